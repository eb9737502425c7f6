package vgpu

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error the package returns wraps one of them (a
// typed error's Unwrap returns it), so callers tell the kinds apart with
// errors.Is and read the details with errors.As.
var (
	// ErrConfig reports an invalid HostConfig, VMSpec or workload
	// configuration.
	ErrConfig = errors.New("vgpu: invalid configuration")
	// ErrUnknownProfile reports a vGPU type name that is not in the profile
	// table; see UnknownProfileError.
	ErrUnknownProfile = errors.New("vgpu: unknown vGPU profile")
	// ErrUnknownGPU reports a GPU model that is not in the spec table.
	ErrUnknownGPU = errors.New("vgpu: unknown GPU model")
	// ErrECCEnabled reports a vGPU that cannot be created because ECC
	// memory is on for its physical GPU, on a model that creates no vGPU
	// with ECC on (GPUSpec.ECCWithVGPU false: the P40).
	ErrECCEnabled = errors.New("vgpu: ECC memory is enabled on the GPU")
	// ErrGPUBusy reports an operation that needs an empty GPU (changing ECC,
	// handing the GPU to a VM in passthrough) on a GPU that is in use.
	ErrGPUBusy = errors.New("vgpu: GPU is in use")
	// ErrNoCapacity reports a vGPU that no GPU of the host can hold; see
	// PlacementError for the reason per GPU.
	ErrNoCapacity = errors.New("vgpu: no GPU can hold the vGPU")
	// ErrInsufficientRAM reports a VM whose guest memory the host cannot
	// reserve; see CapacityError.
	ErrInsufficientRAM = errors.New("vgpu: not enough host memory for the VM")
	// ErrMultiVGPU reports several vGPUs requested for one VM with a profile
	// that does not allow it, or of different profiles.
	ErrMultiVGPU = errors.New("vgpu: profile cannot be attached several times to one VM")
	// ErrDuplicateVM reports a VM ID already present on the host.
	ErrDuplicateVM = errors.New("vgpu: VM ID already present on the host")
	// ErrPassthrough reports an operation that a VM with a passthrough GPU
	// (DirectPath I/O) does not support, above all live migration; see
	// NotMigratableError.
	ErrPassthrough = errors.New("vgpu: VM uses a passthrough GPU")
	// ErrIllegalTransition reports a lifecycle operation not allowed in the
	// current state of a VM or vGPU; see TransitionError.
	ErrIllegalTransition = errors.New("vgpu: transition not allowed")
	// ErrCorruptState reports a saved device state or workload state that
	// is malformed; see CorruptStateError and WorkloadStateError.
	ErrCorruptState = errors.New("vgpu: corrupt device state")
	// ErrStateVersion reports a saved device state or workload state of a
	// format version this package does not read.
	ErrStateVersion = errors.New("vgpu: unsupported device state version")
	// ErrIncompatibleState reports a well-formed device state saved for
	// another GPU model or profile, or a workload state for a VM other
	// than the one it is decoded for, or otherwise not restorable here;
	// see IncompatibleStateError and WorkloadStateError.
	ErrIncompatibleState = errors.New("vgpu: device state saved for another device")
	// ErrIncompatibleHost reports an incoming VM whose memory layout (page
	// sizes) the destination host does not use.
	ErrIncompatibleHost = errors.New("vgpu: VM incompatible with the host")
	// ErrInvalidDuration reports a negative Advance or one past the
	// scheduler's last representable time.
	ErrInvalidDuration = errors.New("vgpu: invalid duration")
	// ErrWorkload reports a workload that does not fit its VM or broke the
	// driving contract.
	ErrWorkload = errors.New("vgpu: workload error")
	// ErrMigrating reports a VM a migration holds (see MigrationClaim): a
	// second claim on it, a suspend of it (the file would be a second copy
	// beside the migration's), or, once its migration has committed it to
	// the destination, a change by its owner that the destination would
	// never see.
	ErrMigrating = errors.New("vgpu: VM is migrating")
	// ErrDriven reports a host whose clock a driver holds (see
	// Host.TakeClock), asked to advance by anyone else, or claimed by a
	// second driver.
	ErrDriven = errors.New("vgpu: host driven by another")
	// ErrSuspendFile reports a suspend file that is well formed as a
	// checkpoint stream but whose VM record is not what VM.Suspend writes.
	ErrSuspendFile = errors.New("vgpu: malformed suspend file")
)

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// UnknownProfileError reports a profile name that parses to no vGPU type.
// It lists the valid names so that a user's typo is easy to fix. It wraps
// ErrUnknownProfile.
type UnknownProfileError struct {
	Name  string   // the name given
	Valid []string // every name ParseProfile accepts, in table order
}

func (e *UnknownProfileError) Error() string {
	return fmt.Sprintf("vgpu: unknown vGPU profile %q (valid: %s)", e.Name, strings.Join(e.Valid, ", "))
}

// Unwrap returns ErrUnknownProfile.
func (e *UnknownProfileError) Unwrap() error { return ErrUnknownProfile }

// Refusal is why one GPU cannot take a vGPU.
type Refusal uint8

// The reasons a GPU refuses a vGPU, in the order placement checks them.
const (
	// RefusedModel: the GPU is of another model than the profile's.
	RefusedModel Refusal = iota + 1
	// RefusedPassthrough: the GPU is given whole to a VM.
	RefusedPassthrough
	// RefusedECC: ECC memory is on, and the model creates no vGPU with it
	// (GPUSpec.ECCWithVGPU).
	RefusedECC
	// RefusedOtherType: the GPU holds vGPUs of another type, and one GPU
	// holds one type at a time.
	RefusedOtherType
	// RefusedFull: every slot of the type is taken.
	RefusedFull
	// RefusedSameVM: the GPU already holds a vGPU of the same VM.
	RefusedSameVM
)

func (r Refusal) String() string {
	switch r {
	case RefusedModel:
		return "other GPU model"
	case RefusedPassthrough:
		return "assigned in passthrough"
	case RefusedECC:
		return "ECC enabled"
	case RefusedOtherType:
		return "holds another vGPU type"
	case RefusedFull:
		return "full"
	case RefusedSameVM:
		return "already holds a vGPU of this VM"
	}
	return fmt.Sprintf("Refusal(%d)", uint8(r))
}

// GPURefusal says why GPU Index refused a vGPU; Detail adds the type it
// holds or its occupancy.
type GPURefusal struct {
	Index  int
	Reason Refusal
	Detail string
}

// PlacementError reports a vGPU no GPU of the host could hold, with every
// GPU's reason. It wraps ErrNoCapacity, and also ErrECCEnabled when ECC is
// the only reason, so that errors.Is answers the question a caller asks.
type PlacementError struct {
	Profile string
	GPUs    []GPURefusal
}

func (e *PlacementError) Error() string {
	if len(e.GPUs) == 0 {
		return fmt.Sprintf("vgpu: no GPU can hold a %s vGPU: the host has no GPU", e.Profile)
	}
	parts := make([]string, len(e.GPUs))
	for i, g := range e.GPUs {
		parts[i] = fmt.Sprintf("GPU %d: %s", g.Index, g.Reason)
		if g.Detail != "" {
			parts[i] += " (" + g.Detail + ")"
		}
	}
	return fmt.Sprintf("vgpu: no GPU can hold a %s vGPU: %s", e.Profile, strings.Join(parts, "; "))
}

// Unwrap returns ErrNoCapacity, and ErrECCEnabled if every GPU that could
// otherwise take the vGPU has ECC on.
func (e *PlacementError) Unwrap() []error {
	errs := []error{ErrNoCapacity}
	ecc := false
	for _, g := range e.GPUs {
		switch g.Reason {
		case RefusedECC:
			ecc = true
		case RefusedModel:
		default:
			return errs
		}
	}
	if ecc {
		errs = append(errs, ErrECCEnabled)
	}
	return errs
}

// CapacityError reports host memory that cannot be reserved. It wraps
// ErrInsufficientRAM.
type CapacityError struct {
	RequestedBytes int64
	FreeBytes      int64
}

func (e *CapacityError) Error() string {
	return fmt.Sprintf("vgpu: VM needs %d bytes of guest memory, the host has %d free", e.RequestedBytes, e.FreeBytes)
}

// Unwrap returns ErrInsufficientRAM.
func (e *CapacityError) Unwrap() error { return ErrInsufficientRAM }

// TransitionError reports a lifecycle operation refused in the current
// state. Device is -1 when the VM itself refused, else the index of the
// vGPU in its VM. It wraps ErrIllegalTransition.
type TransitionError struct {
	Op     string // "start", "pause", "save", "restore", ...
	VM     string
	Device int
	From   string // the state the operation was refused in
}

func (e *TransitionError) Error() string {
	if e.Device < 0 {
		return fmt.Sprintf("vgpu: %s VM %q: not allowed when %s", e.Op, e.VM, e.From)
	}
	return fmt.Sprintf("vgpu: %s vGPU %d of VM %q: not allowed when %s", e.Op, e.Device, e.VM, e.From)
}

// Unwrap returns ErrIllegalTransition.
func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

// CorruptStateError reports malformed device state: the byte offset of the
// offending field and what is wrong. It wraps ErrCorruptState.
type CorruptStateError struct {
	Offset int
	Reason string
}

func (e *CorruptStateError) Error() string {
	return fmt.Sprintf("vgpu: corrupt device state at offset %d: %s", e.Offset, e.Reason)
}

// Unwrap returns ErrCorruptState.
func (e *CorruptStateError) Unwrap() error { return ErrCorruptState }

// IncompatibleStateError reports device state saved for another device:
// Field is "GPU model" or "profile", Saved is what the state holds and
// Device what the restoring device is. It wraps ErrIncompatibleState.
type IncompatibleStateError struct {
	Field  string
	Saved  string
	Device string
}

func (e *IncompatibleStateError) Error() string {
	return fmt.Sprintf("vgpu: device state saved for %s %q, device is %q", e.Field, e.Saved, e.Device)
}

// Unwrap returns ErrIncompatibleState.
func (e *IncompatibleStateError) Unwrap() error { return ErrIncompatibleState }

// NotMigratableError is the answer of the migration compatibility check for
// a VM that cannot be live-migrated. It wraps ErrPassthrough.
type NotMigratableError struct {
	VM     string
	Reason string
}

func (e *NotMigratableError) Error() string {
	return fmt.Sprintf("vgpu: VM %q cannot be live-migrated: %s", e.VM, e.Reason)
}

// Unwrap returns ErrPassthrough.
func (e *NotMigratableError) Unwrap() error { return ErrPassthrough }
