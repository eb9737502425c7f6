package sched

import (
	"fmt"
	"time"
)

// Scheduler time-shares one physical GPU among its tenants on simulated
// time. The caller moves time on with Advance; nothing happens between
// calls. A Scheduler is not safe for concurrent use and starts no
// goroutines.
type Scheduler struct {
	cfg    Config
	strict bool          // turns go round-robin and overshoot shortens slices
	share  bool          // equal or fixed share: turns are paced by eligibility
	factor time.Duration // the averaging factor, as a divisor of durations

	now      time.Duration
	tenants  []*tenant // in ID order, which is the round-robin order
	nextID   TenantID
	nOn      int // tenants on or paused: the equal-share denominator
	runnable int // tenants on with queued work

	// The turn in progress. cur holds the GPU (nil: no turn) and is
	// tenants[last]; last is also the round-robin position, -1 before the
	// first turn.
	cur     *tenant
	last    int
	slotEnd time.Duration // when cur's slice ends
	overrun bool          // cur is past slotEnd, running to its job's next chunk boundary

	rep         *Report       // the caller's, during Advance
	busy        time.Duration // GPU time granted since New, for Busy
	ivBusy      time.Duration
	ivDecisions int64

	// trace, when set (by tests), sees every stretch of GPU time granted.
	trace func(id TenantID, from, to time.Duration)
	// steps counts iterations of run's loop, so tests can tell a jump from
	// a walk.
	steps int64
}

// New returns a scheduler with no tenants, at simulated time cfg.Start.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Scheduler{
		cfg:    cfg,
		strict: cfg.strictRoundRobin(),
		share:  cfg.Policy != BestEffort,
		factor: time.Duration(cfg.AveragingFactor),
		now:    cfg.Start,
		last:   -1,
	}, nil
}

// Config returns the configuration in use, defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

// Now returns the current simulated time.
func (s *Scheduler) Now() time.Duration { return s.now }

// Advance moves simulated time on by d, running tenants' work, and
// describes the interval in rep (which may be nil). A decision due exactly
// at the end of the interval is taken at the start of the next Advance, so
// that jobs submitted in between take part in it; apart from that,
// splitting an Advance in two changes nothing.
func (s *Scheduler) Advance(d time.Duration, rep *Report) error {
	if d < 0 || d > MaxTime-s.now {
		return fmt.Errorf("%w: advance by %v from %v", ErrInvalidDuration, d, s.now)
	}
	if rep != nil {
		rep.Start = s.now
		rep.Completions = rep.Completions[:0]
		rep.Tenants = rep.Tenants[:0]
	}
	s.rep = rep
	s.run(s.now + d)
	s.rep = nil
	if rep != nil {
		rep.End, rep.Busy, rep.Decisions = s.now, s.ivBusy, s.ivDecisions
	}
	for _, t := range s.tenants {
		if rep != nil {
			rep.Tenants = append(rep.Tenants, TenantInterval{
				ID: t.id, State: t.state, Granted: t.ivGranted, Overshoot: t.ivOvershoot,
				Completed: t.ivCompleted, Queued: t.q.n,
			})
		}
		t.ivGranted, t.ivOvershoot, t.ivCompleted = 0, 0, 0
	}
	s.ivBusy, s.ivDecisions = 0, 0
	return nil
}

// run simulates up to target, one event at a time: a turn starting, a job
// finishing, a slice ending, an overshoot reaching its chunk boundary, or
// the GPU idling until a tenant may run. Where nothing could interrupt, it
// jumps: over idle time, over the renewed slices of a tenant that runs
// alone, and over whole periods of a lone tenant paced by its share.
func (s *Scheduler) run(target time.Duration) {
	for s.now < target {
		s.steps++
		t := s.cur
		switch {
		case t == nil:
			s.decide(target)
		case s.overrun:
			s.runOverrun(t, target)
		case s.now >= s.slotEnd:
			s.expire()
		case s.runnable == 1 && s.renewsAlone(t):
			s.runAlone(t, target)
		default:
			s.runSlot(t, min(s.slotEnd, target))
		}
	}
}

// decide starts the next turn when no turn is in progress, or idles.
func (s *Scheduler) decide(target time.Duration) {
	if s.runnable == 0 {
		s.now = target // no work anywhere, and none can arrive before target
		return
	}
	i := s.pick()
	if i < 0 {
		// Equal or fixed share: every tenant with work has used its share
		// for now. Its slot is not lent to anyone: the GPU idles.
		s.now = min(s.nextEligible(), target)
		return
	}
	if s.runnable == 1 && s.skipPeriods(i, target) {
		return
	}
	s.startTurn(i)
}

// pick returns the index of the tenant that should run next, or -1.
// Candidates are the tenants that are on, have work and, under equal or
// fixed share, are eligible. Strict round-robin takes the first candidate
// after the last tenant to start a turn; otherwise the candidate with the
// least scheduled time wins, ties going in round-robin order.
func (s *Scheduler) pick() int {
	n := len(s.tenants)
	i := s.last
	best := -1
	for range n {
		i++
		if i >= n {
			i = 0
		}
		t := s.tenants[i]
		if t.state != On || t.q.n == 0 || (s.share && t.eligible > s.now) {
			continue
		}
		if s.strict {
			return i
		}
		if best < 0 || t.scheduled < s.tenants[best].scheduled {
			best = i
		}
	}
	return best
}

// nextEligible is the earliest time a tenant with work may start a turn.
func (s *Scheduler) nextEligible() time.Duration {
	next := MaxTime
	for _, t := range s.tenants {
		if t.state == On && t.q.n > 0 && t.eligible < next {
			next = t.eligible
		}
	}
	return next
}

// period is the time between the starts of a tenant's turns when its share
// is all it gets: its slice times the share's denominator.
func (s *Scheduler) period(t *tenant) time.Duration {
	if s.cfg.Policy == EqualShare {
		return time.Duration(s.nOn) * t.slice
	}
	return time.Duration(t.maxInstances) * t.slice
}

// startTurn gives the GPU to tenants[i] for one slice.
//
// Overshoot compensation: the slice is shortened by the tenant's
// accumulated overshoot divided by the averaging factor (rounded up, so
// the debt reaches zero), and that amount is taken off the debt, as NVIDIA
// describes the compensation (NVIDIA AI Enterprise User Guide v5.0, 2024,
// section 7.1). A slice is never shortened by more than half, so that a
// tenant whose kernels overrun every slice still runs; the rest of its
// debt waits. The half is an assumption: the guide gives no floor.
//
// Under equal and fixed share a turn also moves the tenant's eligibility
// one period on. It moves from the previous eligibility, not from now, so
// a tenant kept waiting by others does not lose its share; but it never
// lands before this turn's start, so however far behind a tenant falls
// (on an oversubscribed GPU) its turns n and n+2 are a full period apart.
// A tenant that was idle does not fall behind at all: see wake.
func (s *Scheduler) startTurn(i int) {
	t := s.tenants[i]
	s.cur, s.last, s.overrun = t, i, false
	slot := t.slice
	if s.strict && t.debt > 0 {
		cut := min((t.debt+s.factor-1)/s.factor, slot/2)
		t.debt -= cut
		slot -= cut
	}
	s.slotEnd = s.now + slot
	if s.share {
		t.eligible = max(t.eligible+s.period(t), s.now)
	}
	s.ivDecisions++
}

// expire handles the end of cur's slice: renew it if cur is again the one
// to run, otherwise preempt cur, letting its job run on to its next chunk
// boundary first.
func (s *Scheduler) expire() {
	i := s.pick()
	if i == s.last {
		s.startTurn(i)
		return
	}
	if s.cur.q.front().toChunkBoundary() > 0 {
		s.overrun = true
		return
	}
	s.endTurn()
	if i >= 0 {
		s.startTurn(i)
	}
}

func (s *Scheduler) endTurn() {
	s.cur, s.overrun = nil, false
}

// runSlot runs cur's jobs up to end (within its slice), ending the turn
// early if its queue empties: under best effort the GPU moves on at once.
func (s *Scheduler) runSlot(t *tenant, end time.Duration) {
	for s.now < end {
		j := t.q.front()
		r := j.remaining()
		if r > end-s.now {
			s.grant(t, j, end-s.now, false)
			return
		}
		s.grant(t, j, r, false)
		s.complete(t)
		if t.q.n == 0 {
			s.endTurn()
			return
		}
	}
}

// runOverrun runs a preempted job on to its next chunk boundary, or to its
// end; either ends the turn.
func (s *Scheduler) runOverrun(t *tenant, target time.Duration) {
	j := t.q.front()
	need := j.toChunkBoundary()
	d := min(need, target-s.now)
	s.grant(t, j, d, true)
	if d < need {
		return
	}
	if j.remaining() == 0 {
		s.complete(t)
	}
	s.endTurn()
}

// renewsAlone reports whether cur, the only tenant with work, will have its
// slice renewed at every slice end until its work runs out: under best
// effort, or when its share is the whole GPU; and with no overshoot debt
// left to shorten a slice.
func (s *Scheduler) renewsAlone(t *tenant) bool {
	if s.strict && t.debt > 0 {
		return false
	}
	return !s.share || (s.period(t) == t.slice && t.eligible <= s.slotEnd)
}

// runAlone runs cur without a break until its queue empties or target, then
// accounts in one step for the slice renewals it ran through: they fall at
// slotEnd + k*slice before the stop.
func (s *Scheduler) runAlone(t *tenant, target time.Duration) {
	for s.now < target && t.q.n > 0 {
		j := t.q.front()
		if r := j.remaining(); r <= target-s.now {
			s.grant(t, j, r, false)
			s.complete(t)
		} else {
			s.grant(t, j, target-s.now, false)
		}
	}
	if stop := s.now; stop > s.slotEnd {
		m := (stop - s.slotEnd + t.slice - 1) / t.slice
		if s.share {
			// Each renewal moves eligibility one period (= one slice) on;
			// startTurn's floor never applies, because the eligibility set
			// at the current slice's start is at least that start.
			t.eligible += m * t.slice
		}
		s.slotEnd += m * t.slice
		s.ivDecisions += int64(m)
	}
	if t.q.n == 0 {
		s.endTurn()
	}
}

// skipPeriods handles the steady state of a lone tenant paced by its share
// (a period longer than its slice): each period is a full slice of its
// front job and then idle time until it is eligible again. It takes as many
// whole periods at once as fit before target without finishing the job,
// and reports whether it took any.
func (s *Scheduler) skipPeriods(i int, target time.Duration) bool {
	t := s.tenants[i]
	if !s.share || t.eligible != s.now || (s.strict && t.debt > 0) {
		return false
	}
	p := s.period(t)
	j := t.q.front()
	if p == t.slice || j.chunk != 0 {
		return false
	}
	k := min((target-s.now)/p, (j.remaining()-1)/t.slice)
	if k <= 0 {
		return false
	}
	if !j.hasRun {
		j.started, j.hasRun = s.now, true
	}
	if s.trace != nil {
		for m := range k {
			s.trace(t.id, s.now+m*p, s.now+m*p+t.slice)
		}
	}
	run := k * t.slice
	j.done += run
	t.granted += run
	t.scheduled += run
	t.ivGranted += run
	s.ivBusy += run
	s.busy += run
	s.now += k * p
	t.eligible = s.now
	s.last = i
	s.ivDecisions += int64(k)
	return true
}

// grant runs j, t's front job, for d and accounts for it; overshoot marks
// time past the end of t's slice.
func (s *Scheduler) grant(t *tenant, j *job, d time.Duration, overshoot bool) {
	if !j.hasRun {
		j.started, j.hasRun = s.now, true
	}
	if s.trace != nil {
		s.trace(t.id, s.now, s.now+d)
	}
	j.done += d
	t.granted += d
	t.scheduled += d
	t.ivGranted += d
	s.ivBusy += d
	s.busy += d
	if overshoot {
		t.overshoot += d
		t.ivOvershoot += d
		if s.strict {
			t.debt = min(t.debt+d, MaxOvershootDebt)
		}
	}
	s.now += d
}

// complete retires t's finished front job and reports it.
func (s *Scheduler) complete(t *tenant) {
	j := t.q.front()
	if s.rep != nil {
		s.rep.Completions = append(s.rep.Completions, Completion{
			Tenant: t.id, Tag: j.tag, Work: j.work,
			Submitted: j.submitted, Started: j.started, Finished: s.now,
		})
	}
	t.q.pop()
	t.completed++
	t.ivCompleted++
	if t.q.n == 0 {
		s.runnable--
	}
}
