package vgpu

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/sched"
)

// This file moves a session's jobs: from the client VM's Submit to the
// server's scheduler, part by part, and back as a completion. The client's
// host runs submit and deliver, the server's host the rest; what they
// share is under r.mu, so that a driver may advance the two on separate
// goroutines (the horizon keeps either from reading what the other has
// not written yet).

// attach makes vm the session's client, its device index.
func (r *RemoteGPU) attach(vm *VM, index int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.client, r.index = vm, index
}

// checkAttach says whether vm, on host h, may attach to the session.
func (r *RemoteGPU) checkAttach(h *Host) error {
	switch {
	case r == nil:
		return configError("a nil remote GPU")
	case r.dev.state == DeviceDestroyed:
		return configError("remote session %d of host %q is closed", r.id, r.server.cfg.Name)
	case r.Client() != nil:
		return fmt.Errorf("%w: remote session %d of host %q already has a VM", ErrGPUBusy, r.id, r.server.cfg.Name)
	case h.now != r.server.now:
		return fmt.Errorf("%w: host %q is at %v, the GPU server %q at %v", ErrOutOfStep, h.cfg.Name, h.now, r.server.cfg.Name, r.server.now)
	}
	return nil
}

// detach lets the session go of vm, destroyed, if it is the session's
// client (a migration's destination is not, until the hand-over).
func (r *RemoteGPU) detach(vm *VM) error {
	if r.Client() != vm {
		return nil
	}
	err := r.reset(vm)
	r.mu.Lock()
	r.client = nil
	r.mu.Unlock()
	return err
}

// reset drops the session's work, as a VM's power-off drops what its
// vGPUs had queued: the part on the GPU, the jobs on their way either
// way; if vm is its client.
func (r *RemoteGPU) reset(vm *VM) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != vm {
		return nil
	}
	if r.started && r.partDue == NoEvent {
		s := r.dev.gpu.sched
		if _, err := s.PowerOff(r.dev.tenant); err != nil {
			return err
		}
		if err := s.PowerOn(r.dev.tenant); err != nil {
			return err
		}
	}
	r.inbound, r.outbound = nil, nil
	r.started, r.partDue, r.partsOn = false, NoEvent, 0
	return nil
}

// submit sends a job from the client at now: its inputs follow those of
// the jobs before it on the link, then cross it.
func (r *RemoteGPU) submit(now time.Duration, j sched.Job, io JobIO) error {
	if err := io.check(); err != nil {
		return err
	}
	if j.Work <= 0 || j.Work > sched.MaxJobWork {
		return fmt.Errorf("%w: work %v outside (0, %v]", sched.ErrInvalidJob, j.Work, sched.MaxJobWork)
	}
	if r.dev.state != DeviceRunning {
		return r.dev.refuse("submit")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.inbound) >= r.dev.gpu.sched.Config().MaxQueue {
		// The server's queue for the session is full, as a local
		// vGPU's would be.
		return fmt.Errorf("%w: remote session %d has %d jobs", sched.ErrQueueFull, r.id, len(r.inbound))
	}
	sent := max(now, r.upAt)
	if n := len(r.inbound); n > 0 {
		// The link carries one transfer at a time, in order.
		sent = max(sent, r.inbound[n-1].arrives-r.link.latency())
	}
	r.inbound = append(r.inbound, remoteJob{job: j, io: io, submitted: now,
		arrives: sent + r.link.transfer(io.InputBytes) + r.link.latency()})
	r.stats.Jobs++
	r.stats.InputBytes += io.InputBytes
	return nil
}

// parts is the number of parts a job's work runs in: one a call, each
// part at least a nanosecond.
func parts(j remoteJob) int {
	return int(min(int64(max(j.io.Calls, 1)), int64(j.job.Work)))
}

// partWork is the work of part k of n of w: equal parts, the remainder in
// the last.
func partWork(w time.Duration, k, n int) time.Duration {
	p := w / time.Duration(n)
	if k == n-1 {
		return w - p*time.Duration(n-1)
	}
	return p
}

// serverNext is when the server must next look at the session: a job's
// inputs arriving, a part's call arriving, or, while a part runs, the
// earliest it can finish (its work left, were the GPU its own), so that
// the part's end is seen at its exact time and the next call leaves then.
func (r *RemoteGPU) serverNext() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.serverNextLocked()
}

func (r *RemoteGPU) serverNextLocked() time.Duration {
	switch {
	case !r.started && len(r.inbound) > 0:
		return r.inbound[0].arrives
	case !r.started:
		return NoEvent
	case r.partDue != NoEvent:
		return r.partDue
	}
	info, err := r.dev.gpu.sched.Tenant(r.dev.tenant)
	if err != nil || info.QueuedWork <= 0 {
		return r.server.now
	}
	return r.server.now + info.QueuedWork
}

// serverFire starts the first job whose inputs are in, or submits the
// next part whose call arrived, at the server's time t.
func (r *RemoteGPU) serverFire(t time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		if len(r.inbound) == 0 || r.inbound[0].arrives > t {
			return nil
		}
		r.started, r.partsOn, r.first = true, 0, t
	} else if r.partDue > t {
		return nil
	}
	j := r.inbound[0]
	n := parts(j)
	part := sched.Job{Work: partWork(j.job.Work, r.partsOn, n), Chunk: min(j.job.Chunk, sched.MaxChunk), Tag: j.job.Tag}
	if err := r.dev.submit(part); err != nil {
		return err
	}
	r.partsOn++
	r.partDue = NoEvent
	return nil
}

// partDone takes a part's completion on the server: the job's next call
// leaves for the server now, and its answer comes a round trip later; after
// the last part the job's outputs go back to the client.
func (r *RemoteGPU) partDone(c sched.Completion) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return // dropped by a reset
	}
	j := r.inbound[0]
	if r.partsOn < parts(j) {
		// The answer reaches the client, which makes the next call,
		// neither crossing before a hand-over is done.
		r.partDue = max(c.Finished+r.link.latency(), r.upAt) + r.link.RTT - r.link.latency()
		r.stats.Calls++
		return
	}
	sent := c.Finished
	if n := len(r.outbound); n > 0 {
		sent = max(sent, r.outbound[n-1].arrives-r.link.latency())
	}
	arrives := max(sent+r.link.transfer(j.io.OutputBytes)+r.link.latency(), r.upAt)
	r.outbound = append(r.outbound, remoteDone{arrives: arrives, c: sched.Completion{
		Tenant: r.dev.tenant, Tag: j.job.Tag, Work: j.job.Work,
		Submitted: j.submitted, Started: r.first, Finished: arrives}})
	r.stats.OutputBytes += j.io.OutputBytes
	r.inbound[0] = remoteJob{}
	r.inbound = r.inbound[1:]
	r.started, r.partDue, r.partsOn = false, NoEvent, 0
}

// clientNext is when the next completion reaches the client VM.
func (r *RemoteGPU) clientNext() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.outbound) == 0 {
		return NoEvent
	}
	return r.outbound[0].arrives
}

// deliver hands the client VM the completions that reached it by t.
func (r *RemoteGPU) deliver(vm *VM, t time.Duration) error {
	for {
		r.mu.Lock()
		if len(r.outbound) == 0 || r.outbound[0].arrives > t {
			r.mu.Unlock()
			return nil
		}
		d := r.outbound[0]
		r.outbound = r.outbound[1:]
		r.stats.Completed++
		index := r.index
		r.mu.Unlock()
		if err := vm.completed(index, d.c); err != nil {
			return err
		}
	}
}

// earliestToClient is the earliest time a completion not yet on its way
// can reach the client: the session's first job ends no sooner than its
// parts' work and round trips allow, were the GPU its own.
func (r *RemoteGPU) earliestToClient() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.inbound) == 0 {
		return NoEvent
	}
	j := r.inbound[0]
	n := parts(j)
	var end time.Duration
	left := n
	switch {
	case !r.started:
		end = max(j.arrives, r.server.now) + partWork(j.job.Work, 0, n)
		left = n - 1
	case r.partDue != NoEvent:
		end = r.partDue + partWork(j.job.Work, r.partsOn, n)
		left = n - r.partsOn - 1
	default:
		end = r.serverNextLocked()
		left = n - r.partsOn
	}
	end += time.Duration(left) * (r.link.RTT + j.job.Work/time.Duration(n))
	return end + r.link.latency()
}

// remoteHandoverRTTs is what a session's hand-over to a migrated VM costs
// before it answers again: the client's connection from its new host, a
// TCP handshake and the session's resume request, one round trip each.
// Assumption: Bitfusion's documentation gives no figure, and its client
// reaches its server over TCP on VMXNET3 or over RDMA's connection setup,
// which takes a round trip as well.
const remoteHandoverRTTs = 2

// handOver makes to, on its host at now, the session's client, its device
// index; the session answers again after the hand-over, which it returns.
// Completions on their way reach the new VM, no sooner than then.
func (r *RemoteGPU) handOver(to *VM, index int, now time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	took := remoteHandoverRTTs * r.link.RTT
	r.client, r.index, r.upAt = to, index, now+took
	if r.partDue != NoEvent {
		r.partDue = max(r.partDue, r.upAt+r.link.latency())
	}
	for i := range r.outbound {
		d := &r.outbound[i]
		d.arrives = max(d.arrives, r.upAt)
		d.c.Finished = d.arrives
	}
	r.stats.Handovers++
	return took
}
