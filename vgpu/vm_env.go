package vgpu

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// Env is what a host gives a workload: its VM's memory and vGPUs, the
// clock, and a way to submit GPU work.
//
// No method panics. A method given an argument it cannot honour (a vGPU
// index outside [0, Devices())) returns an error wrapping ErrWorkload that
// names the VM and the argument. Only a host makes a working Env; the zero
// Env (or a nil one) has no VM: its value accessors return zero values and
// every other method an error wrapping ErrWorkload.
type Env struct {
	vm *VM
}

// errNoVM is the error of an Env that no host made.
func errNoVM(op string) error {
	return fmt.Errorf("%w: %s on an Env without a VM", ErrWorkload, op)
}

// ok reports whether e belongs to a VM.
func (e *Env) ok() bool { return e != nil && e.vm != nil }

// device returns vGPU i, or an error wrapping ErrWorkload naming the VM
// and i.
//
// A remote GPU's device is its session's vGPU on the server, and the
// session comes with it; a local one's session is nil.
func (e *Env) device(op string, i int) (*VGPU, *RemoteGPU, error) {
	if !e.ok() {
		return nil, nil, errNoVM(op)
	}
	local := len(e.vm.devices)
	if i < 0 || i >= local+len(e.vm.remotes) {
		return nil, nil, fmt.Errorf("%w: VM %q: %s: no vGPU %d (the VM has %d)", ErrWorkload, e.vm.id, op, i, local+len(e.vm.remotes))
	}
	if i >= local {
		r := e.vm.remotes[i-local]
		return r.dev, r, nil
	}
	return e.vm.devices[i], nil, nil
}

// Now returns the host's simulated time (0 for an Env without a VM).
func (e *Env) Now() time.Duration {
	if !e.ok() {
		return 0
	}
	return e.vm.host.now
}

// VMID returns the VM's ID ("" for an Env without a VM).
func (e *Env) VMID() string {
	if !e.ok() {
		return ""
	}
	return e.vm.id
}

// RAM returns the VM's guest memory (nil for an Env without a VM).
func (e *Env) RAM() *memory.Region {
	if !e.ok() {
		return nil
	}
	return e.vm.ram
}

// RAMWorkloadBase returns the offset in guest memory after the guest OS
// footprint, rounded up to a page: where a workload's own data starts.
func (e *Env) RAMWorkloadBase() int64 {
	if !e.ok() {
		return 0
	}
	ps := int64(e.vm.ram.PageSize())
	return (e.vm.footprint + ps - 1) / ps * ps
}

// Devices returns the number of vGPUs (0 for an Env without a VM).
func (e *Env) Devices() int {
	if !e.ok() {
		return 0
	}
	return len(e.vm.devices) + len(e.vm.remotes)
}

// Framebuffer returns the framebuffer of vGPU i. An i outside
// [0, Devices()) is an error wrapping ErrWorkload.
func (e *Env) Framebuffer(i int) (*memory.Region, error) {
	v, _, err := e.device("framebuffer", i)
	if err != nil {
		return nil, err
	}
	return v.window, nil
}

// UsableFramebufferBytes returns the framebuffer of vGPU i the guest can
// use, from offset 0. An i outside [0, Devices()) is an error wrapping
// ErrWorkload.
func (e *Env) UsableFramebufferBytes(i int) (int64, error) {
	v, _, err := e.device("usable framebuffer", i)
	if err != nil {
		return 0, err
	}
	return v.UsableFramebufferBytes(), nil
}

// GPU returns the spec of the VM's GPUs (the zero GPUSpec for an Env
// without a VM).
func (e *Env) GPU() GPUSpec {
	if !e.ok() {
		return GPUSpec{}
	}
	if len(e.vm.devices) == 0 && len(e.vm.remotes) > 0 {
		return e.vm.remotes[0].server.cfg.GPU
	}
	return e.vm.host.cfg.GPU
}

// FrameRateLimitFPS returns the frame-rate limiter's cap for vGPU i, or 0
// when the limiter is off: NVIDIA enables it under the best-effort
// scheduler only. An i outside [0, Devices()) is an error wrapping
// ErrWorkload.
func (e *Env) FrameRateLimitFPS(i int) (int, error) {
	v, r, err := e.device("frame-rate limit", i)
	if err != nil {
		return 0, err
	}
	h := e.vm.host
	if r != nil {
		h = r.server // the limiter is the server's vGPU manager's
	}
	if h.cfg.Sched.Policy != sched.BestEffort || e.vm.passthrough {
		return 0, nil
	}
	return v.profile.FrameRateLimitFPS, nil
}

// Submit queues GPU work on vGPU i at the current time; Tag comes back in
// the completion. It is refused from a completion handler, where the
// schedulers are not at the current time. Every error wraps ErrWorkload:
// an i outside [0, Devices()), a job the scheduler refuses (also
// sched.ErrInvalidJob, sched.ErrQueueFull), a vGPU not running (also a
// *TransitionError).
func (e *Env) Submit(i int, j sched.Job) error { return e.SubmitIO(i, j, JobIO{}) }

// SubmitIO is Submit for a job that moves io's bytes and makes io's
// calls, which a remote GPU (VMSpec.Remote) charges on its link and a
// local vGPU ignores (its PCIe transfers are not modelled). An io out of
// range is refused as Submit refuses a job, wrapping ErrWorkload and
// ErrConfig.
func (e *Env) SubmitIO(i int, j sched.Job, io JobIO) error {
	if !e.ok() {
		return errNoVM("submit")
	}
	if e.vm.host.phase == phaseRoute {
		return fmt.Errorf("%w: VM %q: work submitted from a completion handler", ErrWorkload, e.vm.id)
	}
	v, r, err := e.device("submit", i)
	if err != nil {
		return err
	}
	if r != nil {
		err = r.submit(e.vm.host.now, j, io)
	} else if err = io.check(); err == nil {
		err = v.submit(j)
	}
	if err != nil {
		return fmt.Errorf("%w: VM %q: submit to vGPU %d: %w", ErrWorkload, e.vm.id, i, err)
	}
	return nil
}
