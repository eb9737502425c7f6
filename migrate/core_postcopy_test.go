package migrate

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestCorePostCopySteps: in PostCopy mode the Core sends no round, asks
// for page lists rather than pages in the stun, enters PhasePostCopy
// after the resume, accounts the faults, and releases the source when
// the driver says every page arrived.
func TestCorePostCopySteps(t *testing.T) {
	c := coreFixture(t, Policy{Mode: PostCopy})
	now := time.Millisecond
	var kinds []ActionKind
	for c.Phase() != PhasePostCopy {
		a := c.Done(now)
		kinds = append(kinds, a.Kind)
		if a.Kind == DoSendFinalRAM || a.Kind == DoSendFinalFramebuffers {
			if !a.PostCopy || !a.AllInUse {
				t.Fatalf("%v: %+v", a.Kind, a)
			}
			c.Sent(a.First, Traffic{WireBytes: 8})
			c.Owe(100)
		}
		now += time.Millisecond
	}
	want := []ActionKind{DoSwitchOver, DoPause, DoSaveDevices, DoSendFinalRAM, DoSendFinalFramebuffers, DoSendDeviceStates,
		DoRestore, DoResume, DoPostCopy}
	if !slices.Equal(kinds, want) {
		t.Fatalf("actions %v, want %v", kinds, want)
	}
	rep := c.Report()
	if len(rep.Rounds) != 0 || rep.Switchover != NoPreCopy || rep.PostCopy == nil || rep.PostCopy.OwedPages != 200 {
		t.Fatalf("report: %d rounds, switchover %v, post-copy %+v", len(rep.Rounds), rep.Switchover, rep.PostCopy)
	}
	start := now - time.Millisecond
	c.Sent(0, Traffic{Pages: 150, RawBytes: 150 * 4096, WireBytes: 1000})
	c.Faulted(now, []Traffic{{}, {Pages: 4, RawBytes: 4 * 4096, WireBytes: 100}}, 10*time.Millisecond, time.Millisecond, 13*time.Millisecond)
	c.Faulted(now, []Traffic{{Pages: 1, RawBytes: 4096, WireBytes: 30}}, 20*time.Millisecond, 0, 20*time.Millisecond)
	c.Faulted(now, []Traffic{{Pages: 1}, {Pages: 1}, {Pages: 1}}, time.Millisecond, 0, time.Millisecond) // more regions than the VM has
	if a := c.LinkLost(now, ErrConnection); a.Kind != DoPauseDestination || !c.DestinationPaused() {
		t.Fatalf("link lost in post-copy: %+v", a)
	}
	now += time.Second
	if a, err := c.LinkRestored(now); err != nil || a.Kind != DoResumePostCopy {
		t.Fatalf("link restored: %+v, %v", a, err)
	}
	if _, err := c.LinkRestored(now); !errors.Is(err, ErrConfig) {
		t.Fatalf("a second restore: %v", err)
	}
	now += time.Millisecond
	if a := c.Done(now); a.Kind != DoRelease {
		t.Fatalf("every page arrived: %+v", a)
	}
	c.Done(now)
	rep = c.Report()
	p := rep.PostCopy
	if rep.Outcome != PhaseDone || p.Faults != 5 || p.Fetches != 2 || p.Pushed.Pages != 150 || p.Paused != time.Second ||
		p.Window != now-start || p.Stall != 13*time.Millisecond+20*time.Millisecond {
		t.Fatalf("outcome %v, post-copy %+v", rep.Outcome, *p)
	}
	// Latencies 10, 11, 12, 13 and 20 ms.
	if p.FaultLatencyP50 != 12*time.Millisecond || p.FaultLatencyP99 != 20*time.Millisecond || p.FaultLatencyMax != 20*time.Millisecond {
		t.Fatalf("latencies p50 %v p99 %v max %v", p.FaultLatencyP50, p.FaultLatencyP99, p.FaultLatencyMax)
	}
	if rep.RawBytes != 155*4096 {
		t.Fatalf("raw bytes %d", rep.RawBytes)
	}
}

// TestCorePostCopyFailure: a failure in post-copy loses the VM
// (DoStrand, ErrVMLost); a lost link before it is a failure like any
// other; the hybrid switches into post-copy when pre-copy does not
// converge, and not when it does.
func TestCorePostCopyFailure(t *testing.T) {
	c := coreFixture(t, Policy{Mode: PostCopy})
	for c.Phase() != PhasePostCopy {
		c.Done(0)
	}
	if h := c.Holder(); h != HeldByDestination {
		t.Fatalf("in post-copy the VM is held by the %v", h)
	}
	a := c.Fail(0, ErrDestination)
	if a.Kind != DoStrand || !errors.Is(a.Err, ErrVMLost) || !errors.Is(a.Err, ErrDestination) || c.Phase() != PhaseFailed {
		t.Fatalf("fail in post-copy: %+v", a)
	}
	if h := c.Holder(); h != HeldInDoubt {
		t.Errorf("a lost post-copy's VM is held by the %v, want in doubt", h)
	}
	c = coreFixture(t, Policy{Mode: PostCopy})
	c.Done(0)
	if a := c.LinkLost(0, ErrConnection); a.Kind != DoRollBack || !errors.Is(a.Err, ErrConnection) {
		t.Fatalf("link lost at switchover: %+v", a)
	}
	hybrid := Policy{OnNonConvergence: SwitchToPostCopy, MaxRounds: 2, StunTarget: 400 * time.Millisecond}
	c = coreFixture(t, hybrid)
	feed(t, c, []round{{wireBytes: 1e9, rawBytes: 1e9, dirtyBytes: 5e8, took: time.Second},
		{wireBytes: 5e8, rawBytes: 5e8, dirtyBytes: 4e8, took: 500 * time.Millisecond}})
	if rep := c.Report(); c.Phase() != PhaseSwitchover || rep.Switchover != RoundLimit || rep.PostCopy == nil {
		t.Fatalf("hybrid that did not converge: %v, %v, %v", c.Phase(), rep.Switchover, rep.PostCopy)
	}
	c = coreFixture(t, hybrid)
	feed(t, c, []round{{wireBytes: 1e9, rawBytes: 1e9, took: time.Second}})
	if rep := c.Report(); c.Phase() != PhaseSwitchover || rep.Switchover != Converged || rep.PostCopy != nil {
		t.Fatalf("hybrid that converged: %v, %v, %v", c.Phase(), rep.Switchover, rep.PostCopy)
	}
	for _, p := range []Policy{{Mode: Legacy, OnNonConvergence: SwitchToPostCopy}, {Mode: PostCopy, OnNonConvergence: SwitchToPostCopy}} {
		if _, err := p.WithDefaults(); !errors.Is(err, ErrConfig) {
			t.Errorf("%v with %v: %v", p.Mode, p.OnNonConvergence, err)
		}
	}
}

// TestFaultLatencyPercentile: the percentiles computed from fetches'
// arithmetic runs equal the nearest-rank percentiles of every latency
// listed one by one.
func TestFaultLatencyPercentile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) fetchLatency {
			return fetchLatency{n: rapid.Int64Range(1, 50).Draw(t, "n"), first: time.Duration(rapid.Int64Range(0, 1e6).Draw(t, "first")),
				step: time.Duration(rapid.Int64Range(0, 1e4).Draw(t, "step"))}
		}), 1, 20).Draw(t, "fetches")
		var all []time.Duration
		for _, f := range fs {
			for k := range f.n {
				all = append(all, f.first+time.Duration(k)*f.step)
			}
		}
		slices.Sort(all)
		for _, p := range []int{1, 50, 90, 99, 100} {
			rank := (len(all)*p + 99) / 100
			if got, want := percentile(fs, p), all[rank-1]; got != want {
				t.Fatalf("p%d: %v, want %v", p, got, want)
			}
		}
	})
}

// TestCorePostCopyUnknownRate: a driver that knows no rate before its
// first round (the live mode) switches over into post-copy at once with
// its stun not known: the report holds zero, the event says so, and a
// stun limit is not held against a figure nobody measured.
func TestCorePostCopyUnknownRate(t *testing.T) {
	c, err := NewCore(CoreConfig{VM: "vm", Policy: Policy{Mode: PostCopy, StunLimit: time.Second}, Framebuffers: 1, Devices: 1,
		DeviceStateBytes: 1000, PageListBytes: 4096}, 0, "test")
	must(t, err)
	if a := c.Done(time.Millisecond); a.Kind != DoSwitchOver {
		t.Fatalf("setup done: %+v (%v)", a, c.Err())
	}
	var detail string
	for _, e := range c.Events() {
		if e.Kind == SwitchedOver {
			detail = e.Detail
			if e.ExpectedStun != 0 {
				t.Errorf("switchover event expects %v", e.ExpectedStun)
			}
		}
	}
	if rep := c.Report(); rep.ExpectedStun != 0 || rep.Switchover != NoPreCopy || !strings.Contains(detail, "not known") {
		t.Fatalf("expected stun %v, switchover %v, event %q", rep.ExpectedStun, rep.Switchover, detail)
	}
}

// TestCoreServedAndFaultWaits: the live source counts the pages it served
// on demand (Served) and takes the destination's measured waits
// (FaultWaits), which the report gives in place of its own.
func TestCoreServedAndFaultWaits(t *testing.T) {
	c := coreFixture(t, Policy{Mode: PostCopy})
	for c.Phase() != PhasePostCopy {
		c.Done(time.Millisecond)
	}
	c.Served([]Traffic{{Pages: 2, RawBytes: 8192, WireBytes: 100}, {Pages: 1, RawBytes: 4096, WireBytes: 50}})
	c.FaultWaits(FaultWaits{Faults: 5, Fetches: 4, P50: time.Millisecond, P99: 3 * time.Millisecond, Max: 4 * time.Millisecond, Stall: -time.Second})
	pc := c.Report().PostCopy
	if pc.Faulted.Pages != 3 || pc.Faulted.WireBytes != 150 || pc.Faults != 5 || pc.Fetches != 4 || pc.FaultLatencyP50 != time.Millisecond ||
		pc.FaultLatencyP99 != 3*time.Millisecond || pc.FaultLatencyMax != 4*time.Millisecond || pc.Stall != 0 {
		t.Fatalf("post-copy account %+v", *pc)
	}
}
