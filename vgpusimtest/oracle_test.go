package vgpusimtest_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// Small and byte-exact: 16 MiB VMs of the smallest P40 type on Sparse
// hosts, so that the whole file runs in well under a second.
const (
	kitVMRAM       = 16 << 20
	kitVMFootprint = 1 << 20
)

func kitHost(t *testing.T, name string) *vgpu.Host {
	t.Helper()
	h, err := vgpu.NewHost(vgpu.HostConfig{Name: name, Memory: memory.Sparse, RAMBytes: 256 << 20, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// kitVM creates VM id on h with workload w (nil for none), started.
func kitVM(t *testing.T, h *vgpu.Host, id string, w vgpu.Workload) *vgpu.VM {
	t.Helper()
	vm, err := h.CreateVM(vgpu.VMSpec{ID: id, RAMBytes: kitVMRAM, RAMFootprintBytes: kitVMFootprint,
		Profiles: []string{"P40-1Q"}, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.Start(); err != nil {
		t.Fatal(err)
	}
	return vm
}

// flipByte damages one byte of a region behind the oracle's back.
func flipByte(t *testing.T, r *memory.Region, off int64) {
	t.Helper()
	b := make([]byte, 1)
	if _, err := r.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := r.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestOracleWriteAt: a write over two whole pages and part of a third
// records all three as they must be — the unwritten rest of the partial
// page as the VM held it before — and the oracle names the byte a
// direct write later changed, in any of them.
func TestOracleWriteAt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		region int
		first  int   // the first page written
		lead   int64 // bytes into it the write starts
		damage int   // the page, among the three, damaged afterwards
		at     int   // the byte of that page damaged
	}{
		{"RAM aligned, damage in written bytes", 0, 10, 0, 1, 7},
		{"RAM in the footprint, damage in the partial page's old bytes", 0, 3, 100, 2, 4000},
		{"RAM, damage before the write in its first page", 0, 300, 100, 0, 99},
		{"framebuffer", 1, 5, 0, 2, 12},
		{"framebuffer, unaligned", 1, 40, 3 << 10, 0, 3<<10 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := kitHost(t, "h")
			vm := kitVM(t, h, "vm", nil)
			o := vgpusimtest.NewOracle()
			r, err := vgpusimtest.Region(vm, tc.region)
			if err != nil {
				t.Fatal(err)
			}
			ps := int64(r.PageSize())
			// Two and a half pages from lead: three pages, the last partial.
			p := bytes.Repeat([]byte{0xa5, 0x5a, 0x33}, int(ps))[:2*ps+ps/2]
			off := int64(tc.first)*ps + tc.lead
			if err := o.WriteAt(vm, tc.region, off, p); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(p))
			if _, err := r.ReadAt(got, off); err != nil || !bytes.Equal(got, p) {
				t.Fatalf("the write did not reach the region (%v)", err)
			}
			if n := o.Pages("vm"); n != 3 {
				t.Fatalf("the oracle checks %d pages, want 3", n)
			}
			if err := o.Check(vm); err != nil {
				t.Fatalf("check after the write: %v", err)
			}
			page := tc.first + tc.damage
			flipByte(t, r, int64(page)*ps+int64(tc.at))
			wantLost(t, o.Check(vm), "h", tc.region, page, tc.at)
		})
	}
}

// TestOracleWriteAtOverRecord: a second write over part of a recorded
// page builds on the oracle's record, not on the VM's copy, so damage
// done between the two writes is still found.
func TestOracleWriteAtOverRecord(t *testing.T) {
	vm := kitVM(t, kitHost(t, "h"), "vm", nil)
	o := vgpusimtest.NewOracle()
	if err := o.WriteAt(vm, 0, 4096*20, bytes.Repeat([]byte{1}, 4096)); err != nil {
		t.Fatal(err)
	}
	flipByte(t, vm.RAM(), 4096*20+10)
	if err := o.WriteAt(vm, 0, 4096*20+2048, []byte{2, 2}); err != nil {
		t.Fatal(err)
	}
	wantLost(t, o.Check(vm), "h", 0, 20, 10)
}

// TestOracleWriteAtOutOfRange: writes outside the VM's regions are
// refused with ErrOutOfRange and record nothing.
func TestOracleWriteAtOutOfRange(t *testing.T) {
	vm := kitVM(t, kitHost(t, "h"), "vm", nil)
	fb := vm.Framebuffers()[0].Size()
	for _, tc := range []struct {
		name   string
		region int
		off    int64
		n      int
	}{
		{"negative offset", 0, -1, 1},
		{"past the end of RAM", 0, kitVMRAM - 1, 2},
		{"at the end of RAM", 0, kitVMRAM, 1},
		{"past the end of the framebuffer", 1, fb - 4, 8},
		{"negative region", -1, 0, 1},
		{"region past the framebuffers", 2, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := vgpusimtest.NewOracle()
			err := o.WriteAt(vm, tc.region, tc.off, make([]byte, tc.n))
			if !errors.Is(err, vgpusimtest.ErrOutOfRange) {
				t.Fatalf("got %v, want ErrOutOfRange", err)
			}
			if n := o.Pages("vm"); n != 0 {
				t.Fatalf("a refused write recorded %d pages", n)
			}
		})
	}
	if _, err := vgpusimtest.Region(vm, 2); !errors.Is(err, vgpusimtest.ErrOutOfRange) {
		t.Fatalf("Region(vm, 2): %v, want ErrOutOfRange", err)
	}
}

// TestOracleUnwrittenPagesUnchecked: the oracle checks only what it
// recorded; damage anywhere else, or to a VM it does not follow, passes.
func TestOracleUnwrittenPagesUnchecked(t *testing.T) {
	h := kitHost(t, "h")
	vm, other := kitVM(t, h, "vm", nil), kitVM(t, h, "other", nil)
	o := vgpusimtest.NewOracle()
	if err := o.WriteAt(vm, 0, 4096*50, []byte("recorded")); err != nil {
		t.Fatal(err)
	}
	flipByte(t, vm.RAM(), 4096*49+5)
	flipByte(t, vm.RAM(), 4096*51)
	flipByte(t, vm.Framebuffers()[0], 4096*50)
	flipByte(t, other.RAM(), 4096*50)
	if err := o.Check(vm); err != nil {
		t.Fatalf("damage to unrecorded pages: %v", err)
	}
	if err := o.Check(other); err != nil {
		t.Fatalf("a VM the oracle does not follow: %v", err)
	}
	if ids := o.VMs(); len(ids) != 1 || ids[0] != "vm" {
		t.Fatalf("the oracle follows %v, want [vm]", ids)
	}
}

// writesSeen advances vm's host for d in 10 ms steps and counts the
// steps after which the last page of its guest RAM, and of its
// framebuffer, changed. A workload that owns one page of each and writes
// less than once a step writes a new version there each time, so the
// counts are its writes, seen through public memory alone.
func writesSeen(t *testing.T, vm *vgpu.VM, d time.Duration) (counts [2]int) {
	t.Helper()
	rs := [2]*memory.Region{vm.RAM(), vm.Framebuffers()[0]}
	var prev [2][]byte
	for step := time.Duration(0); step <= d; step += 10 * time.Millisecond {
		if step > 0 {
			if err := vm.Host().Advance(10 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		for i, r := range rs {
			cur := make([]byte, r.PageSize())
			if _, err := r.ReadAt(cur, r.Size()-int64(len(cur))); err != nil {
				t.Fatal(err)
			}
			if prev[i] != nil && !bytes.Equal(cur, prev[i]) {
				counts[i]++
			}
			prev[i] = cur
		}
	}
	return counts
}

// TestOracleWorkloadRate: the workload writes PagesPerSec pages a second
// to guest RAM and the framebuffer alike, cut by a throttle, none while
// paused and none for the paused time after a resume; the oracle checks
// every page it wrote.
func TestOracleWorkloadRate(t *testing.T) {
	const half = 500 * time.Millisecond
	for _, tc := range []struct {
		name     string
		throttle float64
		pause    bool
		want     []int // writes in each half second: running, then paused and resumed if pause
	}{
		{"full rate", 0, false, []int{25, 25}},
		{"throttled by half", 0.5, false, []int{12, 13}},
		{"throttled by 0.8", 0.8, false, []int{5, 5}},
		{"paused, then resumed", 0, true, []int{25, 0, 25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := kitHost(t, "h")
			o := vgpusimtest.NewOracle()
			vm := kitVM(t, h, "vm", o.Workload(vgpusimtest.OracleConfig{PagesPerSec: 50, Pages: 1}))
			if err := vm.SetThrottle(tc.throttle); err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.want {
				if tc.pause && i > 0 {
					op := vm.Pause
					if vm.State() == vgpu.VMPaused {
						op = vm.Resume
					}
					if err := op(); err != nil {
						t.Fatal(err)
					}
				}
				got := writesSeen(t, vm, half)
				if got[0] != want || got[1] != want {
					t.Fatalf("half second %d: %v writes to RAM and framebuffer, want %d", i, got, want)
				}
				if err := o.Check(vm); err != nil {
					t.Fatal(err)
				}
			}
			if n := o.Pages("vm"); n != 2 {
				t.Fatalf("the oracle checks %d pages, want one of each region", n)
			}
		})
	}
}

// TestOracleWorkloadSecond: a second of the default workload, alone or
// around a desktop that keeps its own data and metrics, leaves every
// page it wrote checkable; pages past the region make Start fail.
func TestOracleWorkloadSecond(t *testing.T) {
	desktop := func() vgpu.Workload {
		d, err := vgpu.NewDesktop(vgpu.DesktopConfig{UpdatesPerSec: 50, UpdatePixels: 10000, SurfaceBytes: 2 << 20,
			RAMWorkingSetBytes: 1 << 20, RAMDirtyBytesPerSec: 256 << 10, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		name  string
		cfg   vgpusimtest.OracleConfig
		inner bool
	}{
		{"alone", vgpusimtest.OracleConfig{PagesPerSec: 200, Seed: 1}, false},
		{"around a desktop", vgpusimtest.OracleConfig{PagesPerSec: 200, Seed: 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := kitHost(t, "h")
			o := vgpusimtest.NewOracle()
			if tc.inner {
				tc.cfg.Inner = desktop()
			}
			vm := kitVM(t, h, "vm", o.Workload(tc.cfg))
			// The desktop's working set, after the footprint, well
			// below the oracle's pages.
			before, after := make([]byte, 1<<20), make([]byte, 1<<20)
			if _, err := vm.RAM().ReadAt(before, kitVMFootprint); err != nil {
				t.Fatal(err)
			}
			if err := h.Advance(time.Second); err != nil {
				t.Fatal(err)
			}
			if _, err := vm.RAM().ReadAt(after, kitVMFootprint); err != nil {
				t.Fatal(err)
			}
			if err := o.Check(vm); err != nil {
				t.Fatal(err)
			}
			if n := o.Pages("vm"); n != 2*vgpusimtest.DefaultOraclePages {
				t.Fatalf("the oracle checks %d pages, want %d", n, 2*vgpusimtest.DefaultOraclePages)
			}
			m := vm.Workload().Metrics(0, time.Second)
			if tc.inner && (m.Completed == 0 || m.Workload != "desktop" || bytes.Equal(before, after)) {
				t.Fatalf("the desktop's metrics %+v; its memory written: %v", m, !bytes.Equal(before, after))
			}
		})
	}
	for _, pages := range []int{kitVMRAM/4096 - kitVMFootprint/4096 + 1, kitVMRAM/4096 + 1} {
		vm, err := kitHost(t, "h").CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: kitVMRAM, RAMFootprintBytes: kitVMFootprint,
			Profiles: []string{"P40-1Q"}, Workload: vgpusimtest.NewOracle().Workload(vgpusimtest.OracleConfig{Pages: pages})})
		if err != nil {
			t.Fatal(err)
		}
		if err := vm.Start(); err == nil {
			t.Fatalf("%d pages of a VM with %d after its footprint: Start succeeded", pages, (kitVMRAM-kitVMFootprint)/4096)
		}
	}
}

// TestOracleForgetAndOneVMEach: Forget drops a VM's record, so a VM made
// again under the ID starts afresh; one oracle workload given to two VMs
// is refused at the second's start.
func TestOracleForgetAndOneVMEach(t *testing.T) {
	o := vgpusimtest.NewOracle()
	h := kitHost(t, "h")
	wl := o.Workload(vgpusimtest.OracleConfig{Seed: 1})
	vm := kitVM(t, h, "vm", wl)
	if o.Pages("vm") == 0 {
		t.Fatal("the workload recorded nothing")
	}
	other, err := h.CreateVM(vgpu.VMSpec{ID: "other", RAMBytes: kitVMRAM, RAMFootprintBytes: kitVMFootprint, Profiles: []string{"P40-1Q"}, Workload: wl})
	if err == nil {
		err = other.Start()
	}
	if err == nil {
		t.Fatal("one oracle workload started on a second VM")
	}
	if err := vm.Destroy(); err != nil {
		t.Fatal(err)
	}
	o.Forget("vm")
	if n := o.Pages("vm"); n != 0 {
		t.Fatalf("%d pages recorded after Forget", n)
	}
	again := kitVM(t, h, "vm", nil)
	if err := o.Check(again); err != nil {
		t.Fatalf("a VM made again under a forgotten ID: %v", err)
	}
}
