package vgpu

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// intruder is the byte every out-of-range write carries. Tenants' own
// patterns never use it, so a refused write that landed anyway shows.
const intruder = 0xFF

// tenantByte is tenant slot's pattern at byte j of its boundary runs: in
// [1, 254], and different for every slot of a P40 at the same j (19 is
// prime to 254), so a neighbour's byte is never mistaken for one's own.
func tenantByte(slot, j int) byte { return byte(1 + (slot*19+j*7)%254) }

// boundaryRuns are the byte ranges a tenant writes at the edges of its
// window: the first and last bytes, each side of the first and the last
// page boundary, and each side of the end of the usable framebuffer (the
// vGPU manager's reservation sits above it, still inside the window).
// Overlapping runs are merged, so that every byte is written once.
func boundaryRuns(size, pageSize, usable int64) [][2]int64 {
	cand := [][2]int64{{0, 2}, {pageSize - 2, pageSize + 2}, {usable - 2, usable + 2},
		{size - pageSize - 2, size - pageSize + 2}, {size - 2, size}}
	var out [][2]int64
	for _, r := range cand {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// outOfRange are the accesses a tenant tries beyond its window of size
// bytes and pageSize pages: each must touch nothing and fail typed.
func outOfRange(size, pageSize int64) []struct {
	name string
	off  int64
	n    int
} {
	return []struct {
		name string
		off  int64
		n    int
	}{
		{"one byte before the start", -1, 1},
		{"straddling the start", -1, 2},
		{"one byte past the end", size, 1},
		{"straddling the end", size - 1, 2},
		{"a page past the end", size, int(pageSize)},
		{"a page ending one byte past the end", size - pageSize + 1, int(pageSize)},
		{"an offset whose end overflows", math.MaxInt64 - 1, 4},
		{"the most negative offset", math.MinInt64, 1},
	}
}

// accessor is one public way into a vGPU's framebuffer.
type accessor struct {
	name  string
	write func(v *VGPU, p []byte, off int64) (int, error)
	read  func(v *VGPU, p []byte, off int64) (int, error)
}

var accessors = []accessor{
	{"device", (*VGPU).WriteAt, (*VGPU).ReadAt},
	{"region", func(v *VGPU, p []byte, off int64) (int, error) { return v.Framebuffer().WriteAt(p, off) },
		func(v *VGPU, p []byte, off int64) (int, error) { return v.Framebuffer().ReadAt(p, off) }},
}

// isolationCounts are the figures a boundary run reports.
type isolationCounts struct{ hosts, tenants, written, refused int }

// TestWindowBoundariesIsolateTenants fills a P40 with tenants of one
// profile, for several profiles, page sizes and backings. Each tenant
// writes its own pattern at every edge of its window, then tries every
// kind of access just outside it through the device and through its
// framebuffer region; each of those fails with a *memory.AccessError
// wrapping memory.ErrOutOfRange, moves no byte and leaves the read buffer
// as it was. Afterwards every tenant reads its own pattern back, the GPU's
// framebuffer holds exactly the tenants' bytes at their global offsets,
// and no page beyond those written is resident.
func TestWindowBoundariesIsolateTenants(t *testing.T) {
	all := []string{"P40-1Q", "P40-2Q", "P40-4Q", "P40-8Q", "P40-24Q", "P40-3A", "P40-6C"}
	// A GPU of 4 KiB pages has 6.3 M of them and takes a quarter of a
	// second to build, so that page size runs the extremes only.
	cases := []struct {
		kind     memory.Kind
		pageSize int
		profiles []string
	}{
		{memory.Sparse, DefaultFramebufferPageSize, all},
		{memory.Synthetic, DefaultFramebufferPageSize, all},
		{memory.Sparse, 4096, []string{"P40-1Q", "P40-4Q", "P40-24Q"}},
		{memory.Synthetic, 4096, []string{"P40-2Q"}},
	}
	if isolationRace {
		cases = cases[:2] // the same steps; 4 KiB pages cost too long under the race detector
	}
	var c isolationCounts
	for _, tc := range cases {
		for _, prof := range tc.profiles {
			t.Run(fmt.Sprintf("%v/%d/%s", tc.kind, tc.pageSize, prof), func(t *testing.T) {
				probeFilledGPU(t, tc.kind, tc.pageSize, prof, &c)
			})
		}
	}
	t.Logf("%d filled GPUs, %d tenants, %d boundary bytes written, %d out-of-range accesses refused",
		c.hosts, c.tenants, c.written, c.refused)
}

func probeFilledGPU(t *testing.T, kind memory.Kind, pageSize int, profile string, c *isolationCounts) {
	h := newHost(t, HostConfig{Name: "iso", Memory: kind, FramebufferPageSize: pageSize, Seed: 7})
	p, err := ParseProfile(profile)
	must(t, err)
	g := h.GPU(0)
	bySlot := make([]*VGPU, p.MaxInstances)
	for i := range p.MaxInstances {
		vm := mustVM(t, h, VMSpec{ID: fmt.Sprintf("tenant-%02d", i), RAMBytes: 4 * MiB, Profiles: []string{profile}})
		must(t, vm.Start())
		v := vm.VGPUs()[0]
		if v.GPU() != g || bySlot[v.Slot()] != nil {
			t.Fatalf("tenant %d placed on GPU %d slot %d, taken or elsewhere", i, v.GPU().Index(), v.Slot())
		}
		bySlot[v.Slot()] = v
	}
	// The GPU is full: the windows tile its framebuffer, and one more
	// tenant is refused with the reason.
	if n, why := g.Free(p); n != 0 || why != RefusedFull {
		t.Fatalf("a filled GPU has room for %d (%v)", n, why)
	}
	var pe *PlacementError
	if _, err := h.CreateVM(VMSpec{ID: "one-too-many", RAMBytes: 4 * MiB, Profiles: []string{profile}}); !errors.As(err, &pe) || !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("a tenant beyond a full GPU: %v, want a *PlacementError wrapping ErrNoCapacity", err)
	}
	size, ps := p.FramebufferBytes, int64(pageSize)
	if int64(p.MaxInstances)*size > g.Framebuffer().Size() {
		t.Fatalf("%d windows of %d bytes overflow the GPU's %d", p.MaxInstances, size, g.Framebuffer().Size())
	}
	for slot, v := range bySlot {
		w := v.Framebuffer()
		if w.Size() != size || int64(w.FirstPage())*ps != int64(slot)*size {
			t.Fatalf("slot %d: window of %d bytes at %d, want %d at %d", slot, w.Size(), int64(w.FirstPage())*ps, size, int64(slot)*size)
		}
	}

	runs := boundaryRuns(size, ps, p.UsableFramebufferBytes())
	for slot, v := range bySlot {
		j := 0
		for _, r := range runs {
			buf := make([]byte, r[1]-r[0])
			for k := range buf {
				buf[k] = tenantByte(slot, j)
				j++
			}
			if n, err := v.WriteAt(buf, r[0]); err != nil || n != len(buf) {
				t.Fatalf("slot %d: writing %d bytes at %d inside the window: %d, %v", slot, len(buf), r[0], n, err)
			}
			c.written += len(buf)
		}
	}
	for _, v := range bySlot {
		c.refused += tryOutside(t, v, size, ps)
	}

	// Every tenant's edges hold its own pattern, read through each
	// accessor and through the GPU's framebuffer at the global offset.
	pages := map[int64]bool{}
	root := g.Framebuffer()
	for slot, v := range bySlot {
		j := 0
		for _, r := range runs {
			want := make([]byte, r[1]-r[0])
			for k := range want {
				want[k] = tenantByte(slot, j)
				j++
			}
			for _, a := range accessors {
				got := make([]byte, len(want))
				if _, err := a.read(v, got, r[0]); err != nil || string(got) != string(want) {
					t.Fatalf("slot %d, %s read at %d: % x, %v; want % x", slot, a.name, r[0], got, err, want)
				}
			}
			global := int64(slot)*size + r[0]
			got := make([]byte, len(want))
			if _, err := root.ReadAt(got, global); err != nil || string(got) != string(want) {
				t.Fatalf("GPU framebuffer at %d (slot %d + %d): % x, %v; want % x", global, slot, r[0], got, err, want)
			}
			for b := global; b < global+int64(len(want)); b++ {
				pages[b/ps] = true
			}
		}
	}
	// Nothing else was written anywhere on the GPU: only the pages of the
	// boundary runs hold bytes, and on a Sparse GPU the pages each device
	// filled at its start (its page tables and GPFIFO rings, which a
	// Synthetic GPU generates instead of storing).
	if kind == memory.Sparse {
		for slot, v := range bySlot {
			for _, off := range devicePages(t, v) {
				pages[(int64(slot)*size+off)/ps] = true
			}
		}
	}
	if got, want := root.ResidentBytes(), int64(len(pages))*ps; got != want {
		t.Fatalf("GPU framebuffer holds %d resident bytes, want %d (%d pages written)", got, want, len(pages))
	}
	c.hosts++
	c.tenants += len(bySlot)
}

// devicePages returns the offsets in v's window of the pages its device
// state points at: context page tables and channel rings.
func devicePages(t *testing.T, v *VGPU) []int64 {
	t.Helper()
	st, err := v.Snapshot()
	must(t, err)
	var out []int64
	for _, c := range st.Contexts {
		out = append(out, int64(c.PageTableRoot))
	}
	for _, ch := range st.Channels {
		out = append(out, int64(ch.GPFIFOOffset))
	}
	return out
}

// tryOutside makes every out-of-range access of v, through each accessor
// and the region's page operations, and checks each fails typed and moves
// nothing. It returns how many were tried.
func tryOutside(t *testing.T, v *VGPU, size, ps int64) int {
	t.Helper()
	tried := 0
	for _, a := range accessors {
		for _, o := range outOfRange(size, ps) {
			buf := make([]byte, o.n)
			for i := range buf {
				buf[i] = intruder
			}
			n, err := a.write(v, buf, o.off)
			checkAccessError(t, fmt.Sprintf("%s write %s", a.name, o.name), n, err, "write", o.off, o.n, size)
			for i := range buf {
				buf[i] = 0xEE
			}
			n, err = a.read(v, buf, o.off)
			checkAccessError(t, fmt.Sprintf("%s read %s", a.name, o.name), n, err, "read", o.off, o.n, size)
			for i, b := range buf {
				if b != 0xEE {
					t.Fatalf("%s read %s: a refused read changed the buffer at %d to %#x", a.name, o.name, i, b)
				}
			}
			tried += 2
		}
	}
	w := v.Framebuffer()
	last := w.Pages()
	page := make([]byte, ps)
	for i := range page {
		page[i] = intruder
	}
	pageOps := []struct {
		name string
		do   func() error
	}{
		{"store page before the start", func() error { return w.StorePage(-1, page, 1) }},
		{"store page past the end", func() error { return w.StorePage(last, page, 1) }},
		{"read page past the end", func() error { _, err := w.ReadPage(last, page); return err }},
		{"fill straddling the end", func() error { return w.Fill(last-1, 2, memory.ClassRandom) }},
		{"fill before the start", func() error { return w.Fill(-1, 1, memory.ClassText) }},
		{"generated page past the end", func() error { return w.StoreGenerated(last, memory.ClassWeights, 3) }},
	}
	for _, op := range pageOps {
		var ae *memory.AccessError
		if err := op.do(); !errors.Is(err, memory.ErrOutOfRange) || !errors.As(err, &ae) {
			t.Fatalf("%s: %v, want a *memory.AccessError wrapping ErrOutOfRange", op.name, err)
		}
		tried++
	}
	return tried
}

// checkAccessError checks a refused byte access: nothing moved, and a
// *memory.AccessError that describes it.
func checkAccessError(t *testing.T, what string, n int, err error, op string, off int64, length int, size int64) {
	t.Helper()
	var ae *memory.AccessError
	if n != 0 || !errors.Is(err, memory.ErrOutOfRange) || !errors.As(err, &ae) {
		t.Fatalf("%s: %d bytes, %v; want 0 and a *memory.AccessError wrapping ErrOutOfRange", what, n, err)
	}
	if ae.Op != op || ae.Off != off || ae.Len != int64(length) || ae.Size != size {
		t.Fatalf("%s: %+v, want op %q off %d len %d size %d", what, *ae, op, off, length, size)
	}
}
