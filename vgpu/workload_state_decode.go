package vgpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// construct checks a decoded configuration with the workload's own
// constructor, so that the decoder accepts exactly the configurations the
// package does, and that it is the one the constructor keeps (defaults
// filled in): w is nil when either fails.
func construct[W any, C any](d *stateDecoder, off int, c C, newW func(C) (W, error), config func(W) C, enc func(*stateEncoder, C)) (W, bool) {
	var zero W
	if d.failed() {
		return zero, false
	}
	w, err := newW(c)
	if err != nil {
		d.refuse(off, ErrCorruptState, err, "configuration refused")
		return zero, false
	}
	d.canonical(off, "configuration", func(e *stateEncoder) { enc(e, config(w)) })
	return w, !d.failed()
}

func (d *stateDecoder) base(b *base) {
	off := d.r.off
	f := d.f64("throttle")
	if !d.failed() && !validThrottle(f) {
		d.corrupt(off, "throttle %v outside [0, 1)", f)
	}
	b.throttle = f
	b.last = d.dur("last")
	off = d.r.off
	flags := d.u8("flags")
	if !d.failed() && flags&^3 != 0 {
		d.corrupt(off, "flags %#x, only 1 (running) and 2 (paused) are defined", flags)
	}
	b.running, b.paused = flags&1 != 0, flags&2 != 0
	d.history(&b.hist)
	b.ram = d.dirtier(d.env.RAM(), "guest memory dirtier")
	n := d.devices("framebuffer dirtiers", dirtierMinBytes)
	b.fb = nil
	for i := range n {
		fb := d.framebuffer(i)
		dt := d.dirtier(fb, fmt.Sprintf("framebuffer %d dirtier", i))
		if d.failed() {
			return
		}
		b.fb = append(b.fb, dt)
	}
}

// history reads the ring into h, whose limit the configuration set.
func (d *stateDecoder) history(h *history) {
	off := d.r.off
	limit := d.i64("history limit")
	if !d.failed() && limit != int64(h.limit) {
		d.corrupt(off, "history limit %d, the configuration's is %d", limit, h.limit)
	}
	h.evicted = d.flag("history evicted")
	off = d.r.off
	h.oldest = d.dur("history oldest")
	if !d.failed() && !h.evicted && h.oldest != 0 {
		d.corrupt(off, "history oldest %v, and nothing evicted", h.oldest)
	}
	off = d.r.off
	n := d.count32("history records", recordStateBytes, math.MaxUint32)
	switch {
	case d.failed():
		return
	case n > h.limit:
		d.corrupt(off, "%d history records, the limit is %d", n, h.limit)
		return
	case h.evicted && n != h.limit:
		// A record is evicted only from a full ring, which stays full.
		d.corrupt(off, "history evicted records (oldest %v) but holds %d of %d", h.oldest, n, h.limit)
		return
	}
	h.buf, h.head, h.n = nil, 0, 0
	if n > 0 {
		h.buf = make([]record, n)
	}
	for i := range h.buf {
		r := &h.buf[i]
		r.start = d.dur("record start")
		r.end = d.dur("record end")
		r.dropped = d.flag("record dropped")
	}
	h.n = n
}

// dirtier reads a dirtier and restores its pattern onto r.
func (d *stateDecoder) dirtier(r *memory.Region, what string) dirtier {
	off := d.r.off
	rate := d.i64(what + " rate")
	if !d.failed() && (rate < 0 || rate > memory.MaxRateBytesPerSec) {
		d.corrupt(off, "%s rate %d bytes/s outside [0, %g]", what, rate, float64(memory.MaxRateBytesPerSec))
	}
	if !d.flag(what+" pattern") || d.failed() {
		return dirtier{rate: rate}
	}
	off = d.r.off
	s := d.patternState(what)
	if d.failed() {
		return dirtier{}
	}
	c := s.Config
	if r == nil {
		d.incompatible(off, "%s writes a region the VM does not have", what)
		return dirtier{}
	}
	if c.FirstPage < 0 || c.Pages <= 0 || c.FirstPage > r.Pages()-c.Pages {
		d.incompatible(off, "%s pages [%d, +%d) outside the region's %d", what, c.FirstPage, c.Pages, r.Pages())
		return dirtier{}
	}
	p, err := memory.RestorePattern(r, s)
	if err != nil {
		d.refuse(off, ErrCorruptState, err, "%s", what)
		return dirtier{}
	}
	d.canonical(off, what, func(e *stateEncoder) { e.pattern(p.State()) })
	return dirtier{p: p, rate: rate}
}

func (d *stateDecoder) patternState(what string) memory.PatternState {
	var s memory.PatternState
	c := &s.Config
	c.Kind = memory.PatternKind(d.u8(what + " kind"))
	c.RateBytesPerSec = d.i64(what + " pattern rate")
	off := d.r.off
	first, pages := d.i64(what+" first page"), d.i64(what+" pages")
	if !d.failed() && (first < 0 || pages <= 0 || first > math.MaxInt32 || pages > math.MaxInt32) {
		d.corrupt(off, "%s pages [%d, +%d)", what, first, pages)
	}
	c.FirstPage, c.Pages = int(first), int(pages)
	c.Mix = d.mix(what + " mix")
	c.Seed = d.u64(what + " seed")
	s.RNG = []byte(d.str(what + " random state"))
	s.CarryByteNS = d.u64(what + " carry")
	s.Cursor = int(d.i64(what + " cursor"))
	s.Written = d.i64(what + " written")
	s.Passes = d.i64(what + " passes")
	return s
}

func (d *stateDecoder) mix(what string) memory.Mix {
	var m memory.Mix
	m.Name = d.str(what + " name")
	n := d.count8(what+" parts", mixPartStateBytes, math.MaxUint8)
	if n > 0 {
		m.Parts = make([]memory.MixPart, n)
	}
	for i := range m.Parts {
		m.Parts[i].Class = memory.Class(d.u8(what + " class"))
		m.Parts[i].Weight = d.r.u32(what + " weight")
	}
	return m
}

// span reads a span of r with the given mix (see checkSpan).
func (d *stateDecoder) span(r *memory.Region, mix memory.Mix, what string) span {
	off := d.r.off
	s := span{off: d.i64(what + " offset"), size: d.i64(what + " size"), mix: mix}
	d.checkSpan(off, s, r, what)
	return s
}

// checkSpan checks that s lies inside r, page-aligned. An empty span at
// offset 0 needs no region: the span of a workload never started.
func (d *stateDecoder) checkSpan(off int, s span, r *memory.Region, what string) {
	switch {
	case d.failed():
	case s.off < 0 || s.size < 0:
		d.corrupt(off, "%s [%d, +%d) is negative", what, s.off, s.size)
	case s.off == 0 && s.size == 0:
	case r == nil:
		d.incompatible(off, "%s [%d, +%d) in a region the VM does not have", what, s.off, s.size)
	case s.off%int64(r.PageSize()) != 0 || s.size%int64(r.PageSize()) != 0:
		d.corrupt(off, "%s [%d, +%d) not aligned to %d-byte pages", what, s.off, s.size, r.PageSize())
	case s.off > r.Size() || s.size > r.Size()-s.off:
		d.incompatible(off, "%s [%d, +%d) outside the region's %d bytes", what, s.off, s.size, r.Size())
	}
}

// fbSpan reads a span that every vGPU's framebuffer holds (training's
// weights and activations are in each).
func (d *stateDecoder) fbSpan(mix memory.Mix, what string) span {
	off := d.r.off
	s := span{off: d.i64(what + " offset"), size: d.i64(what + " size"), mix: mix}
	if d.env.Devices() == 0 {
		d.checkSpan(off, s, nil, what)
	}
	for i := range d.env.Devices() {
		d.checkSpan(off, s, d.framebuffer(i), fmt.Sprintf("%s of vGPU %d", what, i))
	}
	return s
}

// sweeper reads a sweeper of r: a span, a cursor inside it and less than a
// page carried.
func (d *stateDecoder) sweeper(r *memory.Region, mix memory.Mix, what string) sweeper {
	s := sweeper{span: d.span(r, mix, what)}
	off := d.r.off
	cursor, carry := d.i64(what+" cursor"), d.i64(what+" carry")
	if d.failed() {
		return sweeper{}
	}
	var pages, page int64
	if r != nil {
		page = int64(r.PageSize())
		pages = s.span.size / page
	}
	switch {
	case cursor < 0 || cursor >= max(pages, 1):
		d.corrupt(off, "%s cursor %d outside its %d pages", what, cursor, pages)
	case carry < 0 || carry >= max(page, 1):
		d.corrupt(off+8, "%s carry of %d bytes, a page is %d", what, carry, page)
	}
	s.cursor, s.carry = int(cursor), carry
	return s
}

// rng reads a rand.PCG's marshalled state.
func (d *stateDecoder) rng(what string) *rand.PCG {
	off := d.r.off
	b := []byte(d.str(what))
	if d.failed() {
		return nil
	}
	p := new(rand.PCG)
	if err := p.UnmarshalBinary(b); err != nil {
		d.refuse(off, ErrCorruptState, err, "%s", what)
		return nil
	}
	d.canonical(off, what, func(e *stateEncoder) { e.rng(p, what) })
	return p
}

func (d *stateDecoder) service(s *service, outMix memory.Mix) {
	s.arrivals = d.rng("arrival random state")
	off := d.r.off
	s.next = d.dur("next arrival")
	if !d.failed() && s.running {
		d.catchUp(off, "arrivals", float64(s.last-s.next)/float64(time.Second)*s.effectiveRate())
	}
	s.seq = d.u64("sequence")
	off = d.r.off
	rr := d.i64("round robin")
	switch {
	case d.failed():
	case rr < 0 || rr >= MaxVGPUsPerVM:
		d.corrupt(off, "round-robin position %d outside [0, %d)", rr, MaxVGPUsPerVM)
	case rr > 0 && rr >= int64(d.env.Devices()):
		d.incompatible(off, "round-robin position %d, the VM has %d vGPUs", rr, d.env.Devices())
	}
	s.rr = int(rr)
	n := d.count32("requests in flight", inflightStateBytes, math.MaxUint32)
	clear(s.inflight)
	var prev uint64
	for i := range n {
		off := d.r.off
		tag, arrival := d.u64("request tag"), d.dur("request arrival")
		switch {
		case d.failed():
			return
		case i > 0 && tag <= prev:
			d.corrupt(off, "request tags not increasing")
			return
		case tag >= s.seq:
			d.corrupt(off, "request tag %d not below the sequence %d", tag, s.seq)
			return
		}
		prev = tag
		s.inflight[tag] = arrival
	}
	s.work = time.Duration(d.nonNeg("request work"))
	s.chunk = time.Duration(d.nonNeg("request chunk"))
	s.inBytes = d.nonNeg("request input bytes")
	s.outBytes = d.nonNeg("request output bytes")
	s.reqRing = d.sweeper(d.env.RAM(), ramMix(), "request ring")
	m := d.devices("output sweepers", sweeperStateBytes)
	s.out = nil
	for i := range m {
		o := d.sweeper(d.framebuffer(i), outMix, fmt.Sprintf("vGPU %d output ring", i))
		if d.failed() {
			return
		}
		s.out = append(s.out, o)
	}
}

// maxCatchUpEvents bounds the events a decoded workload owes from before
// its clock: arrivals or frames that fell due while it was paused, which
// the first Fire after its resume goes through one by one. A VM paused
// for hours at a high rate owes millions; a state owing more than this,
// which could only be crafted, is refused rather than left to spin the
// host that resumes it.
const maxCatchUpEvents = 1 << 24

// catchUp refuses a state whose next event at off is owed events before
// the workload's clock.
func (d *stateDecoder) catchUp(off int, what string, owed float64) {
	if owed > maxCatchUpEvents {
		d.corrupt(off, "%.3g %s due before the workload's clock, at most %d", owed, what, maxCatchUpEvents)
	}
}

func decodeInference(env *Env, state []byte) (Workload, error) {
	d := newStateDecoder(env, StateKindInference, kindCodeInference, state)
	off := d.r.off
	w, ok := construct(d, off, d.inferenceConfig(), NewInference, (*Inference).Config, (*stateEncoder).inferenceConfig)
	if ok {
		d.base(&w.base)
		d.service(&w.service, memory.MixActivations())
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return w, nil
}

func decodeDesktop(env *Env, state []byte) (Workload, error) {
	d := newStateDecoder(env, StateKindDesktop, kindCodeDesktop, state)
	off := d.r.off
	w, ok := construct(d, off, d.desktopConfig(), NewDesktop, (*Desktop).Config, (*stateEncoder).desktopConfig)
	if ok {
		d.base(&w.base)
		d.service(&w.service, textMix())
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return w, nil
}

func decodeTraining(env *Env, state []byte) (Workload, error) {
	d := newStateDecoder(env, StateKindTraining, kindCodeTraining, state)
	off := d.r.off
	w, ok := construct(d, off, d.trainingConfig(), NewTraining, (*Training).Config, (*stateEncoder).trainingConfig)
	if ok {
		d.training(w)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return w, nil
}

func decodeCAD(env *Env, state []byte) (Workload, error) {
	d := newStateDecoder(env, StateKindCAD, kindCodeCAD, state)
	off := d.r.off
	w, ok := construct(d, off, d.cadConfig(), NewCAD, (*CAD).Config, (*stateEncoder).cadConfig)
	if ok {
		d.cad(w)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return w, nil
}

func (d *stateDecoder) training(w *Training) {
	d.base(&w.base)
	w.work = time.Duration(d.nonNeg("iteration work"))
	w.clock = d.dur("clock")
	w.nextIter = d.u64("next iteration")
	// At most QueueDepth iterations are ever queued (a throttle lowers the
	// depth in force, never the ones already queued), and one with a host
	// phase.
	limit := w.cfg.QueueDepth
	if w.cfg.hasDataLoad() {
		limit = 1
	}
	n := d.count32("iterations in flight", iterStateBytes, limit)
	clear(w.remaining)
	var prev uint64
	for i := range n {
		off := d.r.off
		it, left := d.u64("iteration"), d.i64("jobs left")
		switch {
		case d.failed():
			return
		case i > 0 && it <= prev:
			d.corrupt(off, "iterations not increasing")
			return
		case it >= w.nextIter:
			d.corrupt(off, "iteration %d in flight, the next is %d", it, w.nextIter)
			return
		case left < 1 || left > MaxVGPUsPerVM:
			d.corrupt(off+8, "iteration %d has %d jobs left", it, left)
			return
		case left > int64(d.env.Devices()):
			d.incompatible(off+8, "iteration %d has %d jobs left, the VM has %d vGPUs", it, left, d.env.Devices())
			return
		}
		prev = it
		w.remaining[it] = int(left)
	}
	off := d.r.off
	if inFlight := d.i64("iterations in flight"); !d.failed() && inFlight != int64(n) {
		d.corrupt(off, "%d iterations in flight, %d listed", inFlight, n)
	}
	w.inFlight = n
	w.readyAt = d.dur("ready at")
	w.lastDone = d.dur("last done")
	w.weights = d.fbSpan(memory.MixTrainingWeights(), "weights")
	w.acts = d.fbSpan(memory.MixActivations(), "activations")
	w.optimizer = d.span(d.env.RAM(), memory.MixWeights(), "optimizer state")
	if d.version == trainingDataLoadVersion {
		d.dataLoad(w)
	}
}

// dataLoad reads a training's host phase in progress: the jitter's random
// state and the phase a pause froze, which only a paused training between
// iterations has, and which is at most the wait its last iteration's
// completion set (from its end to the time the next batch is ready).
func (d *stateDecoder) dataLoad(w *Training) {
	w.loader = d.rng("data-load random state")
	off := d.r.off
	left := time.Duration(d.nonNeg("data load left"))
	switch {
	case d.failed() || left == 0:
	case !w.running || !w.paused || w.inFlight > 0:
		d.corrupt(off, "data load of %v left, and not paused between iterations", left)
	case w.readyAt < w.lastDone || uint64(left) > uint64(w.readyAt)-uint64(w.lastDone):
		d.corrupt(off, "data load of %v left, longer than the wait from %v to %v", left, w.lastDone, w.readyAt)
	}
	w.loadLeft = left
}

func (d *stateDecoder) cad(w *CAD) {
	d.base(&w.base)
	off := d.r.off
	w.fps = d.f64("frame rate")
	w.period = d.dur("frame period")
	if !d.failed() {
		// The period follows from the rate and the throttle (setPeriod):
		// a state with another would have Fire loop over frames no
		// renderer makes.
		want := CAD{base: base{throttle: w.throttle}, fps: w.fps}
		if w.fps != 0 {
			want.setPeriod()
		}
		switch {
		case !(w.fps == 0 || w.fps >= minTargetFPS && w.fps <= w.cfg.TargetFPS):
			d.corrupt(off, "frame rate %v outside [%v, %v]", w.fps, minTargetFPS, w.cfg.TargetFPS)
		case w.period != want.period:
			d.corrupt(off+8, "frame period %v, %v at %v frames/s and throttle %v", w.period, want.period, w.fps, w.throttle)
		case w.running && w.fps == 0:
			d.corrupt(off, "a running renderer without a frame rate")
		}
	}
	off = d.r.off
	w.next = d.dur("next frame")
	if !d.failed() && w.running && w.period > 0 {
		d.catchUp(off, "frames", float64(w.last-w.next)/float64(w.period))
	}
	w.seq = d.u64("frame sequence")
	w.inFlight = d.flag("frame in flight")
	off = d.r.off
	w.tag = d.u64("frame tag")
	if !d.failed() && w.tag > w.seq {
		d.corrupt(off, "frame tag %d above the sequence %d", w.tag, w.seq)
	}
	w.sentAt = d.dur("frame sent at")
	w.work = time.Duration(d.nonNeg("frame work"))
	w.rtBytes = d.nonNeg("render-target bytes")
	var fb *memory.Region
	if d.env.Devices() > 0 {
		fb = d.framebuffer(0)
	}
	w.targets = d.sweeper(fb, renderMix(), "render targets")
}
