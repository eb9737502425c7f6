package fuzz_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vgpusim/vgpusim/migrate"
)

var hostopsUpdateSeeds = flag.Bool("update-hostops-seeds", false,
	"rewrite testdata/fuzz/FuzzHostOps/seed-* from the seeds of FuzzHostOps")

func hostopsOpOf(k hostopsKind, a, b, c, d, e byte) hostopsOp {
	return hostopsOp{Kind: k, A: a, B: b, C: c, D: d, E: e}
}

// hostopsEnds wants the migrations to have ended so: nil for PhaseDone,
// else the sentinel the failure wraps.
func hostopsEnds(want ...error) func(*hostopsWorld) error {
	return func(w *hostopsWorld) error {
		if len(w.migs) != len(want) {
			return fmt.Errorf("%d migrations started, want %d", len(w.migs), len(want))
		}
		for i, mg := range w.migs {
			switch err := mg.m.Err(); {
			case want[i] == nil && mg.m.Phase() != migrate.PhaseDone:
				return fmt.Errorf("migration #%d ended in %v (%v), want done", i, mg.m.Phase(), err)
			case want[i] != nil && !errors.Is(err, want[i]):
				return fmt.Errorf("migration #%d ended in %v with %v, want %v", i, mg.m.Phase(), err, want[i])
			}
		}
		return nil
	}
}

var hostopsSeeds = []hostopsSeed{{
	// A VM with a load, written to, migrated to the end, written to at
	// its destination, destroyed there; a new VM takes its scrubbed slot.
	name:   "migrate-complete",
	header: [4]byte{0, 0, 0, 0},
	ops: []hostopsOp{
		hostopsOpOf(hostopsCreate, 0, 0, 0, 0, 1),
		hostopsOpOf(hostopsWriteRAM, 0, 1, 2, 3, 7),
		hostopsOpOf(hostopsWriteFB, 0, 0, 1, 2, 9),
		hostopsOpOf(hostopsMigrate, 0, 1, 1, 0, 0),
		hostopsOpOf(hostopsStep, 2, 0, 0, 0, 0),
		hostopsOpOf(hostopsWriteFB, 0, 5, 5, 5, 3),
		hostopsOpOf(hostopsRun, 0, 0, 0, 0, 0),
		hostopsOpOf(hostopsWriteRAM, 0, 9, 9, 9, 63),
		hostopsOpOf(hostopsDestroy, 0, 0, 0, 0, 0),
		hostopsOpOf(hostopsCreate, 1, 1, 0, 0, 0),
		hostopsOpOf(hostopsWriteFB, 1, 0, 1, 3, 4),
	},
	want: hostopsEnds(nil),
}, {
	// A migration canceled in pre-copy: the VM stays, written to, on its
	// source.
	name:   "migrate-cancel",
	header: [4]byte{0, 0, 0, 0},
	ops: []hostopsOp{
		hostopsOpOf(hostopsCreate, 0, 0, 1, 1, 1),
		hostopsOpOf(hostopsWriteFB, 0, 3, 0, 0, 17),
		hostopsOpOf(hostopsMigrate, 0, 1, 0, 0, 0),
		hostopsOpOf(hostopsStep, 1, 1, 0, 0, 0),
		hostopsOpOf(hostopsWriteRAM, 0, 0, 4, 0, 40),
		hostopsOpOf(hostopsCancel, 0, 0, 0, 0, 0),
		hostopsOpOf(hostopsAdvance, 9, 0, 0, 0, 0),
		hostopsOpOf(hostopsWriteFB, 0, 3, 0, 0, 18),
	},
	want: hostopsEnds(migrate.ErrCanceled),
}, {
	// Two migrations share a 1 GbE link: the destination refuses one, the
	// link stalls under the other until its timeout; a non-link fault is
	// refused by FailLink.
	name:   "faults-and-timeout",
	header: [4]byte{0, 0, 0, 1},
	ops: []hostopsOp{
		hostopsOpOf(hostopsCreate, 0, 0, 0, 0, 1),
		hostopsOpOf(hostopsCreate, 1, 0, 0, 2, 0),
		hostopsOpOf(hostopsMigrate, 0, 1, 0, 0, 0),
		hostopsOpOf(hostopsMigrate, 1, 1, 0, 0, 0),
		hostopsOpOf(hostopsStep, 1, 0, 0, 0, 0),
		hostopsOpOf(hostopsInject, 0, 2, 0, 0, 0),
		hostopsOpOf(hostopsFailLink, 0, 1, 0, 0, 0),
		hostopsOpOf(hostopsFailLink, 0, 3, 0, 0, 0),
		hostopsOpOf(hostopsWriteRAM, 1, 7, 7, 7, 5),
		hostopsOpOf(hostopsAdvance, 9, 2, 0, 0, 0),
	},
	want: hostopsEnds(migrate.ErrRefused, migrate.ErrConnection),
}, {
	// Fixed share, 1 ms slices and 200 us chunks on a host of two GPUs
	// with 64 KiB framebuffer pages:
	// loaded VMs placed breadth-first then depth-first, paused, resumed,
	// stopped, while time passes.
	name:   "fixed-share",
	header: [4]byte{4, 5, 0x11, 0},
	ops: []hostopsOp{
		hostopsOpOf(hostopsCreate, 0, 0, 2, 0, 1),
		hostopsOpOf(hostopsCreate, 1, 0, 2, 0, 1),
		hostopsOpOf(hostopsPlace, 0, 1, 0, 0, 0),
		hostopsOpOf(hostopsCreate, 2, 0, 2, 0, 1),
		hostopsOpOf(hostopsAdvance, 4, 2, 0, 0, 0),
		hostopsOpOf(hostopsPower, 1, 1, 0, 0, 0),
		hostopsOpOf(hostopsAdvance, 20, 1, 0, 0, 0),
		hostopsOpOf(hostopsPower, 1, 2, 0, 0, 0),
		hostopsOpOf(hostopsPower, 2, 3, 0, 0, 0),
		hostopsOpOf(hostopsAdvance, 3, 2, 0, 0, 0),
	},
	want: func(w *hostopsWorld) error {
		for v, g := range w.grants {
			if info, err := v.GPU().Scheduler().Tenant(v.Tenant()); err == nil && info.Granted > g.granted {
				return nil
			}
		}
		return errors.New("no tenant received GPU time")
	},
}, {
	// Three hosts: a two-vGPU VM's Legacy migration loses its destination,
	// a second attempt completes; another VM is destroyed under its
	// migration.
	name:   "legacy-destination-gone",
	header: [4]byte{1, 0, 5, 1},
	ops: []hostopsOp{
		hostopsOpOf(hostopsCreate, 0, 0, 0x82, 0, 1),
		hostopsOpOf(hostopsWriteFB, 0, 1, 2, 3, 0x45),
		hostopsOpOf(hostopsWriteFB, 0, 1, 2, 3, 0x05),
		hostopsOpOf(hostopsMigrate, 0, 2, 2, 1, 0),
		hostopsOpOf(hostopsStep, 3, 0, 0, 0, 0),
		hostopsOpOf(hostopsInject, 0, 3, 0, 0, 0),
		hostopsOpOf(hostopsMigrate, 0, 2, 2, 1, 0),
		hostopsOpOf(hostopsRun, 0, 0, 0, 0, 0),
		hostopsOpOf(hostopsCreate, 1, 1, 1, 0, 0),
		hostopsOpOf(hostopsMigrate, 1, 0, 1, 0, 0),
		hostopsOpOf(hostopsStep, 1, 1, 2, 0, 0),
		hostopsOpOf(hostopsDestroy, 1, 0, 0, 0, 0),
		hostopsOpOf(hostopsAdvance, 5, 1, 0, 0, 0),
	},
	want: hostopsEnds(migrate.ErrDestination, nil, migrate.ErrSource),
}}

// TestHostopsSeeds runs each seed, checks that it did what it was written
// for and that together they reach every operation, and that the corpus
// files hold them (-update-hostops-seeds rewrites the files).
func TestHostopsSeeds(t *testing.T) {
	reached := map[hostopsKind]bool{}
	for _, s := range hostopsSeeds {
		t.Run(s.name, func(t *testing.T) {
			w := hostopsExec(t, s.data())
			if err := s.want(w); err != nil {
				t.Fatalf("%v\nlog:\n%v", err, w.log)
			}
		})
		for _, o := range hostopsDecode(s.data()).Ops {
			reached[o.Kind] = true
		}
		path := filepath.Join("testdata", "fuzz", "FuzzHostOps", "seed-"+s.name)
		file := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.data())
		if *hostopsUpdateSeeds {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != file {
			t.Errorf("%s does not hold seed %q (%v); run with -update-hostops-seeds", path, s.name, err)
		}
	}
	for k := range hostopsKinds {
		if !reached[k] {
			t.Errorf("no seed reaches %s", hostopsKindNames[k])
		}
	}
}
