package vgpusimtest_test

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/migrate"
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
