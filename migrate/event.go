package migrate

import (
	"fmt"
	"time"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// PhaseStarted: the migration entered Phase, ending the phase before.
	PhaseStarted EventKind = iota + 1
	// RoundStarted: pre-copy round Round begins.
	RoundStarted
	// RoundSent: round Round's pages are on their way; WireBytes is what
	// the round put on the wire.
	RoundSent
	// RoundEnded: round Round arrived; its measured rates, the expected
	// stun and the throttle in force are set.
	RoundEnded
	// Throttled: pre-copy did not converge and the workload is cut by
	// Throttle for the next round.
	Throttled
	// SwitchedOver: pre-copy ended; ExpectedStun is the stun predicted.
	SwitchedOver
	// StunStarted: the VM is being stopped at the source.
	StunStarted
	// PagesSent: the stun's last pages of guest RAM or of the
	// framebuffers are on their way.
	PagesSent
	// BytesMoved: more of a live stream went out (or, at the
	// destination, came in); WireBytes is the total so far.
	BytesMoved
	// Notice: something the migration met and went on from, such as a
	// source that could not be released after the destination took the
	// VM.
	Notice
	// Done: the VM runs at the destination.
	Done
	// Failed: the migration failed; Err says why.
	Failed

	numEventKinds = iota
)

var eventKindNames = [...]string{PhaseStarted: "phase started", RoundStarted: "round started",
	RoundSent: "round sent", RoundEnded: "round ended", Throttled: "throttled", SwitchedOver: "switched over",
	StunStarted: "stun started", PagesSent: "pages sent", BytesMoved: "bytes moved", Notice: "notice",
	Done: "done", Failed: "failed"}

func (k EventKind) String() string {
	if k > 0 && int(k) <= numEventKinds {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// MarshalText writes the kind's name.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Event is something that happened to a migration, in either mode: the
// simulator's Sim.Step returns them and each Migration keeps its own; the
// live mode hands them to SendConfig.Progress and ReceiveConfig.Progress.
// Both modes' events come from the same decisions (see Core), so the same
// migration produces the same kinds in the same order.
type Event struct {
	Kind EventKind `json:"kind"`
	// At is the Sim's time, or in the live mode the wall time since that
	// side's start.
	At time.Duration `json:"at_ns"`
	// VM names the migrating VM.
	VM string `json:"vm"`
	// Phase is the phase the migration is in after the event.
	Phase Phase `json:"phase"`
	// Round is the pre-copy round the event concerns, -1 outside pre-copy.
	Round int `json:"round"`
	// Detail says what happened, for a person.
	Detail string `json:"detail"`
	// WireBytes is the stream's bytes: a round's for RoundSent, every
	// byte so far for BytesMoved, Done and Failed in the live mode.
	WireBytes int64 `json:"wire_bytes,omitempty"`
	// BandwidthBytesPerSec and DirtyRateBytesPerSec are the round's
	// measured rates, for RoundEnded; ExpectedStun the stun predicted
	// after it (RoundEnded, SwitchedOver).
	BandwidthBytesPerSec int64         `json:"bandwidth_bytes_per_sec,omitempty"`
	DirtyRateBytesPerSec int64         `json:"dirty_rate_bytes_per_sec,omitempty"`
	ExpectedStun         time.Duration `json:"expected_stun_ns,omitempty"`
	// Throttle is the cut applied to the workload, for Throttled and
	// RoundEnded.
	Throttle float64 `json:"throttle,omitempty"`
	// Err is why the migration failed, for Failed.
	Err error `json:"-"`
}

func (e Event) String() string {
	return fmt.Sprintf("%12v %s: %v: %s", e.At, e.VM, e.Phase, e.Detail)
}
