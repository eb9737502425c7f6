package vgpu

import (
	"fmt"
	"slices"
	"time"
)

// IncomingSpec is what a migration's destination needs to hold a VM before
// any of its memory arrives: its identity and seeds, sizes and page sizes,
// and its vGPU types. The destination maps each vGPU window with the seed
// the source's window has, so generated content regenerates identically.
type IncomingSpec struct {
	ID                  string
	Seed                uint64
	RAMBytes            int64
	RAMFootprintBytes   int64
	RAMPageSize         int
	FramebufferPageSize int
	GPUModel            string
	Profiles            []string
	Passthrough         bool
	// Remote is the VM's remote GPU sessions, which the destination uses
	// once the VM is handed over (VM.HandOverRemote); they stay on their
	// server. They are pointers into this process, so a spec that crosses
	// a wire carries none.
	Remote []*RemoteGPU `json:"-"`
}

// IncomingSpec returns the spec a destination host needs to prepare for
// this VM.
func (vm *VM) IncomingSpec() IncomingSpec {
	s := IncomingSpec{
		ID: vm.id, Seed: vm.seed, RAMBytes: vm.ramBytes, RAMFootprintBytes: vm.footprint,
		RAMPageSize: vm.ram.PageSize(), FramebufferPageSize: vm.host.cfg.FramebufferPageSize,
		GPUModel: vm.host.cfg.GPU.Model, Passthrough: vm.passthrough,
	}
	if !vm.passthrough {
		for _, d := range vm.devices {
			s.Profiles = append(s.Profiles, d.profile.Name)
		}
	}
	if len(vm.devices) == 0 && len(vm.remotes) > 0 {
		s.GPUModel = "" // its GPUs are its server's, whatever the host has
	}
	s.Remote = slices.Clone(vm.remotes)
	return s
}

// CheckMigratable is the VM side of a migration's compatibility check: a
// VM with a passthrough GPU cannot be live-migrated (a device in DirectPath
// I/O mode blocks vMotion, as "Machine Learning Leveraging NVIDIA GPUs with
// Bitfusion on VMware vSphere (Part 2 of 2)", VMware blog, 2019, says).
func (vm *VM) CheckMigratable() error {
	if vm.state == VMDestroyed || vm.state == VMIncoming {
		return vm.refuse("migrate")
	}
	if vm.passthrough {
		return &NotMigratableError{VM: vm.id, Reason: "it has a GPU in passthrough (DirectPath I/O)"}
	}
	return nil
}

func (h *Host) checkSpec(spec IncomingSpec) (VMSpec, error) {
	if spec.Passthrough {
		return VMSpec{}, &NotMigratableError{VM: spec.ID, Reason: "it has a GPU in passthrough (DirectPath I/O)"}
	}
	if spec.RAMPageSize != h.cfg.RAMPageSize || spec.FramebufferPageSize != h.cfg.FramebufferPageSize {
		return VMSpec{}, fmt.Errorf("%w: VM %q uses %d/%d-byte RAM/framebuffer pages, host %q %d/%d",
			ErrIncompatibleHost, spec.ID, spec.RAMPageSize, spec.FramebufferPageSize,
			h.cfg.Name, h.cfg.RAMPageSize, h.cfg.FramebufferPageSize)
	}
	if len(spec.Profiles) > 0 && !equalModel(spec.GPUModel, h.cfg.GPU.Model) {
		return VMSpec{}, fmt.Errorf("%w: VM %q runs on %s GPUs, host %q has %s",
			ErrIncompatibleHost, spec.ID, spec.GPUModel, h.cfg.Name, h.cfg.GPU.Model)
	}
	if spec.Seed == 0 {
		return VMSpec{}, configError("incoming VM %q has no seed", spec.ID)
	}
	return VMSpec{ID: spec.ID, Seed: spec.Seed, RAMBytes: spec.RAMBytes,
		RAMFootprintBytes: spec.RAMFootprintBytes, Profiles: spec.Profiles, Remote: spec.Remote}, nil
}

// CheckIncoming reports whether the host could take the VM of spec now,
// reserving nothing: the destination side of a migration's compatibility
// check.
func (h *Host) CheckIncoming(spec IncomingSpec) error {
	vs, err := h.checkSpec(spec)
	if err != nil {
		return err
	}
	_, err = h.check(vs, true)
	return err
}

// PrepareIncoming reserves what a migrating VM needs on this host — its
// guest memory, and vGPUs of the same types placed by the host's scheme
// with windows mapped with the source's seeds — and returns it incoming:
// nothing runs and no device has state until Restore or Commit. Abort (or
// Destroy) releases everything. A passthrough VM is refused with a
// *NotMigratableError.
func (h *Host) PrepareIncoming(spec IncomingSpec) (*VM, error) {
	vs, err := h.checkSpec(spec)
	if err != nil {
		return nil, err
	}
	return h.build(vs, true)
}

// SaveDeviceStates saves the state of every vGPU, in vGPU order, for a
// checkpoint or a migration's switch-over. The VM must be paused (the stun)
// or stopped.
func (vm *VM) SaveDeviceStates() ([][]byte, error) {
	if vm.passthrough {
		return nil, &NotMigratableError{VM: vm.id, Reason: "a passthrough GPU has no device state the hypervisor can save"}
	}
	if vm.state != VMPaused && vm.state != VMStopped {
		return nil, vm.refuse("save")
	}
	out := make([][]byte, len(vm.devices))
	for i, d := range vm.devices {
		b, err := d.SaveState(nil)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// Restore installs saved device states, one per vGPU in order, and leaves
// the VM paused; Resume then runs it. Every state is decoded and checked
// (version, GPU model, profile, the PCI identity they imply, offsets)
// before any device changes, and a scheduler state that fails to restore
// undoes the ones restored before it, so on error the VM is as it was. Each
// restored vGPU gets a new generation ID.
func (vm *VM) Restore(states [][]byte) error {
	if err := vm.held("restore"); err != nil {
		return err
	}
	if vm.state != VMIncoming && vm.state != VMPaused && vm.state != VMStopped {
		return vm.refuse("restore")
	}
	if len(states) != len(vm.devices) {
		return &IncompatibleStateError{Field: "vGPU count", Saved: fmt.Sprint(len(states)), Device: fmt.Sprint(len(vm.devices))}
	}
	decoded := make([]DeviceState, len(states))
	for i, d := range vm.devices {
		s, err := d.checkRestore(states[i])
		if err != nil {
			return fmt.Errorf("vGPU %d: %w", i, err)
		}
		decoded[i] = s
	}
	undo := make([][]byte, len(vm.devices))
	for i, d := range vm.devices {
		b, err := d.gpu.sched.SaveTenant(nil, d.tenant)
		if err != nil {
			return err
		}
		undo[i] = b
	}
	for i, d := range vm.devices {
		if err := d.restoreSched(decoded[i].Sched); err != nil {
			for j := range i {
				_ = vm.devices[j].gpu.sched.RestoreTenant(vm.devices[j].tenant, undo[j])
			}
			return fmt.Errorf("vGPU %d: %w", i, err)
		}
	}
	for i, d := range vm.devices {
		d.apply(decoded[i])
	}
	vm.state = VMPaused
	vm.changes++
	return nil
}

// Commit is the end of a migration at the destination: it restores the
// device states (see Restore) and resumes the VM. If the restore fails the
// VM stays incoming and the caller aborts.
func (vm *VM) Commit(states [][]byte) error {
	if vm.state != VMIncoming {
		return vm.refuse("commit")
	}
	if err := vm.Restore(states); err != nil {
		return err
	}
	return vm.Resume()
}

// Abort gives up an incoming VM: its windows are unmapped and scrubbed and
// its memory released, so the destination holds nothing of it.
func (vm *VM) Abort() error {
	if vm.state != VMIncoming {
		return vm.refuse("abort")
	}
	return vm.Destroy()
}

// HandOverWorkload moves the VM's workload, with its random state, queued
// bookkeeping and metrics history, to another VM — a migration's
// destination at switch-over — so that its metrics continue across the
// migration. vm must be paused or stopped (or incoming, to hand a workload
// back after a failed switch-over), to must not be running and must have
// the same vGPU types and no workload. The workload's times are shifted by
// the difference between the two hosts' clocks.
func (vm *VM) HandOverWorkload(to *VM) error {
	switch {
	case to == nil || to == vm:
		return fmt.Errorf("%w: hand-over to itself or nil", ErrWorkload)
	case vm.state != VMPaused && vm.state != VMStopped && vm.state != VMIncoming:
		return vm.refuse("hand over workload")
	case to.state == VMRunning || to.state == VMDestroyed:
		return to.refuse("take over workload")
	case vm.workload == nil:
		return fmt.Errorf("%w: VM %q has no workload to hand over", ErrWorkload, vm.id)
	case to.workload != nil:
		return fmt.Errorf("%w: VM %q already runs %s", ErrWorkload, to.id, to.workload.Name())
	}
	a, b := vm.IncomingSpec(), to.IncomingSpec()
	if !slices.Equal(a.Profiles, b.Profiles) || a.RAMBytes != b.RAMBytes {
		return fmt.Errorf("%w: VM %q (%v, %d bytes) and %q (%v, %d bytes) differ",
			ErrIncompatibleHost, vm.id, a.Profiles, a.RAMBytes, to.id, b.Profiles, b.RAMBytes)
	}
	w := vm.workload
	if d := to.host.now - vm.host.now; d != 0 {
		w.Shift(d)
	}
	to.workload, to.wlStarted, to.throttle = w, vm.wlStarted, vm.throttle
	vm.workload, vm.wlStarted = nil, false
	return nil
}

// HandOverRemote moves the VM's remote GPU sessions (VMSpec.Remote) to
// another VM — a migration's destination at switch-over, prepared with
// this VM's IncomingSpec, or back to the source after a failed one — and
// returns how long they take to answer again: the client's connection
// from to's host (two round trips of the slowest session's link), during
// which to's jobs wait to go out and its completions to come in. A VM
// without one hands over nothing and returns 0. vm must be paused, stopped
// or incoming and to not running; both must name the same sessions in the
// same order, and to's host must be at its servers' time (ErrOutOfStep).
// Nothing changes on error.
func (vm *VM) HandOverRemote(to *VM) (time.Duration, error) {
	switch {
	case to == nil || to == vm:
		return 0, fmt.Errorf("%w: hand-over to itself or nil", ErrConfig)
	case len(vm.remotes) == 0 && len(to.remotes) == 0:
		return 0, nil
	case vm.state != VMPaused && vm.state != VMStopped && vm.state != VMIncoming:
		return 0, vm.refuse("hand over remote GPUs")
	case to.state == VMRunning || to.state == VMDestroyed:
		return 0, to.refuse("take over remote GPUs")
	case !slices.Equal(vm.remotes, to.remotes):
		return 0, fmt.Errorf("%w: VM %q and %q use different remote GPUs", ErrIncompatibleHost, vm.id, to.id)
	}
	for _, r := range vm.remotes {
		switch {
		case r.Client() != vm:
			return 0, fmt.Errorf("%w: VM %q does not hold remote session %d of host %q", ErrConfig, vm.id, r.id, r.server.cfg.Name)
		case to.host.now != r.server.now:
			return 0, fmt.Errorf("%w: host %q is at %v, the GPU server %q at %v", ErrOutOfStep, to.host.cfg.Name, to.host.now, r.server.cfg.Name, r.server.now)
		}
	}
	var took time.Duration
	for i, r := range vm.remotes {
		took = max(took, r.handOver(to, len(to.devices)+i, to.host.now))
	}
	return took, nil
}
