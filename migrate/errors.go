package migrate

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error the package returns wraps one of them, and a
// migration's failure is a *PhaseError that wraps one and says where.
var (
	// ErrConfig reports an invalid configuration or link.
	ErrConfig = errors.New("migrate: invalid configuration")
	// ErrIncompatible reports a VM the destination cannot take: another GPU
	// model, no room for its vGPUs or memory, a passthrough device. The
	// vgpu package's typed error is wrapped beside it.
	ErrIncompatible = errors.New("migrate: incompatible destination")
	// ErrStunLimit reports a migration whose stun would exceed the VM's
	// stun-time limit: refused at the start, or given up at switchover.
	ErrStunLimit = errors.New("migrate: stun time limit exceeded")
	// ErrNotConverged reports pre-copy that did not converge under the
	// Abort policy.
	ErrNotConverged = errors.New("migrate: pre-copy did not converge")
	// ErrCanceled reports a migration the caller canceled.
	ErrCanceled = errors.New("migrate: canceled")
	// ErrTooLate reports a cancel after the destination acknowledged the
	// resume: the VM has moved, and the migration completes (a post-copy
	// may still lose it: ErrVMLost).
	ErrTooLate = errors.New("migrate: too late to cancel")
	// ErrBusy reports a host already at its limit of concurrent
	// migrations.
	ErrBusy = errors.New("migrate: too many concurrent migrations")
	// ErrMigrating reports a VM that another migration holds, in either
	// mode: a VM has one migration at a time, from its start (Sim.Start,
	// live.Send, NewSource) until it ends. vgpu.ErrMigrating is wrapped
	// beside it.
	ErrMigrating = errors.New("migrate: VM already migrating")
	// ErrStream reports a stream the destination rejected; the checkpoint
	// package's *Error is wrapped beside it.
	ErrStream = errors.New("migrate: stream rejected")
	// ErrDestination reports a destination that failed to restore or
	// resume the VM.
	ErrDestination = errors.New("migrate: destination failed")
	// ErrSource reports a source VM or host that failed during the
	// migration (a workload error, a VM destroyed under the migration).
	ErrSource = errors.New("migrate: source failed")
	// ErrConnection reports a migration's connection that closed, failed
	// or stalled past the timeout: a live one's, or a simulated one's
	// FaultLinkDown or FaultLinkStall.
	ErrConnection = errors.New("migrate: connection failed")
	// ErrRefused reports a migration the destination turned down: a live
	// one in the handshake, or at the end of the stream when it failed
	// the destination's checks, where the reason it gave follows and,
	// where it names one, ErrIncompatible, ErrBusy, ErrConfig,
	// ErrAuthentication, ErrStream or ErrDestination is wrapped beside it;
	// a simulated one at any point before it acknowledged the resume, by
	// FaultRefused.
	ErrRefused = errors.New("migrate: destination refused")
	// ErrAuthentication reports a live migration's peer or message that
	// failed authentication: a peer without the migration key, a control
	// message forged, altered, replayed from another migration or out of
	// its place, or a connection that is not this migration's. Without a
	// key it reports a message corrupted on the way.
	ErrAuthentication = errors.New("migrate: authentication failed")
	// ErrInDoubt reports a live migration whose source told the
	// destination to resume and then lost the connection before the
	// destination acknowledged: the VM may run there. The source keeps
	// its copy paused, unchanged and held — its owner's changes, Destroy
	// included, are refused with vgpu.ErrMigrating — so that there are
	// never two running copies and never none; whoever manages the hosts
	// asks the destination and calls vgpu.VM.ResolveMigration, which
	// destroys the copy or gives it back to its owner.
	ErrInDoubt = errors.New("migrate: outcome in doubt")
	// ErrVMLost reports a post-copy migration that failed once the VM ran
	// at the destination (its destination or source gone, the stream
	// rejected): neither end holds the VM as it ran. The destination's
	// copy lacks pages no end can give it any more and is destroyed, its
	// workload handed back; the source's, whole as of the stun but older
	// than what ran, stays paused and held, unless the failure took it:
	// vgpu.VM.ResolveMigration(false) gives it back to its owner, a
	// rollback to the stun that loses what the VM did since, and true
	// destroys it. A VM is never run with a page missing. A lost link is
	// not this: the destination pauses and the migration waits for
	// Recover.
	ErrVMLost = errors.New("migrate: VM lost in post-copy")
)

// PhaseError is how a migration fails: the VM, the phase it was in, and the
// cause, which wraps one of the sentinels above.
type PhaseError struct {
	VM    string
	Phase Phase
	Err   error
}

func (e *PhaseError) Error() string {
	return fmt.Sprintf("migrate: VM %q failed in %v: %v", e.VM, e.Phase, e.Err)
}

func (e *PhaseError) Unwrap() error { return e.Err }

// wrap joins a sentinel and the error that caused it, so that errors.Is
// finds both and errors.As finds the cause's type. A cause that wraps the
// sentinel already is returned as it is: its message names the sentinel,
// and naming it twice would read "canceled: migrate: canceled".
func wrap(sentinel error, cause error) error {
	if cause == nil {
		return sentinel
	}
	if errors.Is(cause, sentinel) {
		return cause
	}
	return fmt.Errorf("%w: %w", sentinel, cause)
}
