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

// A VM resumed and paused again between two of the migration's events, or
// written by its owner while paused, has changed since its final pages
// left: the migration fails with ErrSource rather than resume a stale copy.
func TestOwnerWritesDuringStun(t *testing.T) {
	phases := []Phase{PhaseFinalRAM, PhaseFinalFramebuffer, PhaseDeviceState, PhaseRestore, PhaseResume}
	for _, mode := range []Mode{PreCopy, Legacy} {
		for _, p := range phases {
			for _, how := range []string{"resume-pause", "owner-write"} {
				t.Run(fmt.Sprintf("mode=%v/phase=%v/how=%s", mode, p, how), func(t *testing.T) {
					src, dst := smallPageHosts(t)
					w := &counterWorkload{PagesPerSec: 1000, Pages: 16}
					vm := counterVM(t, src, w)
					s, err := NewSim(SimConfig{}, src, dst)
					must(t, err)
					m, err := s.Start(vm, dst, Config{Policy: Policy{Mode: mode}, Link: slowLink})
					must(t, err)
					runTo(t, m, p)
					// The VM ran before the migration, and runs after it
					// fails; unless it failed while the owner had the VM
					// running, and the owner then paused it.
					want := vgpu.VMRunning
					if how == "resume-pause" {
						must(t, vm.Resume())
						if _, err := s.Advance(time.Millisecond); err != nil {
							t.Fatal(err)
						}
						if m.Done() {
							want = vgpu.VMPaused
						}
						must(t, vm.Pause())
					} else {
						for _, r := range []*memory.Region{vm.RAM(), vm.Framebuffers()[0]} {
							_, err := r.WriteAt([]byte("late"), r.Size()/2)
							must(t, err)
						}
					}
					if _, err := m.Run(); !errors.Is(err, ErrSource) {
						t.Fatalf("migration error %v, want ErrSource", err)
					}
					if vm.Host() != src || vm.State() != want {
						t.Fatalf("VM %v on %s, want %v at the source", vm.State(), vm.Host().Name(), want)
					}
					checkNothingAt(t, dst)
				})
			}
		}
	}
}
