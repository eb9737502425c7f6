package vgpu

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
	"pgregory.net/rapid"
)

// TestLifecycle walks every VM operation from every state and checks which
// are allowed, and that a refused one is a *TransitionError that changes
// nothing.
func TestLifecycle(t *testing.T) {
	type op struct {
		name string
		do   func(*VM) error
	}
	ops := []op{
		{"start", (*VM).Start},
		{"pause", (*VM).Pause},
		{"resume", (*VM).Resume},
		{"stop", (*VM).Stop},
		{"save", func(vm *VM) error { _, err := vm.SaveDeviceStates(); return err }},
		{"abort", (*VM).Abort},
		{"destroy", (*VM).Destroy},
	}
	// to[state][op] is the state after op, or 0 if op is refused.
	to := map[VMState]map[string]VMState{
		VMCreated:  {"start": VMRunning, "destroy": VMDestroyed},
		VMRunning:  {"pause": VMPaused, "stop": VMStopped, "destroy": VMDestroyed},
		VMPaused:   {"resume": VMRunning, "stop": VMStopped, "save": VMPaused, "destroy": VMDestroyed},
		VMStopped:  {"start": VMRunning, "save": VMStopped, "destroy": VMDestroyed},
		VMIncoming: {"abort": VMDestroyed, "destroy": VMDestroyed},
	}
	reach := func(t *testing.T, s VMState) *VM {
		h := newHost(t, HostConfig{})
		if s == VMIncoming {
			src := newHost(t, HostConfig{})
			vm := mustVM(t, src, VMSpec{ID: "vm", Profiles: []string{"P40-4Q"}})
			in, err := h.PrepareIncoming(vm.IncomingSpec())
			must(t, err)
			return in
		}
		vm := mustVM(t, h, VMSpec{ID: "vm", Profiles: []string{"P40-4Q"}})
		switch s {
		case VMRunning:
			must(t, vm.Start())
		case VMPaused:
			must(t, vm.Start())
			must(t, vm.Pause())
		case VMStopped:
			must(t, vm.Start())
			must(t, vm.Stop())
		}
		return vm
	}
	devState := map[VMState]DeviceLifecycle{VMCreated: DeviceCreated, VMRunning: DeviceRunning,
		VMPaused: DevicePaused, VMStopped: DeviceStopped, VMIncoming: DeviceCreated, VMDestroyed: DeviceDestroyed}
	for from, allowed := range to {
		for _, o := range ops {
			t.Run(from.String()+"/"+o.name, func(t *testing.T) {
				vm := reach(t, from)
				if vm.State() != from {
					t.Fatalf("reached %v, want %v", vm.State(), from)
				}
				err := o.do(vm)
				want, ok := allowed[o.name]
				if !ok {
					var te *TransitionError
					if !errors.As(err, &te) || !errors.Is(err, ErrIllegalTransition) || te.From != from.String() || te.Op != o.name || te.Device != -1 {
						t.Fatalf("%s from %v: %v, want a *TransitionError", o.name, from, err)
					}
					want = from
				} else if err != nil {
					t.Fatalf("%s from %v: %v", o.name, from, err)
				}
				if vm.State() != want {
					t.Errorf("%s from %v: now %v, want %v", o.name, from, vm.State(), want)
				}
				if d := vm.VGPUs()[0].State(); d != devState[want] {
					t.Errorf("vGPU is %v, want %v", d, devState[want])
				}
			})
		}
	}
	// A destroyed VM refuses everything.
	vm := reach(t, VMCreated)
	must(t, vm.Destroy())
	for _, o := range ops {
		if err := o.do(vm); !errors.Is(err, ErrIllegalTransition) {
			t.Errorf("%s on a destroyed VM: %v", o.name, err)
		}
	}
}

// TestPauseMatchesScheduler checks that the stun reaches the scheduler: a
// paused vGPU's tenant is paused and keeps its queue.
func TestPauseMatchesScheduler(t *testing.T) {
	h := newHost(t, HostConfig{})
	vm := mustVM(t, h, VMSpec{ID: "vm", Profiles: []string{"P40-4Q"}})
	must(t, vm.Start())
	v := vm.VGPUs()[0]
	must(t, vm.env.Submit(0, sched.Job{Work: 1e9, Tag: 7}))
	must(t, vm.Pause())
	info, err := v.GPU().Scheduler().Tenant(v.Tenant())
	must(t, err)
	if info.State != sched.Paused || info.Queued != 1 {
		t.Fatalf("tenant %v with %d queued", info.State, info.Queued)
	}
	advance(t, h, 5e9)
	info, _ = v.GPU().Scheduler().Tenant(v.Tenant())
	if info.Granted != 0 || info.Queued != 1 {
		t.Errorf("paused tenant ran %v", info.Granted)
	}
	if err := vm.env.Submit(0, sched.Job{Work: 1, Tag: 8}); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("submit to a paused vGPU: %v", err)
	}
}

// TestScrubOnDestroy: a secret written by one tenant is never readable by
// the next tenant of the same slot.
func TestScrubOnDestroy(t *testing.T) {
	h := newHost(t, HostConfig{Memory: memory.Sparse})
	secret := bytes.Repeat([]byte("secret!"), 100)
	a := mustVM(t, h, VMSpec{ID: "a", Profiles: []string{"P40-12Q"}})
	must(t, a.Start())
	va := a.VGPUs()[0]
	off := va.UsableFramebufferBytes() - int64(len(secret))
	if _, err := va.WriteAt(secret, off); err != nil {
		t.Fatal(err)
	}
	must(t, a.Destroy())
	if _, err := va.ReadAt(make([]byte, 1), 0); !errors.Is(err, memory.ErrUnmapped) {
		t.Errorf("reading a destroyed vGPU: %v", err)
	}
	b := mustVM(t, h, VMSpec{ID: "b", Profiles: []string{"P40-12Q"}})
	vb := b.VGPUs()[0]
	if vb.GPU() != va.GPU() || vb.Slot() != va.Slot() {
		t.Fatalf("b got slot %d, a had %d", vb.Slot(), va.Slot())
	}
	got := make([]byte, len(secret))
	if _, err := vb.ReadAt(got, off); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, make([]byte, len(secret))) {
		t.Fatal("the next tenant reads the previous tenant's data")
	}
	// The root holds nothing of it either.
	if _, err := vb.GPU().Framebuffer().ReadAt(got, int64(vb.Slot())*vb.Profile().FramebufferBytes+off); err != nil || !bytes.Equal(got, make([]byte, len(secret))) {
		t.Fatal("the scrubbed slot still holds the secret")
	}
}

// TestIsolationProperty: random accesses through each vGPU at random
// offsets and lengths either land wholly inside its window or fail and
// touch nothing; no other window changes; destroying a vGPU scrubs its
// slot before the next tenant maps it.
func TestIsolationProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h, err := NewHost(HostConfig{Memory: memory.Sparse, FramebufferPageSize: 1 << 20, RAMBytes: 64 * GiB})
		if err != nil {
			rt.Fatal(err)
		}
		profile := rapid.SampledFrom([]string{"P40-4Q", "P40-6Q", "P40-8Q", "P40-12Q"}).Draw(rt, "profile")
		n := 0
		newVM := func() {
			n++
			if _, err := h.CreateVM(VMSpec{ID: string(rune('a' + n)), RAMBytes: 64 << 20, Profiles: []string{profile}}); err != nil && !errors.Is(err, ErrNoCapacity) {
				rt.Fatal(err)
			}
		}
		newVM()
		newVM()
		rt.Repeat(map[string]func(*rapid.T){
			"write": func(rt *rapid.T) {
				vms := h.VMs()
				if len(vms) == 0 {
					rt.Skip("no VM")
				}
				v := rapid.SampledFrom(vms).Draw(rt, "vm").VGPUs()[0]
				size := v.Profile().FramebufferBytes
				off := rapid.Int64Range(-size/4, size+size/4).Draw(rt, "off")
				ln := rapid.IntRange(0, 3<<20).Draw(rt, "len")
				before := digests(rt, h, v)
				buf := bytes.Repeat([]byte{byte(ln) | 1}, ln)
				_, err := v.WriteAt(buf, off)
				inside := off >= 0 && off+int64(ln) <= size
				if inside != (err == nil) {
					rt.Fatalf("write [%d, +%d) of a %d-byte window: %v", off, ln, size, err)
				}
				if !inside && !errors.Is(err, memory.ErrOutOfRange) {
					rt.Fatalf("out-of-range write: %v", err)
				}
				after := digests(rt, h, v)
				for w, d := range before {
					if after[w] != d {
						rt.Fatalf("writing vGPU slot %d changed another window", v.Slot())
					}
				}
				if inside && ln > 0 {
					got := make([]byte, ln)
					if _, err := v.ReadAt(got, off); err != nil || !bytes.Equal(got, buf) {
						rt.Fatalf("read back: %v", err)
					}
				}
			},
			"read": func(rt *rapid.T) {
				vms := h.VMs()
				if len(vms) == 0 {
					rt.Skip("no VM")
				}
				v := rapid.SampledFrom(vms).Draw(rt, "vm").VGPUs()[0]
				size := v.Profile().FramebufferBytes
				off := rapid.Int64Range(-size/4, size+size/4).Draw(rt, "off")
				ln := rapid.IntRange(0, 1<<20).Draw(rt, "len")
				_, err := v.ReadAt(make([]byte, ln), off)
				if inside := off >= 0 && off+int64(ln) <= size; inside != (err == nil) {
					rt.Fatalf("read [%d, +%d) of %d: %v", off, ln, size, err)
				}
			},
			"replace": func(rt *rapid.T) {
				vms := h.VMs()
				if len(vms) == 0 {
					rt.Skip("no VM")
				}
				vm := rapid.SampledFrom(vms).Draw(rt, "vm")
				v := vm.VGPUs()[0]
				g, slot := v.GPU(), v.Slot()
				if err := vm.Destroy(); err != nil {
					rt.Fatal(err)
				}
				n++
				nvm, err := h.CreateVM(VMSpec{ID: string(rune('a' + n)), RAMBytes: 64 << 20, Profiles: []string{profile}})
				if err != nil {
					rt.Fatal(err)
				}
				nv := nvm.VGPUs()[0]
				if nv.GPU() != g || nv.Slot() != slot {
					rt.Fatalf("new vGPU in slot %d, freed %d", nv.Slot(), slot)
				}
				if resident := nv.Framebuffer(); nonZero(rt, resident) {
					rt.Fatal("a new tenant sees data in its window")
				}
			},
			"create": func(rt *rapid.T) { newVM() },
		})
	})
}

// digests fingerprints every window on v's GPU but v's by its pages'
// generations and classes: every write to a page bumps its generation, so
// equal fingerprints mean no page was written.
func digests(t interface{ Fatal(...any) }, h *Host, v *VGPU) map[*memory.Region]uint64 {
	out := map[*memory.Region]uint64{}
	for _, w := range v.GPU().Framebuffer().Windows() {
		if w == v.Framebuffer() {
			continue
		}
		var d uint64
		for p := range w.Pages() {
			st, err := w.PageState(p)
			if err != nil {
				t.Fatal(err)
			}
			d = mix64(d ^ uint64(st.Gen)<<8 ^ uint64(st.Class))
		}
		out[w] = d
	}
	return out
}

// nonZero reports whether any page of r is not all zero.
func nonZero(t interface{ Fatal(...any) }, r *memory.Region) bool {
	for p := range r.Pages() {
		z, err := r.IsZeroPage(p)
		if err != nil {
			t.Fatal(err)
		}
		if !z {
			return true
		}
	}
	return false
}

// FuzzWindowIsolation throws random offsets and lengths at one vGPU of
// three and checks that every other window reads as before, byte for byte.
// A window's fingerprint hashes every byte a guest of it would read, so a
// stray write is caught whether or not it went through the page metadata
// (a page's class and generation). The windows are the P40's smallest, 1
// GiB, so that hashing the two neighbours takes a fraction of a second.
func FuzzWindowIsolation(f *testing.F) {
	f.Add(int64(0), uint32(100), uint8(0), true)
	f.Add(int64(1<<30-20), uint32(20), uint8(1), true) // up to the end
	f.Add(int64(1<<30-10), uint32(20), uint8(1), true) // across the end
	f.Add(int64(-1), uint32(2), uint8(2), false)
	f.Add(int64(1<<62), uint32(1<<20), uint8(0), true)
	h, err := NewHost(HostConfig{Memory: memory.Sparse, FramebufferPageSize: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	var vs []*VGPU
	fingerprint := map[*VGPU]uint64{} // each window's bytes, as last hashed
	for _, id := range []string{"a", "b", "c"} {
		vm, err := h.CreateVM(VMSpec{ID: id, RAMBytes: 64 << 20, Profiles: []string{"P40-1Q"}})
		if err != nil {
			f.Fatal(err)
		}
		v := vm.VGPUs()[0]
		// Bytes at both ends, where a write off by a little would land.
		for _, off := range []int64{0, v.Profile().FramebufferBytes - 1} {
			if _, err := v.WriteAt([]byte(id), off); err != nil {
				f.Fatal(err)
			}
		}
		vs = append(vs, v)
		fingerprint[v] = windowBytes(f, v)
	}
	f.Fuzz(func(t *testing.T, off int64, n uint32, which uint8, write bool) {
		v := vs[int(which)%len(vs)]
		buf := make([]byte, n%(4<<20))
		for i := range buf {
			buf[i] = 0xa5
		}
		var err error
		if write {
			_, err = v.WriteAt(buf, off)
		} else {
			_, err = v.ReadAt(buf, off)
		}
		size := v.Profile().FramebufferBytes
		inside := off >= 0 && off <= size-int64(len(buf))
		if inside != (err == nil) {
			t.Fatalf("access [%d, +%d) of %d: %v", off, len(buf), size, err)
		}
		for i, w := range vs {
			if w != v && windowBytes(t, w) != fingerprint[w] {
				t.Fatalf("accessing window %d changed the bytes of window %d", int(which)%len(vs), i)
			}
		}
		if write && inside && len(buf) > 0 {
			fingerprint[v] = windowBytes(t, v) // its own bytes changed, as they should
		}
	})
}

// windowBytes hashes every byte of v's framebuffer window as a read
// returns it.
func windowBytes(t interface{ Fatal(...any) }, v *VGPU) uint64 {
	w := v.Framebuffer()
	buf := make([]byte, w.PageSize())
	d := xxhash.New()
	for p := range w.Pages() {
		if _, err := w.ReadPage(p, buf); err != nil {
			t.Fatal(err)
		}
		_, _ = d.Write(buf)
	}
	return d.Sum64()
}
