package live

import (
	"cmp"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
)

// recvTally is the destination's account of a live migration, kept as the
// records are applied: the rounds as their end-of-round records arrive,
// the pages since the last of them by region, and when the stun's parts
// that the destination can see began. Times are since the migration's
// start on the destination's clock.
type recvTally struct {
	meta   *checkpoint.Metadata
	rounds []migrate.Round
	// cur holds the pages applied since the last end of round, by region
	// (guest RAM, then each framebuffer): the next round's, or the stun's.
	cur []migrate.Traffic

	roundAt   time.Duration // when the current round began
	roundWire int64         // the stream's offset where it began
	lastWire  int64         // the offset after the last record seen

	// lastRAM and lastFB are when the last batch of guest RAM and of a
	// framebuffer since the last end of round arrived; zero if none did.
	lastRAM, lastFB time.Duration
	// restoreAt and resumeAt are when the stream ended and when the
	// destination said it was ready; zero until then.
	restoreAt, resumeAt time.Duration
	// stunEnd is when the destination acknowledged the resume: the end
	// of the stun, which a post-copy's window follows; zero until then.
	stunEnd time.Duration
}

// begin starts the tally when the stream has opened, at offset wire.
func (t *recvTally) begin(meta *checkpoint.Metadata, wire int64, now time.Duration) {
	t.meta, t.cur = meta, make([]migrate.Traffic, len(meta.Regions))
	t.roundAt, t.roundWire, t.lastWire = now, wire, wire
}

// batch counts a page batch of region that was applied, when the streams
// had carried wire bytes.
func (t *recvTally) batch(region uint32, pages, zero int, wire int64, now time.Duration) {
	i := int(region) // the source declares region i as id i
	if i >= len(t.cur) {
		return
	}
	n := int64(pages)
	t.cur[i].Pages += n
	t.cur[i].ZeroPages += int64(zero)
	t.cur[i].RawBytes += n * int64(t.meta.Regions[i].PageSize)
	t.cur[i].WireBytes += wire - t.lastWire
	t.lastWire = wire
	if i == 0 {
		t.lastRAM = now
	} else {
		t.lastFB = now
	}
}

// endRound closes the round whose end-of-round record ended at wire.
func (t *recvTally) endRound(wire int64, now time.Duration) {
	if t.cur == nil {
		return
	}
	rd := migrate.Round{Index: len(t.rounds), RAM: t.cur[0], Framebuffers: append([]migrate.Traffic(nil), t.cur[1:]...),
		WireBytes: wire - t.roundWire, Start: t.roundAt, Duration: now - t.roundAt}
	rd.BandwidthBytesPerSec = migrate.BytesPerSec(rd.WireBytes, rd.Duration)
	t.rounds = append(t.rounds, rd)
	clear(t.cur)
	t.roundAt, t.roundWire, t.lastWire = now, wire, wire
	t.lastRAM, t.lastFB = 0, 0
}

// fill writes the tally into rep: the rounds, the pages before and after
// the last end of round, and, if the migration succeeded at end, the stun
// as the destination saw it.
func (t *recvTally) fill(rep *migrate.Report, end time.Duration, done bool) {
	rep.Rounds, rep.PreCopy = t.rounds, migrate.Traffic{}
	for _, rd := range t.rounds {
		rep.PreCopy.Add(rd.Total())
	}
	if t.cur == nil {
		return
	}
	rep.Final = migrate.FinalTraffic{RAM: t.cur[0], Framebuffers: append([]migrate.Traffic(nil), t.cur[1:]...)}
	if !done {
		return
	}
	// The source stops the VM once the last round is out; what follows
	// arrives in order: guest RAM, framebuffers, device states and the
	// end of the stream, after which the destination restores and
	// resumes.
	ram := max(t.roundAt, t.lastRAM)
	fb := max(ram, t.lastFB)
	rep.StunPhases, rep.Stun = nil, 0
	for _, p := range []migrate.StunPhase{
		{Phase: migrate.PhaseFinalRAM, Duration: ram - t.roundAt},
		{Phase: migrate.PhaseFinalFramebuffer, Duration: fb - ram},
		{Phase: migrate.PhaseDeviceState, Duration: t.restoreAt - fb},
		{Phase: migrate.PhaseRestore, Duration: t.resumeAt - t.restoreAt},
		{Phase: migrate.PhaseResume, Duration: cmp.Or(t.stunEnd, end) - t.resumeAt},
	} {
		rep.AddStun(p.Phase, max(p.Duration, 0))
	}
}

// enter moves the destination to phase p and notes when the stun's parts
// that it times began.
func (r *receiver) enter(p migrate.Phase) {
	r.phase = p
	switch p {
	case migrate.PhaseRestore:
		r.tally.restoreAt = r.since()
	case migrate.PhaseResume:
		r.tally.resumeAt = r.since()
	}
}

// closeReport ends the destination's report with outcome and returns a
// copy of it.
func (r *receiver) closeReport(outcome migrate.Phase) *migrate.Report {
	rep := &r.rep
	rep.Outcome, rep.End = outcome, r.since()
	rep.Total = rep.End - rep.Start
	if pe, ok := r.err.(*migrate.PhaseError); ok {
		rep.Error, rep.FailedIn = pe.Error(), pe.Phase
	}
	r.tally.fill(rep, rep.End, outcome == migrate.PhaseDone)
	rep.Settle()
	rep.WireBytes = r.wire()
	out := *rep
	return &out
}
