package migrate

import (
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// TestFidelitiesAgree: a VM with 1 GiB of used framebuffer (and a guest OS
// footprint of realistic content in RAM) migrated in Bytes and in Model
// fidelity gives the same stun and the same bytes on the wire within 2 %,
// in both modes.
func TestFidelitiesAgree(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("encodes 1.5 GiB for real")
	}
	for _, mode := range []Mode{PreCopy, Legacy} {
		t.Run(mode.String(), func(t *testing.T) {
			var reps [2]*Report
			for i, fid := range []Fidelity{Bytes, Model} {
				src, dst := hostPair(t, memory.Synthetic, 1)
				vm := calibrationVMSized(t, src, 2*GiB, 128*MiB, 1*GiB)
				start := time.Now()
				rep, err := Migrate(vm, dst, Config{Policy: Policy{Mode: mode}, Fidelity: fid})
				must(t, err)
				reps[i] = rep
				t.Logf("%v: stun %v, wire %d bytes, ratio %.3f (wall %v)", fid, rep.Stun, rep.WireBytes, rep.CompressionRatio, time.Since(start))
			}
			b, m := reps[0], reps[1]
			if d := rel(float64(m.Stun), float64(b.Stun)); d > 0.02 {
				t.Errorf("stun: model %v, bytes %v (%.2f %% apart)", m.Stun, b.Stun, 100*d)
			}
			if d := rel(float64(m.WireBytes), float64(b.WireBytes)); d > 0.02 {
				t.Errorf("wire: model %d, bytes %d (%.2f %% apart)", m.WireBytes, b.WireBytes, 100*d)
			}
		})
	}
}

func rel(a, b float64) float64 {
	if b == 0 {
		return a
	}
	d := (a - b) / b
	if d < 0 {
		return -d
	}
	return d
}

func calibrationVMSized(t testing.TB, h *vgpu.Host, ramBytes, ramFootprint, usedFB int64) *vgpu.VM {
	t.Helper()
	w, err := vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.MobileNet(), RequestsPerSec: 100, FootprintBytes: usedFB, Seed: 7})
	must(t, err)
	vm, err := h.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: ramBytes, RAMFootprintBytes: ramFootprint, Profiles: []string{"P40-2Q"}, Workload: w})
	must(t, err)
	must(t, vm.Start())
	must(t, h.Advance(time.Second))
	return vm
}
