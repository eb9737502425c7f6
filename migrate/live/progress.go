package live

import (
	"context"
	"log/slog"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
)

// progressEvery is how many stream bytes pass between BytesMoved events.
const progressEvery = 64 << 20

// reporter hands one side's events to the caller's callback and logger.
type reporter struct {
	fn     func(migrate.Event)
	log    *slog.Logger
	clock  Clock
	start  time.Time
	vm     string
	lastAt int64 // WireBytes at the last BytesMoved
}

// since is the time since the side's start on its clock.
func (r *reporter) since() time.Duration { return r.clock.Now().Sub(r.start) }

func (r *reporter) emit(e migrate.Event) {
	if r.fn == nil && r.log == nil {
		return
	}
	if e.VM == "" {
		e.VM = r.vm
	}
	if r.fn != nil {
		r.fn(e)
	}
	if r.log != nil {
		level := slog.LevelInfo
		switch e.Kind {
		case migrate.BytesMoved:
			level = slog.LevelDebug
		case migrate.Failed, migrate.Notice:
			level = slog.LevelWarn
		}
		attrs := []slog.Attr{slog.String("vm", e.VM), slog.String("phase", e.Phase.String()),
			slog.Int("round", e.Round), slog.Duration("elapsed", e.At), slog.Int64("wire_bytes", e.WireBytes)}
		if e.Kind == migrate.RoundEnded {
			attrs = append(attrs, slog.Int64("bandwidth_bytes_per_sec", e.BandwidthBytesPerSec),
				slog.Int64("dirty_rate_bytes_per_sec", e.DirtyRateBytesPerSec), slog.Duration("expected_stun", e.ExpectedStun))
		}
		if e.Detail != "" {
			attrs = append(attrs, slog.String("detail", e.Detail))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String("error", e.Err.Error()))
		}
		r.log.LogAttrs(context.Background(), level, "migrate: "+e.Kind.String(), attrs...)
	}
}

// bytes reports BytesMoved when another progressEvery bytes have passed.
func (r *reporter) bytes(phase migrate.Phase, round int, wire int64) {
	if wire-r.lastAt >= progressEvery {
		r.lastAt = wire
		r.emit(migrate.Event{Kind: migrate.BytesMoved, At: r.since(), Phase: phase, Round: round, WireBytes: wire})
	}
}
