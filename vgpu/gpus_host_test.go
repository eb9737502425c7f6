package vgpu

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// gpuTestHost is a one-GPU host of spec small enough to build for every
// type: synthetic memory, 2 MiB framebuffer pages, small guests.
func gpuTestHost(t *testing.T, spec GPUSpec, ecc bool) *Host {
	t.Helper()
	return newHost(t, HostConfig{Name: spec.Model, GPU: spec, ECC: ecc, RAMBytes: 1 * GiB,
		Memory: memory.Synthetic, FramebufferPageSize: 2 << 20, RAMPageSize: 1 << 20})
}

// refusedWith reports whether err is a placement error whose only GPU
// refused with r.
func refusedWith(err error, r Refusal) bool {
	var pe *PlacementError
	return errors.As(err, &pe) && len(pe.GPUs) == 1 && pe.GPUs[0].Reason == r
}

// TestPlaceEveryType: for every GPU model and every one of its types, a
// GPU takes exactly MaxInstances vGPUs of the type, each on its own aligned
// window with the type's default time slice, refuses one more, and refuses
// a second type while it holds the first (the homogeneous rule).
func TestPlaceEveryType(t *testing.T) {
	for _, spec := range Specs() {
		t.Run(spec.Model, func(t *testing.T) {
			h := gpuTestHost(t, spec, false)
			types := Profiles(spec.Model)
			if len(types) == 0 {
				t.Fatal("no types")
			}
			for i, p := range types {
				other := types[(i+1)%len(types)]
				var vms []*VM
				for n := range p.MaxInstances {
					vm := mustVM(t, h, VMSpec{ID: fmt.Sprintf("%s-%d", p.Name, n), RAMBytes: 4 * MiB, Profiles: []string{p.Name}})
					vms = append(vms, vm)
					v := vm.VGPUs()[0]
					fb := v.Framebuffer()
					if v.Profile().Name != p.Name || fb.Size() != p.FramebufferBytes ||
						int64(fb.FirstPage())*int64(fb.PageSize())%p.FramebufferBytes != 0 {
						t.Fatalf("%s: vGPU %s of %d bytes at page %d", p.Name, v.Profile().Name, fb.Size(), fb.FirstPage())
					}
					info, err := v.GPU().Scheduler().Tenant(v.Tenant())
					must(t, err)
					if info.Slice != p.DefaultTimeSlice() {
						t.Fatalf("%s: tenant slice %v, want %v", p.Name, info.Slice, p.DefaultTimeSlice())
					}
				}
				if got := h.GPU(0).VGPUCount(); got != p.MaxInstances {
					t.Fatalf("%s: %d vGPUs on the GPU, want %d", p.Name, got, p.MaxInstances)
				}
				_, err := h.CreateVM(VMSpec{ID: "one-more", RAMBytes: 4 * MiB, Profiles: []string{p.Name}})
				if !errors.Is(err, ErrNoCapacity) || !refusedWith(err, RefusedFull) {
					t.Fatalf("%s: vGPU %d: %v, want full", p.Name, p.MaxInstances+1, err)
				}
				if other.Name != p.Name {
					// Free a slot where one vGPU stays, so that only the
					// type stands in the way.
					if len(vms) > 1 {
						must(t, vms[0].Destroy())
						vms = vms[1:]
					}
					_, err = h.CreateVM(VMSpec{ID: "other", RAMBytes: 4 * MiB, Profiles: []string{other.Name}})
					if !errors.Is(err, ErrNoCapacity) || !refusedWith(err, RefusedOtherType) {
						t.Fatalf("%s beside %s: %v, want another type refused", other.Name, p.Name, err)
					}
				}
				for _, vm := range vms {
					must(t, vm.Destroy())
				}
				if _, held := h.GPU(0).Type(); held {
					t.Fatalf("%s: the GPU keeps a type with no vGPU", p.Name)
				}
			}
		})
	}
}

// TestECCWithVGPUPerModel: the P40 follows vGPU release 8.0, where no vGPU
// starts with ECC on; the later models create vGPUs of every series with
// ECC on, and on GDDR (the T4) ECC takes profile/16 more of each vGPU's
// framebuffer, on HBM2 (V100, A100) nothing.
func TestECCWithVGPUPerModel(t *testing.T) {
	for _, spec := range Specs() {
		t.Run(spec.Model, func(t *testing.T) {
			h := gpuTestHost(t, spec, true)
			for _, p := range Profiles(spec.Model) {
				vm, err := h.CreateVM(VMSpec{ID: p.Name, RAMBytes: 4 * MiB, Profiles: []string{p.Name}})
				if !spec.ECCWithVGPU {
					if !errors.Is(err, ErrECCEnabled) {
						t.Fatalf("%s with ECC on: %v, want ErrECCEnabled", p.Name, err)
					}
					continue
				}
				must(t, err)
				v := vm.VGPUs()[0]
				want := p.UsableFramebufferBytes()
				if !spec.HBM2 {
					want -= (p.FramebufferBytes/16 + reservationAlign - 1) / reservationAlign * reservationAlign
				}
				if got := v.UsableFramebufferBytes(); got != want || got != p.FramebufferBytes-p.ReservedFramebufferBytes(true) {
					t.Errorf("%s with ECC on: %d usable bytes, want %d", p.Name, got, want)
				}
				must(t, vm.Destroy())
			}
		})
	}
}

// TestLargestTypeRuns: on every model, a VM with the largest Q- and the
// largest C-series type runs an inference service: simulated time passes
// and the GPU's scheduler grants its vGPU GPU time.
func TestLargestTypeRuns(t *testing.T) {
	for _, spec := range Specs() {
		for _, series := range []Series{SeriesQ, SeriesC} {
			var p Profile
			for _, q := range Profiles(spec.Model) {
				if q.Series == series && q.FramebufferBytes > p.FramebufferBytes {
					p = q
				}
			}
			if p.Name == "" {
				if spec.Model != "A100" || series != SeriesQ {
					t.Errorf("%s has no %v type", spec.Model, series)
				}
				continue
			}
			t.Run(p.Name, func(t *testing.T) {
				h := gpuTestHost(t, spec, false)
				w, err := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 50, Seed: 7})
				must(t, err)
				vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 512 * MiB, Profiles: []string{p.Name}, Workload: w})
				must(t, vm.Start())
				advance(t, h, 2*time.Second)
				v := vm.VGPUs()[0]
				info, err := v.GPU().Scheduler().Tenant(v.Tenant())
				must(t, err)
				if h.Now() != 2*time.Second || info.Granted <= 0 || vm.GPUTime() <= 0 || info.Completed == 0 {
					t.Errorf("at %v: granted %v, VM GPU time %v, %d jobs done", h.Now(), info.Granted, vm.GPUTime(), info.Completed)
				}
			})
		}
	}
}
