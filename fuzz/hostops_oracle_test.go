package fuzz_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

// TestHostopsOracleCatches breaks each invariant behind the library's back
// and checks that the checks of FuzzHostOps report it: a fuzz target whose
// oracle cannot fail finds nothing.
func TestHostopsOracleCatches(t *testing.T) {
	create := func(id, host byte) hostopsOp { return hostopsOpOf(hostopsCreate, id, host, 0, 0, 0) }
	writeFB := hostopsOpOf(hostopsWriteFB, 0, 0, 1, 2, 9)
	// leak writes a byte into host 0's GPU 0 framebuffer where vm0 wrote,
	// bypassing every window, as a missed scrub would leave it.
	leak := func(t *testing.T, w *hostopsWorld) {
		for phys := range w.taint[hostopsGPUKey{0, 0}] {
			if _, err := w.hosts[0].GPU(0).Framebuffer().WriteAt([]byte{0xee}, phys); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatal("nothing tainted")
	}
	tests := []struct {
		name    string
		header  []byte
		ops     []hostopsOp
		corrupt func(*testing.T, *hostopsWorld)
		want    string
	}{{
		name:    "unscrubbed byte outside any window",
		ops:     []hostopsOp{create(0, 0), writeFB, hostopsOpOf(hostopsDestroy, 0, 0, 0, 0, 0)},
		corrupt: leak,
		want:    "outside any window",
	}, {
		name: "byte of a former tenant in the next one's window",
		ops: []hostopsOp{create(0, 0), writeFB, hostopsOpOf(hostopsDestroy, 0, 0, 0, 0, 0),
			create(1, 0)},
		corrupt: leak,
		want:    "in vm1's vGPU 0",
	}, {
		name: "guest RAM not holding what was written",
		ops:  []hostopsOp{create(0, 0), hostopsOpOf(hostopsWriteRAM, 0, 1, 2, 3, 7)},
		corrupt: func(t *testing.T, w *hostopsWorld) {
			for off, b := range w.shadow["vm0"].ram {
				vm, _ := w.hosts[0].VM("vm0")
				if _, err := vm.RAM().WriteAt([]byte{^b}, off); err != nil {
					t.Fatal(err)
				}
				return
			}
		},
		want: "RAM at",
	}, {
		name: "one VM running on two hosts",
		ops:  []hostopsOp{create(0, 0)},
		corrupt: func(t *testing.T, w *hostopsWorld) {
			vm, err := w.hosts[1].CreateVM(vgpu.VMSpec{ID: "vm0", RAMBytes: 16 << 20, Profiles: []string{"P40-1Q"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := vm.Start(); err != nil {
				t.Fatal(err)
			}
		},
		want: "several owners",
	}, {
		name: "more GPU time than passed",
		ops:  []hostopsOp{hostopsOpOf(hostopsCreate, 0, 0, 0, 0, 1), hostopsOpOf(hostopsAdvance, 9, 0, 0, 0, 0)},
		corrupt: func(t *testing.T, w *hostopsWorld) {
			for v, g := range w.grants {
				g.granted -= time.Hour
				w.grants[v] = g
			}
		},
		want: "of GPU time in",
	}, {
		name:   "more than a fixed share",
		header: []byte{4, 0, 0, 0},
		ops: []hostopsOp{hostopsOpOf(hostopsCreate, 0, 0, 2, 0, 1), hostopsOpOf(hostopsCreate, 1, 0, 2, 0, 1),
			hostopsOpOf(hostopsAdvance, 24, 1, 0, 0, 0)},
		corrupt: func(t *testing.T, w *hostopsWorld) {
			for v, g := range w.grants {
				g.granted -= (v.GPU().Scheduler().Now() - g.at) / 2
				w.grants[v] = g
			}
		},
		want: "under fixed share",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := newHostopsWorld(hostopsDecode(tt.header).Setup)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range tt.ops {
				if err := w.apply(o); err != nil {
					t.Fatalf("%v: %v", o, err)
				}
				if err := w.check(); err != nil {
					t.Fatalf("before the corruption, %v: %v", o, err)
				}
			}
			tt.corrupt(t, w)
			err = w.check()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("check after the corruption: %v, want an error saying %q\nlog: %v", err, tt.want, w.log)
			}
		})
	}
}
