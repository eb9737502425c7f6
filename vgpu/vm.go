package vgpu

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// VMState is a VM's run state.
type VMState uint8

// The run states of a VM. Exactly one host owns a running VM: a migration's
// destination holds it as incoming, then paused once its devices are
// restored, and runs it only when the source has let it go; the source is
// paused from the stun until it is destroyed or resumes. During the stun
// both copies may read paused, never both running.
//
//	created  --Start--> running
//	running  --Pause--> paused --Resume--> running
//	running/paused --Stop--> stopped --Start--> running
//	incoming --Restore--> paused, --Commit--> running, --Abort--> destroyed
//	paused/stopped --Restore--> paused (a checkpoint restored in place)
//	any      --Destroy--> destroyed
const (
	VMCreated VMState = iota + 1
	VMRunning
	VMPaused
	VMStopped
	VMIncoming
	VMDestroyed
)

func (s VMState) String() string {
	switch s {
	case VMCreated:
		return "created"
	case VMRunning:
		return "running"
	case VMPaused:
		return "paused"
	case VMStopped:
		return "stopped"
	case VMIncoming:
		return "incoming"
	case VMDestroyed:
		return "destroyed"
	}
	return fmt.Sprintf("VMState(%d)", uint8(s))
}

// MaxVGPUsPerVM bounds the vGPUs of one VM (vSphere allows four).
const MaxVGPUsPerVM = 4

// VMSpec describes a VM to create.
type VMSpec struct {
	// ID names the VM; it must be unique on the host and stays the same
	// across migrations.
	ID string
	// Seed keys the VM's memory contents (its guest RAM and each vGPU's
	// framebuffer window derive their seeds from it); 0 means one derived
	// from the host's seed and the ID.
	Seed uint64
	// RAMBytes is the guest memory, a positive multiple of the host's RAM
	// page size, reserved in full.
	RAMBytes int64
	// RAMFootprintBytes is the guest memory holding data (guest OS and
	// applications) at the first start, filled with a realistic mix of
	// contents from offset 0; workloads place their own data after it.
	RAMFootprintBytes int64
	// Profiles names the vGPUs, one entry each, all of one type; several
	// only for a type that allows it (MultiVGPU).
	Profiles []string
	// Passthrough gives the VM a whole GPU (DirectPath I/O) instead of
	// vGPUs; Profiles must then be empty. Such a VM cannot be migrated.
	Passthrough bool
	// Workload, if set, runs while the VM runs.
	Workload Workload
}

// VM is a virtual machine: guest RAM, vGPUs (or one passthrough GPU), a
// run state and a workload. It is driven by its host's Advance.
type VM struct {
	host        *Host
	id          string
	seed        uint64
	state       VMState
	ram         *memory.Region
	ramBytes    int64
	footprint   int64
	devices     []*VGPU
	passthrough bool
	booted      bool // the RAM footprint has been written (or migrated in)

	workload  Workload
	wlStarted bool
	throttle  float64
	env       Env
}

// CreateVM places the VM's vGPUs, reserves its guest memory and returns it
// created (powered off). Nothing is reserved if any part fails: the error
// is a *PlacementError, a *CapacityError, or wraps ErrConfig,
// ErrUnknownProfile, ErrMultiVGPU or ErrDuplicateVM.
func (h *Host) CreateVM(spec VMSpec) (*VM, error) {
	vm, err := h.build(spec, false)
	if err != nil {
		return nil, err
	}
	if spec.Workload != nil {
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

// check validates spec and chooses GPUs, changing nothing.
func (h *Host) check(spec VMSpec) (plan, error) {
	pl := plan{spec: spec}
	ps := int64(h.cfg.RAMPageSize)
	switch {
	case spec.ID == "" || len(spec.ID) > 128:
		return pl, configError("VM ID %q must be 1 to 128 bytes", spec.ID)
	case spec.RAMBytes <= 0 || spec.RAMBytes%ps != 0:
		return pl, configError("VM %q: guest memory %d is not a positive multiple of the %d-byte page", spec.ID, spec.RAMBytes, ps)
	case spec.RAMBytes/ps > memory.MaxPages:
		return pl, configError("VM %q: guest memory %d exceeds %d pages", spec.ID, spec.RAMBytes, memory.MaxPages)
	case spec.RAMFootprintBytes < 0 || spec.RAMFootprintBytes > spec.RAMBytes:
		return pl, configError("VM %q: RAM footprint %d outside [0, %d]", spec.ID, spec.RAMFootprintBytes, spec.RAMBytes)
	case spec.Passthrough && len(spec.Profiles) > 0:
		return pl, configError("VM %q: a passthrough VM has no vGPU profiles", spec.ID)
	case !spec.Passthrough && len(spec.Profiles) == 0:
		return pl, configError("VM %q: no vGPU profile", spec.ID)
	case len(spec.Profiles) > MaxVGPUsPerVM:
		return pl, fmt.Errorf("%w: VM %q asks for %d vGPUs, the limit is %d", ErrMultiVGPU, spec.ID, len(spec.Profiles), MaxVGPUsPerVM)
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
	} else {
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
	pl, err := h.check(spec)
	if err != nil {
		return nil, err
	}
	ram, err := memory.New(memory.Config{SizeBytes: spec.RAMBytes, PageSize: h.cfg.RAMPageSize,
		Kind: h.cfg.Memory, Seed: derive(spec.Seed, seedRAM)})
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
	h.ramUsed += spec.RAMBytes
	h.vms = append(h.vms, vm)
	return vm, nil
}

// attach creates vGPU index of vm on g.
func (h *Host) attach(vm *VM, g *GPU, p Profile, index int) (*VGPU, error) {
	slot := 0
	var w *memory.Region
	var err error
	if p.Passthrough {
		w, err = g.fb.Map(0, g.fb.Pages(), windowSeed(vm.seed, index))
	} else {
		slot = g.freeSlot(p)
		w, err = g.mapSlot(p, slot, windowSeed(vm.seed, index))
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

// ID returns the VM's ID.
func (vm *VM) ID() string { return vm.id }

// Seed returns the seed that keys the VM's memory contents.
func (vm *VM) Seed() uint64 { return vm.seed }

// Host returns the host the VM is on.
func (vm *VM) Host() *Host { return vm.host }

// State returns the VM's run state.
func (vm *VM) State() VMState { return vm.state }

// Passthrough reports whether the VM has a whole GPU in passthrough.
func (vm *VM) Passthrough() bool { return vm.passthrough }

// RAM returns the VM's guest memory.
func (vm *VM) RAM() *memory.Region { return vm.ram }

// RAMFootprintBytes returns the guest memory the guest OS fills at first
// start.
func (vm *VM) RAMFootprintBytes() int64 { return vm.footprint }

// VGPUs returns the VM's vGPUs (for a passthrough VM, its one pseudo-vGPU
// covering the whole GPU).
func (vm *VM) VGPUs() []*VGPU { return append([]*VGPU(nil), vm.devices...) }

// Framebuffers returns each vGPU's framebuffer window, in vGPU order.
func (vm *VM) Framebuffers() []*memory.Region {
	out := make([]*memory.Region, len(vm.devices))
	for i, d := range vm.devices {
		out[i] = d.window
	}
	return out
}

// Profiles returns each vGPU's type, in vGPU order.
func (vm *VM) Profiles() []Profile {
	out := make([]Profile, len(vm.devices))
	for i, d := range vm.devices {
		out[i] = d.profile
	}
	return out
}

// GPUModel returns the model of the VM's GPUs.
func (vm *VM) GPUModel() string { return vm.host.cfg.GPU.Model }

// Workload returns the VM's workload, or nil.
func (vm *VM) Workload() Workload { return vm.workload }

// SetWorkload attaches w to a VM that has none. On a running VM it starts
// at once.
func (vm *VM) SetWorkload(w Workload) error {
	if vm.state == VMDestroyed {
		return vm.refuse("set workload")
	}
	if vm.workload != nil {
		return fmt.Errorf("%w: VM %q already runs %s", ErrWorkload, vm.id, vm.workload.Name())
	}
	if w == nil {
		return fmt.Errorf("%w: nil workload", ErrWorkload)
	}
	vm.workload = w
	if vm.state == VMRunning {
		return vm.startWorkload()
	}
	return nil
}

// active returns the workload the host drives: a running VM's.
func (vm *VM) active() Workload {
	if vm.state != VMRunning || !vm.wlStarted {
		return nil
	}
	return vm.workload
}

func (vm *VM) refuse(op string) error {
	return &TransitionError{Op: op, VM: vm.id, Device: -1, From: vm.state.String()}
}

func (vm *VM) startWorkload() error {
	if vm.workload == nil {
		return nil
	}
	if vm.throttle != 0 {
		if err := vm.workload.SetThrottle(vm.throttle); err != nil {
			return err
		}
	}
	var err error
	if vm.wlStarted {
		err = vm.workload.Resume(&vm.env)
	} else {
		err = vm.workload.Start(&vm.env)
	}
	if err != nil {
		return fmt.Errorf("VM %q: %w", vm.id, err)
	}
	vm.wlStarted = true
	return nil
}

// Start powers the VM on (from created or stopped): its vGPUs start, the
// guest OS footprint is written at the first start, and the workload
// starts.
func (vm *VM) Start() error {
	if vm.state != VMCreated && vm.state != VMStopped {
		return vm.refuse("start")
	}
	if !vm.booted && vm.footprint > 0 {
		ps := int64(vm.ram.PageSize())
		if err := vm.ram.FillMix(0, int((vm.footprint+ps-1)/ps), memory.MixRealistic()); err != nil {
			return err
		}
	}
	vm.booted = true
	for _, d := range vm.devices {
		if err := d.start(); err != nil {
			return err
		}
	}
	vm.state = VMRunning
	return vm.startWorkload()
}

// Pause stuns the VM: its workload stops at once and its vGPUs' scheduler
// tenants get no turns, but nothing is lost — queued GPU work, the
// workload's state and every byte of memory stay as they are.
func (vm *VM) Pause() error {
	if vm.state != VMRunning {
		return vm.refuse("pause")
	}
	for _, d := range vm.devices {
		if err := d.pause(); err != nil {
			return err
		}
	}
	vm.state = VMPaused
	if vm.workload != nil && vm.wlStarted {
		vm.workload.Pause(&vm.env)
	}
	return nil
}

// Resume runs a paused VM again, including one restored from a checkpoint.
func (vm *VM) Resume() error {
	if vm.state != VMPaused {
		return vm.refuse("resume")
	}
	for _, d := range vm.devices {
		if err := d.resume(); err != nil {
			return err
		}
	}
	vm.state = VMRunning
	return vm.startWorkload()
}

// Stop powers the VM off: queued GPU work is dropped and the workload
// stops; Start boots it again.
func (vm *VM) Stop() error {
	if vm.state != VMRunning && vm.state != VMPaused {
		return vm.refuse("stop")
	}
	for _, d := range vm.devices {
		if err := d.stop(); err != nil {
			return err
		}
	}
	if vm.workload != nil && vm.wlStarted {
		vm.workload.Stop(&vm.env)
	}
	vm.wlStarted = false
	vm.state = VMStopped
	return nil
}

// Destroy removes the VM from its host in any state: its vGPU windows are
// unmapped, which scrubs them, its scheduler tenants removed, its guest
// memory scrubbed and released. At a migration's source this releases the
// VM; at a destination it is the abort.
func (vm *VM) Destroy() error {
	if vm.state == VMDestroyed {
		return vm.refuse("destroy")
	}
	if vm.workload != nil && vm.wlStarted {
		vm.workload.Stop(&vm.env)
		vm.wlStarted = false
	}
	for _, d := range vm.devices {
		if err := d.destroy(); err != nil {
			return err
		}
	}
	if err := vm.ram.Scrub(); err != nil {
		return err
	}
	vm.host.ramUsed -= vm.ramBytes
	vm.host.remove(vm)
	vm.state = VMDestroyed
	return nil
}

// Throttle returns the fraction by which the VM's workload is slowed.
func (vm *VM) Throttle() float64 { return vm.throttle }

// SetThrottle slows the VM's workload by the fraction f in [0, 1): its
// memory dirty rates and the rate at which it submits GPU work are cut to
// 1-f of their configured values; 0 restores them. A migration uses it to
// make pre-copy converge (stun during page send).
func (vm *VM) SetThrottle(f float64) error {
	if !(f >= 0 && f < 1) {
		return configError("throttle %v outside [0, 1)", f)
	}
	if vm.workload != nil {
		if err := vm.workload.SetThrottle(f); err != nil {
			return err
		}
	}
	vm.throttle = f
	return nil
}

// completed hands a finished job of vGPU dev to the workload.
func (vm *VM) completed(dev int, c sched.Completion) error {
	if w := vm.active(); w != nil {
		if err := w.Complete(&vm.env, dev, c); err != nil {
			return fmt.Errorf("VM %q: %w", vm.id, err)
		}
	}
	return nil
}

// Snapshots returns the device state of each vGPU as it stands.
func (vm *VM) Snapshots() ([]DeviceState, error) {
	out := make([]DeviceState, len(vm.devices))
	for i, d := range vm.devices {
		s, err := d.Snapshot()
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// Env is what a host gives a workload: its VM's memory and vGPUs, the
// clock, and a way to submit GPU work.
type Env struct {
	vm *VM
}

// Now returns the host's simulated time.
func (e *Env) Now() time.Duration { return e.vm.host.now }

// VMID returns the VM's ID.
func (e *Env) VMID() string { return e.vm.id }

// RAM returns the VM's guest memory.
func (e *Env) RAM() *memory.Region { return e.vm.ram }

// RAMWorkloadBase returns the offset in guest memory after the guest OS
// footprint, rounded up to a page: where a workload's own data starts.
func (e *Env) RAMWorkloadBase() int64 {
	ps := int64(e.vm.ram.PageSize())
	return (e.vm.footprint + ps - 1) / ps * ps
}

// Devices returns the number of vGPUs.
func (e *Env) Devices() int { return len(e.vm.devices) }

// Framebuffer returns the framebuffer of vGPU i.
func (e *Env) Framebuffer(i int) *memory.Region { return e.vm.devices[i].window }

// UsableFramebufferBytes returns the framebuffer of vGPU i the guest can
// use, from offset 0.
func (e *Env) UsableFramebufferBytes(i int) int64 { return e.vm.devices[i].UsableFramebufferBytes() }

// GPU returns the spec of the VM's GPUs.
func (e *Env) GPU() GPUSpec { return e.vm.host.cfg.GPU }

// FrameRateLimitFPS returns the frame-rate limiter's cap for vGPU i, or 0
// when the limiter is off: NVIDIA enables it under the best-effort
// scheduler only.
func (e *Env) FrameRateLimitFPS(i int) int {
	if e.vm.host.cfg.Sched.Policy != sched.BestEffort || e.vm.passthrough {
		return 0
	}
	return e.vm.devices[i].profile.FrameRateLimitFPS
}

// Submit queues GPU work on vGPU i at the current time; Tag comes back in
// the completion. It is refused from a completion handler, where the
// schedulers are not at the current time.
func (e *Env) Submit(i int, j sched.Job) error {
	if e.vm.host.phase == phaseRoute {
		return fmt.Errorf("%w: VM %q: work submitted from a completion handler", ErrWorkload, e.vm.id)
	}
	if i < 0 || i >= len(e.vm.devices) {
		return fmt.Errorf("%w: VM %q has no vGPU %d", ErrWorkload, e.vm.id, i)
	}
	return e.vm.devices[i].submit(j)
}
