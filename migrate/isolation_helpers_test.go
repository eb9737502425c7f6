package migrate

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// isolationVMID names the migrating VM of the isolation tests.
const isolationVMID = "oracle"

// secretFramebufferPages are the framebuffer pages where the migrating VM
// keeps a secret, clear of the counter oracle's pages 0-199: those that
// exist at the window's page size, and its last page.
var secretFramebufferPages = []int{300, 301, 302, 303, 4096, 4097, 65535, 65536}

// secretPages returns where the secret lives in r: fb chooses the
// framebuffer pages, else the last 16 pages of guest RAM.
func secretPages(r *memory.Region, fb bool) []int {
	if fb {
		var out []int
		for _, p := range secretFramebufferPages {
			if p < r.Pages()-1 {
				out = append(out, p)
			}
		}
		return append(out, r.Pages()-1)
	}
	var out []int
	for p := r.Pages() - 16; p < r.Pages(); p++ {
		out = append(out, p)
	}
	return out
}

// secretPage is the secret's content of page p: seeded non-zero bytes.
func secretPage(p, size int) []byte {
	rng := rand.New(rand.NewPCG(uint64(p), 0x5ec7e7))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.Uint32()) | 1
	}
	return b
}

// writeSecret writes the secret into vm's guest RAM and first framebuffer.
func writeSecret(t testing.TB, vm *vgpu.VM) {
	t.Helper()
	for i, r := range []*memory.Region{vm.RAM(), vm.Framebuffers()[0]} {
		for _, p := range secretPages(r, i == 1) {
			_, err := r.WriteAt(secretPage(p, r.PageSize()), int64(p)*int64(r.PageSize()))
			must(t, err)
		}
	}
}

// secretPagesIn counts the secret's framebuffer pages r holds.
func secretPagesIn(t testing.TB, r *memory.Region) int {
	t.Helper()
	n, buf := 0, make([]byte, r.PageSize())
	for _, p := range secretPages(r, true) {
		_, err := r.ReadAt(buf, int64(p)*int64(r.PageSize()))
		must(t, err)
		if bytes.Equal(buf, secretPage(p, len(buf))) {
			n++
		}
	}
	return n
}

// newSecretWorld is a source running the counter oracle in a VM that also
// holds a secret, and a destination, in one Sim.
func newSecretWorld(t testing.TB) (*Sim, *vgpu.VM, *vgpu.Host, *vgpu.Host) {
	t.Helper()
	src, dst := smallPageHosts(t)
	w := &counterWorkload{pagesPerSec: 400, pages: 200}
	vm, err := src.CreateVM(vgpu.VMSpec{ID: isolationVMID, RAMBytes: 16 * MiB, RAMFootprintBytes: 2 * MiB,
		Profiles: []string{"P40-1Q"}, Workload: w})
	must(t, err)
	must(t, vm.Start())
	writeSecret(t, vm)
	must(t, src.Advance(time.Second))
	s, err := NewSim(SimConfig{}, src, dst)
	must(t, err)
	return s, vm, src, dst
}

// isolationConfig is the migration every isolation case runs: with the
// oracle dirtying pages it takes more than one pre-copy round and a final
// round that carries pages; a short stall timeout keeps stalls quick.
func isolationConfig() Config {
	return Config{Policy: Policy{StunTarget: 310 * time.Millisecond}, Fidelity: Bytes, Link: slowLink, Timeout: 2 * time.Second}
}

// vmPages returns the framebuffer pages that can hold anything of vm:
// the oracle's, the secret's and those its device state points at.
func vmPages(t testing.TB, vm *vgpu.VM) []int {
	t.Helper()
	fb := vm.Framebuffers()[0]
	out := secretPages(fb, true)
	for p := range 200 {
		out = append(out, p)
	}
	states, err := vm.Snapshots()
	must(t, err)
	ps := uint64(fb.PageSize())
	for _, c := range states[0].Contexts {
		out = append(out, int(c.PageTableRoot/ps))
	}
	for _, ch := range states[0].Channels {
		out = append(out, int(ch.GPFIFOOffset/ps))
	}
	return out
}

// windowAt records where a vGPU's window lies on its host.
type windowAt struct {
	gpu, slot, firstPage int
}

func windowOf(v *vgpu.VGPU) windowAt {
	return windowAt{v.GPU().Index(), v.Slot(), v.Framebuffer().FirstPage()}
}

// nextTenantReadsZeros places a new VM of the same profile on host, checks
// that it gets the window at, and that its framebuffer reads zeros at
// every page in pages, or everywhere if pages is nil, and its guest RAM
// everywhere. The tenant is destroyed again.
func nextTenantReadsZeros(t testing.TB, host *vgpu.Host, at windowAt, pages []int) {
	t.Helper()
	next, err := host.CreateVM(vgpu.VMSpec{ID: "next-tenant", RAMBytes: 16 * MiB, Profiles: []string{"P40-1Q"}})
	must(t, err)
	defer func() { must(t, next.Destroy()) }()
	v := next.VGPUs()[0]
	if got := windowOf(v); got != at {
		t.Fatalf("the next tenant got window %+v, the migrating VM had %+v", got, at)
	}
	fb := v.Framebuffer()
	ps := fb.PageSize()
	if pages == nil {
		readsZeros(t, "the next tenant's framebuffer", fb, 0, fb.Size())
	}
	for _, p := range pages {
		readsZeros(t, "the next tenant's framebuffer", fb, int64(p)*int64(ps), int64(ps))
	}
	readsZeros(t, "the next tenant's guest RAM", next.RAM(), 0, next.RAM().Size())
}

// readsZeros fails t unless n bytes of r from off read as zero.
func readsZeros(t testing.TB, what string, r *memory.Region, off, n int64) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for end := off + n; off < end; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), end-off)]
		_, err := r.ReadAt(b, off)
		must(t, err)
		if !memory.IsZero(b) {
			t.Fatalf("%s: bytes from %d are not zero", what, off)
		}
	}
}

// staleHandlesHoldNothing checks what a destroyed incoming VM leaves
// behind in the hands of whoever kept its regions: the window refuses
// access, the released guest RAM reads zeros where the secret was.
func staleHandlesHoldNothing(t testing.TB, fb, ram *memory.Region) {
	t.Helper()
	if _, err := fb.ReadAt(make([]byte, 8), 0); !errors.Is(err, memory.ErrUnmapped) {
		t.Fatalf("reading the aborted window: %v, want memory.ErrUnmapped", err)
	}
	for _, p := range secretPages(ram, false) {
		readsZeros(t, "the aborted guest RAM", ram, int64(p)*int64(ram.PageSize()), int64(ram.PageSize()))
	}
}
