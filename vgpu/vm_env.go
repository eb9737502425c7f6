package vgpu

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

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
