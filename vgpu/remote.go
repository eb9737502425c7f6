package vgpu

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vgpusim/vgpusim/sched"
)

// ErrOutOfStep reports hosts joined by a remote GPU whose clocks would
// drift apart: one moved on alone (Host.Advance), a session opened between
// hosts whose clocks differ, or a set of hosts that leaves out one end of
// a session (Horizon, AdvanceHosts).
var ErrOutOfStep = errors.New("vgpu: hosts joined by a remote GPU out of step")

// RemoteLink is the network between a VM and the GPU server whose GPU it
// uses remotely (RemoteGPU), as VMware vSphere Bitfusion reaches a GPU in
// another host (seed 002).
type RemoteLink struct {
	// Name names the link in tables.
	Name string
	// RTT is the round trip of a small message: a remote call that waits
	// for its answer costs one. Half of it is the one-way latency, which
	// is also how far apart in time two hosts joined by the link can move
	// without missing a message (Horizon).
	RTT time.Duration
	// BytesPerSec is the rate of a transfer, each way: a job's inputs go
	// to the server at it, its outputs come back at it.
	BytesPerSec int64
}

// The remote links of seed 002's three set-ups. The round trips are not
// given there; Bitfusion's documentation asks for one of 50 µs or less
// ("vSphere Bitfusion 4.0 User Guide", the page on PVRDMA adapters:
// "a network connection with a low latency of 50 microseconds or less"),
// and VMware measured a virtual machine's round trip over 10 GbE at a few
// tens of microseconds above a physical machine's ("Network I/O Latency
// on VMware vSphere 5", technical white paper, 2012).

// RemoteVMXNET3 is 10 Gb/s Ethernet through VMXNET3: a 50 µs round trip
// (Bitfusion's bound, above; assumption: a tuned VMXNET3 path meets it no
// better), 1.175 GB/s (10 Gb/s times 1460/1538, TCP's payload in a
// 1500-byte-MTU Ethernet frame with its preamble and gap: IEEE 802.3, RFC
// 793).
func RemoteVMXNET3() RemoteLink {
	return RemoteLink{Name: "10 GbE VMXNET3", RTT: 50 * time.Microsecond, BytesPerSec: 1_175_000_000}
}

// RemoteRoCE is 100 Gb/s RDMA over Converged Ethernet, the adapter in
// DirectPath I/O: a 4 µs round trip (assumption: two one-way RDMA sends of
// about 2 µs, adapter, switch and PCIe included, where NVIDIA's ConnectX-5
// product brief gives the adapter alone "sub-600ns latency"), 12 GB/s
// (assumption: 96 % of the line rate, RoCE's headers in a 4096-byte MTU).
func RemoteRoCE() RemoteLink {
	return RemoteLink{Name: "100 Gb RoCE", RTT: 4 * time.Microsecond, BytesPerSec: 12_000_000_000}
}

// RemotePVRDMA is the same 100 Gb/s RoCE through vSphere's paravirtual
// RDMA adapter, which keeps vMotion possible: a 10 µs round trip
// (assumption: the paravirtual path's extra cost puts it between RoCE in
// DirectPath I/O and VMXNET3, the order seed 002 reports) at RoCE's rate.
func RemotePVRDMA() RemoteLink {
	return RemoteLink{Name: "100 Gb PVRDMA", RTT: 10 * time.Microsecond, BytesPerSec: 12_000_000_000}
}

// Limits of a RemoteLink.
const (
	// MaxRemoteRTT bounds a link's round trip.
	MaxRemoteRTT = time.Second
	// MaxJobCalls bounds JobIO.Calls.
	MaxJobCalls = 1 << 16
	// MaxJobIOBytes bounds JobIO's byte counts.
	MaxJobIOBytes = int64(1) << 40
)

func (l RemoteLink) check() error {
	switch {
	case l.RTT < 2 || l.RTT > MaxRemoteRTT:
		return configError("remote link %q: round trip %v outside [2ns, %v]", l.Name, l.RTT, MaxRemoteRTT)
	case l.BytesPerSec <= 0:
		return configError("remote link %q: rate %d bytes/s is not positive", l.Name, l.BytesPerSec)
	}
	return nil
}

// latency is the one-way latency, half the round trip.
func (l RemoteLink) latency() time.Duration { return l.RTT / 2 }

// transfer is the time n bytes take at the link's rate, rounded up.
func (l RemoteLink) transfer(n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	ns := float64(float64(n) / float64(l.BytesPerSec) * float64(time.Second))
	return time.Duration(ns) + 1
}

// JobIO is what a GPU job moves and waits for when its GPU is remote
// (Env.SubmitIO): a local vGPU ignores it.
type JobIO struct {
	// InputBytes go to the server before the job can run; OutputBytes
	// come back after it, before the VM sees it complete.
	InputBytes, OutputBytes int64
	// Calls is the number of the job's remote calls that wait for an
	// answer; its work runs in that many equal parts, each part's call
	// reaching the server one round trip after the previous part ended
	// [0 or 1: one part]. Other VMs' work may use the GPU meanwhile.
	Calls int
}

func (io JobIO) check() error {
	switch {
	case io.InputBytes < 0 || io.InputBytes > MaxJobIOBytes || io.OutputBytes < 0 || io.OutputBytes > MaxJobIOBytes:
		return configError("job moves %d and %d bytes, outside [0, %d]", io.InputBytes, io.OutputBytes, MaxJobIOBytes)
	case io.Calls < 0 || io.Calls > MaxJobCalls:
		return configError("job makes %d calls, outside [0, %d]", io.Calls, MaxJobCalls)
	}
	return nil
}

// RemoteConfig opens a RemoteGPU.
type RemoteConfig struct {
	// Profile is the vGPU type the session takes on the server's GPU: its
	// framebuffer and its place in the GPU's scheduler, as Bitfusion
	// gives a client a fraction of a GPU.
	Profile string
	// Link is the network between the server and its client VM.
	Link RemoteLink
	// Seed keys the session's framebuffer contents [derived from the
	// server's seed and the session's number].
	Seed uint64
}

// RemoteGPU is a GPU session a GPU server (a Host) opens for a VM on
// another host, the client: a vGPU on one of the server's GPUs, sharing
// its scheduler with the server's other vGPUs and sessions, that the
// client's workload uses as its own vGPU (after its local ones, in Env's
// numbering) across a RemoteLink. Each job's inputs travel to the server
// and its outputs back, each way after the link's one-way latency, and
// each of its calls that waits for an answer (JobIO.Calls) costs a round
// trip in which the GPU is free for others. A session's jobs run one after
// the other, in the order the VM submitted them, as on one CUDA stream.
//
// The framebuffer stays on the server, so a client VM has none of its own
// to migrate. The server's host and the client's keep one clock: a host
// with a session attached refuses Host.Advance, and AdvanceHosts (or
// migrate.Sim) moves them together, never further apart than a message
// takes (Horizon), so a job reaches the server, and a completion the VM,
// at its exact time.
//
// A session is safe for the use its two hosts make of it when a driver
// advances them on separate goroutines; nothing else in it is.
type RemoteGPU struct {
	server *Host
	dev    *VGPU
	link   RemoteLink
	id     int

	// mu guards everything below it, which the two hosts share.
	mu     sync.Mutex
	client *VM // nil until a VM attaches, and after it goes
	index  int // the device's number in the client's Env

	// Jobs on their way to the server or waiting there, in the order the
	// client submitted them; the first is running once started.
	inbound []remoteJob
	started bool          // inbound[0] has begun on the GPU
	partDue time.Duration // when inbound[0]'s next part reaches the GPU; NoEvent while one runs
	partsOn int           // inbound[0]'s parts submitted so far
	first   time.Duration // when inbound[0]'s first part began
	// Completions on their way back to the client, in order.
	outbound []remoteDone
	// upAt is when the session answers its client after a hand-over:
	// nothing crosses the link before it.
	upAt time.Duration

	stats RemoteStats
}

// remoteJob is a job on its way to, or at, the server.
type remoteJob struct {
	job       sched.Job
	io        JobIO
	submitted time.Duration // on the client's clock, which is the server's
	arrives   time.Duration // when its inputs have reached the server
}

// remoteDone is a completion on its way to the client.
type remoteDone struct {
	c       sched.Completion
	arrives time.Duration
}

// RemoteStats counts what a session moved.
type RemoteStats struct {
	// Jobs is the jobs the VM submitted; Completed those whose completion
	// reached it.
	Jobs, Completed int64
	// InputBytes and OutputBytes are what the jobs moved each way.
	InputBytes, OutputBytes int64
	// Calls is the round trips the jobs' calls waited for.
	Calls int64
	// Handovers counts the session's moves to another VM: a migration's
	// hand-over, and its hand-back after a failure.
	Handovers int64
}

// OpenRemote opens a GPU session on one of the host's GPUs, placed as a
// VM's vGPU is, for a VM of another host to attach (VMSpec.Remote). It
// fails as CreateVM does for the profile: a *PlacementError,
// ErrUnknownProfile, ErrConfig (a passthrough profile, a bad link).
func (h *Host) OpenRemote(cfg RemoteConfig) (*RemoteGPU, error) {
	if err := cfg.Link.check(); err != nil {
		return nil, err
	}
	p, err := ParseProfile(cfg.Profile)
	if err != nil {
		return nil, err
	}
	if p.Passthrough {
		return nil, configError("a remote GPU session is a vGPU, not %s", p.Name)
	}
	gpus, err := h.choose(p, 1)
	if err != nil {
		return nil, err
	}
	h.remoteCount++
	seed := cfg.Seed
	if seed == 0 {
		seed = derive(h.cfg.Seed, seedRemote<<32|uint64(h.remoteCount))
	}
	v, err := h.attachSeeded(nil, seed, gpus[0], p, 0)
	if err != nil {
		return nil, err
	}
	r := &RemoteGPU{server: h, dev: v, link: cfg.Link, id: h.remoteCount, partDue: NoEvent}
	v.remote = r
	if err := v.start(); err != nil {
		_ = v.destroy()
		return nil, err
	}
	h.serving = append(h.serving, r)
	return r, nil
}

// Server returns the host the session's GPU is in.
func (r *RemoteGPU) Server() *Host { return r.server }

// Link returns the session's link.
func (r *RemoteGPU) Link() RemoteLink { return r.link }

// VGPU returns the session's vGPU on the server: its framebuffer, its
// tenant, its GPU time.
func (r *RemoteGPU) VGPU() *VGPU { return r.dev }

// Client returns the VM attached to the session, or nil.
func (r *RemoteGPU) Client() *VM {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.client
}

// Stats returns what the session has moved since it opened.
func (r *RemoteGPU) Stats() RemoteStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Close ends the session: its vGPU is destroyed and its framebuffer
// scrubbed. A session a VM is attached to is refused with ErrGPUBusy.
func (r *RemoteGPU) Close() error {
	if r.dev.state == DeviceDestroyed {
		return r.dev.refuse("close")
	}
	if r.Client() != nil {
		return fmt.Errorf("%w: remote session %d of host %q has a VM attached", ErrGPUBusy, r.id, r.server.cfg.Name)
	}
	if err := r.dev.destroy(); err != nil {
		return err
	}
	h := r.server
	for i, s := range h.serving {
		if s == r {
			h.serving = append(h.serving[:i], h.serving[i+1:]...)
			break
		}
	}
	return nil
}
