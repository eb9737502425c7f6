package sched

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

// P40 slot counts: the maximum instances per GPU of the Q profiles.
var p40Slots = []int{24, 12, 8, 6, 4, 3, 2, 1}

func drawConfig(t *rapid.T, policies ...Policy) Config {
	if len(policies) == 0 {
		policies = []Policy{BestEffort, EqualShare, FixedShare}
	}
	c := Config{
		Policy:                  rapid.SampledFrom(policies).Draw(t, "policy"),
		AveragingFactor:         rapid.IntRange(0, MaxAveragingFactor).Draw(t, "averaging"),
		DisableStrictRoundRobin: rapid.Bool().Draw(t, "noStrictRR"),
		MaxQueue:                rapid.IntRange(1, 12).Draw(t, "maxQueue"),
		Start:                   time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "start")),
	}
	if rapid.Bool().Draw(t, "explicitSlice") {
		c.Slice = time.Duration(rapid.Int64Range(int64(MinSlice), int64(MaxSlice)).Draw(t, "slice"))
	}
	return c
}

func drawSlots(t *rapid.T, label string) int {
	if rapid.Bool().Draw(t, label+"P40") {
		return rapid.SampledFrom(p40Slots).Draw(t, label)
	}
	return rapid.IntRange(1, MaxInstancesLimit).Draw(t, label)
}

func drawJob(t *rapid.T, tag uint64, chunks bool) Job {
	j := Job{Tag: tag}
	if rapid.IntRange(0, 9).Draw(t, "long") == 0 {
		j.Work = time.Duration(rapid.Int64Range(int64(50*time.Millisecond), int64(time.Second)).Draw(t, "work"))
	} else {
		j.Work = time.Duration(rapid.Int64Range(1, int64(20*time.Millisecond)).Draw(t, "work"))
	}
	if chunks && rapid.Bool().Draw(t, "chunked") {
		j.Chunk = time.Duration(rapid.Int64Range(1, int64(4*time.Millisecond)).Draw(t, "chunk"))
	}
	return j
}

func drawAdvance(t *rapid.T) time.Duration {
	switch rapid.IntRange(0, 9).Draw(t, "advanceKind") {
	case 0:
		return 0
	case 1:
		return time.Duration(rapid.Int64Range(int64(100*time.Millisecond), int64(2*time.Second)).Draw(t, "advance"))
	}
	return time.Duration(rapid.Int64Range(1, int64(15*time.Millisecond)).Draw(t, "advance"))
}

// checkInterval checks what must hold of any Advance, whatever the policy:
// granted time adds up to Busy and never exceeds the elapsed time, and each
// tenant's jobs complete in submission order (tags are submission numbers).
func checkInterval(t *rapid.T, rep *Report, lastTag map[TenantID]uint64) {
	var sum time.Duration
	for _, ti := range rep.Tenants {
		if ti.Granted < 0 || ti.Overshoot < 0 || ti.Overshoot > ti.Granted {
			t.Fatalf("tenant %d: granted %v, overshoot %v", ti.ID, ti.Granted, ti.Overshoot)
		}
		sum += ti.Granted
	}
	if sum != rep.Busy {
		t.Fatalf("granted sums to %v, busy is %v", sum, rep.Busy)
	}
	if rep.Busy > rep.End-rep.Start {
		t.Fatalf("busy %v exceeds elapsed %v", rep.Busy, rep.End-rep.Start)
	}
	for _, c := range rep.Completions {
		if c.Tag <= lastTag[c.Tenant] {
			t.Fatalf("tenant %d completed job %d after job %d", c.Tenant, c.Tag, lastTag[c.Tenant])
		}
		lastTag[c.Tenant] = c.Tag
		if c.Submitted > c.Started || c.Started >= c.Finished || c.Finished > rep.End || c.Finished <= rep.Start {
			t.Fatalf("completion times out of order: %+v in [%v, %v]", c, rep.Start, rep.End)
		}
	}
}

// TestPropMatchesNaiveReference drives the scheduler and the naive
// reference with the same random tenants, policies, slices and job streams,
// and requires identical reports: busy time, per-tenant grants, decisions
// and every completion. The real scheduler's Advances are sometimes split
// in two, which must change nothing. Best effort must also be
// work-conserving: busy equals the lesser of the interval and the queued
// work of the tenants that are on.
func TestPropMatchesNaiveReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t)
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ref := newRef(cfg)
		var ids []TenantID
		addTenant := func() {
			m := drawSlots(t, "slots")
			id, err := s.AddTenant(m)
			if err != nil {
				t.Fatal(err)
			}
			if rid := ref.add(m); rid != id {
				t.Fatalf("reference gave ID %d, scheduler %d", rid, id)
			}
			ids = append(ids, id)
		}
		for range rapid.IntRange(1, 5).Draw(t, "tenants") {
			addTenant()
		}
		var tag uint64
		lastTag := map[TenantID]uint64{}
		var rep, rep2 Report
		for step := range rapid.IntRange(1, 120).Draw(t, "steps") {
			if len(ids) == 0 {
				addTenant()
			}
			id := rapid.SampledFrom(ids).Draw(t, "tenant")
			info, _ := s.Tenant(id)
			switch op := rapid.IntRange(0, 15).Draw(t, "op"); {
			case op <= 5:
				tag++
				j := drawJob(t, tag, true)
				if err := s.Submit(id, j); err == nil {
					ref.submit(id, j)
				} else if !errors.Is(err, ErrTenantState) && !errors.Is(err, ErrQueueFull) {
					t.Fatal(err)
				}
			case op == 6:
				if s.PowerOn(id) == nil {
					ref.powerOn(id)
				}
			case op == 7 && rapid.IntRange(0, 3).Draw(t, "rarely") == 0:
				if _, err := s.PowerOff(id); err == nil {
					ref.powerOff(id)
				}
			case op == 8:
				if s.Pause(id) == nil {
					ref.pause(id)
				}
			case op == 9:
				if s.Resume(id) == nil {
					ref.resume(id)
				}
			case op == 10 && len(ids) < 6:
				addTenant()
			case op == 11 && info.State == Off:
				if err := s.RemoveTenant(id); err != nil {
					t.Fatal(err)
				}
				ref.remove(id)
				for i, x := range ids {
					if x == id {
						ids = append(ids[:i], ids[i+1:]...)
						break
					}
				}
			default:
				d := drawAdvance(t)
				var work time.Duration
				for _, x := range ids {
					if in, _ := s.Tenant(x); in.State == On {
						work += in.QueuedWork
					}
				}
				want := ref.advance(d)
				if d > 1 && rapid.Bool().Draw(t, "split") {
					d1 := time.Duration(rapid.Int64Range(1, int64(d-1)).Draw(t, "split1"))
					if err := s.Advance(d1, &rep); err != nil {
						t.Fatal(err)
					}
					checkInterval(t, &rep, lastTag)
					if err := s.Advance(d-d1, &rep2); err != nil {
						t.Fatal(err)
					}
					checkInterval(t, &rep2, lastTag)
					merge(&rep, &rep2)
				} else {
					if err := s.Advance(d, &rep); err != nil {
						t.Fatal(err)
					}
					checkInterval(t, &rep, lastTag)
				}
				got := refReport{busy: rep.Busy, decisions: rep.Decisions, completions: rep.Completions}
				for _, ti := range rep.Tenants {
					got.granted = append(got.granted, ti.Granted)
				}
				if diff := cmp.Diff(want, got, cmp.AllowUnexported(refReport{}), cmpopts.EquateEmpty(), cmp.Comparer(func(a, b Completion) bool { return a == b })); diff != "" {
					t.Fatalf("step %d, advance %v: scheduler differs from reference (-ref +got):\n%s", step, d, diff)
				}
				if cfg.Policy == BestEffort && rep.Busy != min(d, work) {
					t.Fatalf("best effort not work-conserving: busy %v over %v with %v of work queued", rep.Busy, d, work)
				}
			}
		}
	})
}

// driveRandom applies a random stream of submissions, power changes,
// pauses and Advances to a fresh scheduler, calling check after each
// Advance with the interval's report and the work that was queued, on
// tenants that are on, when it began.
func driveRandom(t *rapid.T, cfg Config, check func(d, queued time.Duration, rep *Report)) {
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ids []TenantID
	for range rapid.IntRange(1, 6).Draw(t, "tenants") {
		id, _ := s.AddTenant(drawSlots(t, "slots"))
		_ = s.PowerOn(id)
		ids = append(ids, id)
	}
	var tag uint64
	var rep Report
	for range rapid.IntRange(1, 100).Draw(t, "steps") {
		id := rapid.SampledFrom(ids).Draw(t, "tenant")
		switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
		case op <= 4:
			tag++
			_ = s.Submit(id, drawJob(t, tag, true))
		case op == 5:
			_ = s.Pause(id)
		case op == 6:
			_ = s.Resume(id)
		case op == 7:
			_, _ = s.PowerOff(id)
			_ = s.PowerOn(id)
		default:
			var queued time.Duration
			for _, x := range ids {
				if in, _ := s.Tenant(x); in.State == On {
					queued += in.QueuedWork
				}
			}
			d := drawAdvance(t)
			if err := s.Advance(d, &rep); err != nil {
				t.Fatal(err)
			}
			check(d, queued, &rep)
		}
	}
}

// Best effort is work-conserving: the GPU is never idle while a tenant
// that is on has work, so an interval's busy time is the lesser of its
// length and the work queued when it began (nothing is submitted during
// an Advance).
func TestPropBestEffortIsWorkConserving(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		driveRandom(t, drawConfig(t, BestEffort), func(d, queued time.Duration, rep *Report) {
			if rep.Busy != min(d, queued) {
				t.Fatalf("busy %v over %v with %v of work queued", rep.Busy, d, queued)
			}
		})
	})
}

// Under every policy granted time adds up to the busy time and never
// exceeds the elapsed time, and each tenant's jobs complete in submission
// order.
func TestPropGrantedWithinElapsedAndJobsInSubmissionOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lastTag := map[TenantID]uint64{}
		driveRandom(t, drawConfig(t), func(_, _ time.Duration, rep *Report) {
			checkInterval(t, rep, lastTag)
		})
	})
}

// merge folds the report of the second half of a split Advance into the
// first.
func merge(a, b *Report) {
	a.End = b.End
	a.Busy += b.Busy
	a.Decisions += b.Decisions
	a.Completions = append(a.Completions, b.Completions...)
	for i := range a.Tenants {
		a.Tenants[i].Granted += b.Tenants[i].Granted
		a.Tenants[i].Overshoot += b.Tenants[i].Overshoot
	}
}

type segment struct{ from, to time.Duration }

// TestPropFixedShareCapsEveryWindow checks the fixed-share guarantee
// against the exact trace of grants: whatever the other tenants do, no
// tenant receives more than 1/MaxInstances of any window of
// MaxInstances × slice, plus one slice. Jobs are fully preemptible here;
// overshoot is the subject of its own tests.
func TestPropFixedShareCapsEveryWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t, FixedShare)
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		runs := map[TenantID][]segment{}
		s.trace = func(id TenantID, from, to time.Duration) {
			if to > from {
				runs[id] = append(runs[id], segment{from, to})
			}
		}
		var ids []TenantID
		for range rapid.IntRange(1, 6).Draw(t, "tenants") {
			id, _ := s.AddTenant(drawSlots(t, "slots"))
			_ = s.PowerOn(id)
			ids = append(ids, id)
		}
		var tag uint64
		for range rapid.IntRange(1, 150).Draw(t, "steps") {
			id := rapid.SampledFrom(ids).Draw(t, "tenant")
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op <= 4:
				tag++
				_ = s.Submit(id, drawJob(t, tag, false))
			case op == 5:
				_ = s.Pause(id)
			case op == 6:
				_ = s.Resume(id)
			case op == 7:
				_, _ = s.PowerOff(id)
				_ = s.PowerOn(id)
			default:
				if err := s.Advance(drawAdvance(t), nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, id := range ids {
			info, _ := s.Tenant(id)
			w := time.Duration(info.MaxInstances) * info.Slice
			limit := w/time.Duration(info.MaxInstances) + info.Slice
			segs := runs[id]
			for i, a := range segs {
				// The busiest window starts where some stretch of work starts.
				var got time.Duration
				for _, b := range segs[i:] {
					if b.from >= a.from+w {
						break
					}
					got += min(b.to, a.from+w) - b.from
				}
				if got > limit {
					t.Fatalf("tenant %d (1/%d, slice %v) got %v in the window [%v, %v), limit %v",
						id, info.MaxInstances, info.Slice, got, a.from, a.from+w, limit)
				}
			}
		}
	})
}

// TestPropEqualShareConverges: under equal share every powered-on tenant
// with continuous work receives 1/N of the GPU, N counting the tenants that
// are powered on, busy or not; the error stays within a few periods however
// long the run, so the share converges to 1/N.
func TestPropEqualShareConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t, EqualShare)
		cfg.MaxQueue = 0
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := rapid.IntRange(1, 8).Draw(t, "tenants")
		busy := map[TenantID]bool{}
		var ids []TenantID
		for i := range n {
			id, _ := s.AddTenant(drawSlots(t, "slots"))
			_ = s.PowerOn(id)
			ids = append(ids, id)
			busy[id] = i == 0 || rapid.Bool().Draw(t, "busy")
		}
		var maxPeriod time.Duration
		for _, id := range ids {
			info, _ := s.Tenant(id)
			maxPeriod = max(maxPeriod, time.Duration(n)*info.Slice)
		}
		total := time.Duration(rapid.IntRange(200, 2000).Draw(t, "periods")) * maxPeriod
		step := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(50*time.Millisecond)).Draw(t, "step"))
		granted := map[TenantID]time.Duration{}
		var rep Report
		var tag uint64
		for s.Now()-cfg.Start < total {
			for _, id := range ids {
				info, _ := s.Tenant(id)
				if busy[id] && info.Queued < 2 {
					tag++
					_ = s.Submit(id, Job{Work: time.Second, Tag: tag})
				} else if !busy[id] && info.Queued == 0 && rapid.IntRange(0, 4).Draw(t, "burst") == 0 {
					tag++
					_ = s.Submit(id, drawJob(t, tag, false))
				}
			}
			if err := s.Advance(min(step, total-(s.Now()-cfg.Start)), &rep); err != nil {
				t.Fatal(err)
			}
			for _, ti := range rep.Tenants {
				granted[ti.ID] += ti.Granted
			}
		}
		fair := total / time.Duration(n)
		for _, id := range ids {
			if busy[id] {
				if diff := (granted[id] - fair).Abs(); diff > 2*maxPeriod {
					t.Fatalf("tenant %d got %v of %v, 1/%d is %v: off by %v, more than two periods (%v)",
						id, granted[id], total, n, fair, diff, 2*maxPeriod)
				}
			} else if granted[id] > fair+2*maxPeriod {
				t.Fatalf("tenant %d got %v, more than its share %v", id, granted[id], fair)
			}
		}
	})
}

// TestPropSaveRestoreSaveIdentical: whatever state a tenant is in, saving
// it, restoring it (on the same scheduler or another, at another time) and
// saving again gives the same bytes.
func TestPropSaveRestoreSaveIdentical(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t)
		s, _ := New(cfg)
		var ids []TenantID
		for range rapid.IntRange(1, 4).Draw(t, "tenants") {
			id, _ := s.AddTenant(drawSlots(t, "slots"))
			_ = s.PowerOn(id)
			ids = append(ids, id)
		}
		var tag uint64
		for range rapid.IntRange(0, 60).Draw(t, "steps") {
			id := rapid.SampledFrom(ids).Draw(t, "tenant")
			if rapid.IntRange(0, 2).Draw(t, "op") < 2 {
				tag++
				_ = s.Submit(id, drawJob(t, tag, true))
			} else {
				_ = s.Advance(drawAdvance(t), nil)
			}
		}
		id := rapid.SampledFrom(ids).Draw(t, "saved")
		_ = s.Pause(id)
		first, err := s.SaveTenant(nil, id)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := s.Tenant(id)

		// Restore on another scheduler, at another time, among other tenants.
		cfg2 := cfg
		cfg2.MaxQueue = MaxQueueLimit
		cfg2.Start = time.Duration(rapid.Int64Range(0, int64(24*time.Hour)).Draw(t, "otherStart"))
		d, _ := New(cfg2)
		for range rapid.IntRange(0, 3).Draw(t, "neighbours") {
			n, _ := d.AddTenant(drawSlots(t, "slots"))
			_ = d.PowerOn(n)
			_ = d.Submit(n, Job{Work: time.Second})
			_ = d.Advance(time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, "busy")), nil)
		}
		dst, _ := d.AddTenant(info.MaxInstances)
		if err := d.RestoreTenant(dst, first); err != nil {
			t.Fatal(err)
		}
		second, err := d.SaveTenant(nil, dst)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, second); diff != "" {
			t.Fatalf("save -> restore -> save changed the bytes (-first +second):\n%s", diff)
		}
		got, _ := d.Tenant(dst)
		if got.Queued != info.Queued || got.QueuedWork != info.QueuedWork || got.Debt != info.Debt {
			t.Fatalf("restored tenant %+v, saved %+v", got, info)
		}
		// And back onto the original tenant.
		if err := s.RestoreTenant(id, second); err != nil {
			t.Fatal(err)
		}
		third, _ := s.SaveTenant(nil, id)
		if diff := cmp.Diff(first, third); diff != "" {
			t.Fatalf("restoring onto the source changed the bytes:\n%s", diff)
		}
	})
}

// TestPropDeterministic: the same calls give the same reports, field by
// field, and the same saved state, byte for byte. The calls are drawn once
// and replayed on two schedulers.
func TestPropDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type op struct {
			kind   int // 0 submit, 1 pause, 2 resume, 3 power cycle, 4 advance
			tenant int
			job    Job
			d      time.Duration
		}
		cfg := drawConfig(t)
		slots := rapid.SliceOfN(rapid.SampledFrom(p40Slots), 1, 6).Draw(t, "slots")
		var ops []op
		for i := range rapid.IntRange(1, 80).Draw(t, "steps") {
			o := op{kind: rapid.IntRange(0, 4).Draw(t, "kind"), tenant: rapid.IntRange(0, len(slots)-1).Draw(t, "tenant")}
			switch o.kind {
			case 0:
				o.job = drawJob(t, uint64(i+1), true)
			case 4:
				o.d = drawAdvance(t)
			}
			ops = append(ops, o)
		}
		replay := func() (reps []Report, saved [][]byte) {
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var ids []TenantID
			for _, m := range slots {
				id, _ := s.AddTenant(m)
				_ = s.PowerOn(id)
				ids = append(ids, id)
			}
			for _, o := range ops {
				id := ids[o.tenant]
				switch o.kind {
				case 0:
					_ = s.Submit(id, o.job)
				case 1:
					_ = s.Pause(id)
				case 2:
					_ = s.Resume(id)
				case 3:
					_, _ = s.PowerOff(id)
					_ = s.PowerOn(id)
				case 4:
					var rep Report
					if err := s.Advance(o.d, &rep); err != nil {
						t.Fatal(err)
					}
					reps = append(reps, rep)
				}
			}
			for _, id := range ids {
				b, err := s.SaveTenant(nil, id)
				if err != nil {
					t.Fatal(err)
				}
				saved = append(saved, b)
			}
			return reps, saved
		}
		reps1, saved1 := replay()
		reps2, saved2 := replay()
		if diff := cmp.Diff(reps1, reps2, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("the same calls gave different reports (-first +second):\n%s", diff)
		}
		if diff := cmp.Diff(saved1, saved2); diff != "" {
			t.Fatalf("the same calls saved different bytes (-first +second):\n%s", diff)
		}
	})
}
