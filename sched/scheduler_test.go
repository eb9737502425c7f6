package sched

import (
	"errors"
	"testing"
	"time"
)

const ms = time.Millisecond

// newOn returns a scheduler with one powered-on tenant per slot count.
func newOn(t *testing.T, cfg Config, slots ...int) (*Scheduler, []TenantID) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ids []TenantID
	for _, m := range slots {
		id, err := s.AddTenant(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PowerOn(id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return s, ids
}

func submit(t *testing.T, s *Scheduler, id TenantID, j Job) {
	t.Helper()
	if err := s.Submit(id, j); err != nil {
		t.Fatal(err)
	}
}

func advance(t *testing.T, s *Scheduler, d time.Duration) Report {
	t.Helper()
	var rep Report
	if err := s.Advance(d, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func granted(rep Report, id TenantID) time.Duration {
	ti, _ := rep.Tenant(id)
	return ti.Granted
}

// turns records each tenant's turns (adjacent grants merged) from the trace.
func turns(s *Scheduler) map[TenantID][]segment {
	runs := map[TenantID][]segment{}
	var lastID TenantID
	s.trace = func(id TenantID, from, to time.Duration) {
		r := runs[id]
		if id == lastID && len(r) > 0 && r[len(r)-1].to == from {
			r[len(r)-1].to = to
		} else {
			r = append(r, segment{from, to})
		}
		runs[id], lastID = r, id
	}
	return runs
}

// A tenant preempted mid-chunk runs on to the chunk boundary; the overshoot
// accumulates, and each next slice is shortened by the accumulated total
// divided by the averaging factor (rounded up), which is taken off the
// total.
func TestOvershootShortensNextSlicesByDebtOverAveragingFactor(t *testing.T) {
	s, ids := newOn(t, Config{Slice: ms, AveragingFactor: 4}, 6, 6)
	a, b := ids[0], ids[1]
	runs := turns(s)
	submit(t, s, a, Job{Work: 1600 * time.Microsecond, Chunk: 1600 * time.Microsecond, Tag: 1}) // one kernel
	submit(t, s, a, Job{Work: time.Second, Tag: 2})
	submit(t, s, b, Job{Work: time.Second, Tag: 3})
	advance(t, s, 8*ms)

	want := []time.Duration{
		1600 * time.Microsecond, // 1 ms slice + 600 µs overshoot: debt 600 µs
		850 * time.Microsecond,  // cut ceil(600/4) = 150 µs: debt 450 µs
		887500,                  // cut 112.5 µs: debt 337.5 µs
		915625,                  // cut 84.375 µs: debt 253.125 µs
	}
	for i, w := range want {
		if got := runs[a][i].to - runs[a][i].from; got != w {
			t.Errorf("tenant A's turn %d lasted %v, want %v", i, got, w)
		}
	}
	for i, seg := range runs[b][:3] {
		if got := seg.to - seg.from; got != ms {
			t.Errorf("tenant B's turn %d lasted %v, want the full 1ms slice", i, got)
		}
	}
	info, _ := s.Tenant(a)
	if info.Overshoot != 600*time.Microsecond || info.Debt != 253125 {
		t.Errorf("overshoot %v, debt %v; want 600µs and 253.125µs", info.Overshoot, info.Debt)
	}
}

// Compensation makes overshoot a loan, not a gift: a tenant whose kernels
// overrun its slices still gets half of a best-effort GPU it shares with
// one other busy tenant (without repayment it would get about 57 %).
func TestOvershootCompensationKeepsShareFair(t *testing.T) {
	s, ids := newOn(t, Config{Slice: ms}, 6, 6)
	a, b := ids[0], ids[1]
	var total [2]time.Duration
	for range 200 {
		for _, id := range ids {
			if info, _ := s.Tenant(id); info.Queued < 2 {
				submit(t, s, id, Job{Work: 100 * ms, Chunk: 400 * time.Microsecond * time.Duration(2-int(id-a))})
			}
		}
		rep := advance(t, s, 100*ms)
		total[0] += granted(rep, a)
		total[1] += granted(rep, b)
	}
	info, _ := s.Tenant(a)
	if info.Overshoot < (total[0] / 20) {
		t.Fatalf("tenant A overshot only %v of %v: the test needs real overshoot", info.Overshoot, total[0])
	}
	share := float64(total[0]) / float64(total[0]+total[1])
	if share < 0.495 || share > 0.505 {
		t.Fatalf("tenant A got %.4f of the GPU, want 0.5 ± 0.005", share)
	}
}

// Fixed share: a lone P40-4Q tenant still gets one sixth, whatever other
// tenants exist or are on.
func TestFixedShareLoneP40_4QGetsOneSixth(t *testing.T) {
	s, ids := newOn(t, Config{Policy: FixedShare}, 6)
	submit(t, s, ids[0], Job{Work: time.Hour})
	rep := advance(t, s, 1200*ms)
	if g := granted(rep, ids[0]); g != 200*ms {
		t.Fatalf("lone 4Q tenant got %v of 1.2s, want one sixth, 200ms", g)
	}
	// A neighbour that is off, and one that is busy, change nothing.
	off, _ := s.AddTenant(6)
	busy, _ := s.AddTenant(6)
	_ = s.PowerOn(busy)
	submit(t, s, busy, Job{Work: time.Hour})
	rep = advance(t, s, 1200*ms)
	if g := granted(rep, ids[0]); g != 200*ms {
		t.Fatalf("with neighbours the 4Q tenant got %v of 1.2s, want 200ms", g)
	}
	if g := granted(rep, off); g != 0 {
		t.Fatalf("the off tenant got %v", g)
	}
	if u := rep.Utilization(); u < 0.333 || u > 0.334 {
		t.Fatalf("utilization %.4f, want 1/3: the unused slots stay idle", u)
	}
}

// Equal share divides the GPU among the powered-on tenants, busy or not; an
// idle tenant's slot is not lent. Powering it off raises the others' share.
func TestEqualShareDividesAmongPoweredOnTenants(t *testing.T) {
	s, ids := newOn(t, Config{Policy: EqualShare}, 6, 6, 6)
	a, b, idle := ids[0], ids[1], ids[2]
	submit(t, s, a, Job{Work: time.Hour})
	submit(t, s, b, Job{Work: time.Hour})
	rep := advance(t, s, 1200*ms)
	for _, id := range []TenantID{a, b} {
		if g := granted(rep, id); g != 400*ms {
			t.Fatalf("tenant %d got %v of 1.2s with 3 powered on, want 1/3, 400ms", id, g)
		}
	}
	if u := rep.Utilization(); u < 0.666 || u > 0.667 {
		t.Fatalf("utilization %.4f, want 2/3: the idle tenant's slot is not lent", u)
	}
	if _, err := s.PowerOff(idle); err != nil {
		t.Fatal(err)
	}
	rep = advance(t, s, 1200*ms)
	for _, id := range []TenantID{a, b} {
		if g := granted(rep, id); g != 600*ms {
			t.Fatalf("tenant %d got %v of 1.2s with 2 powered on, want 1/2, 600ms", id, g)
		}
	}
}

// Best effort lends every idle moment: two busy tenants of three split the
// whole GPU.
func TestBestEffortLendsIdleTime(t *testing.T) {
	s, ids := newOn(t, Config{}, 6, 6, 6)
	submit(t, s, ids[0], Job{Work: time.Hour})
	submit(t, s, ids[1], Job{Work: time.Hour})
	rep := advance(t, s, 1200*ms)
	if g0, g1 := granted(rep, ids[0]), granted(rep, ids[1]); g0 != 600*ms || g1 != 600*ms {
		t.Fatalf("busy tenants got %v and %v of 1.2s, want 600ms each", g0, g1)
	}
	if rep.Utilization() != 1 {
		t.Fatalf("utilization %v, want 1", rep.Utilization())
	}
}

// A paused tenant gets no turns but keeps its queue, and under equal share
// keeps its slot too: its neighbours' shares do not change for a stun.
func TestPauseKeepsQueueAndEqualShareSlot(t *testing.T) {
	s, ids := newOn(t, Config{Policy: EqualShare}, 6, 6)
	a, b := ids[0], ids[1]
	submit(t, s, a, Job{Work: time.Hour})
	submit(t, s, b, Job{Work: 50 * ms, Tag: 7})
	submit(t, s, b, Job{Work: 50 * ms, Tag: 8})
	advance(t, s, 10*ms)
	if err := s.Pause(b); err != nil {
		t.Fatal(err)
	}
	rep := advance(t, s, 100*ms)
	if g := granted(rep, b); g != 0 {
		t.Fatalf("paused tenant got %v", g)
	}
	if g := granted(rep, a); g != 50*ms {
		t.Fatalf("neighbour of a paused tenant got %v of 100ms, want still 1/2", g)
	}
	if info, _ := s.Tenant(b); info.Queued != 2 || info.State != Paused {
		t.Fatalf("paused tenant %+v, want its 2 jobs kept", info)
	}
	if err := s.Resume(b); err != nil {
		t.Fatal(err)
	}
	rep = advance(t, s, 300*ms)
	if len(rep.Completions) != 2 || rep.Completions[0].Tag != 7 || rep.Completions[1].Tag != 8 {
		t.Fatalf("after resume completions %+v, want jobs 7 then 8", rep.Completions)
	}
}

func TestPowerOffDropsQueue(t *testing.T) {
	s, ids := newOn(t, Config{}, 6)
	submit(t, s, ids[0], Job{Work: time.Second})
	submit(t, s, ids[0], Job{Work: time.Second})
	advance(t, s, 10*ms)
	n, err := s.PowerOff(ids[0])
	if err != nil || n != 2 {
		t.Fatalf("PowerOff = %d, %v; want 2 jobs dropped", n, err)
	}
	info, _ := s.Tenant(ids[0])
	if info.Dropped != 2 || info.Queued != 0 || info.Granted != 10*ms {
		t.Fatalf("after power off: %+v", info)
	}
	if rep := advance(t, s, 10*ms); rep.Busy != 0 {
		t.Fatalf("GPU busy %v with its only tenant off", rep.Busy)
	}
}

// Strict round-robin gives the next turn to the tenant after the last one
// to run; with it switched off the tenant that has spent the least time
// scheduled goes first.
func TestTurnOrderStrictRoundRobinVersusLeastScheduled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noRR    bool
		wantTag []uint64
	}{
		{"strict round-robin: after B comes C", false, []uint64{3, 1, 2}},
		{"least scheduled: B (2ms) before A (10ms) before C (30ms)", true, []uint64{2, 1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ids := newOn(t, Config{Policy: EqualShare, DisableStrictRoundRobin: tc.noRR}, 1, 1, 1)
			a, b, c := ids[0], ids[1], ids[2]
			for _, w := range []struct {
				id   TenantID
				work time.Duration
			}{{a, 10 * ms}, {c, 30 * ms}, {b, 2 * ms}} {
				submit(t, s, w.id, Job{Work: w.work})
				advance(t, s, 200*ms)
			}
			submit(t, s, a, Job{Work: ms, Tag: 1})
			submit(t, s, b, Job{Work: ms, Tag: 2})
			submit(t, s, c, Job{Work: ms, Tag: 3})
			rep := advance(t, s, 100*ms)
			var got []uint64
			for _, c := range rep.Completions {
				got = append(got, c.Tag)
			}
			if len(got) != 3 || got[0] != tc.wantTag[0] || got[1] != tc.wantTag[1] || got[2] != tc.wantTag[2] {
				t.Fatalf("completion order %v, want %v", got, tc.wantTag)
			}
		})
	}
}

// A job longer than a slice is preempted at the slice's end and resumed;
// the completion reports its queueing delay and latency.
func TestCompletionReportsQueueDelayAndLatency(t *testing.T) {
	s, ids := newOn(t, Config{}, 6, 6)
	submit(t, s, ids[0], Job{Work: 5 * ms, Tag: 1})
	submit(t, s, ids[1], Job{Work: ms, Tag: 2})
	rep := advance(t, s, 20*ms)
	want := []Completion{
		{Tenant: ids[1], Tag: 2, Work: ms, Submitted: 0, Started: 2 * ms, Finished: 3 * ms},
		{Tenant: ids[0], Tag: 1, Work: 5 * ms, Submitted: 0, Started: 0, Finished: 6 * ms},
	}
	if len(rep.Completions) != 2 || rep.Completions[0] != want[0] || rep.Completions[1] != want[1] {
		t.Fatalf("completions %+v, want %+v", rep.Completions, want)
	}
	if d := rep.Completions[0].QueueDelay(); d != 2*ms {
		t.Errorf("queue delay %v, want 2ms (the other tenant's slice)", d)
	}
	if l := rep.Completions[1].Latency(); l != 6*ms {
		t.Errorf("latency %v, want 6ms", l)
	}
}

// Advance jumps where nothing can interrupt: an idle GPU, a lone tenant
// renewing its slices, a lone tenant paced by its share. The decisions are
// still counted as if taken slice by slice.
func TestAdvanceJumpsInsteadOfWalkingSlices(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cfg           Config
		slots         int
		wantDecisions int64
	}{
		{"best effort, lone tenant: 1 ms slices renewed", Config{Slice: ms}, 24, 3_600_000},
		{"equal share, lone tenant owns the GPU", Config{Policy: EqualShare, Slice: ms}, 24, 3_600_000},
		{"fixed share, lone 4Q tenant: one 2 ms slice per 12 ms", Config{Policy: FixedShare}, 6, 300_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ids := newOn(t, tc.cfg, tc.slots)
			submit(t, s, ids[0], Job{Work: 2 * time.Hour})
			rep := advance(t, s, time.Hour)
			if rep.Decisions != tc.wantDecisions {
				t.Errorf("decisions %d, want %d", rep.Decisions, tc.wantDecisions)
			}
			if s.steps > 10 {
				t.Errorf("took %d steps for an hour of one tenant", s.steps)
			}
		})
	}
	s, _ := newOn(t, Config{Policy: EqualShare}, 6, 6)
	advance(t, s, time.Hour)
	if s.steps != 1 {
		t.Errorf("idle GPU took %d steps for an hour, want 1", s.steps)
	}
}

// With the Report reused, a busy GPU's Advance allocates nothing, under
// every policy and in both turn orders: no allocation per slice in steady
// state. Jobs are short enough that each Advance completes many and
// chunked so that overshoot and its repayment run too.
func TestAdvanceSteadyStateAllocatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"best effort", Config{Policy: BestEffort}},
		{"equal share", Config{Policy: EqualShare}},
		{"fixed share", Config{Policy: FixedShare}},
		{"equal share, least-scheduled", Config{Policy: EqualShare, DisableStrictRoundRobin: true}},
		{"fixed share, least-scheduled", Config{Policy: FixedShare, DisableStrictRoundRobin: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slots := make([]int, 24)
			for i := range slots {
				slots[i] = []int{1, 2, 24}[i%3] // 2 ms and 1 ms slices, 1/1 to 1/24 fixed shares
			}
			s, ids := newOn(t, tc.cfg, slots...)
			var rep Report
			step := func() {
				for _, id := range ids {
					for {
						if info, _ := s.Tenant(id); info.Queued >= 3 {
							break
						}
						_ = s.Submit(id, Job{Work: 7 * ms, Chunk: 300 * time.Microsecond})
					}
				}
				_ = s.Advance(100*ms, &rep)
			}
			for range 20 {
				step()
			}
			if n := testing.AllocsPerRun(50, step); n != 0 {
				t.Fatalf("%v allocations per Advance, want 0", n)
			}
			if len(rep.Completions) == 0 || rep.Decisions < 40 {
				t.Fatalf("%d completions, %d decisions: the test did not exercise scheduling", len(rep.Completions), rep.Decisions)
			}
		})
	}
}

func TestAdvanceRejectsBadDurations(t *testing.T) {
	s, _ := New(Config{Start: MaxTime - ms})
	for _, d := range []time.Duration{-1, ms + 1} {
		if err := s.Advance(d, nil); !errors.Is(err, ErrInvalidDuration) {
			t.Errorf("Advance(%v) = %v, want ErrInvalidDuration", d, err)
		}
	}
	if err := s.Advance(ms, nil); err != nil || s.Now() != MaxTime {
		t.Errorf("Advance to MaxTime: %v, now %v", err, s.Now())
	}
}

func TestSubmitRejects(t *testing.T) {
	s, ids := newOn(t, Config{MaxQueue: 1}, 6)
	off, _ := s.AddTenant(6)
	for _, tc := range []struct {
		name string
		id   TenantID
		job  Job
		want error
	}{
		{"zero work", ids[0], Job{}, ErrInvalidJob},
		{"work above MaxJobWork", ids[0], Job{Work: MaxJobWork + 1}, ErrInvalidJob},
		{"negative chunk", ids[0], Job{Work: ms, Chunk: -1}, ErrInvalidJob},
		{"chunk above MaxChunk", ids[0], Job{Work: ms, Chunk: MaxChunk + 1}, ErrInvalidJob},
		{"tenant off", off, Job{Work: ms}, ErrTenantState},
		{"unknown tenant", 99, Job{Work: ms}, ErrUnknownTenant},
	} {
		if err := s.Submit(tc.id, tc.job); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	submit(t, s, ids[0], Job{Work: ms})
	if err := s.Submit(ids[0], Job{Work: ms}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("second job with MaxQueue 1: %v, want ErrQueueFull", err)
	}
}

func TestLifecycleRefusesWrongState(t *testing.T) {
	s, _ := New(Config{MaxTenants: 2})
	id, _ := s.AddTenant(6)
	check := func(op string, err error, state State) {
		t.Helper()
		var se *StateError
		if !errors.As(err, &se) || !errors.Is(err, ErrTenantState) || se.State != state || se.Tenant != id {
			t.Errorf("%s: %v, want a StateError for a tenant %s", op, err, state)
		}
	}
	check("pause while off", s.Pause(id), Off)
	check("resume while off", s.Resume(id), Off)
	_, err := s.PowerOff(id)
	check("power off while off", err, Off)
	_ = s.PowerOn(id)
	check("power on while on", s.PowerOn(id), On)
	check("resume while on", s.Resume(id), On)
	check("remove while on", s.RemoveTenant(id), On)
	check("restore while on", s.RestoreTenant(id, nil), On)
	_ = s.Pause(id)
	check("pause while paused", s.Pause(id), Paused)
	check("remove while paused", s.RemoveTenant(id), Paused)

	if _, err := s.AddTenant(0); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("AddTenant(0): %v", err)
	}
	_, _ = s.AddTenant(1)
	if _, err := s.AddTenant(1); !errors.Is(err, ErrTooManyTenants) {
		t.Errorf("third tenant with MaxTenants 2: %v", err)
	}
	if err := s.RemoveTenant(42); !errors.Is(err, ErrUnknownTenant) {
		t.Errorf("remove unknown: %v", err)
	}
}
