package migrate

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// TestCancelInEveryPhase cancels a migration in each phase in turn. Before
// the destination acknowledged the resume the VM stays on the source as it
// was (running, or paused if it was paused) and the destination holds
// nothing; from the release on, the cancel is too late and the migration
// completes. A second migration afterwards succeeds.
func TestCancelInEveryPhase(t *testing.T) {
	phases := Phases()
	if len(phases) != 14 {
		t.Fatalf("%d phases: a new phase needs its case in this test", len(phases))
	}
	for _, paused := range []bool{false, true} {
		if paused && raceEnabled {
			// The same steps; under the race detector once is enough.
			continue
		}
		for _, p := range phases {
			name := p.String()
			if paused {
				name += "/paused"
			}
			t.Run(name, func(t *testing.T) { cancelIn(t, p, paused) })
		}
	}
}

func cancelIn(t *testing.T, p Phase, paused bool) {
	src, dst := smallPageHosts(t)
	w := &counterWorkload{PagesPerSec: 400, Pages: 200}
	vm := counterVM(t, src, w)
	must(t, src.Advance(time.Second))
	if paused {
		must(t, vm.Pause())
	}
	sameClock(t, src, dst)
	s, err := NewSim(SimConfig{}, src, dst)
	must(t, err)
	// Both fidelities take the same steps; the paused runs use Model to
	// keep the suite quick.
	fid := Bytes
	if paused {
		fid = Model
	}
	cfg := Config{Fidelity: fid, Link: slowLink}
	if p == PhasePostCopy {
		// Only a post-copy migration has the phase.
		cfg.Mode = PostCopy
	}
	m, err := s.Start(vm, dst, cfg)
	must(t, err)
	if p == PhaseFailed {
		must(t, m.Cancel())
	}
	for m.Phase() != p {
		if _, ok, err := m.Step(); err != nil || !ok {
			t.Fatalf("never reached %v: ended in %v (%v)", p, m.Phase(), m.Err())
		}
	}
	late := p == PhasePostCopy || p == PhaseRelease || p == PhaseDone
	var before sourceImage
	if !late {
		before = imageOf(t, vm)
	}
	err = m.Cancel()
	switch {
	case late:
		if !errors.Is(err, ErrTooLate) {
			t.Fatalf("cancel in %v: %v, want ErrTooLate", p, err)
		}
		if _, err := m.Run(); err != nil || m.Phase() != PhaseDone {
			t.Fatalf("migration after a late cancel: %v, %v", m.Phase(), err)
		}
		want := vgpu.VMRunning
		if paused {
			want = vgpu.VMPaused
		}
		if moved := m.VM(); moved.Host() != dst || moved.State() != want {
			t.Fatalf("VM %v on %s", moved.State(), moved.Host().Name())
		}
		return
	}
	must(t, err)
	must(t, m.Cancel()) // harmless
	var pe *PhaseError
	if !errors.Is(m.Err(), ErrCanceled) || !errors.As(m.Err(), &pe) || pe.Phase != p && p != PhaseFailed {
		t.Fatalf("error %v, want ErrCanceled in %v", m.Err(), p)
	}
	if _, ok, err := m.Step(); err != nil || ok && m.Phase() != PhaseFailed {
		t.Fatalf("step after cancel: %v %v", ok, err)
	}
	want := vgpu.VMRunning
	if paused {
		want = vgpu.VMPaused
	}
	after := imageOf(t, vm)
	if vm.State() != want || vm.Host() != src {
		t.Fatalf("source VM %v, want %v", vm.State(), want)
	}
	before.VMState = want
	if d := cmp.Diff(before, after, cmp.AllowUnexported(sourceImage{})); d != "" {
		t.Fatalf("source changed by the cancel (-before +after):\n%s", d)
	}
	for _, r := range append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...) {
		if r.DirtyLogging() {
			t.Fatal("dirty logging still on at the source")
		}
	}
	checkNothingAt(t, dst)
	w.Check(t, vm)
	// The VM runs on, then migrates for good, pages dirtied during the
	// failed attempt included.
	if paused {
		must(t, vm.Resume())
	}
	if _, err := s.Advance(500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	m2, err := s.Start(vm, dst, Config{Fidelity: fid, Link: slowLink})
	must(t, err)
	runToRelease(t, m2)
	w.Check(t, m2.VM())
	if _, err := m2.Run(); err != nil {
		t.Fatal(err)
	}
	if len(src.VMs()) != 0 || src.FreeRAMBytes() != src.RAMBytes() {
		t.Fatal("the source still holds the VM after the second migration")
	}
}
