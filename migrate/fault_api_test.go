package migrate

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

func TestFaultNames(t *testing.T) {
	want := []string{"link-down", "link-stall", "refused", "destination-gone"}
	fs := Faults()
	if len(fs) != len(want) {
		t.Fatalf("%d faults, want %d", len(fs), len(want))
	}
	for i, f := range fs {
		if f.String() != want[i] {
			t.Errorf("fault %d is %q, want %q", i, f, want[i])
		}
	}
	if s := Fault(0).String(); s != "Fault(0)" {
		t.Errorf("Fault(0) is %q", s)
	}
}

// TestInjectRules: an unknown fault is a configuration error; a fault
// after the destination acknowledged the resume is too late and the
// migration completes; a fault on an ended migration does nothing; a
// cancel during a stall fails the migration at once.
func TestInjectRules(t *testing.T) {
	fw := newFaultWorld(t, false)
	m, err := fw.sim.Start(fw.vm, fw.dst, faultConfig(faultMode{fid: Bytes}))
	must(t, err)
	for _, f := range []Fault{0, FaultDestinationGone + 1} {
		if err := m.Inject(f); !errors.Is(err, ErrConfig) || m.Done() {
			t.Fatalf("Inject(%v): %v, done %v", f, err, m.Done())
		}
	}
	runToRelease(t, m)
	for _, f := range Faults() {
		if err := m.Inject(f); !errors.Is(err, ErrTooLate) {
			t.Fatalf("Inject(%v) after the acknowledgement: %v", f, err)
		}
	}
	if _, err := m.Run(); err != nil || m.VM().Host() != fw.dst {
		t.Fatalf("migration after a late fault: %v", err)
	}
	if err := m.Inject(FaultLinkDown); err != nil {
		t.Fatalf("Inject on an ended migration: %v", err)
	}

	m, err = fw.sim.Start(m.VM(), fw.src, faultConfig(faultMode{fid: Bytes}))
	must(t, err)
	runTo(t, m, PhaseQuiesce)
	must(t, m.Inject(FaultLinkStall))
	at := fw.sim.Now()
	if _, err := fw.sim.Advance(time.Second); err != nil || m.Done() {
		t.Fatalf("a stall ended the migration before the timeout: %v", err)
	}
	must(t, m.Inject(FaultLinkStall)) // does not restart the wait
	must(t, m.Cancel())
	if !errors.Is(m.Err(), ErrCanceled) || fw.sim.Now()-at != time.Second {
		t.Fatalf("cancel during a stall: %v at %v", m.Err(), fw.sim.Now()-at)
	}
	checkNothingAt(t, fw.src)
}

// TestFailLink fails one of two links: the migrations over it fail with
// ErrConnection, in the phase each was in, and the one over the other link
// completes.
func TestFailLink(t *testing.T) {
	src, dst := smallPageHosts(t)
	sameClock(t, src, dst)
	s, err := NewSim(SimConfig{}, src, dst)
	must(t, err)
	other := slowLink
	other.Name = "other"
	var ms []*Migration
	for i, l := range []Link{slowLink, slowLink, other} {
		vm := inferenceVM(t, src, string(rune('a'+i)), "P40-1Q", 64*MiB, 8*MiB, tinyModel, uint64(i))
		m, err := s.Start(vm, dst, Config{Link: l, Fidelity: Model})
		must(t, err)
		ms = append(ms, m)
	}
	if _, err := s.Advance(50 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FailLink(slowLink.Name, FaultRefused); !errors.Is(err, ErrConfig) {
		t.Fatalf("FailLink with a destination fault: %v", err)
	}
	n, err := s.FailLink(slowLink.Name, FaultLinkDown)
	if err != nil || n != 2 {
		t.Fatalf("FailLink hit %d migrations (%v), want 2", n, err)
	}
	if n, _ := s.FailLink("none", FaultLinkDown); n != 0 {
		t.Fatalf("FailLink of an unused link hit %d", n)
	}
	if _, err := s.Run(); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms[:2] {
		var pe *PhaseError
		if !errors.Is(m.Err(), ErrConnection) || !errors.As(m.Err(), &pe) || pe.Phase != PhasePreCopy {
			t.Fatalf("migration %d: %v", i, m.Err())
		}
		if m.VM().Host() != src || m.VM().State() != vgpu.VMRunning {
			t.Fatalf("migration %d left the VM %v on %s", i, m.VM().State(), m.VM().Host().Name())
		}
	}
	if ms[2].Err() != nil || ms[2].VM().Host() != dst {
		t.Fatalf("the migration over the other link: %v", ms[2].Err())
	}
}

// TestOwnershipAtEveryEvent fails migrations at seeded random events with
// seeded random faults, and checks after every event of every migration
// that the VM has one live copy and never two running ones.
func TestOwnershipAtEveryEvent(t *testing.T) {
	runs := 40
	if raceEnabled || testing.Short() {
		runs = 8
	}
	events, failed := 0, 0
	for seed := range uint64(runs) {
		rng := rand.New(rand.NewPCG(seed, 99))
		paused := rng.IntN(4) == 0
		mode := []faultMode{{fid: Bytes}, {fid: Model}, {fid: Bytes, filtered: true}}[rng.IntN(3)]
		total := len(cleanEvents(t, paused, mode))
		at := rng.IntN(total)
		fw := newFaultWorld(t, paused)
		hosts := fw.sim.Hosts()
		m, err := fw.sim.Start(fw.vm, fw.dst, faultConfig(mode))
		must(t, err)
		for i := 0; ; i++ {
			if i == at {
				if k := faultKinds[rng.IntN(len(faultKinds))]; k.inject(m) != nil && m.Phase() != PhaseRelease {
					t.Fatalf("seed %d: %s in %v refused", seed, k.name, m.Phase())
				}
			}
			_, ok, err := m.Step()
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			checkOneOwner(t, fw.vm.ID(), hosts...)
			events++
			if !ok {
				break
			}
		}
		owner := checkSettled(t, fw.vm.ID(), hosts...)
		if (m.Err() == nil) != (owner == fw.dst) {
			t.Fatalf("seed %d: migration error %v, VM on %s", seed, m.Err(), owner.Name())
		}
		if m.Err() != nil {
			failed++
			checkNothingAt(t, fw.dst)
		}
	}
	t.Logf("ownership: %d migrations (%d failed by a fault), one owner at each of %d events", runs, failed, events)
}
