package fuzz_test

import (
	"errors"
	"fmt"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// An error the library returns to an operation is an outcome, not a
// failure, but it must be one the library documents: every error of
// packages vgpu and migrate wraps one of the package's sentinels.

// vgpuOutcome logs the result of a vgpu call; every error it returns wraps
// one of its sentinels.
func (w *hostopsWorld) vgpuOutcome(what string, err error) error {
	w.logf("%s: %v", what, err)
	if err == nil || hostopsWraps(err, hostopsVGPUErrs) {
		return nil
	}
	return fmt.Errorf("%s: error %q wraps no vgpu sentinel", what, err)
}

// migrateOutcome does the same for package migrate.
func (w *hostopsWorld) migrateOutcome(what string, err error) error {
	w.logf("%s: %v", what, err)
	if err == nil || hostopsWraps(err, hostopsMigrateErrs) {
		return nil
	}
	return fmt.Errorf("%s: error %q wraps no migrate sentinel", what, err)
}

var hostopsVGPUErrs = []error{vgpu.ErrConfig, vgpu.ErrUnknownProfile, vgpu.ErrUnknownGPU, vgpu.ErrECCEnabled,
	vgpu.ErrGPUBusy, vgpu.ErrNoCapacity, vgpu.ErrInsufficientRAM, vgpu.ErrMultiVGPU, vgpu.ErrDuplicateVM,
	vgpu.ErrPassthrough, vgpu.ErrIllegalTransition, vgpu.ErrCorruptState, vgpu.ErrStateVersion,
	vgpu.ErrIncompatibleState, vgpu.ErrIncompatibleHost, vgpu.ErrInvalidDuration, vgpu.ErrWorkload, vgpu.ErrMigrating}

var hostopsMigrateErrs = []error{migrate.ErrConfig, migrate.ErrIncompatible, migrate.ErrStunLimit,
	migrate.ErrNotConverged, migrate.ErrCanceled, migrate.ErrTooLate, migrate.ErrBusy, migrate.ErrMigrating, migrate.ErrStream,
	migrate.ErrDestination, migrate.ErrSource, migrate.ErrConnection, migrate.ErrRefused, migrate.ErrInDoubt,
	migrate.ErrClosed}

func hostopsWraps(err error, sentinels []error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
