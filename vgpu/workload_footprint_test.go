package vgpu

import (
	"fmt"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// TestFootprintFillsUsableFramebuffer: a workload sized to a profile's whole
// usable framebuffer starts on it, whatever the framebuffer page size, and
// holds exactly what it declares: its spans, each rounded up to whole pages,
// cover the first pages of the window up to the declared footprint rounded
// up to a page, nothing beyond, and none of them starts past the usable
// framebuffer.
func TestFootprintFillsUsableFramebuffer(t *testing.T) {
	// Each builds the workload for a footprint and returns the footprint
	// its configuration declares.
	workloads := map[string]func(footprint int64) (Workload, int64, error){
		"cad": func(f int64) (Workload, int64, error) {
			w, err := NewCAD(CADConfig{FootprintBytes: f, RAMWorkingSetBytes: 4 * MiB})
			if err != nil {
				return nil, 0, err
			}
			return w, w.Config().FootprintBytes, nil
		},
		"inference": func(f int64) (Workload, int64, error) {
			w, err := NewInference(InferenceConfig{Model: MobileNet(), ActivationsBytes: 3*MiB + 5, FootprintBytes: f, RAMWorkingSetBytes: 4 * MiB})
			if err != nil {
				return nil, 0, err
			}
			return w, w.Config().FootprintBytes, nil
		},
		"training": func(f int64) (Workload, int64, error) {
			w, err := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 8, ActivationsBytes: 3*MiB + 5, FootprintBytes: f})
			if err != nil {
				return nil, 0, err
			}
			return w, w.Config().FootprintBytes, nil
		},
	}
	for _, page := range []int{4096, DefaultFramebufferPageSize} {
		h := newHost(t, HostConfig{Memory: memory.Synthetic, FramebufferPageSize: page, GPUs: 3, RAMBytes: 1 << 40})
		for _, name := range []string{"cad", "inference", "training"} {
			for _, prof := range []string{"P40-1Q", "P40-3Q"} {
				t.Run(fmt.Sprintf("page=%d/workload=%s/profile=%s", page, name, prof), func(t *testing.T) {
					p, err := ParseProfile(prof)
					must(t, err)
					usable := p.UsableFramebufferBytes()
					w, declared, err := workloads[name](usable)
					must(t, err)
					if declared != usable {
						t.Fatalf("declares a footprint of %d bytes, was given %d", declared, usable)
					}
					// Training keeps its optimizer state, twice the
					// weights, in guest memory.
					ram := 64*MiB + 3*usable/MiB*MiB
					vm := mustVM(t, h, VMSpec{ID: "fill", RAMBytes: ram, Profiles: []string{prof}, Workload: w})
					defer func() { must(t, vm.Destroy()) }()
					must(t, vm.Start())

					// Start writes each page of the footprint once; no
					// time has passed for the workload to write more.
					// Past the usable framebuffer lies the vGPU manager's
					// reservation, where the device itself keeps four
					// pages (page tables and GPFIFO rings).
					fb := vm.VGPUs()[0].Framebuffer()
					want := int((declared + int64(page) - 1) / int64(page))
					usablePages := int((usable + int64(page) - 1) / int64(page))
					used, last, reserved := 0, -1, 0
					for pg := range fb.Pages() {
						st, err := fb.PageState(pg)
						must(t, err)
						switch {
						case st.Gen == 0:
						case pg < usablePages:
							used, last = used+1, pg
						case pg < usablePages+4:
							reserved++
						default:
							t.Fatalf("page %d written, past the usable framebuffer and the device's own pages", pg)
						}
					}
					if used != want || last != want-1 {
						t.Fatalf("%d pages used, the last %d; the footprint of %d bytes is pages [0, %d)", used, last, declared, want)
					}
					if int64(last)*int64(page) >= usable {
						t.Fatalf("page %d starts past the usable framebuffer of %d bytes", last, usable)
					}
					if reserved != 4 {
						t.Fatalf("%d of the device's 4 pages written", reserved)
					}
				})
			}
		}
	}
}
