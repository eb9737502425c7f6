package vgpusimtest_test

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
	"pgregory.net/rapid"
)

// balloonDouble is the planted bug: a test double of a host agent that,
// when a VM arrives, reclaims the last page of its guest memory as if the
// guest had ballooned it out, and so loses what the guest kept there.
func balloonDouble(w *vgpusimtest.World, ev migrate.Event) error {
	if ev.Kind != migrate.Done {
		return nil
	}
	for i, id := range w.IDs {
		if id != ev.VM {
			continue
		}
		vm, ok := w.VM(i)
		if !ok {
			return nil
		}
		ps := int64(vm.RAM().PageSize())
		_, err := vm.RAM().WriteAt(make([]byte, ps), vm.RAM().Size()-ps)
		return err
	}
	return nil
}

// shrinkRecorder is a rapid.TB that records a failing check instead of
// failing the test, so that a test can look at what rapid found.
type shrinkRecorder struct {
	failed bool
	out    strings.Builder
}

func (r *shrinkRecorder) Helper()                        {}
func (r *shrinkRecorder) Name() string                   { return "shrink-recorder" }
func (r *shrinkRecorder) Logf(format string, a ...any)   { fmt.Fprintf(&r.out, format+"\n", a...) }
func (r *shrinkRecorder) Log(a ...any)                   { fmt.Fprintln(&r.out, a...) }
func (r *shrinkRecorder) Skipf(string, ...any)           {}
func (r *shrinkRecorder) Skip(...any)                    {}
func (r *shrinkRecorder) SkipNow()                       {}
func (r *shrinkRecorder) Errorf(format string, a ...any) { r.failed = true; r.Logf(format, a...) }
func (r *shrinkRecorder) Error(a ...any)                 { r.failed = true; r.Log(a...) }
func (r *shrinkRecorder) Fatalf(format string, a ...any) { r.Errorf(format, a...) }
func (r *shrinkRecorder) Fatal(a ...any)                 { r.Error(a...) }
func (r *shrinkRecorder) FailNow()                       { r.failed = true }
func (r *shrinkRecorder) Fail()                          { r.failed = true }
func (r *shrinkRecorder) Failed() bool                   { return r.failed }

// findPlanted runs the kit's property with the balloon double and returns
// the first scenario that failed and the one rapid shrank the failure to
// (the last that failed: rapid replays its minimal case last), nil if
// none failed.
func findPlanted() (first, minimal *vgpusimtest.Spec) {
	rapid.Check(&shrinkRecorder{}, func(rt *rapid.T) {
		s := vgpusimtest.Scenario(rt)
		w, err := vgpusimtest.NewWorld(s)
		if err != nil {
			rt.Fatal(err)
		}
		w.OnEvent = balloonDouble
		w.Run(failRecorder{rt, func() {
			if first == nil {
				first = s
			}
			minimal = s
		}})
	})
	return first, minimal
}

// failRecorder calls onFail before failing its rapid.T.
type failRecorder struct {
	*rapid.T
	onFail func()
}

func (f failRecorder) Fatalf(format string, a ...any) {
	f.onFail()
	f.T.Fatalf(format, a...)
}

// size is how much there is of a scenario: hosts, VMs and steps.
func size(s *vgpusimtest.Spec) int { return len(s.Hosts) + len(s.VMs) + len(s.Steps) }

// TestPlantedPageLossFound: a user's property test written only against
// the kit finds the double that loses a page, and rapid shrinks the
// scenario that first showed it. On an idle machine it shrinks to one VM
// and its migration, with little else: usually two one-GPU P40 hosts, the
// smallest type, no workload and the migration alone. rapid shrinks for
// at most -rapid.shrinktime, which a loaded machine (or the race
// detector) spends sooner, so the test asks only that the shrunk scenario
// is no larger than the first, still migrates, and has one VM when the
// first had; it logs both.
func TestPlantedPageLossFound(t *testing.T) {
	// Ten seconds of shrinking keep the test short. No fail file: the
	// next run must find the bug afresh, not replay it.
	setFlag(t, "rapid.shrinktime", "10s")
	setFlag(t, "rapid.nofailfile", "true")
	first, minimal := findPlanted()
	if minimal == nil {
		t.Fatal("the kit did not find the page the double loses")
	}
	t.Logf("first failure (%d hosts, VMs and steps):\n%s\nshrunk to (%d):\n%s", size(first), first, size(minimal), minimal)
	migrations := 0
	for _, st := range minimal.Steps {
		if st.Kind == vgpusimtest.StepMigrate {
			migrations++
		}
	}
	if migrations == 0 || size(minimal) > size(first) || len(minimal.VMs) > len(first.VMs) {
		t.Fatalf("shrunk to a scenario no smaller, or without a migration:\n%s", minimal)
	}
}

// setFlag sets the flag name to value for the rest of the test.
func setFlag(t *testing.T, name, value string) {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("no flag -%s", name)
	}
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// TestSpecValidate: a hand-written Spec that names what it does not have
// is refused by NewWorld with ErrInvalid, never a panic.
func TestSpecValidate(t *testing.T) {
	two := []vgpusimtest.HostSpec{{}, {}}
	vm := []vgpusimtest.VMSpec{{Profile: "P40-1Q"}}
	for _, tc := range []struct {
		name string
		spec vgpusimtest.Spec
	}{
		{"no hosts", vgpusimtest.Spec{}},
		{"negative GPUs", vgpusimtest.Spec{Hosts: []vgpusimtest.HostSpec{{GPUs: -1}}}},
		{"too many GPUs", vgpusimtest.Spec{Hosts: []vgpusimtest.HostSpec{{GPUs: 1000}}}},
		{"VM on a missing host", vgpusimtest.Spec{Hosts: two, VMs: []vgpusimtest.VMSpec{{Host: 2, Profile: "P40-1Q"}}}},
		{"VM on a negative host", vgpusimtest.Spec{Hosts: two, VMs: []vgpusimtest.VMSpec{{Host: -1, Profile: "P40-1Q"}}}},
		{"migration to a missing host", vgpusimtest.Spec{Hosts: two, VMs: vm, Steps: []vgpusimtest.Step{{Kind: vgpusimtest.StepMigrate, To: 5}}}},
		{"nil", vgpusimtest.Spec{}},
		{"unknown type", vgpusimtest.Spec{Hosts: two, VMs: []vgpusimtest.VMSpec{{Profile: "P40-1q-typo"}}}},
		{"type of another GPU", vgpusimtest.Spec{Hosts: two, VMs: []vgpusimtest.VMSpec{{Profile: "T4-1Q"}}}},
		{"unknown workload", vgpusimtest.Spec{Hosts: two, VMs: []vgpusimtest.VMSpec{{Profile: "P40-1Q", Workload: vgpusimtest.WorkloadSpec{Kind: "Inference"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &tc.spec
			if tc.name == "nil" {
				spec = nil
			}
			if _, err := vgpusimtest.NewWorld(spec); !errors.Is(err, vgpusimtest.ErrInvalid) {
				t.Fatalf("NewWorld: %v, want ErrInvalid", err)
			}
		})
	}
	w, err := vgpusimtest.NewWorld(&vgpusimtest.Spec{Hosts: two, VMs: vm})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []vgpusimtest.Step{{Kind: vgpusimtest.StepMigrate, To: 9}, {Kind: 0}} {
		if err := w.Do(st); !errors.Is(err, vgpusimtest.ErrInvalid) {
			t.Errorf("Do(%v): %v, want ErrInvalid", st, err)
		}
	}
	for _, st := range []vgpusimtest.Step{{Kind: vgpusimtest.StepMigrate, VM: 7, To: 1}, {Kind: vgpusimtest.StepCancel, Migration: -3},
		{Kind: vgpusimtest.StepWrite, VM: -1}, {Kind: vgpusimtest.StepPauseResume, VM: 3}} {
		if err := w.Do(st); err != nil {
			t.Errorf("Do(%v) of what the world does not hold: %v, want nothing done", st, err)
		}
	}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestWorldPostCopy: the World holds a post-copy to its rules. A lost link
// leaves the VM paused at the destination with pages absent, which Check
// skips and Finish recovers; a destination gone loses the VM, which Check
// finds as the rule says (no copy there, the source's paused and held),
// gives back to its owner paused and forgets.
func TestWorldPostCopy(t *testing.T) {
	for _, fault := range []migrate.Fault{migrate.FaultLinkDown, migrate.FaultDestinationGone} {
		t.Run(fault.String(), func(t *testing.T) {
			w, err := vgpusimtest.NewWorld(&vgpusimtest.Spec{
				Hosts: []vgpusimtest.HostSpec{{}, {}},
				VMs:   []vgpusimtest.VMSpec{{Profile: "P40-1Q", OraclePagesPerSec: 2000, Seed: 7}},
			})
			if err != nil {
				t.Fatal(err)
			}
			cfg := migrate.Config{Policy: migrate.Policy{Mode: migrate.PostCopy}, Fidelity: migrate.Bytes, Link: migrate.GbE1()}
			if err := w.Do(vgpusimtest.Step{Kind: vgpusimtest.StepMigrate, To: 1, Config: cfg}); err != nil || len(w.Migrations) != 1 {
				t.Fatalf("migrate: %v, refusals %v", err, w.Refusals)
			}
			m := w.Migrations[0]
			for m.Phase() != migrate.PhasePostCopy {
				if _, ok, err := m.Step(); err != nil || !ok {
					t.Fatalf("ended in %v before post-copy: %v", m.Phase(), err)
				}
			}
			// The owner's own write and the oracle's at the destination,
			// which a lost VM loses with it.
			if err := w.Do(vgpusimtest.Step{Kind: vgpusimtest.StepWrite, VM: 0, Page: 3, Value: 0x5a}); err != nil || len(w.Refusals) > 0 {
				t.Fatalf("write: %v, refusals %v", err, w.Refusals)
			}
			if _, err := w.Sim.Advance(10 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if err := m.Inject(fault); err != nil {
				t.Fatal(err)
			}
			if err := w.Check(); err != nil {
				t.Fatalf("after %v: %v", fault, err)
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			if err := w.Check(); err != nil {
				t.Fatalf("finished: %v", err)
			}
			vm, ok := w.VM(0)
			switch {
			case !ok:
				t.Fatal("the VM is gone")
			case fault == migrate.FaultLinkDown && (m.Err() != nil || vm.Host() != w.Hosts[1] || vm.State() != vgpu.VMRunning):
				t.Errorf("recovered: %v, the VM %v on %s", m.Err(), vm.State(), vm.Host().Name())
			case fault == migrate.FaultDestinationGone && (!errors.Is(m.Err(), migrate.ErrVMLost) || vm.Host() != w.Hosts[0] || vm.State() != vgpu.VMPaused || vm.Migrating()):
				t.Errorf("lost: %v, the VM %v on %s, held %t", m.Err(), vm.State(), vm.Host().Name(), vm.Migrating())
			}
		})
	}
}
