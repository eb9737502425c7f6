package migrate

import (
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

const (
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)

// tb is what the helpers need of a *testing.T, a *testing.B or a
// *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func must(t tb, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// hostPair returns a source and a destination host of the given backing;
// their clocks differ on purpose, as two real hosts' would.
func hostPair(t testing.TB, kind memory.Kind, gpus int) (*vgpu.Host, *vgpu.Host) {
	t.Helper()
	src, err := vgpu.NewHost(vgpu.HostConfig{Name: "src", GPUs: gpus, Memory: kind, Seed: 1, RAMBytes: 256 * GiB})
	must(t, err)
	dst, err := vgpu.NewHost(vgpu.HostConfig{Name: "dst", GPUs: gpus, Memory: kind, Seed: 2, RAMBytes: 256 * GiB, Start: time.Hour})
	must(t, err)
	return src, dst
}

// tinyModel keeps byte-exact tests fast.
var tinyModel = vgpu.Model{Name: "tiny", MACs: 50_000_000, Layers: 10, Parameters: 1_000_000, InputBytes: 64 << 10, ActivationBytes: 256 << 10}

// inferenceVM creates and starts a VM serving inference.
func inferenceVM(t testing.TB, h *vgpu.Host, id, profile string, ramBytes, footprint int64, model vgpu.Model, seed uint64) *vgpu.VM {
	t.Helper()
	w, err := vgpu.NewInference(vgpu.InferenceConfig{Model: model, RequestsPerSec: 100, FootprintBytes: footprint,
		RAMWorkingSetBytes: 16 * MiB, FramebufferDirtyBytesPerSec: 4 * MiB, Seed: seed})
	must(t, err)
	vm, err := h.CreateVM(vgpu.VMSpec{ID: id, RAMBytes: ramBytes, RAMFootprintBytes: ramBytes / 8, Profiles: []string{profile}, Workload: w})
	must(t, err)
	must(t, vm.Start())
	return vm
}
