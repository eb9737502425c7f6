package vgpu

import (
	"errors"
	"testing"
)

// throttleSpy is a workload that records the throttle its VM gives it.
type throttleSpy struct {
	Workload
	got float64
}

func (w *throttleSpy) SetThrottle(f float64) error {
	w.got = f
	return w.Workload.SetThrottle(f)
}

func claimVM(t *testing.T) (*VM, *throttleSpy) {
	t.Helper()
	h := newHost(t, HostConfig{})
	inf, err := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 100, FootprintBytes: 64 * MiB, Seed: 3})
	must(t, err)
	w := &throttleSpy{Workload: inf}
	vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 256 * MiB, Profiles: []string{"P40-4Q"}, Workload: w})
	must(t, vm.Start())
	return vm, w
}

// TestMigrationClaim: one claim at a time; the claim's pause, resume and
// cut are not the owner's changes; the owner's throttle runs under the
// cut, is kept, and is what is left when the claim ends; a committed
// claim refuses the owner's changes until it is released, and a destroyed
// VM drops its claim.
func TestMigrationClaim(t *testing.T) {
	vm, w := claimVM(t)
	c, err := vm.ClaimMigration()
	must(t, err)
	if _, err := vm.ClaimMigration(); !errors.Is(err, ErrMigrating) || !vm.Migrating() {
		t.Fatalf("second claim: %v", err)
	}
	n := vm.Changes()
	must(t, c.SetThrottle(0.5))
	must(t, c.Pause())
	must(t, c.Resume())
	if vm.Changes() != n || vm.Throttle() != 0 || vm.EffectiveThrottle() != 0.5 || w.got != 0.5 {
		t.Fatalf("the claim's own calls: %d changes, throttle %v, effective %v, workload %v", vm.Changes()-n, vm.Throttle(), vm.EffectiveThrottle(), w.got)
	}
	must(t, vm.SetThrottle(0.2))
	if vm.Throttle() != 0.2 || vm.EffectiveThrottle() != 0.5 || w.got != 0.5 {
		t.Fatalf("owner under the cut: throttle %v, effective %v, workload %v", vm.Throttle(), vm.EffectiveThrottle(), w.got)
	}
	must(t, vm.SetThrottle(0.7))
	if vm.EffectiveThrottle() != 0.7 || w.got != 0.7 {
		t.Fatalf("owner above the cut: effective %v, workload %v", vm.EffectiveThrottle(), w.got)
	}
	must(t, vm.Pause())
	must(t, vm.Resume())
	if vm.Changes() != n+2 {
		t.Fatalf("the owner's pause and resume: %d changes, want 2", vm.Changes()-n)
	}
	must(t, c.Pause())
	f, err := c.Commit()
	must(t, err)
	if f != 0.7 {
		t.Fatalf("commit's throttle %v, the owner's 0.7", f)
	}
	for op, call := range map[string]func() error{"resume": vm.Resume, "pause": vm.Pause, "stop": vm.Stop, "start": vm.Start,
		"throttle": func() error { return vm.SetThrottle(0.1) }, "restore": func() error { return vm.Restore(nil) }} {
		if err := call(); !errors.Is(err, ErrMigrating) {
			t.Errorf("%s after the commit: %v, want ErrMigrating", op, err)
		}
	}
	c.Release()
	c.Release()
	if vm.Migrating() || vm.EffectiveThrottle() != 0.7 || w.got != 0.7 {
		t.Fatalf("released: migrating %v, effective %v, workload %v", vm.Migrating(), vm.EffectiveThrottle(), w.got)
	}
	if err := c.Resume(); !errors.Is(err, ErrConfig) {
		t.Fatalf("a released claim's resume: %v", err)
	}
	must(t, vm.Resume())

	// A lower owner's throttle comes back when the cut ends.
	c, err = vm.ClaimMigration()
	must(t, err)
	must(t, vm.SetThrottle(0.1))
	must(t, c.SetThrottle(0.6))
	if err := c.SetThrottle(1); !errors.Is(err, ErrConfig) {
		t.Fatalf("cut of 1: %v", err)
	}
	c.Release()
	if vm.EffectiveThrottle() != 0.1 || w.got != 0.1 {
		t.Fatalf("after the cut: effective %v, workload %v", vm.EffectiveThrottle(), w.got)
	}

	c, err = vm.ClaimMigration()
	must(t, err)
	must(t, vm.Destroy())
	if vm.Migrating() {
		t.Fatal("a destroyed VM keeps its claim")
	}
	if _, err := vm.ClaimMigration(); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("claim of a destroyed VM: %v", err)
	}
	if err := vm.SetThrottle(0.3); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("throttle of a destroyed VM: %v", err)
	}
	c.Release()
}

// A migration in doubt holds its VM, Destroy included, until
// ResolveMigration says where the VM runs: destroyed here if the
// destination runs it, given back paused otherwise.
func TestResolveMigration(t *testing.T) {
	for _, destinationRuns := range []bool{true, false} {
		vm, _ := claimVM(t)
		if err := vm.ResolveMigration(false); !errors.Is(err, ErrConfig) {
			t.Fatalf("resolving a VM no migration holds: %v", err)
		}
		c, err := vm.ClaimMigration()
		must(t, err)
		if err := vm.ResolveMigration(true); !errors.Is(err, ErrConfig) || vm.State() == VMDestroyed {
			t.Fatalf("resolving a claim that never committed: %v, VM %v", err, vm.State())
		}
		must(t, c.Pause())
		_, err = c.Commit()
		must(t, err)
		for op, f := range map[string]func() error{"resume": vm.Resume, "destroy": vm.Destroy, "stop": vm.Stop} {
			if err := f(); !errors.Is(err, ErrMigrating) {
				t.Fatalf("%s of a held VM: %v", op, err)
			}
		}
		must(t, vm.ResolveMigration(destinationRuns))
		switch {
		case destinationRuns && vm.State() != VMDestroyed:
			t.Fatalf("the destination runs it, and this copy is %v", vm.State())
		case !destinationRuns && (vm.State() != VMPaused || vm.Migrating()):
			t.Fatalf("given back: %v, migrating %v", vm.State(), vm.Migrating())
		case !destinationRuns:
			must(t, vm.Resume())
		}
	}
}
