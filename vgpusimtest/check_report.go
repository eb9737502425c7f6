package vgpusimtest

import (
	"github.com/vgpusim/vgpusim/migrate"
)

// CheckReport checks that a report of a migration that ended adds up: a
// migration that succeeded has a stun equal to the sum of its phases, no
// longer than the migration, its longest phase named dominant, and pages
// before the stun equal to its rounds' sum; one that failed says why and
// where. Its times run forward — rounds one after another inside the
// migration, events in order — and its totals match their parts.
func CheckReport(r *migrate.Report) error {
	bad := func(format string, args ...any) error {
		return broken("report", "migration of %s: "+format, append([]any{r.VM}, args...)...)
	}
	if r.End < r.Start || r.Total != r.End-r.Start {
		return bad("start %v, end %v, total %v", r.Start, r.End, r.Total)
	}
	switch r.Outcome {
	case migrate.PhaseDone:
		if r.Error != "" || r.FailedIn != 0 {
			return bad("done, yet failed in %v: %s", r.FailedIn, r.Error)
		}
		var sum, longest migrate.StunPhase
		for _, p := range r.StunPhases {
			if p.Duration < 0 {
				return bad("stun phase %v of %v", p.Phase, p.Duration)
			}
			sum.Duration += p.Duration
			if p.Duration > longest.Duration {
				longest = p
			}
		}
		if sum.Duration != r.Stun {
			return bad("stun %v, its phases sum to %v", r.Stun, sum.Duration)
		}
		if r.Stun > r.Total {
			return bad("stun %v longer than the migration's %v", r.Stun, r.Total)
		}
		if longest.Duration > 0 && r.Dominant != longest.Phase {
			return bad("dominant phase %v, the longest is %v", r.Dominant, longest.Phase)
		}
		var rounds migrate.Traffic
		for _, rd := range r.Rounds {
			rounds.Add(rd.Total())
		}
		if rounds.Pages != r.PreCopy.Pages || rounds.RawBytes != r.PreCopy.RawBytes {
			return bad("pre-copy sent %d pages (%d bytes), its rounds %d (%d bytes)", r.PreCopy.Pages, r.PreCopy.RawBytes, rounds.Pages, rounds.RawBytes)
		}
		pages := r.PreCopy
		pages.Add(r.Final.RAM)
		for _, f := range r.Final.Framebuffers {
			pages.Add(f)
		}
		if pc := r.PostCopy; pc != nil {
			// A post-copy's pages follow the stun: pushed, or fetched
			// when the VM touched them first.
			pages.Add(pc.Pushed)
			pages.Add(pc.Faulted)
			if pc.Faults != pc.Faulted.Pages || pc.Pushed.Pages+pc.Faulted.Pages < pc.OwedPages {
				return bad("post-copy: %d faults for %d pages fetched; %d pushed and fetched of %d owed", pc.Faults, pc.Faulted.Pages, pc.Pushed.Pages+pc.Faulted.Pages, pc.OwedPages)
			}
		}
		if pages.RawBytes != r.RawBytes || pages.WireBytes > r.WireBytes {
			return bad("pages of %d raw and %d wire bytes, the report %d raw and %d on the wire", pages.RawBytes, pages.WireBytes, r.RawBytes, r.WireBytes)
		}
	case migrate.PhaseFailed:
		if r.Error == "" || r.FailedIn == 0 {
			return bad("failed in %v with error %q", r.FailedIn, r.Error)
		}
	default:
		return bad("outcome %v: not ended", r.Outcome)
	}
	// Beyond the sums Report.Settle forms: what the report's parts say of
	// each other, which no single line of the library computes.
	end, roundWire := r.Start, int64(0)
	for i, rd := range r.Rounds {
		if rd.Index != i || rd.Duration < 0 || rd.Start < end || rd.Start+rd.Duration > r.End {
			return bad("round %d (index %d) runs from %v for %v, after a round ending at %v, in a migration from %v to %v",
				i, rd.Index, rd.Start, rd.Duration, end, r.Start, r.End)
		}
		end, roundWire = rd.Start+rd.Duration, roundWire+rd.WireBytes
	}
	if roundWire > r.WireBytes {
		return bad("rounds put %d bytes on the wire, the whole stream %d", roundWire, r.WireBytes)
	}
	at := r.Start
	for _, ev := range r.Events {
		if ev.At < at || ev.At > r.End {
			return bad("event %v at %v, after one at %v, in a migration from %v to %v", ev.Kind, ev.At, at, r.Start, r.End)
		}
		at = ev.At
	}
	return nil
}
