package migrate

import (
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// newSecretWorld is a source running the counter oracle in a VM that also
// holds a secret, and a destination, in one Sim.
func newSecretWorld(t testing.TB) (*Sim, *vgpu.VM, *vgpu.Host, *vgpu.Host) {
	t.Helper()
	src, dst := smallPageHosts(t)
	w := &counterWorkload{PagesPerSec: 400, Pages: 200}
	vm, err := src.CreateVM(vgpu.VMSpec{ID: isolationVMID, RAMBytes: 16 * MiB, RAMFootprintBytes: 2 * MiB,
		Profiles: []string{"P40-1Q"}, Workload: w})
	must(t, err)
	must(t, vm.Start())
	writeSecret(t, vm)
	must(t, src.Advance(time.Second))
	sameClock(t, src, dst)
	s, err := NewSim(SimConfig{}, src, dst)
	must(t, err)
	return s, vm, src, dst
}

// isolationConfig is the migration every isolation case runs: with the
// oracle dirtying pages it takes more than one pre-copy round and a final
// round that carries pages; a short stall timeout keeps stalls quick.
func isolationConfig() Config {
	return Config{Policy: Policy{StunTarget: 110 * time.Millisecond}, Fidelity: Bytes, Link: slowLink, Timeout: 2 * time.Second}
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
