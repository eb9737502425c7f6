package fuzz_test

import (
	"fmt"

	"github.com/vgpusim/vgpusim/vgpu"
)

// The VM operations of FuzzHostOps: create, destroy, write, power.

func (w *hostopsWorld) create(o hostopsOp) error {
	id := w.freeID(o)
	if id == "" {
		w.logf("create: every ID in use")
		return nil
	}
	var load vgpu.Workload
	if o.E&1 != 0 {
		load = newHostopsLoad(w.setup.Chunk)
	}
	profiles := make([]string, o.vgpus())
	for i := range profiles {
		profiles[i] = o.profile()
	}
	h := w.hosts[int(o.B)%len(w.hosts)]
	ram := o.ramBytes()
	vm, err := h.CreateVM(vgpu.VMSpec{ID: id, RAMBytes: ram, RAMFootprintBytes: hostopsFootprint,
		Profiles: profiles, Workload: load})
	if err != nil {
		return w.vgpuOutcome("create "+id, err)
	}
	delete(w.ghost, id)
	w.shadow[id] = &hostopsShadow{ram: map[int64]byte{}, fb: make([]map[int64]byte, len(profiles))}
	for i := range profiles {
		w.shadow[id].fb[i] = map[int64]byte{}
	}
	w.logf("create %s on %s", id, h.Name())
	if o.E&2 == 0 {
		return w.vgpuOutcome("start "+id, vm.Start())
	}
	return nil
}

func (w *hostopsWorld) destroy(o hostopsOp) error {
	id := o.id()
	vm := w.owner(id)
	if vm == nil {
		w.logf("destroy %s: no such VM", id)
		return nil
	}
	if mg := w.active(id); mg != nil {
		mg.loose = true
		w.ghost[id] = w.shadow[id]
	}
	ram, sh := vm.RAM(), w.shadow[id]
	if err := vm.Destroy(); err != nil {
		return w.vgpuOutcome("destroy "+id, err)
	}
	delete(w.shadow, id)
	w.logf("destroy %s on %s", id, vm.Host().Name())
	if vm.State() != vgpu.VMDestroyed {
		return fmt.Errorf("destroyed %s is %v", id, vm.State())
	}
	// The guest memory is scrubbed as it is released.
	for off := range sh.ram {
		var b [1]byte
		if _, err := ram.ReadAt(b[:], off); err != nil {
			return fmt.Errorf("reading destroyed %s's RAM at %#x: %w", id, off, err)
		}
		if b[0] != 0 {
			return fmt.Errorf("destroyed %s's RAM holds %#02x at %#x, not scrubbed", id, b[0], off)
		}
	}
	return nil
}

// write writes the op's bytes into the owner of its VM, unless a
// migration holds the VM stunned: a stunned guest writes nothing.
func (w *hostopsWorld) write(o hostopsOp) error {
	id := o.id()
	vm, sh := w.owner(id), w.shadow[id]
	if vm == nil || sh == nil {
		w.logf("write %s: no such VM", id)
		return nil
	}
	if mg := w.active(id); mg != nil && mg.m.Phase().Stunned() {
		w.logf("write %s: stunned in %v", id, mg.m.Phase())
		return nil
	}
	buf := make([]byte, o.writeLen())
	for k := range buf {
		buf[k] = o.E + 1 + byte(k)*29
	}
	if o.Kind == hostopsWriteRAM {
		fp, size := vm.RAMFootprintBytes(), vm.RAM().Size()
		off := fp + o.offset(16)%(size-fp-int64(len(buf))+1)
		if _, err := vm.RAM().WriteAt(buf, off); err != nil {
			return fmt.Errorf("write %s RAM at %#x: %w", id, off, err)
		}
		for k, b := range buf {
			sh.ram[off+int64(k)] = b
		}
		w.logf("write %s RAM [%#x, %#x)", id, off, off+int64(len(buf)))
		return nil
	}
	devs := vm.VGPUs()
	dev := int(o.E>>6) % len(devs)
	v := devs[dev]
	off := o.offset(4093) % (v.Framebuffer().Size() - int64(len(buf)) + 1)
	if _, err := v.WriteAt(buf, off); err != nil {
		return fmt.Errorf("write %s vGPU %d at %#x: %w", id, dev, off, err)
	}
	for k, b := range buf {
		sh.fb[dev][off+int64(k)] = b
	}
	w.logf("write %s vGPU %d (%s GPU %d slot %d) [%#x, %#x)", id, dev, vm.Host().Name(), v.GPU().Index(),
		v.Slot(), off, off+int64(len(buf)))
	return nil
}

func (w *hostopsWorld) power(o hostopsOp) error {
	id := o.id()
	vm := w.owner(id)
	if vm == nil || w.active(id) != nil {
		w.logf("power %s: no such VM, or migrating", id)
		return nil
	}
	var err error
	switch name := hostopsPowerNames[o.B%4]; name {
	case "start":
		err = vm.Start()
	case "pause":
		err = vm.Pause()
	case "resume":
		err = vm.Resume()
	default:
		err = vm.Stop()
	}
	return w.vgpuOutcome(fmt.Sprintf("%s %s", hostopsPowerNames[o.B%4], id), err)
}
