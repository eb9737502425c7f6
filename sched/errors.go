package sched

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of them, so a
// caller tells the kinds apart with errors.Is.
var (
	// ErrInvalidConfig: a Config field is out of its documented range.
	ErrInvalidConfig = errors.New("sched: invalid config")
	// ErrInvalidRmPVMRL: a registry value does not decode; see RmPVMRLError.
	ErrInvalidRmPVMRL = errors.New("sched: invalid RmPVMRL value")
	// ErrUnknownTenant: no tenant has the given ID on this scheduler.
	ErrUnknownTenant = errors.New("sched: unknown tenant")
	// ErrTooManyTenants: AddTenant would exceed Config.MaxTenants.
	ErrTooManyTenants = errors.New("sched: too many tenants")
	// ErrTenantState: the operation is not allowed in the tenant's current
	// state (submitting to a tenant that is off, pausing one that is not
	// on...); see StateError.
	ErrTenantState = errors.New("sched: operation not allowed in the tenant's state")
	// ErrInvalidJob: a Job's Work or Chunk is out of range.
	ErrInvalidJob = errors.New("sched: invalid job")
	// ErrQueueFull: the tenant already holds Config.MaxQueue jobs.
	ErrQueueFull = errors.New("sched: tenant queue full")
	// ErrInvalidDuration: Advance was given a negative duration, or one that
	// would carry simulated time past MaxTime.
	ErrInvalidDuration = errors.New("sched: invalid duration")
	// ErrCorruptState: saved tenant state is malformed; see CorruptStateError.
	ErrCorruptState = errors.New("sched: corrupt tenant state")
	// ErrUnsupportedVersion: saved tenant state has a version this package
	// does not read.
	ErrUnsupportedVersion = errors.New("sched: unsupported tenant state version")
	// ErrIncompatibleState: saved tenant state is well formed but belongs
	// to a tenant of another profile (a different MaxInstances).
	ErrIncompatibleState = errors.New("sched: tenant state saved for a different profile")
)

// StateError reports an operation refused because of the tenant's state.
// It wraps ErrTenantState.
type StateError struct {
	Op     string // the refused operation, e.g. "submit"
	Tenant TenantID
	State  State // the tenant's state when the operation was refused
}

// Error says which operation was refused and why.
func (e *StateError) Error() string {
	return fmt.Sprintf("sched: %s: tenant %d is %s", e.Op, e.Tenant, e.State)
}

// Unwrap returns ErrTenantState.
func (e *StateError) Unwrap() error { return ErrTenantState }

// CorruptStateError reports malformed saved tenant state: the byte offset of
// the offending field and what is wrong with it. It wraps ErrCorruptState.
type CorruptStateError struct {
	Offset int
	Reason string
}

// Error gives the offset and the reason.
func (e *CorruptStateError) Error() string {
	return fmt.Sprintf("sched: corrupt tenant state at offset %d: %s", e.Offset, e.Reason)
}

// Unwrap returns ErrCorruptState.
func (e *CorruptStateError) Unwrap() error { return ErrCorruptState }

// RmPVMRLError reports an RmPVMRL registry value that does not decode in
// the given layout. It wraps ErrInvalidRmPVMRL.
type RmPVMRLError struct {
	Value  uint32
	Layout Layout
	Reason string
}

// Error gives the value, the layout and the reason.
func (e *RmPVMRLError) Error() string {
	return fmt.Sprintf("sched: invalid RmPVMRL value %#08x in %s layout: %s", e.Value, e.Layout, e.Reason)
}

// Unwrap returns ErrInvalidRmPVMRL.
func (e *RmPVMRLError) Unwrap() error { return ErrInvalidRmPVMRL }
