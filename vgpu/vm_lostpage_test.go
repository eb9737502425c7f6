package vgpu

import (
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// TestLostPagePausesVM: a workload whose memory access meets a page that
// cannot come (its fault function fails, as a failed post-copy's
// destination's does) stops its VM, paused, and the host goes on with its
// other VMs: Advance does not fail for one VM's lost page.
func TestLostPagePausesVM(t *testing.T) {
	h := newHost(t, HostConfig{Name: "h", Seed: 5})
	newVM := func(id string) *VM {
		w, err := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 100, FootprintBytes: 64 * MiB,
			RAMWorkingSetBytes: 16 * MiB, RAMDirtyBytesPerSec: 64 * MiB, FramebufferDirtyBytesPerSec: 4 * MiB, Seed: 3})
		must(t, err)
		vm := mustVM(t, h, VMSpec{ID: id, RAMBytes: 256 * MiB, Profiles: []string{"P40-4Q"}, Workload: w})
		must(t, vm.Start())
		return vm
	}
	lost, other := newVM("lost"), newVM("other")
	advance(t, h, 50*time.Millisecond)
	all := memory.NewPageSet(lost.RAM().Pages())
	for p := range lost.RAM().Pages() {
		all.Add(p)
	}
	gone := errors.New("the page's source is gone")
	must(t, lost.RAM().SetAbsent(all, func(int) error { return gone }))
	before := other.Workload().Metrics(0, h.Now())
	advance(t, h, 200*time.Millisecond)
	if lost.State() != VMPaused || other.State() != VMRunning {
		t.Fatalf("the VM that lost a page is %v, the other %v", lost.State(), other.State())
	}
	if after := other.Workload().Metrics(0, h.Now()); after.Completed <= before.Completed {
		t.Fatalf("the other VM served %d requests before and %d after", before.Completed, after.Completed)
	}
	// Resumed with its pages still missing, it stops again at once.
	must(t, lost.Resume())
	advance(t, h, 10*time.Millisecond)
	if lost.State() != VMPaused {
		t.Fatalf("resumed without its pages, the VM is %v", lost.State())
	}
}
