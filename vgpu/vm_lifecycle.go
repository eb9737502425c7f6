package vgpu

import (
	"errors"
	"fmt"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// SetWorkload attaches w to a VM that has none. On a running VM it starts
// at once. A workload that does not fit the VM (see Fitter), or fails to
// start, is refused and the VM stays without one.
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
	if err := vm.fits(w); err != nil {
		return err
	}
	vm.workload = w
	if vm.state == VMRunning && !vm.stalled {
		// A stalled VM starts it when the stall ends (endStall).
		if err := vm.startWorkload(); err != nil {
			vm.workload = nil
			return err
		}
	}
	return nil
}

// active returns the workload the host drives: a running VM's, unless
// the VM is stalled.
func (vm *VM) active() Workload {
	if vm.state != VMRunning || !vm.wlStarted || vm.stalled {
		return nil
	}
	return vm.workload
}

// hookError is the error of a workload's hook that failed: it names the
// VM and wraps err and ErrWorkload, so that every error a workload returns
// reaches the caller of Host.Advance, VM.Start, VM.Resume or
// VM.SetThrottle typed, whatever the workload's own error. An error that
// already wraps ErrWorkload (one of Env's) is only prefixed with the VM.
func (vm *VM) hookError(w Workload, hook string, err error) error {
	if errors.Is(err, ErrWorkload) {
		return fmt.Errorf("VM %q: %w", vm.id, err)
	}
	return fmt.Errorf("%w: VM %q: workload %s: %s: %w", ErrWorkload, vm.id, w.Name(), hook, err)
}

func (vm *VM) refuse(op string) error {
	return &TransitionError{Op: op, VM: vm.id, Device: -1, From: vm.state.String()}
}

func (vm *VM) startWorkload() error {
	if vm.workload == nil {
		return nil
	}
	if f := vm.EffectiveThrottle(); f != 0 {
		if err := vm.workload.SetThrottle(f); err != nil {
			return vm.hookError(vm.workload, "throttle", err)
		}
	}
	if vm.wlStarted {
		if err := vm.workload.Resume(&vm.env); err != nil {
			return vm.hookError(vm.workload, "resume", err)
		}
	} else if err := vm.workload.Start(&vm.env); err != nil {
		return vm.hookError(vm.workload, "start", err)
	}
	vm.wlStarted = true
	return nil
}

// Start powers the VM on (from created or stopped): its vGPUs start, the
// guest OS footprint is written at the first start, and the workload
// starts. It is all or nothing: if any part fails, the vGPUs that started
// stop again and the VM stays in the state it was in, with the error.
func (vm *VM) Start() error {
	if err := vm.held("start"); err != nil {
		return err
	}
	if vm.state != VMCreated && vm.state != VMStopped {
		return vm.refuse("start")
	}
	vm.changes++
	if !vm.booted && vm.footprint > 0 {
		ps := int64(vm.ram.PageSize())
		if err := vm.ram.FillMix(0, int((vm.footprint+ps-1)/ps), memory.MixRealistic()); err != nil {
			return err
		}
	}
	vm.booted = true
	prev := vm.state
	var err error
	for _, d := range vm.devices {
		if err = d.start(); err != nil {
			break
		}
	}
	if err == nil {
		vm.state = VMRunning
		if err = vm.startWorkload(); err == nil {
			return nil
		}
	}
	vm.state = prev
	for _, d := range vm.devices {
		if d.state == DeviceRunning {
			// A device that started stops as it would at a Stop; the
			// error that matters is the one that failed the start.
			_ = d.stop()
		}
	}
	return err
}

// Pause stuns the VM: its workload stops at once and its vGPUs' scheduler
// tenants get no turns, but nothing is lost — queued GPU work, the
// workload's state and every byte of memory stay as they are.
//
// On a migrating VM, a pause during pre-copy is kept: the destination
// resumes the VM paused. One during the stun, where the VM is paused
// already, is refused; a pause that follows a resume in the stun fails the
// migration (see Changes), and the VM stays paused at the source.
func (vm *VM) Pause() error {
	if err := vm.held("pause"); err != nil {
		return err
	}
	if vm.state == VMRunning {
		// Counted before it is made: a pause that fails half-way has
		// changed the VM too.
		vm.changes++
	}
	return vm.pause()
}

// pause is Pause, for the owner and for a migration's claim alike.
func (vm *VM) pause() error {
	if vm.state != VMRunning {
		return vm.refuse("pause")
	}
	if vm.stalled {
		// The stall has paused the devices and the workload already:
		// the pause takes over from it.
		vm.dropStall()
		vm.state = VMPaused
		return nil
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
// On a migrating VM, a resume during the stun fails the migration, which
// leaves the VM at the source.
func (vm *VM) Resume() error {
	if err := vm.held("resume"); err != nil {
		return err
	}
	if vm.state == VMPaused {
		vm.changes++
	}
	return vm.resume()
}

// resume is Resume, for the owner and for a migration's claim alike.
func (vm *VM) resume() error {
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
	if err := vm.held("stop"); err != nil {
		return err
	}
	if vm.state != VMRunning && vm.state != VMPaused {
		return vm.refuse("stop")
	}
	vm.changes++
	vm.dropStall()
	for _, d := range vm.devices {
		if err := d.stop(); err != nil {
			return err
		}
	}
	for _, r := range vm.remotes {
		if err := r.reset(vm); err != nil {
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
	if err := vm.held("destroy"); err != nil {
		return err
	}
	return vm.destroy()
}

// destroy is Destroy, for the owner and for a migration's claim alike.
func (vm *VM) destroy() error {
	if vm.state == VMDestroyed {
		return vm.refuse("destroy")
	}
	vm.dropStall()
	if vm.workload != nil && vm.wlStarted {
		vm.workload.Stop(&vm.env)
		vm.wlStarted = false
	}
	for _, d := range vm.devices {
		if err := d.destroy(); err != nil {
			return err
		}
	}
	for _, r := range vm.remotes {
		if err := r.detach(vm); err != nil {
			return err
		}
	}
	vm.remotes = nil
	if err := vm.ram.Scrub(); err != nil {
		return err
	}
	vm.host.ramUsed -= vm.ramBytes
	vm.host.remove(vm)
	vm.state = VMDestroyed
	// A migration's claim ends with the VM: there is nothing left to
	// migrate, and its migration fails or has released it.
	vm.claim = nil
	return nil
}

// Throttle returns the VM's own throttle: the fraction its owner slowed
// its workload by with SetThrottle. A migration's cut is not included (see
// EffectiveThrottle), and a migration keeps the owner's throttle: the
// destination applies it, and a failed migration leaves it.
func (vm *VM) Throttle() float64 { return vm.throttle }

// EffectiveThrottle returns the fraction by which the VM's workload is
// slowed now: the larger of its owner's throttle and the cut of the
// migration that holds it, if any.
func (vm *VM) EffectiveThrottle() float64 {
	if vm.claim != nil {
		return max(vm.throttle, vm.claim.cut)
	}
	return vm.throttle
}

// SetThrottle slows the VM's workload by the fraction f in [0, 1): its
// memory dirty rates and the rate at which it submits GPU work are cut to
// 1-f of their configured values; 0 restores them. It is the owner's
// throttle; a migration cuts through its MigrationClaim instead (stun
// during page send), above this one. Once a migration has committed the
// VM to its destination the owner's throttle is refused with ErrMigrating.
func (vm *VM) SetThrottle(f float64) error {
	if err := vm.held("throttle"); err != nil {
		return err
	}
	if vm.state == VMDestroyed {
		// A migrated VM's source copy: the throttle belongs to the copy
		// that lives on.
		return vm.refuse("throttle")
	}
	if !validThrottle(f) {
		return configError("throttle %v outside [0, 1)", f)
	}
	eff := f
	if vm.claim != nil {
		eff = max(f, vm.claim.cut)
	}
	if err := vm.applyThrottle(eff); err != nil {
		return err
	}
	vm.throttle = f
	return nil
}

// applyThrottle hands the effective throttle f to the workload.
func (vm *VM) applyThrottle(f float64) error {
	if vm.workload != nil {
		if err := vm.workload.SetThrottle(f); err != nil {
			return vm.hookError(vm.workload, "throttle", err)
		}
	}
	return nil
}

// completed hands a finished job of vGPU dev to the workload.
func (vm *VM) completed(dev int, c sched.Completion) error {
	if w := vm.active(); w != nil && !vm.pageLost {
		if err := w.Complete(&vm.env, dev, c); err != nil && !vm.losePage(err) {
			return vm.hookError(w, "complete", err)
		}
	}
	return nil
}

// losePage reports whether err, a workload hook's failure, is an access to
// a page that could not come (memory.ErrAbsent: the page's fault function
// failed, as a post-copy destination's does once its migration failed),
// and if so marks the VM for the host to pause: the VM cannot go on
// without the page, and the host's other VMs can go on without the VM,
// which its migration ends.
func (vm *VM) losePage(err error) bool {
	if !errors.Is(err, memory.ErrAbsent) {
		return false
	}
	vm.pageLost = true
	return true
}
