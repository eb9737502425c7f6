package fuzz_test

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzHostOps decodes its input into a world of two or three hosts driven
// by a migrate.Sim and a sequence of host operations — create, destroy,
// write guest RAM and framebuffers, placement, migrate, cancel, faults,
// step, advance, power, run — and checks after every operation, and after
// running every migration to its end, that:
//   - each GPU's framebuffer windows are inside it, disjoint, of one type,
//     at their slots, and exactly the windows mapped on it;
//   - every live VM's owner reads back every byte written into it, and a
//     byte one VM wrote reads as zero anywhere outside that VM's window
//     (no access across tenants; released windows and guest RAM scrubbed);
//   - a VM has one owner, runs on one host at most, and a destination's
//     copy does not run before the acknowledgement;
//   - a failed migration leaves the VM on its source as it was and nothing
//     at the destination, with the documented error; a completed one
//     leaves it only at the destination; a stalled one fails by its timeout;
//   - GPU time granted fits in the time that passed and, under fixed share,
//     in each tenant's share.
func FuzzHostOps(f *testing.F) {
	for _, s := range hostopsSeeds {
		f.Add(s.data())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hostopsExec(t, data)
	})
}

// hostopsExec runs the program data decodes to and fails t, printing the
// program and what each operation did, at the first broken invariant.
func hostopsExec(t *testing.T, data []byte) *hostopsWorld {
	t.Helper()
	p := hostopsDecode(data)
	w, err := newHostopsWorld(p.Setup)
	if err != nil {
		t.Fatalf("setup: %v\n%v", err, p)
	}
	fail := func(at string, err error) {
		t.Helper()
		t.Fatalf("%s: %v\nprogram:\n%vlog:\n  %s", at, err, p, strings.Join(w.log, "\n  "))
	}
	for i, o := range p.Ops {
		err := w.apply(o)
		if err == nil {
			err = w.check()
		}
		if err != nil {
			fail(fmt.Sprintf("op %d (%v)", i, o), err)
		}
	}
	// Every migration runs to its end, so that every end is checked; a
	// failing migration may stop Run early, so it is called again.
	for range len(w.migs) + 1 {
		if w.sim.Idle() {
			break
		}
		_, err := w.sim.Run()
		if e := w.migrateOutcome("final run", err); e != nil {
			fail("final run", e)
		}
	}
	if !w.sim.Idle() {
		fail("final run", fmt.Errorf("%d migrations still under way", len(w.sim.Active())))
	}
	if err := w.check(); err != nil {
		fail("final run", err)
	}
	return w
}

// hostopsSeed is a program written by hand to reach some operations, and
// what must have happened once it ran.
type hostopsSeed struct {
	name   string
	header [hostopsHeaderBytes]byte
	ops    []hostopsOp
	want   func(*hostopsWorld) error
}

func (s hostopsSeed) data() []byte {
	b := append([]byte(nil), s.header[:]...)
	for _, o := range s.ops {
		b = append(b, byte(o.Kind), o.A, o.B, o.C, o.D, o.E)
	}
	return b
}
