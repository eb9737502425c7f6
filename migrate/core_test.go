package migrate

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// coreFixture is a Core for a VM with one framebuffer, over a link of
// 1 GB/s with 1 ms of stun latency and 300 ms of fixed costs.
func coreFixture(t *testing.T, p Policy) *Core {
	t.Helper()
	c, err := NewCore(CoreConfig{VM: "vm", Destination: "dst", Policy: p, Costs: PreCopyCosts(), StunLatency: time.Millisecond,
		NominalBandwidthBytesPerSec: 1e9, Framebuffers: 1, Devices: 1, DeviceStateBytes: 1000, PCIeBytesPerSec: 12e9}, 0, "test")
	must(t, err)
	return c
}

// round is one synthetic pre-copy round fed to a Core: what it sent, how
// long it took, and what was dirtied meanwhile.
type round struct {
	wireBytes, rawBytes, dirtyBytes int64
	took                            time.Duration
}

// feed sends rounds through c from its setup, starting each at now, and
// returns the action after the last, the time, and the actions seen.
func feed(t *testing.T, c *Core, rounds []round) (Action, time.Duration, []Action) {
	t.Helper()
	now := time.Duration(0)
	a := c.Done(now)
	var seen []Action
	for _, r := range rounds {
		if a.Kind != DoCopyRound {
			break
		}
		seen = append(seen, a)
		c.Sent(0, Traffic{Pages: r.rawBytes / 4096, RawBytes: r.rawBytes, WireBytes: r.wireBytes})
		c.RoundQueued(r.wireBytes)
		now += r.took
		a = c.RoundArrived(now, Pages{RawBytes: r.dirtyBytes}, Pages{})
	}
	return a, now, seen
}

// steady is a round of 100 MB in 100 ms (1 GB/s) that leaves dirty bytes
// dirty.
func steady(dirty int64) round {
	return round{wireBytes: 100e6, rawBytes: 100e6, dirtyBytes: dirty, took: 100 * time.Millisecond}
}

// TestCoreSwitchover: every way pre-copy ends, under every
// non-convergence policy, decided from synthetic rounds.
func TestCoreSwitchover(t *testing.T) {
	// 3 GB sent in 3 s while 2 GB were dirtied, slower than the link, and
	// the same again: an expected stun of 2.3 s that no round shrinks (a
	// stall).
	stuck := round{wireBytes: 3e9, rawBytes: 3e9, dirtyBytes: 2e9, took: 3 * time.Second}
	// 10 MB dirty: 10 ms more than the fixed costs.
	calm := steady(10e6)
	// Dirtied faster than the link: 1.5 GB in 100 ms.
	racing := round{wireBytes: 100e6, rawBytes: 100e6, dirtyBytes: 1.5e9, took: 100 * time.Millisecond}
	// 10 GB in 10 s, leaving 4 GB, 2 GB, 1 GB, 0.5 GB dirty: expected
	// stuns of 4.3, 2.3, 1.3 and 0.8 s.
	shrinking := func(i int) round {
		return round{wireBytes: 10e9, rawBytes: 10e9, dirtyBytes: int64(4e9) >> i, took: 10 * time.Second}
	}

	for _, tc := range []struct {
		name     string
		policy   Policy
		rounds   []round
		kind     ActionKind
		why      Reason
		err      error
		nRounds  int
		throttle []float64 // the cuts asked for, round by round
	}{
		{name: "converged at once", rounds: []round{calm}, kind: DoSwitchOver, why: Converged, nRounds: 1},
		{name: "converged after shrinking rounds", rounds: []round{shrinking(0), shrinking(1), shrinking(2), shrinking(3), calm},
			kind: DoSwitchOver, why: Converged, nRounds: 4},
		{name: "abort on a stall", policy: Policy{OnNonConvergence: Abort}, rounds: []round{stuck, stuck}, kind: DoRollBack, err: ErrNotConverged, nRounds: 2},
		{name: "abort on a racing dirty rate", policy: Policy{OnNonConvergence: Abort}, rounds: []round{racing}, kind: DoRollBack, err: ErrNotConverged, nRounds: 1},
		{name: "abort at the round limit", policy: Policy{OnNonConvergence: Abort, MaxRounds: 3},
			rounds: []round{shrinking(0), shrinking(1), shrinking(2)}, kind: DoRollBack, err: ErrNotConverged, nRounds: 3},
		{name: "switch anyway on a racing dirty rate", policy: Policy{OnNonConvergence: SwitchAnyway}, rounds: []round{racing}, kind: DoSwitchOver, why: DirtyRateTooHigh, nRounds: 1},
		{name: "switch anyway at the round limit", policy: Policy{OnNonConvergence: SwitchAnyway, MaxRounds: 2},
			rounds: []round{shrinking(0), shrinking(1)}, kind: DoSwitchOver, why: RoundLimit, nRounds: 2},
		{name: "throttle in steps to the maximum", policy: Policy{Throttle: ThrottleSteps{Start: 0.5, Step: 0.25, Max: 0.9}},
			rounds: []round{racing, racing, racing, racing, racing}, kind: DoSwitchOver, why: ThrottledToLimit, nRounds: 4,
			throttle: []float64{0, 0.5, 0.75, 0.9}},
		{name: "throttle until converged", policy: Policy{Throttle: ThrottleSteps{Start: 0.5, Step: 0.25, Max: 0.9}},
			rounds: []round{racing, racing, calm}, kind: DoSwitchOver, why: Converged, nRounds: 3, throttle: []float64{0, 0.5, 0.75}},
		{name: "throttle policy at the round limit switches", policy: Policy{MaxRounds: 1}, rounds: []round{racing}, kind: DoSwitchOver, why: RoundLimit, nRounds: 1},
		{name: "stun limit at switchover", policy: Policy{OnNonConvergence: SwitchAnyway, StunLimit: 2 * time.Second},
			rounds: []round{stuck, stuck}, kind: DoRollBack, err: ErrStunLimit, nRounds: 2},
		{name: "stun limit met at switchover", policy: Policy{StunLimit: 2 * time.Second}, rounds: []round{calm}, kind: DoSwitchOver, why: Converged, nRounds: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := coreFixture(t, tc.policy)
			a, _, seen := feed(t, c, tc.rounds)
			rep := c.Report()
			if a.Kind != tc.kind || len(rep.Rounds) != tc.nRounds {
				t.Fatalf("action %v after %d rounds, want %v after %d", a.Kind, len(rep.Rounds), tc.kind, tc.nRounds)
			}
			if tc.err != nil {
				var pe *PhaseError
				if !errors.Is(a.Err, tc.err) || !errors.As(a.Err, &pe) || pe.Phase != PhasePreCopy || !errors.Is(c.Err(), tc.err) {
					t.Fatalf("error %v, want a *PhaseError in pre-copy wrapping %v", a.Err, tc.err)
				}
				if c.Phase() != PhaseFailed || rep.FailedIn != PhasePreCopy {
					t.Fatalf("phase %v, failed in %v", c.Phase(), rep.FailedIn)
				}
				return
			}
			if rep.Switchover != tc.why || c.Phase() != PhaseSwitchover || rep.ExpectedStun != rep.Rounds[len(rep.Rounds)-1].ExpectedStun {
				t.Fatalf("switchover %v in %v, expected stun %v; want %v", rep.Switchover, c.Phase(), rep.ExpectedStun, tc.why)
			}
			if tc.throttle != nil {
				var got []float64
				for i, a := range seen {
					if a.SetThrottle != (i > 0 && tc.throttle[i] > 0) || a.Throttle != tc.throttle[i] || rep.Rounds[i].Throttle != tc.throttle[i] {
						t.Errorf("round %d: %+v, recorded %v, want %v", i, a, rep.Rounds[i].Throttle, tc.throttle[i])
					}
					got = append(got, a.Throttle)
				}
				if rep.MaxThrottle != slices.Max(tc.throttle) {
					t.Errorf("max throttle %v of %v", rep.MaxThrottle, got)
				}
			}
		})
	}
}

// TestCoreStunLimitBeforeStart: a stun limit under the estimate refuses
// the migration before anything moves; at or over it, the Core starts.
func TestCoreStunLimitBeforeStart(t *testing.T) {
	cfg := CoreConfig{VM: "vm", Costs: PreCopyCosts(), NominalBandwidthBytesPerSec: 1e9, Devices: 1, DeviceStateBytes: 1e6, PCIeBytesPerSec: 1e9}
	floor := cfg.floor().Total // 100 ms + 1 ms twice over PCIe + 1 ms on the link
	if floor != 103*time.Millisecond {
		t.Fatalf("floor %v, want 103ms", floor)
	}
	for _, tc := range []struct {
		limit time.Duration
		err   error
	}{{floor - 1, ErrStunLimit}, {floor, nil}, {0, nil}} {
		cfg.Policy.StunLimit = tc.limit
		_, err := NewCore(cfg, 0, "")
		if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("limit %v: %v, want %v", tc.limit, err, tc.err)
		}
	}
	// A driver that knows no rate before round 0 (the live mode) applies
	// the limit at switchover only.
	cfg.NominalBandwidthBytesPerSec, cfg.Policy.StunLimit = 0, 1
	if _, err := NewCore(cfg, 0, ""); err != nil {
		t.Fatal(err)
	}
}

// TestCoreStunSequence: after the switchover the Core asks for the stun's
// steps in order, accounts each stunned phase's time, and ends done; in
// Legacy mode it pre-copies guest RAM only and sends every used
// framebuffer page in the stun.
func TestCoreStunSequence(t *testing.T) {
	for _, mode := range []Mode{PreCopy, Legacy} {
		t.Run(mode.String(), func(t *testing.T) {
			c := coreFixture(t, Policy{Mode: mode})
			a := c.Done(0)
			if a.Kind != DoCopyRound || !a.AllInUse || a.Round != 0 || a.Regions != map[Mode]int{PreCopy: 2, Legacy: 1}[mode] {
				t.Fatalf("round 0: %+v", a)
			}
			c.RoundQueued(1000)
			a = c.RoundArrived(time.Millisecond, Pages{}, Pages{})
			want := []ActionKind{DoSwitchOver, DoPause, DoSaveDevices, DoSendFinalRAM, DoSendFinalFramebuffers,
				DoSendDeviceStates, DoRestore, DoResume, DoRelease, DoNothing}
			now := time.Millisecond
			for i, k := range want {
				if a.Kind != k {
					t.Fatalf("step %d: %v, want %v", i, a.Kind, k)
				}
				if k == DoSendFinalFramebuffers && a.AllInUse != (mode == Legacy) {
					t.Fatalf("final framebuffers all in use: %v in %v mode", a.AllInUse, mode)
				}
				if k == DoNothing {
					break
				}
				now += 10 * time.Millisecond
				a = c.Done(now)
			}
			rep := c.Report()
			// Quiesce to resume: seven stunned phases of 10 ms each.
			if c.Phase() != PhaseDone || rep.Outcome != PhaseDone || rep.Stun != 70*time.Millisecond || len(rep.StunPhases) != 7 || c.Err() != nil {
				t.Fatalf("phase %v, stun %v in %d phases", c.Phase(), rep.Stun, len(rep.StunPhases))
			}
			if rep.End != now || rep.Total != now {
				t.Fatalf("end %v, total %v, want %v", rep.End, rep.Total, now)
			}
			if a := c.Done(now); a.Kind != DoNothing {
				t.Fatalf("after the end: %v", a.Kind)
			}
			if a := c.Fail(now, ErrCanceled); a.Kind != DoNothing || c.Phase() != PhaseDone {
				t.Fatalf("failing an ended migration: %v, phase %v", a.Kind, c.Phase())
			}
		})
	}
}

// TestCoreFailEveryPhase: a failure in any phase rolls back with a
// *PhaseError naming it; after Commit it is in doubt, and before, never.
func TestCoreFailEveryPhase(t *testing.T) {
	for _, commit := range []bool{false, true} {
		for _, at := range Phases()[:PhasePostCopy-1] {
			c := coreFixture(t, Policy{})
			now := time.Duration(0)
			for c.Phase() != at {
				now += time.Millisecond
				if c.Phase() == PhasePreCopy {
					c.RoundQueued(1)
					c.RoundArrived(now, Pages{}, Pages{})
					continue
				}
				c.Done(now)
			}
			if commit {
				c.Commit()
			}
			a := c.Fail(now, ErrCanceled)
			var pe *PhaseError
			if a.Kind != DoRollBack || !errors.As(a.Err, &pe) || pe.Phase != at || !errors.Is(a.Err, ErrCanceled) ||
				a.InDoubt != commit || errors.Is(a.Err, ErrInDoubt) != commit {
				t.Errorf("fail in %v (committed %v): %+v", at, commit, a)
			}
			ev := c.Events()
			if last := ev[len(ev)-1]; last.Kind != Failed || last.Err != a.Err || last.Phase != PhaseFailed {
				t.Errorf("fail in %v: last event %+v", at, last)
			}
			if rep := c.Report(); rep.FailedIn != at || rep.Outcome != PhaseFailed || rep.Error == "" {
				t.Errorf("fail in %v: report failed in %v, outcome %v", at, rep.FailedIn, rep.Outcome)
			}
		}
	}
}

// TestCoreMisuse: a driver that reports the wrong thing fails the
// migration with ErrConfig rather than corrupt its account.
func TestCoreMisuse(t *testing.T) {
	c := coreFixture(t, Policy{})
	if a := c.RoundArrived(0, Pages{}, Pages{}); a.Kind != DoRollBack || !errors.Is(a.Err, ErrConfig) {
		t.Fatalf("a round arriving in setup: %+v", a)
	}
	c = coreFixture(t, Policy{})
	c.RoundQueued(5) // outside pre-copy: nothing to count
	if len(c.Report().Rounds) != 0 || len(c.Events()) != 1 {
		t.Fatal("a round queued in setup was counted")
	}
	c.Done(0)
	if a := c.Done(1); a.Kind != DoRollBack || !errors.Is(a.Err, ErrConfig) {
		t.Fatalf("Done in pre-copy: %+v", a)
	}
	for _, cfg := range []CoreConfig{{Framebuffers: -1}, {StunLatency: -1}, {Costs: StunCosts{Resume: -1}}, {Policy: Policy{MaxRounds: -1}}} {
		if _, err := NewCore(cfg, 0, ""); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// TestCoreEvents: the events of a migration come in the order its
// decisions were taken, each kind where it belongs.
func TestCoreEvents(t *testing.T) {
	c := coreFixture(t, Policy{})
	racing := round{wireBytes: 100e6, rawBytes: 100e6, dirtyBytes: 1.5e9, took: 100 * time.Millisecond}
	a, now, _ := feed(t, c, []round{racing, steady(10e6)})
	for a.Kind != DoNothing {
		now += time.Millisecond
		a = c.Done(now)
	}
	var kinds []EventKind
	for _, e := range c.Events() {
		kinds = append(kinds, e.Kind)
	}
	want := []EventKind{PhaseStarted, RoundStarted, RoundSent, RoundEnded, Throttled, RoundStarted, RoundSent, RoundEnded,
		SwitchedOver, StunStarted, PhaseStarted, PhaseStarted, PhaseStarted, PhaseStarted, PhaseStarted, PhaseStarted, PhaseStarted, Done}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %v,\nwant %v", kinds, want)
	}
	if len(c.Events()) != 0 {
		t.Fatal("events returned twice")
	}
}

// TestCoreEdges: a round that put nothing measurable on the wire is
// judged at the nominal rate; a failure after the acknowledgement rolls
// nothing back, as the VM is the destination's.
func TestCoreEdges(t *testing.T) {
	c := coreFixture(t, Policy{})
	c.Done(0)
	c.RoundQueued(0)
	if a := c.RoundArrived(0, Pages{}, Pages{}); a.Kind != DoSwitchOver || c.Report().Rounds[0].BandwidthBytesPerSec != 1e9 {
		t.Fatalf("%v at %d B/s", a.Kind, c.Report().Rounds[0].BandwidthBytesPerSec)
	}
	for c.Phase() != PhaseRelease {
		c.Done(time.Second)
	}
	// The VM is the destination's: the source must still let it go.
	if a := c.Fail(2*time.Second, ErrConnection); a.Kind != DoRelease || c.Phase() != PhaseRelease || c.Err() != nil {
		t.Fatalf("fail after the acknowledgement: %v, phase %v, %v", a.Kind, c.Phase(), c.Err())
	}
	if a := c.Done(3 * time.Second); a.Kind != DoNothing || c.Phase() != PhaseDone {
		t.Fatalf("release after a failure after the acknowledgement: %v, phase %v", a.Kind, c.Phase())
	}
	ev := c.Events()
	if ev[len(ev)-2].Kind != Notice || ev[len(ev)-1].Kind != Done {
		t.Fatalf("last events %v, %v", ev[len(ev)-2].Kind, ev[len(ev)-1].Kind)
	}
	if ActionKind(99).String() != "ActionKind(99)" || DoPause.String() != "pause" || EventKind(99).String() != "EventKind(99)" {
		t.Fatal("names")
	}
}

// TestCoreNeverPanics: a Core or a Source that their constructors did not
// make, a nil cause, negative costs and regions out of range give errors
// or nothing, never a panic.
func TestCoreNeverPanics(t *testing.T) {
	var c Core
	c.Notice("x")
	c.Sent(5, Traffic{})
	c.RoundQueued(1)
	c.PagesQueued()
	if a := c.Done(0); a.Kind != DoNothing {
		t.Fatalf("zero Core: %v", a.Kind)
	}
	if a := c.Fail(0, nil); a.Kind != DoRollBack || !errors.Is(a.Err, ErrConfig) {
		t.Fatalf("nil cause: %+v", a)
	}
	_ = c.Report()
	if err := coreFixture(t, Policy{}).UpdateCosts(StunCosts{Quiesce: -1}, 0); !errors.Is(err, ErrConfig) {
		t.Fatalf("negative cost: %v", err)
	}
	if _, err := NewSource(nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("nil VM: %v", err)
	}
	var s *Source
	if s.Pause() == nil || s.SetThrottle(0) == nil || s.Check(PhaseSetup) == nil || s.Regions() != nil {
		t.Fatal("a nil Source")
	}
	if _, err := s.Dirty(1, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("a nil Source's dirty pages: %v", err)
	}
	if _, _, err := s.Commit(); !errors.Is(err, ErrConfig) || s.Release() == nil || s.Committed() || s.OwnerThrottle() != 0 {
		t.Fatal("a nil Source commits or releases")
	}
	s.RollBack(false)
	s.StartLogging()
	s.StopLogging()
	h, _ := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, h, "vm", "P40-1Q", 64*MiB, 8*MiB, tinyModel, 1)
	src, err := NewSource(vm)
	must(t, err)
	noWire := func(*[memory.ClassExplicit]int64, int) (int64, error) { return 0, errors.New("not asked") }
	if d, err := src.Dirty(-1, noWire); err != nil || d != (Pages{}) || src.SendRegions(-3, 99, false, nil, nil) == nil {
		t.Fatal("out of range")
	}
}

// TestEstimateSaturates: a Legacy estimate whose checkpoint path the
// driver does not model (no PCIe rate, no path rate) counts the link
// alone, and no sum of costs wraps into a negative stun.
func TestEstimateSaturates(t *testing.T) {
	in := stunInputs{mode: Legacy, usedFramebufferRaw: 1 << 30, usedFramebufferWire: 1 << 30, bandwidthBps: 1 << 30}
	if e := in.estimate(); e.CheckpointPath != time.Second || e.Total <= 0 {
		t.Fatalf("unmodelled path: %+v", e)
	}
	in.bandwidthBps, in.costs.Resume = 0, time.Hour
	if e := in.estimate(); e.Total != maxTime {
		t.Fatalf("no bandwidth: total %v, want the largest", e.Total)
	}
}
