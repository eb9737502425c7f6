package migrate

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// ProgressKind says what a Progress reports.
type ProgressKind uint8

const (
	// RoundStarted: a pre-copy round begins.
	RoundStarted ProgressKind = iota + 1
	// RoundFinished: a round was sent; its rates and the expected stun
	// are set.
	RoundFinished
	// BytesSent: more of the stream went out (or, at the destination,
	// came in) since the last report.
	BytesSent
	// SwitchedOver: pre-copy ended and the VM is being stunned.
	SwitchedOver
	// Done: the VM runs at the destination.
	Done
	// Failed: the migration failed; Err says why.
	Failed
)

var progressNames = [...]string{RoundStarted: "round started", RoundFinished: "round finished",
	BytesSent: "bytes sent", SwitchedOver: "switchover", Done: "done", Failed: "failed"}

func (k ProgressKind) String() string {
	if int(k) < len(progressNames) && progressNames[k] != "" {
		return progressNames[k]
	}
	return fmt.Sprintf("ProgressKind(%d)", uint8(k))
}

// MarshalText writes the kind's name.
func (k ProgressKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Progress is one report of a live migration's progress.
type Progress struct {
	Kind ProgressKind
	VM   string
	// Phase is the migration's phase; Round the pre-copy round, -1
	// outside pre-copy.
	Phase Phase
	Round int
	// Elapsed is the wall time since the migration started.
	Elapsed time.Duration
	// WireBytes is every stream byte sent (or received) so far.
	WireBytes int64
	// BandwidthBytesPerSec and DirtyRateBytesPerSec are the last round's
	// measured rates; ExpectedStun the switchover rule's prediction after
	// it.
	BandwidthBytesPerSec int64
	DirtyRateBytesPerSec int64
	ExpectedStun         time.Duration
	// Err is why the migration failed, for Failed.
	Err error
}

// progressEvery is how many stream bytes pass between BytesSent reports.
const progressEvery = 64 << 20

// reporter hands progress to the caller's callback and logger.
type reporter struct {
	fn     func(Progress)
	log    *slog.Logger
	start  time.Time
	vm     string
	lastAt int64 // WireBytes at the last BytesSent
}

func (r *reporter) emit(p Progress) {
	if r.fn == nil && r.log == nil {
		return
	}
	p.VM, p.Elapsed = r.vm, time.Since(r.start)
	if r.fn != nil {
		r.fn(p)
	}
	if r.log != nil {
		level := slog.LevelInfo
		if p.Kind == BytesSent {
			level = slog.LevelDebug
		} else if p.Kind == Failed {
			level = slog.LevelWarn
		}
		attrs := []slog.Attr{slog.String("vm", p.VM), slog.String("phase", p.Phase.String()),
			slog.Int("round", p.Round), slog.Duration("elapsed", p.Elapsed), slog.Int64("wire_bytes", p.WireBytes)}
		if p.Kind == RoundFinished {
			attrs = append(attrs, slog.Int64("bandwidth_bytes_per_sec", p.BandwidthBytesPerSec),
				slog.Int64("dirty_rate_bytes_per_sec", p.DirtyRateBytesPerSec), slog.Duration("expected_stun", p.ExpectedStun))
		}
		if p.Err != nil {
			attrs = append(attrs, slog.String("error", p.Err.Error()))
		}
		r.log.LogAttrs(context.Background(), level, "migrate: "+p.Kind.String(), attrs...)
	}
}

// bytes reports BytesSent when another progressEvery bytes have passed.
func (r *reporter) bytes(phase Phase, round int, wire int64) {
	if wire-r.lastAt >= progressEvery {
		r.lastAt = wire
		r.emit(Progress{Kind: BytesSent, Phase: phase, Round: round, WireBytes: wire})
	}
}
