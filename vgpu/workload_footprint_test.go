package vgpu

import (
	"fmt"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// TestFootprintFillsUsableFramebuffer: a workload sized to a profile's whole
// usable framebuffer starts on it, whatever the framebuffer page size, and
// holds exactly that much: its spans, each rounded up to whole pages, still
// fit.
func TestFootprintFillsUsableFramebuffer(t *testing.T) {
	workloads := map[string]func(footprint int64) (Workload, error){
		"cad": func(f int64) (Workload, error) {
			return NewCAD(CADConfig{FootprintBytes: f, RAMWorkingSetBytes: 4 * MiB})
		},
		"inference": func(f int64) (Workload, error) {
			return NewInference(InferenceConfig{Model: MobileNet(), ActivationsBytes: 3*MiB + 5, FootprintBytes: f, RAMWorkingSetBytes: 4 * MiB})
		},
		"training": func(f int64) (Workload, error) {
			return NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 8, ActivationsBytes: 3*MiB + 5, FootprintBytes: f})
		},
	}
	for _, page := range []int{4096, DefaultFramebufferPageSize} {
		h := newHost(t, HostConfig{Memory: memory.Synthetic, FramebufferPageSize: page, GPUs: 3, RAMBytes: 1 << 40})
		for _, name := range []string{"cad", "inference", "training"} {
			for _, prof := range []string{"P40-1Q", "P40-3Q"} {
				t.Run(fmt.Sprintf("page=%d/workload=%s/profile=%s", page, name, prof), func(t *testing.T) {
					p, err := ParseProfile(prof)
					must(t, err)
					w, err := workloads[name](p.UsableFramebufferBytes())
					must(t, err)
					// Training keeps its optimizer state, twice the
					// weights, in guest memory.
					ram := 64*MiB + 3*p.UsableFramebufferBytes()/MiB*MiB
					vm := mustVM(t, h, VMSpec{ID: "fill", RAMBytes: ram, Profiles: []string{prof}, Workload: w})
					defer func() { must(t, vm.Destroy()) }()
					must(t, vm.Start())
				})
			}
		}
	}
}
