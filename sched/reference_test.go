package sched

import (
	"slices"
	"time"
)

// refSched is a naive reference scheduler: the rules of the package doc
// written out as plainly as possible, one event at a time and slice by
// slice, with no counters, no jumps and no ring buffers. The real scheduler
// is checked against it.
type refSched struct {
	cfg      Config
	now      time.Duration
	ts       []*refTenant
	nextID   TenantID
	holder   int // index into ts of the tenant holding the GPU, -1 if none
	lastRR   int // index of the tenant that last started a turn, -1 if none
	sliceEnd time.Duration
	overrun  bool
}

type refTenant struct {
	id                        TenantID
	m                         int
	slice                     time.Duration
	state                     State
	jobs                      []refJob
	debt, eligible, scheduled time.Duration
	granted                   time.Duration // this advance
}

type refJob struct {
	tag                uint64
	work, done, chunk  time.Duration
	submitted, started time.Duration
	hasRun             bool
}

type refReport struct {
	busy        time.Duration
	decisions   int64
	granted     []time.Duration // per tenant, ID order
	completions []Completion
}

func newRef(cfg Config) *refSched {
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	return &refSched{cfg: cfg, now: cfg.Start, holder: -1, lastRR: -1}
}

func (r *refSched) find(id TenantID) int {
	for i, t := range r.ts {
		if t.id == id {
			return i
		}
	}
	return -1
}

func (r *refSched) add(m int) TenantID {
	r.nextID++
	sl := r.cfg.Slice
	if sl == 0 {
		sl = 2 * time.Millisecond
		if m > 8 {
			sl = time.Millisecond
		}
	}
	r.ts = append(r.ts, &refTenant{id: r.nextID, m: m, slice: sl, eligible: r.now})
	return r.nextID
}

func (r *refSched) remove(id TenantID) {
	i := r.find(id)
	r.ts = slices.Delete(r.ts, i, i+1)
	if r.holder > i {
		r.holder--
	}
	if r.lastRR >= i {
		r.lastRR--
	}
}

func (r *refSched) leastOther(t *refTenant) (time.Duration, bool) {
	var base time.Duration
	ok := false
	for _, o := range r.ts {
		if o != t && o.state != Off && (!ok || o.scheduled < base) {
			base, ok = o.scheduled, true
		}
	}
	return base, ok
}

func (r *refSched) powerOn(id TenantID) {
	t := r.ts[r.find(id)]
	if base, ok := r.leastOther(t); ok && t.scheduled < base {
		t.scheduled = base
	}
	t.state = On
	r.noCreditForIdleTime(t)
}

// noCreditForIdleTime: a tenant that starts having work (on, with jobs)
// may run no earlier than now.
func (r *refSched) noCreditForIdleTime(t *refTenant) {
	if t.state == On && len(t.jobs) > 0 && t.eligible < r.now {
		t.eligible = r.now
	}
}

func (r *refSched) stop(id TenantID) *refTenant {
	i := r.find(id)
	if r.holder == i {
		r.holder, r.overrun = -1, false
	}
	return r.ts[i]
}

func (r *refSched) powerOff(id TenantID) {
	t := r.stop(id)
	t.jobs, t.debt, t.state = nil, 0, Off
}

func (r *refSched) pause(id TenantID) { r.stop(id).state = Paused }
func (r *refSched) resume(id TenantID) {
	t := r.ts[r.find(id)]
	t.state = On
	r.noCreditForIdleTime(t)
}

func (r *refSched) submit(id TenantID, j Job) {
	t := r.ts[r.find(id)]
	if len(t.jobs) == 0 {
		t.jobs = append(t.jobs, refJob{tag: j.Tag, work: j.Work, chunk: j.Chunk, submitted: r.now})
		r.noCreditForIdleTime(t)
		return
	}
	t.jobs = append(t.jobs, refJob{tag: j.Tag, work: j.Work, chunk: j.Chunk, submitted: r.now})
}

func (r *refSched) share() bool  { return r.cfg.Policy != BestEffort }
func (r *refSched) strict() bool { return r.cfg.Policy == BestEffort || !r.cfg.DisableStrictRoundRobin }

// candidate scans every tenant for the next to run.
func (r *refSched) candidate() int {
	best := -1
	for k := 1; k <= len(r.ts); k++ {
		i := (r.lastRR + k) % len(r.ts)
		if r.lastRR < 0 {
			i = k - 1
		}
		t := r.ts[i]
		if t.state != On || len(t.jobs) == 0 {
			continue
		}
		if r.share() && t.eligible > r.now {
			continue
		}
		if r.strict() {
			return i
		}
		if best < 0 || t.scheduled < r.ts[best].scheduled {
			best = i
		}
	}
	return best
}

func (r *refSched) period(t *refTenant) time.Duration {
	if r.cfg.Policy == EqualShare {
		on := 0
		for _, o := range r.ts {
			if o.state != Off {
				on++
			}
		}
		return time.Duration(on) * t.slice
	}
	return time.Duration(t.m) * t.slice
}

func (r *refSched) begin(i int, rep *refReport) {
	t := r.ts[i]
	r.holder, r.lastRR, r.overrun = i, i, false
	slot := t.slice
	if r.strict() && t.debt > 0 {
		cut := (t.debt + time.Duration(r.cfg.AveragingFactor) - 1) / time.Duration(r.cfg.AveragingFactor)
		if cut > slot/2 {
			cut = slot / 2
		}
		t.debt -= cut
		slot -= cut
	}
	r.sliceEnd = r.now + slot
	if r.share() {
		p := r.period(t)
		e := t.eligible + p
		if e < r.now {
			e = r.now
		}
		t.eligible = e
	}
	rep.decisions++
}

func (r *refSched) run(t *refTenant, d time.Duration, over bool, rep *refReport) {
	j := &t.jobs[0]
	if !j.hasRun {
		j.started, j.hasRun = r.now, true
	}
	j.done += d
	t.granted += d
	t.scheduled += d
	rep.busy += d
	if over && r.strict() {
		t.debt = min(t.debt+d, MaxOvershootDebt)
	}
	r.now += d
	if j.done == j.work {
		rep.completions = append(rep.completions, Completion{
			Tenant: t.id, Tag: j.tag, Work: j.work, Submitted: j.submitted, Started: j.started, Finished: r.now,
		})
		t.jobs = t.jobs[1:]
	}
}

func (r *refSched) advance(d time.Duration) refReport {
	var rep refReport
	target := r.now + d
	for r.now < target {
		if r.holder < 0 {
			if c := r.candidate(); c >= 0 {
				r.begin(c, &rep)
				continue
			}
			next := target
			for _, t := range r.ts {
				if t.state == On && len(t.jobs) > 0 && t.eligible < next {
					next = t.eligible
				}
			}
			r.now = next
			continue
		}
		t := r.ts[r.holder]
		j := &t.jobs[0]
		if r.overrun {
			b := (j.done/j.chunk + 1) * j.chunk
			b = min(b, j.work)
			step := min(b-j.done, target-r.now)
			finished := step == b-j.done
			r.run(t, step, true, &rep)
			if finished {
				r.holder, r.overrun = -1, false
			}
			continue
		}
		if r.now >= r.sliceEnd {
			c := r.candidate()
			switch {
			case c == r.holder:
				r.begin(c, &rep)
			case j.chunk > 0 && j.done%j.chunk != 0:
				r.overrun = true
			default:
				r.holder = -1
			}
			continue
		}
		step := min(r.sliceEnd-r.now, target-r.now, j.work-j.done)
		r.run(t, step, false, &rep)
		if len(t.jobs) == 0 {
			r.holder = -1
		}
	}
	for _, t := range r.ts {
		rep.granted = append(rep.granted, t.granted)
		t.granted = 0
	}
	return rep
}
