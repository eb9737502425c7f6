package vgpu

import (
	"fmt"
	"hash/fnv"

	"github.com/vgpusim/vgpusim/memory"
)

// CreateVM places the VM's vGPUs, reserves its guest memory and returns it
// created (powered off). Nothing is reserved if any part fails: the error
// is a *PlacementError, a *CapacityError, or wraps ErrConfig,
// ErrUnknownProfile, ErrMultiVGPU, ErrDuplicateVM or, for a workload that
// does not fit the VM (see Fitter), ErrWorkload.
func (h *Host) CreateVM(spec VMSpec) (*VM, error) {
	vm, err := h.build(spec, false)
	if err != nil {
		return nil, err
	}
	if spec.Workload != nil {
		if err := vm.fits(spec.Workload); err != nil {
			// Nothing ran on it: its removal only gives back what
			// build reserved.
			_ = vm.destroy()
			return nil, err
		}
		vm.workload = spec.Workload
	}
	return vm, nil
}

// plan is a checked VMSpec.
type plan struct {
	spec    VMSpec
	profile Profile
	gpus    []*GPU
}

// maxVMIDBytes bounds a VM's ID.
const maxVMIDBytes = 128

// check validates spec and chooses GPUs, changing nothing.
//
// An incoming VM's remote GPUs are still its source's: they are checked
// when they are handed over (VM.HandOverRemote), not here.
func (h *Host) check(spec VMSpec, incoming bool) (plan, error) {
	pl := plan{spec: spec}
	ps := int64(h.cfg.RAMPageSize)
	switch {
	case spec.ID == "" || len(spec.ID) > maxVMIDBytes:
		return pl, configError("VM ID %q must be 1 to %d bytes", spec.ID, maxVMIDBytes)
	case spec.RAMBytes <= 0 || spec.RAMBytes%ps != 0:
		return pl, configError("VM %q: guest memory %d is not a positive multiple of the %d-byte page", spec.ID, spec.RAMBytes, ps)
	case spec.RAMBytes/ps > memory.MaxPages:
		return pl, configError("VM %q: guest memory %d exceeds %d pages", spec.ID, spec.RAMBytes, memory.MaxPages)
	case spec.RAMFootprintBytes < 0 || spec.RAMFootprintBytes > spec.RAMBytes:
		return pl, configError("VM %q: RAM footprint %d outside [0, %d]", spec.ID, spec.RAMFootprintBytes, spec.RAMBytes)
	case spec.Passthrough && len(spec.Profiles) > 0:
		return pl, configError("VM %q: a passthrough VM has no vGPU profiles", spec.ID)
	case spec.Passthrough && len(spec.Remote) > 0:
		return pl, configError("VM %q: a passthrough VM has no remote GPU", spec.ID)
	case !spec.Passthrough && len(spec.Profiles) == 0 && len(spec.Remote) == 0:
		return pl, configError("VM %q: no vGPU profile", spec.ID)
	case len(spec.Profiles)+len(spec.Remote) > MaxVGPUsPerVM:
		return pl, fmt.Errorf("%w: VM %q asks for %d vGPUs, the limit is %d", ErrMultiVGPU, spec.ID, len(spec.Profiles)+len(spec.Remote), MaxVGPUsPerVM)
	}
	for i, r := range spec.Remote {
		if incoming {
			if r == nil {
				return pl, configError("VM %q: a nil remote GPU", spec.ID)
			}
			continue
		}
		if err := r.checkAttach(h); err != nil {
			return pl, fmt.Errorf("VM %q: remote GPU %d: %w", spec.ID, i, err)
		}
		for _, q := range spec.Remote[:i] {
			if q == r {
				return pl, configError("VM %q: remote GPU %d given twice", spec.ID, i)
			}
		}
	}
	if _, dup := h.VM(spec.ID); dup {
		return pl, fmt.Errorf("%w: %q on host %q", ErrDuplicateVM, spec.ID, h.cfg.Name)
	}
	if spec.Passthrough {
		g, err := h.choosePassthrough()
		if err != nil {
			return pl, err
		}
		pl.profile, pl.gpus = passthroughProfile(g.spec), []*GPU{g}
	} else if len(spec.Profiles) > 0 {
		for i, name := range spec.Profiles {
			p, err := ParseProfile(name)
			if err != nil {
				return pl, err
			}
			if i > 0 && p.Name != pl.profile.Name {
				return pl, fmt.Errorf("%w: VM %q mixes %s and %s", ErrMultiVGPU, spec.ID, pl.profile.Name, p.Name)
			}
			pl.profile = p
		}
		if len(spec.Profiles) > 1 && !pl.profile.MultiVGPU {
			return pl, fmt.Errorf("%w: %s (only full-GPU types allow several per VM)", ErrMultiVGPU, pl.profile.Name)
		}
		gpus, err := h.choose(pl.profile, len(spec.Profiles))
		if err != nil {
			return pl, err
		}
		pl.gpus = gpus
	}
	if spec.RAMBytes > h.FreeRAMBytes() {
		return pl, &CapacityError{RequestedBytes: spec.RAMBytes, FreeBytes: h.FreeRAMBytes()}
	}
	return pl, nil
}

// build creates a VM from spec: created, or incoming (devices mapped with
// the spec's seeds and nothing started).
func (h *Host) build(spec VMSpec, incoming bool) (*VM, error) {
	if spec.Seed == 0 {
		f := fnv.New64a()
		f.Write([]byte(spec.ID))
		spec.Seed = derive(h.cfg.Seed^f.Sum64(), seedVM)
	}
	pl, err := h.check(spec, incoming)
	if err != nil {
		return nil, err
	}
	ram, err := memory.New(memory.Config{SizeBytes: spec.RAMBytes, PageSize: h.cfg.RAMPageSize,
		Kind: h.cfg.Memory, Seed: derive(spec.Seed, seedRAM), DirtyLogOff: true}) // off but while migrating: see VM
	if err != nil {
		return nil, fmt.Errorf("%w: VM %q guest memory: %w", ErrConfig, spec.ID, err)
	}
	vm := &VM{host: h, id: spec.ID, seed: spec.Seed, state: VMCreated, ram: ram,
		ramBytes: spec.RAMBytes, footprint: spec.RAMFootprintBytes, passthrough: spec.Passthrough}
	vm.env.vm = vm
	if incoming {
		vm.state, vm.booted = VMIncoming, true
	}
	for i, g := range pl.gpus {
		v, err := h.attach(vm, g, pl.profile, i)
		if err != nil {
			for _, d := range vm.devices {
				_ = d.destroy()
			}
			return nil, err
		}
		vm.devices = append(vm.devices, v)
	}
	for i, r := range spec.Remote {
		if !incoming {
			r.attach(vm, len(vm.devices)+i)
		}
		vm.remotes = append(vm.remotes, r)
	}
	h.ramUsed += spec.RAMBytes
	h.vms = append(h.vms, vm)
	return vm, nil
}

// attach creates vGPU index of vm on g.
func (h *Host) attach(vm *VM, g *GPU, p Profile, index int) (*VGPU, error) {
	return h.attachSeeded(vm, windowSeed(vm.seed, index), g, p, index)
}

// attachSeeded creates vGPU index of vm (nil for a remote session's) on
// g, its window's contents keyed by seed.
func (h *Host) attachSeeded(vm *VM, seed uint64, g *GPU, p Profile, index int) (*VGPU, error) {
	slot := 0
	var w *memory.Region
	var err error
	if p.Passthrough {
		w, err = g.fb.Map(0, g.fb.Pages(), seed)
		if err == nil {
			w.StopDirtyLog() // off but while migrating: see VM
		}
	} else {
		slot = g.freeSlot(p)
		w, err = g.mapSlot(p, slot, seed)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: mapping a %s window on GPU %d: %w", ErrNoCapacity, p.Name, g.index, err)
	}
	t, err := g.sched.AddTenant(p.MaxInstances)
	if err != nil {
		_ = w.Unmap()
		if !p.Passthrough && g.count == 0 {
			g.typ, g.slots = nil, nil
		}
		return nil, fmt.Errorf("%w: GPU %d scheduler: %w", ErrNoCapacity, g.index, err)
	}
	v := &VGPU{gpu: g, slot: slot, profile: p, window: w, tenant: t, vm: vm, index: index, state: DeviceCreated}
	v.generation = h.nextGeneration(0)
	v.initConfig()
	g.byTenant[t] = v
	if p.Passthrough {
		g.passthrough = vm
	} else {
		g.slots[slot] = v
		g.count++
	}
	return v, nil
}
