package migrate

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The VM's owner keeps driving it while it migrates. A pause during
// pre-copy is the owner's to make, and the destination keeps it; a resume
// during the stun would let the VM write what never reaches the
// destination, so the migration fails and the VM runs on at the source.

func TestOwnerPausesDuringPreCopy(t *testing.T) {
	src, dst := smallPageHosts(t)
	w := &counterWorkload{PagesPerSec: 10, Pages: 16}
	vm := counterVM(t, src, w)
	sameClock(t, src, dst)
	s, err := NewSim(SimConfig{}, src, dst)
	must(t, err)
	m, err := s.Start(vm, dst, Config{Link: slowLink})
	must(t, err)
	runTo(t, m, PhasePreCopy)
	must(t, vm.Pause())
	if _, err := m.Run(); err != nil {
		t.Fatal(err)
	}
	if m.VM().Host() != dst || m.VM().State() != vgpu.VMPaused {
		t.Fatalf("VM %v on %s, want paused at the destination as its owner left it", m.VM().State(), m.VM().Host().Name())
	}
	w.Check(t, m.VM())
}

func TestOwnerResumesDuringStun(t *testing.T) {
	for _, p := range []Phase{PhaseDeviceSave, PhaseFinalRAM, PhaseDeviceState, PhaseResume} {
		t.Run("phase="+p.String(), func(t *testing.T) {
			src, dst := smallPageHosts(t)
			w := &counterWorkload{PagesPerSec: 10, Pages: 16}
			vm := counterVM(t, src, w)
			must(t, vm.Pause())
			sameClock(t, src, dst)
			s, err := NewSim(SimConfig{}, src, dst)
			must(t, err)
			m, err := s.Start(vm, dst, Config{Link: slowLink})
			must(t, err)
			runTo(t, m, p)
			must(t, vm.Resume())
			if _, err := m.Run(); !errors.Is(err, ErrSource) {
				t.Fatalf("a VM resumed in %v: migration error %v, want ErrSource", p, err)
			}
			if vm.Host() != src || vm.State() != vgpu.VMRunning {
				t.Fatalf("VM %v on %s, want running at the source", vm.State(), vm.Host().Name())
			}
			checkNothingAt(t, dst)
			if _, err := s.Advance(500 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			w.Check(t, vm)
		})
	}
}

// A VM resumed and paused again between two of the migration's events —
// in one instant, so that nothing is written and its run state reads as
// the stun left it, or after running a while — or written by its owner
// while paused, has changed since the stun began: the migration fails with
// ErrSource in the phase it caught it in, rather than resume a stale copy,
// and the VM stays at the source as its owner left it (paused after a
// pause, running after a write into the migration's stun).
func TestOwnerWritesDuringStun(t *testing.T) {
	phases := []Phase{PhaseQuiesce, PhaseDeviceSave, PhaseFinalRAM, PhaseFinalFramebuffer, PhaseDeviceState, PhaseRestore, PhaseResume}
	for _, mode := range []Mode{PreCopy, Legacy} {
		for _, p := range phases {
			for _, how := range []string{"resume-pause", "resume-run-pause", "owner-write"} {
				t.Run(fmt.Sprintf("mode=%v/phase=%v/how=%s", mode, p, how), func(t *testing.T) {
					src, dst := smallPageHosts(t)
					w := &counterWorkload{PagesPerSec: 1000, Pages: 16}
					vm := counterVM(t, src, w)
					sameClock(t, src, dst)
					s, err := NewSim(SimConfig{}, src, dst)
					must(t, err)
					m, err := s.Start(vm, dst, Config{Policy: Policy{Mode: mode}, Link: slowLink})
					must(t, err)
					runTo(t, m, p)
					want, in := vgpu.VMPaused, p
					switch how {
					case "resume-pause":
						must(t, vm.Resume())
						must(t, vm.Pause())
					case "resume-run-pause":
						must(t, vm.Resume())
						if _, err := s.Advance(time.Millisecond); err != nil {
							t.Fatal(err)
						}
						must(t, vm.Pause())
					default:
						want = vgpu.VMRunning
						if p < PhaseFinalRAM {
							// Written before any final page left: the
							// write goes with them, and only the page
							// written after them fails the migration.
							in = PhaseFinalRAM
							runTo(t, m, PhaseFinalRAM)
						}
						for _, r := range []*memory.Region{vm.RAM(), vm.Framebuffers()[0]} {
							_, err := r.WriteAt([]byte("late"), r.Size()/2)
							must(t, err)
						}
					}
					_, err = m.Run()
					var pe *PhaseError
					if !errors.Is(err, ErrSource) || !errors.As(err, &pe) || pe.Phase != in {
						t.Fatalf("migration error %v, want ErrSource in %v", err, in)
					}
					if vm.Host() != src || vm.State() != want || vm.Migrating() {
						t.Fatalf("VM %v on %s (migrating %v), want %v at the source", vm.State(), vm.Host().Name(), vm.Migrating(), want)
					}
					checkNothingAt(t, dst)
					if how != "owner-write" {
						w.Check(t, vm)
					}
				})
			}
		}
	}
}

// The owner's throttle is the owner's: a migration's own cut (under the
// Throttle policy) runs above it and ends with the migration, and the
// owner's, set at any point before the commit, is what the destination
// applies after a success and what the source keeps after a failure.
func TestOwnerThrottleKept(t *testing.T) {
	cases := []struct {
		name string
		set  Phase // where the owner sets its throttle
		fail Phase // where the migration is canceled; 0: it succeeds
		cut  bool  // the migration cuts first (a hot VM under the Throttle policy)
	}{
		{name: "pre-copy/success", set: PhasePreCopy},
		{name: "pre-copy/canceled-in-pre-copy", set: PhasePreCopy, fail: PhasePreCopy},
		{name: "pre-copy/canceled-in-stun", set: PhasePreCopy, fail: PhaseDeviceState},
		{name: "stun/success", set: PhaseFinalRAM},
		{name: "stun/canceled-in-stun", set: PhaseFinalRAM, fail: PhaseRestore},
		{name: "under-cut/success", set: PhasePreCopy, cut: true},
		{name: "under-cut/canceled", set: PhasePreCopy, fail: PhaseSwitchover, cut: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const owner = 0.05 // under the migration's first cut, 0.2
			var (
				vm, moved *vgpu.VM
				m         *Migration
				w         *counterWorkload
			)
			src, dst := smallPageHosts(t)
			if c.cut {
				src, dst = hostPair(t, memory.Synthetic, 1)
				vm = hotVM(t, src)
				sameClock(t, src, dst)
			} else {
				w = &counterWorkload{PagesPerSec: 1000, Pages: 16}
				vm = counterVM(t, src, w)
			}
			sameClock(t, src, dst)
			s, err := NewSim(SimConfig{}, src, dst)
			must(t, err)
			cfg := Config{Link: slowLink}
			if c.cut {
				cfg = Config{Link: GbE1(), Fidelity: Model}
			}
			m, err = s.Start(vm, dst, cfg)
			must(t, err)
			runTo(t, m, c.set)
			if c.cut {
				for vm.EffectiveThrottle() == 0 {
					if _, ok, err := m.Step(); err != nil || !ok {
						t.Fatalf("the migration never throttled: %v", err)
					}
				}
			}
			must(t, vm.SetThrottle(owner))
			if c.cut && (vm.Throttle() != owner || vm.EffectiveThrottle() < DefaultThrottle().Start) {
				t.Fatalf("under the migration's cut: owner's throttle %v, effective %v", vm.Throttle(), vm.EffectiveThrottle())
			}
			if c.fail != 0 {
				if m.Phase() != c.fail {
					runTo(t, m, c.fail)
				}
				must(t, m.Cancel())
				moved = vm
				if _, err := m.Run(); !errors.Is(err, ErrCanceled) || vm.Host() != src {
					t.Fatalf("canceled migration: %v, VM on %s", err, vm.Host().Name())
				}
			} else {
				if _, err := m.Run(); err != nil {
					t.Fatal(err)
				}
				moved = m.VM()
				if moved.Host() != dst {
					t.Fatalf("VM on %s after success", moved.Host().Name())
				}
			}
			if moved.Throttle() != owner || moved.EffectiveThrottle() != owner || moved.Migrating() {
				t.Fatalf("VM on %s: throttle %v, effective %v (migrating %v); want its owner's %v",
					moved.Host().Name(), moved.Throttle(), moved.EffectiveThrottle(), moved.Migrating(), owner)
			}
			if w != nil && w.Throttle() != owner {
				t.Fatalf("the workload runs throttled by %v, its owner's throttle %v", w.Throttle(), owner)
			}
		})
	}
}

// A VM has one migration at a time: a second, in the same Sim or another,
// is refused with ErrMigrating before anything changes, and the first
// goes on; once the first has ended, the VM can go again.
func TestSecondMigrationRefused(t *testing.T) {
	for _, where := range []string{"same-sim", "other-sim", "source"} {
		t.Run("where="+where, func(t *testing.T) {
			src, dst := smallPageHosts(t)
			w := &counterWorkload{PagesPerSec: 10, Pages: 16}
			vm := counterVM(t, src, w)
			sameClock(t, src, dst)
			s, err := NewSim(SimConfig{}, src, dst)
			must(t, err)
			m, err := s.Start(vm, dst, Config{Link: slowLink})
			must(t, err)
			runTo(t, m, PhasePreCopy)
			second := func() error {
				switch where {
				case "same-sim":
					_, err := s.Start(vm, dst, Config{Link: slowLink})
					return err
				case "other-sim":
					other, err := NewSim(SimConfig{Start: src.Now()})
					must(t, err)
					_, err = other.Start(vm, dst, Config{Link: slowLink})
					return err
				}
				_, err := NewSource(vm)
				return err
			}
			err = second()
			if !errors.Is(err, ErrMigrating) || !errors.Is(err, vgpu.ErrMigrating) {
				t.Fatalf("second migration: %v, want ErrMigrating", err)
			}
			var pe *PhaseError
			if where != "source" && (!errors.As(err, &pe) || pe.Phase != PhaseSetup) {
				t.Fatalf("second migration: %v, want a *PhaseError in setup", err)
			}
			if m.Phase() != PhasePreCopy || vm.State() != vgpu.VMRunning || len(dst.VMs()) != 1 {
				t.Fatalf("the first migration in %v, its VM %v, %d VMs at the destination", m.Phase(), vm.State(), len(dst.VMs()))
			}
			must(t, m.Cancel())
			if vm.Migrating() {
				t.Fatal("a canceled migration still holds its VM")
			}
			m, err = s.Start(vm, dst, Config{Link: slowLink})
			must(t, err)
			if _, err := m.Run(); err != nil {
				t.Fatal(err)
			}
			w.Check(t, m.VM())
		})
	}
}

// Once the source has committed the VM to the destination — which has
// acknowledged the resume — the source's copy refuses its owner's changes
// until it is released: the destination would never see them, and a
// resume would make two running copies.
func TestCommittedSourceRefusesOwner(t *testing.T) {
	src, dst := smallPageHosts(t)
	vm := counterVM(t, src, &counterWorkload{PagesPerSec: 10, Pages: 16})
	sameClock(t, src, dst)
	s, err := NewSim(SimConfig{}, src, dst)
	must(t, err)
	m, err := s.Start(vm, dst, Config{Link: slowLink})
	must(t, err)
	runToRelease(t, m)
	for op, f := range map[string]func() error{"resume": vm.Resume, "stop": vm.Stop, "throttle": func() error { return vm.SetThrottle(0.5) }} {
		if err := f(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("%s of the committed source: %v, want vgpu.ErrMigrating", op, err)
		}
	}
	if vm.State() != vgpu.VMPaused || m.VM().State() != vgpu.VMRunning {
		t.Fatalf("source %v, destination %v", vm.State(), m.VM().State())
	}
	if _, err := m.Run(); err != nil {
		t.Fatal(err)
	}
	if vm.State() != vgpu.VMDestroyed || vm.Migrating() {
		t.Fatalf("source VM %v after the release (migrating %v)", vm.State(), vm.Migrating())
	}
}
