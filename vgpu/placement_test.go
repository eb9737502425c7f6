package vgpu

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func gpuIndex(vm *VM) int { return vm.VGPUs()[0].GPU().Index() }

func TestPlacementOrder(t *testing.T) {
	for _, tc := range []struct {
		placement Placement
		want      []int
	}{
		{BreadthFirst, []int{0, 1, 2, 0, 1, 2, 0, 1, 2}},
		{DepthFirst, []int{0, 0, 0, 1, 1, 1, 2, 2, 2}},
	} {
		t.Run(tc.placement.String(), func(t *testing.T) {
			h := newHost(t, HostConfig{GPUs: 3, Placement: tc.placement})
			var got []int
			for i := range tc.want {
				got = append(got, gpuIndex(mustVM(t, h, VMSpec{ID: fmt.Sprint(i), Profiles: []string{"P40-8Q"}})))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("GPUs %v, want %v", got, tc.want)
			}
			_, err := h.CreateVM(VMSpec{ID: "x", RAMBytes: GiB, Profiles: []string{"P40-8Q"}})
			var pe *PlacementError
			if !errors.As(err, &pe) || !errors.Is(err, ErrNoCapacity) || len(pe.GPUs) != 3 {
				t.Fatalf("tenth 8Q: %v", err)
			}
			for _, r := range pe.GPUs {
				if r.Reason != RefusedFull || r.Detail != "3 of 3" {
					t.Errorf("refusal %+v", r)
				}
			}
		})
	}
}

func TestPlacementOneTypePerGPU(t *testing.T) {
	h := newHost(t, HostConfig{GPUs: 2, Placement: DepthFirst})
	a := mustVM(t, h, VMSpec{ID: "a", Profiles: []string{"P40-8Q"}})
	b := mustVM(t, h, VMSpec{ID: "b", Profiles: []string{"P40-4Q"}})
	if gpuIndex(a) != 0 || gpuIndex(b) != 1 {
		t.Fatalf("8Q on %d, 4Q on %d", gpuIndex(a), gpuIndex(b))
	}
	_, err := h.CreateVM(VMSpec{ID: "c", RAMBytes: GiB, Profiles: []string{"P40-1B"}})
	var pe *PlacementError
	if !errors.As(err, &pe) || pe.GPUs[0].Reason != RefusedOtherType || pe.GPUs[1].Reason != RefusedOtherType {
		t.Fatalf("1B: %v", err)
	}
	if want := "GPU 0: holds another vGPU type (1 x P40-8Q)"; !contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
	// The type is free again once its last vGPU is gone.
	must(t, a.Destroy())
	if _, ok := h.GPU(0).Type(); ok {
		t.Error("GPU 0 keeps a type with no vGPU")
	}
	c := mustVM(t, h, VMSpec{ID: "c", Profiles: []string{"P40-1B"}})
	if gpuIndex(c) != 0 {
		t.Errorf("1B on GPU %d", gpuIndex(c))
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestPlacementECC(t *testing.T) {
	h := newHost(t, HostConfig{GPUs: 2, ECC: true})
	_, err := h.CreateVM(VMSpec{ID: "a", RAMBytes: GiB, Profiles: []string{"P40-2Q"}})
	if !errors.Is(err, ErrECCEnabled) || !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("ECC on: %v", err)
	}
	must(t, h.GPU(1).SetECC(false))
	vm := mustVM(t, h, VMSpec{ID: "a", Profiles: []string{"P40-2Q"}})
	if gpuIndex(vm) != 1 {
		t.Errorf("placed on GPU %d", gpuIndex(vm))
	}
	if err := h.GPU(1).SetECC(true); !errors.Is(err, ErrGPUBusy) {
		t.Errorf("SetECC on a busy GPU: %v", err)
	}
	// A GPU full with ECC off and one with ECC on: the error is not only
	// about ECC.
	h2 := newHost(t, HostConfig{GPUs: 2})
	mustVM(t, h2, VMSpec{ID: "a", Profiles: []string{"P40-24Q"}})
	must(t, h2.GPU(1).SetECC(true))
	_, err = h2.CreateVM(VMSpec{ID: "b", RAMBytes: GiB, Profiles: []string{"P40-24Q"}})
	if !errors.Is(err, ErrNoCapacity) || errors.Is(err, ErrECCEnabled) {
		t.Errorf("full + ECC: %v", err)
	}
}

func TestPlacementRAMAndValidation(t *testing.T) {
	h := newHost(t, HostConfig{GPUs: 1, RAMBytes: 16 * GiB})
	mustVM(t, h, VMSpec{ID: "a", RAMBytes: 12 * GiB, Profiles: []string{"P40-1Q"}})
	_, err := h.CreateVM(VMSpec{ID: "b", RAMBytes: 8 * GiB, Profiles: []string{"P40-1Q"}})
	var ce *CapacityError
	if !errors.As(err, &ce) || !errors.Is(err, ErrInsufficientRAM) || ce.FreeBytes != 4*GiB {
		t.Fatalf("RAM: %v", err)
	}
	if h.GPU(0).VGPUCount() != 1 || h.FreeRAMBytes() != 4*GiB {
		t.Errorf("a failed create left %d vGPUs, %d free bytes", h.GPU(0).VGPUCount(), h.FreeRAMBytes())
	}
	for _, tc := range []struct {
		spec VMSpec
		want error
	}{
		{VMSpec{ID: "a", RAMBytes: GiB, Profiles: []string{"P40-1Q"}}, ErrDuplicateVM},
		{VMSpec{ID: "", RAMBytes: GiB, Profiles: []string{"P40-1Q"}}, ErrConfig},
		{VMSpec{ID: "c", RAMBytes: 1000, Profiles: []string{"P40-1Q"}}, ErrConfig},
		{VMSpec{ID: "c", RAMBytes: GiB}, ErrConfig},
		{VMSpec{ID: "c", RAMBytes: GiB, Profiles: []string{"P40-1Q"}, Passthrough: true}, ErrConfig},
		{VMSpec{ID: "c", RAMBytes: GiB, Profiles: []string{"P40-9Q"}}, ErrUnknownProfile},
		{VMSpec{ID: "c", RAMBytes: GiB, Profiles: []string{"P40-1Q", "P40-1Q"}}, ErrMultiVGPU},
		{VMSpec{ID: "c", RAMBytes: GiB, Profiles: []string{"P40-24Q", "P40-24C"}}, ErrMultiVGPU},
		{VMSpec{ID: "c", RAMBytes: GiB, RAMFootprintBytes: 2 * GiB, Profiles: []string{"P40-1Q"}}, ErrConfig},
	} {
		if _, err := h.CreateVM(tc.spec); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.spec, err, tc.want)
		}
	}
}

func TestPlacementMultiVGPU(t *testing.T) {
	h := newHost(t, HostConfig{GPUs: 2})
	vm := mustVM(t, h, VMSpec{ID: "a", Profiles: []string{"P40-24Q", "P40-24Q"}})
	if g := vm.VGPUs(); g[0].GPU() == g[1].GPU() || len(vm.Framebuffers()) != 2 {
		t.Fatal("two 24Q vGPUs share a GPU")
	}
	h1 := newHost(t, HostConfig{GPUs: 1})
	_, err := h1.CreateVM(VMSpec{ID: "b", RAMBytes: GiB, Profiles: []string{"P40-24C", "P40-24C"}})
	var pe *PlacementError
	if !errors.As(err, &pe) || h1.GPU(0).VGPUCount() != 0 {
		t.Fatalf("2 x 24C on one GPU: %v", err)
	}
}

func TestPlacementModelAndPassthrough(t *testing.T) {
	t4 := newHost(t, HostConfig{GPU: T4()})
	_, err := t4.CreateVM(VMSpec{ID: "a", RAMBytes: GiB, Profiles: []string{"P40-1Q"}})
	var pe *PlacementError
	if !errors.As(err, &pe) || pe.GPUs[0].Reason != RefusedModel {
		t.Fatalf("P40 profile on a T4: %v", err)
	}
	h := newHost(t, HostConfig{GPUs: 2})
	pt := mustVM(t, h, VMSpec{ID: "pt", Passthrough: true})
	if !pt.Passthrough() || h.GPU(0).PassthroughVM() != pt || pt.Framebuffers()[0].Size() != P40().FramebufferBytes {
		t.Fatal("passthrough VM does not own GPU 0")
	}
	vm := mustVM(t, h, VMSpec{ID: "v", Profiles: []string{"P40-1Q"}})
	if gpuIndex(vm) != 1 {
		t.Errorf("vGPU placed on the passthrough GPU")
	}
	if _, err := h.CreateVM(VMSpec{ID: "pt2", RAMBytes: GiB, Passthrough: true}); !errors.Is(err, ErrNoCapacity) {
		t.Errorf("second passthrough: %v", err)
	}
	err = pt.CheckMigratable()
	var nm *NotMigratableError
	if !errors.As(err, &nm) || !errors.Is(err, ErrPassthrough) {
		t.Errorf("CheckMigratable: %v", err)
	}
	other := newHost(t, HostConfig{})
	if _, err := other.PrepareIncoming(pt.IncomingSpec()); !errors.Is(err, ErrPassthrough) {
		t.Errorf("PrepareIncoming of a passthrough VM: %v", err)
	}
	must(t, pt.Start())
	must(t, pt.Pause())
	if _, err := pt.SaveDeviceStates(); !errors.Is(err, ErrPassthrough) {
		t.Errorf("saving a passthrough GPU: %v", err)
	}
	must(t, pt.Destroy())
	if h.GPU(0).PassthroughVM() != nil || len(h.GPU(0).Framebuffer().Windows()) != 0 {
		t.Error("destroyed passthrough VM still holds GPU 0")
	}
}

// TestPlacementProperties drives a host with random creations and
// destructions and checks, after each step, that placement chose the GPU
// a naive reference chooses, never mixed types, never exceeded capacity,
// and laid out aligned windows that never overlap.
func TestPlacementProperties(t *testing.T) {
	profiles := []string{"P40-1Q", "P40-2B", "P40-3A", "P40-4C", "P40-8Q", "P40-12Q", "P40-24Q", "P40-2Q"}
	rapid.Check(t, func(rt *rapid.T) {
		nGPU := rapid.IntRange(1, 4).Draw(rt, "gpus")
		h, err := NewHost(HostConfig{GPUs: nGPU, RAMBytes: 512 * MiB, FramebufferPageSize: 2 << 20, RAMPageSize: 1 << 20, Placement: rapid.SampledFrom([]Placement{BreadthFirst, DepthFirst}).Draw(rt, "placement")})
		if err != nil {
			rt.Fatal(err)
		}
		n := 0
		rt.Repeat(map[string]func(*rapid.T){
			"create": func(rt *rapid.T) {
				p, _ := ParseProfile(rapid.SampledFrom(profiles).Draw(rt, "profile"))
				ram := int64(rapid.IntRange(1, 8).Draw(rt, "ram")) * 32 * MiB
				want := referenceChoice(h, p)
				if ram > h.FreeRAMBytes() && want >= 0 {
					want = -2
				}
				n++
				vm, err := h.CreateVM(VMSpec{ID: fmt.Sprint(n), RAMBytes: ram, Profiles: []string{p.Name}})
				switch {
				case want == -2:
					if !errors.Is(err, ErrInsufficientRAM) {
						rt.Fatalf("want a RAM error, got %v", err)
					}
				case want < 0:
					if !errors.Is(err, ErrNoCapacity) {
						rt.Fatalf("want a placement error, got %v", err)
					}
				case err != nil:
					rt.Fatalf("reference places %s on GPU %d: %v", p.Name, want, err)
				case gpuIndex(vm) != want:
					rt.Fatalf("%v placed %s on GPU %d, reference %d", h.Placement(), p.Name, gpuIndex(vm), want)
				}
			},
			"destroy": func(rt *rapid.T) {
				vms := h.VMs()
				if len(vms) == 0 {
					rt.Skip("no VM")
				}
				vm := rapid.SampledFrom(vms).Draw(rt, "vm")
				if rapid.Bool().Draw(rt, "started") {
					_ = vm.Start()
				}
				if err := vm.Destroy(); err != nil {
					rt.Fatal(err)
				}
			},
			"placement": func(rt *rapid.T) {
				_ = h.SetPlacement(rapid.SampledFrom([]Placement{BreadthFirst, DepthFirst}).Draw(rt, "placement"))
			},
			"": func(rt *rapid.T) { checkPlacementInvariants(rt, h) },
		})
	})
}

// referenceChoice is the GPU a naive placement picks for p, or -1.
func referenceChoice(h *Host, p Profile) int {
	best := -1
	for i, g := range h.GPUs() {
		vs := g.VGPUs()
		if g.PassthroughVM() != nil || g.ECCEnabled() || len(vs) >= p.MaxInstances ||
			len(vs) > 0 && vs[0].Profile().Name != p.Name {
			continue
		}
		if best < 0 ||
			h.Placement() == BreadthFirst && len(vs) < h.GPU(best).VGPUCount() ||
			h.Placement() == DepthFirst && len(vs) > h.GPU(best).VGPUCount() {
			best = i
		}
	}
	return best
}

func checkPlacementInvariants(t interface{ Fatalf(string, ...any) }, h *Host) {
	var ram int64
	for _, vm := range h.VMs() {
		ram += vm.RAM().Size()
	}
	if h.FreeRAMBytes() != h.RAMBytes()-ram {
		t.Fatalf("free RAM %d, VMs hold %d of %d", h.FreeRAMBytes(), ram, h.RAMBytes())
	}
	for _, g := range h.GPUs() {
		vs := g.VGPUs()
		typ, ok := g.Type()
		if ok != (len(vs) > 0) {
			t.Fatalf("GPU %d: type %v with %d vGPUs", g.Index(), typ.Name, len(vs))
		}
		if len(vs) > typ.MaxInstances && ok {
			t.Fatalf("GPU %d: %d vGPUs of %s", g.Index(), len(vs), typ.Name)
		}
		pages := int(typ.FramebufferBytes / int64(g.Framebuffer().PageSize()))
		slots := map[int]bool{}
		for _, v := range vs {
			if v.Profile().Name != typ.Name {
				t.Fatalf("GPU %d mixes %s and %s", g.Index(), typ.Name, v.Profile().Name)
			}
			if slots[v.Slot()] || v.Framebuffer().FirstPage() != v.Slot()*pages || v.Framebuffer().Pages() != pages {
				t.Fatalf("GPU %d: vGPU in slot %d at page %d of %d pages", g.Index(), v.Slot(), v.Framebuffer().FirstPage(), v.Framebuffer().Pages())
			}
			slots[v.Slot()] = true
		}
		ws := g.Framebuffer().Windows()
		if len(ws) != len(vs) {
			t.Fatalf("GPU %d: %d windows for %d vGPUs", g.Index(), len(ws), len(vs))
		}
		for i := 1; i < len(ws); i++ {
			if ws[i-1].FirstPage()+ws[i-1].Pages() > ws[i].FirstPage() {
				t.Fatalf("GPU %d: windows overlap", g.Index())
			}
		}
	}
}
