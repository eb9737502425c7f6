package vgpu

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/sched"
)

// Stall holds the running VM for d of simulated time from its host's
// current time: its workload and its vGPUs' GPU work wait as in a pause —
// no memory is written, the vGPUs' scheduler tenants get no turns, and
// inference requests that arrive meanwhile wait, their latency counting
// the wait — but the VM stays VMRunning and its owner sees no change: no
// run-state change is counted (Changes). It is what a migration's
// destination does when the running guest or a vGPU touches a page still
// at the source (post-copy), d being the time the page takes to come.
//
// Stalls add up: a stall while stalled extends the current one by d (it
// then ends d after its previous end). d == 0 does nothing. The stall ends
// at the first of the host's steps that reaches its end (Host.NextEventAt
// stops there): the vGPUs and the workload resume there as after a Resume,
// nothing written for the time they waited.
//
// Stall is the hypervisor's act, not the owner's: it is allowed whether or
// not a migration holds the VM, committed or not. Only a running VM can be
// stalled, else a *TransitionError, whatever d; a negative d, or one that
// would take the stall's end past sched.MaxTime, is an error wrapping
// ErrInvalidDuration.
//
// What else may happen to a stalled VM:
//   - Pause (the owner's or a migration's claim's) ends the stall and
//     pauses the VM, which stays paused as it was stunned; Resume runs it
//     again as after any pause. Stop and Destroy end it too, as does
//     Suspend (the file holds the VM running, without the stall; a suspend
//     that fails stalls the VM again until the stall's end).
//   - A stalled VM is running, so HandOverWorkload, Restore and
//     SaveDeviceStates refuse it, as they refuse any running VM; a
//     migration pauses it first, which ends the stall.
//   - SetWorkload attaches the workload at once; it starts when the stall
//     ends. Should its start fail then, the Advance that ends the stall
//     fails with the workload's error and the VM runs on without it, as
//     SetWorkload would have left it.
//   - SetThrottle applies at once, as on a paused VM.
func (vm *VM) Stall(d time.Duration) error {
	if vm.state != VMRunning {
		return vm.refuse("stall")
	}
	now := vm.host.now
	from := now
	if vm.stalled {
		from = max(vm.stallUntil, now)
	}
	if d < 0 || d > sched.MaxTime-from {
		return fmt.Errorf("%w: stall VM %q by %v from %v", ErrInvalidDuration, vm.id, d, from)
	}
	if d == 0 {
		return nil
	}
	if vm.stalled {
		vm.stallUntil = from + d
		return nil
	}
	for i, dev := range vm.devices {
		if err := dev.pause(); err != nil {
			// The devices paused before it run on: the VM is as it was.
			for _, p := range vm.devices[:i] {
				_ = p.resume()
			}
			return err
		}
	}
	if vm.workload != nil && vm.wlStarted {
		vm.workload.Pause(&vm.env)
	}
	vm.stalled, vm.stallFrom, vm.stallUntil = true, now, now+d
	return nil
}

// StalledUntil returns when the VM's stall ends and true while it is
// stalled. A VM not stalled returns when its latest stall ended (where a
// Pause, Stop, Destroy or Suspend cut it short, the time it did so), or 0
// if it was never stalled, and false.
func (vm *VM) StalledUntil() (time.Duration, bool) { return vm.stallUntil, vm.stalled }

// StallTime returns the time the VM has spent stalled since it was
// created, up to its host's current time: the whole of every stall that
// has ended, the part cut short by a Pause, Stop, Destroy or Suspend
// excluded, and of a stall under way the part already elapsed. It is
// the VM's own, on this host: a migration's destination VM counts from
// zero.
func (vm *VM) StallTime() time.Duration {
	t := vm.stallTotal
	if vm.stalled {
		t += min(vm.host.now, vm.stallUntil) - vm.stallFrom
	}
	return t
}

// dropStall ends a stall at the host's current time without resuming
// anything: for a Pause, whose own pause the stall's stands for, and for a
// Stop, Destroy or Suspend, which take the VM's devices and workload on
// from paused.
func (vm *VM) dropStall() {
	if !vm.stalled {
		return
	}
	now := vm.host.now
	vm.stallTotal += min(now, vm.stallUntil) - vm.stallFrom
	vm.stalled, vm.stallUntil = false, min(now, vm.stallUntil)
}

// endStall ends a stall whose time has come, at the host's current time:
// the vGPUs resume and the workload continues (or, attached during the
// stall, starts) as after a Resume. A workload that fails to start here is
// detached, as SetWorkload leaves a VM whose workload fails to start.
func (vm *VM) endStall() error {
	vm.dropStall()
	for _, d := range vm.devices {
		if err := d.resume(); err != nil {
			return err
		}
	}
	started := vm.wlStarted
	if err := vm.startWorkload(); err != nil {
		if !started {
			vm.workload = nil
		}
		return err
	}
	return nil
}

// endStalls ends the stalls of the host's VMs due by now.
func (h *Host) endStalls() error {
	for _, vm := range h.vms {
		if vm.stalled && vm.stallUntil <= h.now {
			if err := vm.endStall(); err != nil {
				return err
			}
		}
	}
	return nil
}
