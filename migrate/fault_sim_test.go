package migrate

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// faultKind is a way a migration fails: how to make it happen, and the
// sentinel the failure wraps.
type faultKind struct {
	name     string
	inject   func(*Migration) error
	sentinel error
	stall    bool // fails only once the timeout has passed
}

var faultKinds = []faultKind{
	{"link-dropped", func(m *Migration) error { return m.Inject(FaultLinkDown) }, ErrConnection, false},
	{"link-stalled", func(m *Migration) error { return m.Inject(FaultLinkStall) }, ErrConnection, true},
	{"destination-refuses", func(m *Migration) error { return m.Inject(FaultRefused) }, ErrRefused, false},
	{"destination-gone", func(m *Migration) error { return m.Inject(FaultDestinationGone) }, ErrDestination, false},
	{"source-cancels", (*Migration).Cancel, ErrCanceled, false},
}

// TestFaultTable fails a simulated migration at every point of failure in
// every way. Each time the source ends as it was — running, or paused if
// it was paused — its memory (the counter oracle) and device state
// unchanged by the failure and its dirty logging stopped; the destination
// holds nothing; the error is a *PhaseError naming the phase and wrapping
// the kind's sentinel, and failing it again does nothing. A second
// migration, to the same destination or the third host, then succeeds and
// passes the oracle, pages dirtied during the failed attempt included. At
// every event the VM has exactly one live copy and never two running.
func TestFaultTable(t *testing.T) {
	type variant struct {
		paused bool
		mode   faultMode
	}
	variants := []variant{{false, faultMode{fid: Bytes}}, {true, faultMode{fid: Model}}, {false, faultMode{fid: Bytes, filtered: true}}}
	if raceEnabled {
		variants = variants[:1] // the same steps; under the race detector once is enough
	}
	cell, passed := 0, 0
	for _, v := range variants {
		for _, p := range faultPoints {
			for _, k := range faultKinds {
				name := fmt.Sprintf("%v/%s/%s", v.mode, p.name, k.name)
				if v.paused {
					name += "/paused"
				}
				other := cell%2 == 1
				cell++
				skip := v.paused && p.round > 0
				ok := t.Run(name, func(t *testing.T) {
					if skip {
						t.Skip("a paused VM dirties nothing: pre-copy ends after round 0")
					}
					faultCell(t, p, k, v.paused, v.mode, other)
				})
				if ok && !skip {
					passed++
				}
			}
		}
	}
	t.Logf("simulated fault table: %d scenarios, each ending with the source as it was and a retry that passed the oracle", passed)
}

func faultCell(t *testing.T, p faultPoint, k faultKind, paused bool, mode faultMode, retryElsewhere bool) {
	events, at := faultTimes(t, p, paused, mode)
	fw := newFaultWorld(t, paused)
	m, err := fw.sim.Start(fw.vm, fw.dst, faultConfig(mode))
	must(t, err)
	advanceChecking(t, fw, events, at)
	if m.Phase() != p.phase || p.round >= 0 && m.core.Round() != p.round {
		t.Fatalf("at %v the migration is in %v, want %s", at, m.Phase(), p.name)
	}
	before := imageOf(t, fw.vm)
	must(t, k.inject(m))
	if k.stall {
		if m.Done() {
			t.Fatal("a stalled link failed the migration before the timeout")
		}
		stepChecking(t, m, fw.sim.Hosts()...)
		if waited := fw.sim.Now() - at; waited < faultConfig(mode).Timeout {
			t.Fatalf("a stall failed the migration after %v, before the timeout", waited)
		}
	}
	var pe *PhaseError
	if err := m.Err(); !errors.As(err, &pe) || pe.Phase != p.phase || !errors.Is(err, k.sentinel) {
		t.Fatalf("error %v, want a *PhaseError in %v wrapping %v", err, p.phase, k.sentinel)
	}
	if m.Phase() != PhaseFailed || m.Report().Outcome != PhaseFailed {
		t.Fatalf("migration %v, report %v; want failed", m.Phase(), m.Report().Outcome)
	}
	// Failing an ended migration again does nothing.
	must(t, m.Cancel())
	must(t, m.Inject(FaultLinkDown))
	checkSourceAsBefore(t, fw, before, paused, !k.stall)
	checkNothingAt(t, fw.dst)
	checkSettled(t, fw.vm.ID(), fw.sim.Hosts()...)

	// The VM runs on, then moves for good.
	if paused {
		must(t, fw.vm.Resume())
	}
	if _, err := fw.sim.Advance(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	to := fw.dst
	if retryElsewhere {
		to = fw.third
	}
	m2, err := fw.sim.Start(fw.vm, to, faultConfig(mode))
	must(t, err)
	runToRelease(t, m2)
	fw.w.Check(t, m2.VM())
	stepChecking(t, m2, fw.sim.Hosts()...)
	if m2.Err() != nil || checkSettled(t, fw.vm.ID(), fw.sim.Hosts()...) != to {
		t.Fatalf("second migration: %v", m2.Err())
	}
	checkNothingAt(t, fw.src)
}

// checkSourceAsBefore checks the source after a failure: the VM back in
// its state, its device state and memory as before the fault, and dirty
// logging off. If time passed since the fault (a stall's timeout), the
// running workload has moved memory on and the GPU scheduler its
// accounting: then the oracle vouches for the memory, and the rest of the
// device state is compared.
func checkSourceAsBefore(t *testing.T, fw *faultWorld, before sourceImage, paused, instant bool) {
	t.Helper()
	want := vgpu.VMRunning
	if paused {
		want = vgpu.VMPaused
	}
	if fw.vm.State() != want || fw.vm.Host() != fw.src {
		t.Fatalf("source VM %v on %s, want %v on %s", fw.vm.State(), fw.vm.Host().Name(), want, fw.src.Name())
	}
	after := imageOf(t, fw.vm)
	before.VMState = want
	if !instant {
		after.Digests = before.Digests
		for i := range after.States {
			after.States[i].Sched = before.States[i].Sched
		}
	}
	if d := cmp.Diff(before, after, cmp.AllowUnexported(sourceImage{})); d != "" {
		t.Fatalf("source changed by the failure (-before +after):\n%s", d)
	}
	for _, r := range append([]*memory.Region{fw.vm.RAM()}, fw.vm.Framebuffers()...) {
		if r.DirtyLogging() {
			t.Fatal("dirty logging still on at the source")
		}
	}
	fw.w.Check(t, fw.vm)
}

// TestFaultChain moves a VM A -> B -> C, failing an attempt at each hop
// first, and checks the oracle at C and one owner at every event.
func TestFaultChain(t *testing.T) {
	fw := newFaultWorld(t, false)
	hosts := fw.sim.Hosts()
	faults := []Fault{FaultLinkDown, FaultDestinationGone}
	for i, to := range []*vgpu.Host{fw.dst, fw.third} {
		m, err := fw.sim.Start(fw.vm, to, faultConfig(faultMode{fid: Bytes}))
		must(t, err)
		runTo(t, m, PhaseFinalRAM)
		must(t, m.Inject(faults[i]))
		checkNothingAt(t, to)
		fw.w.Check(t, fw.vm)
		if _, err := fw.sim.Advance(200 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		m, err = fw.sim.Start(fw.vm, to, faultConfig(faultMode{fid: Bytes}))
		must(t, err)
		stepChecking(t, m, hosts...)
		if m.Err() != nil {
			t.Fatalf("hop %d: %v", i, m.Err())
		}
		fw.vm = m.VM()
		fw.w.Check(t, fw.vm)
		if _, err := fw.sim.Advance(time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if checkSettled(t, fw.vm.ID(), hosts...) != fw.third {
		t.Fatal("the VM did not end at C")
	}
	fw.w.Check(t, fw.vm)
	checkNothingAt(t, fw.src)
	checkNothingAt(t, fw.dst)
}
