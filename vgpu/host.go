package vgpu

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// Placement is how a host chooses a GPU for a new vGPU.
type Placement uint8

// The two allocation schemes of vSphere for vGPU VMs.
const (
	// BreadthFirst (the default) puts a vGPU on the GPU with the fewest
	// vGPUs, spreading VMs for performance.
	BreadthFirst Placement = iota
	// DepthFirst puts a vGPU on the GPU with the most vGPUs that still has
	// room, packing VMs for density.
	DepthFirst
)

func (p Placement) String() string {
	switch p {
	case BreadthFirst:
		return "breadth-first"
	case DepthFirst:
		return "depth-first"
	}
	return fmt.Sprintf("Placement(%d)", uint8(p))
}

// Host defaults and limits.
const (
	// DefaultRAMBytes is the guest memory of a host when HostConfig gives
	// none: the 768 GB of the Dell R730 test bed of "vMotion for NVIDIA
	// GRID vGPU Virtual Machines: Case Study of vMotion Using MLaaS" (Hari
	// Sivaraman, Dimitrios Skarlatos, Lan Vu, Uday Kurkure; NVIDIA GTC
	// 2019).
	DefaultRAMBytes = 768 * GiB
	// DefaultFramebufferPageSize is the page size of GPU framebuffers: the
	// 64 KiB big page of NVIDIA's GPU memory management. NVIDIA's open GPU
	// kernel modules (open-gpu-kernel-modules, 2022) map video memory with
	// 4 KiB small, 64 KiB big and 2 MiB huge pages, and on Pascal and
	// later accept no big page size but 64 KiB
	// (kgmmuCheckAndDecideBigPageSize_GP100).
	DefaultFramebufferPageSize = 64 << 10
	// DefaultRAMPageSize is the page size of guest RAM: the x86 base page
	// of 4 KiB (Intel 64 and IA-32 Architectures Software Developer's
	// Manual, volume 3A, chapter 4 "Paging"), the unit a hypervisor's
	// dirty-page tracking works in.
	DefaultRAMPageSize = 4 << 10
	// MaxGPUs bounds the GPUs of a host (a 4U server holds 8-16).
	MaxGPUs = 16
)

// HostConfig describes a host. The zero value is a host with one P40, ECC
// off, 768 GiB of guest memory, breadth-first placement, the scheduler's
// defaults (best effort), synthetic memory backing and 64 KiB / 4 KiB
// pages.
type HostConfig struct {
	// Name identifies the host in errors and generation IDs.
	Name string
	// GPUs is the number of GPUs, 1 to MaxGPUs; 0 means 1.
	GPUs int
	// GPU is their model; the zero value means P40().
	GPU GPUSpec
	// ECC is the initial ECC state of every GPU. A board ships with ECC
	// on; the zero value models one already prepared for vGPU (which the
	// P40 needs; later models also run vGPUs with ECC on, see
	// GPUSpec.ECCWithVGPU).
	ECC bool
	// RAMBytes is the memory the host can give guests; 0 means
	// DefaultRAMBytes. VMs with vGPUs reserve all their guest memory.
	RAMBytes int64
	// Placement chooses a GPU for each new vGPU.
	Placement Placement
	// Sched configures each GPU's scheduler; its Start is replaced by
	// Start below.
	Sched sched.Config
	// Memory is the backing of framebuffers and guest RAM: Synthetic (the
	// default) stores no bytes for generated content and scales to many
	// 24 GB GPUs; Dense and Sparse hold real bytes for byte-exact tests
	// (Dense allocates every framebuffer in full).
	Memory memory.Kind
	// FramebufferPageSize and RAMPageSize are the page sizes; 0 means
	// DefaultFramebufferPageSize and DefaultRAMPageSize. A framebuffer
	// page must divide 1 GiB, the smallest vGPU framebuffer.
	FramebufferPageSize, RAMPageSize int
	// Seed keys everything the host generates: framebuffer contents
	// outside windows, default VM seeds, generation IDs.
	Seed uint64
	// Start is the host's simulated time at creation.
	Start time.Duration
	// UsageResolution and UsageRetention shape each GPU's utilization
	// history (GPU.Utilization): the busy time of every UsageResolution
	// of the clock, kept for UsageRetention; zero means
	// DefaultUsageResolution and DefaultUsageRetention (or as much of it
	// as 2^20 buckets of a finer resolution hold).
	UsageResolution, UsageRetention time.Duration
}

func (c HostConfig) withDefaults() (HostConfig, error) {
	if c.GPUs == 0 {
		c.GPUs = 1
	}
	if c.GPU.Model == "" {
		c.GPU = P40()
	}
	if c.RAMBytes == 0 {
		c.RAMBytes = DefaultRAMBytes
	}
	if c.Memory == 0 {
		c.Memory = memory.Synthetic
	}
	if c.FramebufferPageSize == 0 {
		c.FramebufferPageSize = DefaultFramebufferPageSize
	}
	if c.RAMPageSize == 0 {
		c.RAMPageSize = DefaultRAMPageSize
	}
	if c.UsageResolution == 0 {
		c.UsageResolution = DefaultUsageResolution
	}
	if c.UsageRetention == 0 && c.UsageResolution > 0 {
		c.UsageRetention = min(max(DefaultUsageRetention, c.UsageResolution), maxUsageBuckets*c.UsageResolution)
	}
	switch {
	case c.GPUs < 1 || c.GPUs > MaxGPUs:
		return c, configError("%d GPUs outside [1, %d]", c.GPUs, MaxGPUs)
	case c.RAMBytes < 0:
		return c, configError("negative host memory %d", c.RAMBytes)
	case c.Placement != BreadthFirst && c.Placement != DepthFirst:
		return c, configError("unknown placement %v", c.Placement)
	case !pow2(c.FramebufferPageSize) || c.FramebufferPageSize < memory.MinPageSize || GiB%int64(c.FramebufferPageSize) != 0:
		return c, configError("framebuffer page size %d is not a power of two dividing 1 GiB", c.FramebufferPageSize)
	case !pow2(c.RAMPageSize) || c.RAMPageSize < memory.MinPageSize || c.RAMPageSize > memory.MaxPageSize:
		return c, configError("RAM page size %d is not a power of two in [%d, %d]", c.RAMPageSize, memory.MinPageSize, memory.MaxPageSize)
	case c.UsageResolution < time.Millisecond || c.UsageRetention < c.UsageResolution || c.UsageRetention/c.UsageResolution > maxUsageBuckets:
		return c, configError("usage resolution %v and retention %v: want a resolution of 1 ms or more and at most %d of it retained", c.UsageResolution, c.UsageRetention, maxUsageBuckets)
	case c.Start < 0 || c.Start > sched.MaxTime:
		return c, configError("start %v outside [0, %v]", c.Start, sched.MaxTime)
	}
	return c, c.GPU.validate()
}

func pow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// Host is a server with GPUs and guest memory, and the VMs that use them,
// on one simulated clock. It is not safe for concurrent use and starts no
// goroutines.
type Host struct {
	cfg      HostConfig
	now      time.Duration
	gpus     []*GPU
	vms      []*VM
	ramUsed  int64
	genCount uint64
	genSeed  uint64
	phase    phase
	clock    *Clock // the driver's hold on the clock, or nil

	serving     []*RemoteGPU // the remote GPU sessions the host's GPUs serve
	remoteCount int          // sessions opened, numbering them
}

// phase says what the host is doing inside Advance, so that a workload
// that submits work from a completion handler is caught.
type phase uint8

const (
	phaseIdle phase = iota
	phaseRoute
)

// NewHost returns a host with its GPUs empty and its clock at cfg.Start.
func NewHost(cfg HostConfig) (*Host, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, now: cfg.Start}
	f := fnv.New64a()
	f.Write([]byte(cfg.Name))
	h.genSeed = derive(cfg.Seed^f.Sum64(), seedGeneration)
	for i := range cfg.GPUs {
		g, err := newGPU(h, i)
		if err != nil {
			return nil, err
		}
		h.gpus = append(h.gpus, g)
	}
	return h, nil
}

// Name returns the host's name.
func (h *Host) Name() string { return h.cfg.Name }

// Config returns the host's configuration, defaults filled in.
func (h *Host) Config() HostConfig { return h.cfg }

// Now returns the host's simulated time.
func (h *Host) Now() time.Duration { return h.now }

// NextEventAt returns when, on the host's clock, the earliest event of its
// running workloads is due (a request arriving, a frame, a poll) or a
// stalled VM's stall ends (VM.Stall), and false if none is pending. An
// event a paused VM's workload held back is due now, once the VM runs
// again; one a stalled VM's held back, at the stall's end. A host joined
// to others by remote GPUs also counts their jobs' and completions'
// arrivals and their parts' ends (RemoteGPU). Advance stops at each such
// event on its way, and an Advance split anywhere gives the same result
// as one, so a discrete-event driver advances the host from one event to
// the next (Advance(t - Now()), or AdvanceHosts for joined hosts) and
// misses nothing between them.
func (h *Host) NextEventAt() (time.Duration, bool) {
	t := NoEvent
	for _, vm := range h.vms {
		if vm.stalled {
			t = min(t, vm.stallUntil)
		} else if w := vm.active(); w != nil {
			t = min(t, w.NextEvent())
			for _, r := range vm.remotes {
				t = min(t, r.clientNext())
			}
		}
	}
	for _, r := range h.serving {
		t = min(t, r.serverNext())
	}
	return max(t, h.now), t != NoEvent
}

// GPUs returns the host's GPUs in index order.
func (h *Host) GPUs() []*GPU { return append([]*GPU(nil), h.gpus...) }

// GPU returns GPU i, or nil.
func (h *Host) GPU(i int) *GPU {
	if i < 0 || i >= len(h.gpus) {
		return nil
	}
	return h.gpus[i]
}

// VMs returns the VMs on the host (of every state but destroyed), in
// creation order.
func (h *Host) VMs() []*VM { return append([]*VM(nil), h.vms...) }

// VM returns the VM with the given ID.
func (h *Host) VM(id string) (*VM, bool) {
	for _, v := range h.vms {
		if v.id == id {
			return v, true
		}
	}
	return nil, false
}

// RAMBytes returns the guest memory of the host.
func (h *Host) RAMBytes() int64 { return h.cfg.RAMBytes }

// FreeRAMBytes returns the guest memory not reserved by a VM.
func (h *Host) FreeRAMBytes() int64 { return h.cfg.RAMBytes - h.ramUsed }

// Placement returns the host's placement scheme.
func (h *Host) Placement() Placement { return h.cfg.Placement }

// SetPlacement changes the placement scheme for later vGPUs.
func (h *Host) SetPlacement(p Placement) error {
	if p != BreadthFirst && p != DepthFirst {
		return configError("unknown placement %v", p)
	}
	h.cfg.Placement = p
	return nil
}

// nextGeneration returns a new generation ID, different from parent and,
// with overwhelming probability, from every other ID this or another host
// hands out.
func (h *Host) nextGeneration(parent uint64) uint64 {
	h.genCount++
	g := mix64(h.genSeed+h.genCount*0x9e3779b97f4a7c15) ^ mix64(parent)
	if g == 0 || g == parent {
		g = mix64(g + 1)
	}
	return g
}

// Advance moves the host on by d of simulated time: every GPU's scheduler
// and every running VM's workload, by exactly d. A host whose clock a
// driver holds (TakeClock) refuses it with an error wrapping ErrDriven:
// only the driver moves it on, so its clock and the driver's never drift
// apart. A host joined to another by a remote GPU session refuses it with
// an error wrapping ErrOutOfStep: AdvanceHosts moves the two together.
//
// Inside, it goes from event to event: it takes the earliest next event of
// any running workload (a request arriving, a frame due, a poll) or stall
// end, advances every GPU's scheduler to it — handing each completed job
// back to the workload that submitted it, by its tag — ends the stalls due
// (VM.Stall), advances every workload's continuous memory writes to it,
// and only then fires the events due, so that work is submitted at its
// exact time and its latency is right. Because every event time is a
// function of the workloads' and stalls' state alone, splitting an
// Advance into many smaller ones gives the same result as one call.
//
// A workload hook that fails fails Advance, but for an access to a page
// that cannot come (memory.ErrAbsent: its fault function failed, as a
// failed post-copy's destination's does): that VM is paused where its
// step stopped, and the host goes on with the others.
func (h *Host) Advance(d time.Duration) error {
	if h.clock != nil {
		return fmt.Errorf("%w: host %q is driven by %s", ErrDriven, h.cfg.Name, h.clock.driver)
	}
	if err := h.checkAlone(); err != nil {
		return err
	}
	return h.advance(d)
}

func (h *Host) advance(d time.Duration) error {
	if d < 0 || d > sched.MaxTime-h.now {
		return fmt.Errorf("%w: advance by %v from %v", ErrInvalidDuration, d, h.now)
	}
	end := h.now + d
	for {
		// Every bucket boundary of the GPUs' utilization history is a
		// stop, so that each scheduler interval lies within one bucket.
		t := min(end, h.gpus[0].usage.nextBoundary(h.now))
		if e, ok := h.NextEventAt(); ok && e < t {
			t = e
		}
		h.now = t
		h.phase = phaseRoute
		for _, g := range h.gpus {
			if err := g.advance(t); err != nil {
				h.phase = phaseIdle
				return err
			}
		}
		if err := h.routeRemote(t); err != nil {
			h.phase = phaseIdle
			return err
		}
		h.phase = phaseIdle
		if err := h.fireRemote(t); err != nil {
			return err
		}
		// A stall that ends now ends before the workloads move on: its
		// vGPUs get turns from now, and its workload, resumed at now,
		// fires what fell due meanwhile below.
		if err := h.endStalls(); err != nil {
			return err
		}
		h.pauseLost()
		for _, vm := range h.vms {
			if w := vm.active(); w != nil {
				if err := w.AdvanceTo(&vm.env, t); err != nil && !vm.losePage(err) {
					return vm.hookError(w, "advance", err)
				}
			}
		}
		h.pauseLost()
		for _, vm := range h.vms {
			if w := vm.active(); w != nil && w.NextEvent() <= t {
				if err := w.Fire(&vm.env); err != nil {
					if vm.losePage(err) {
						continue
					}
					return vm.hookError(w, "fire", err)
				}
				if w.NextEvent() <= t {
					return fmt.Errorf("%w: VM %q: workload %s left an event due at %v unfired", ErrWorkload, vm.id, w.Name(), w.NextEvent())
				}
			}
		}
		h.pauseLost()
		if t == end {
			return nil
		}
	}
}

// pauseLost pauses the VMs whose workloads met a page that could not come
// (VM.losePage), between the stages of a step: the VM stops there, as a
// guest whose memory access cannot complete does, and the host goes on.
func (h *Host) pauseLost() {
	for _, vm := range h.vms {
		if vm.pageLost {
			vm.pageLost = false
			if vm.state == VMRunning {
				_ = vm.pause()
			}
		}
	}
}

// remove takes vm off the host's list.
func (h *Host) remove(vm *VM) {
	for i, v := range h.vms {
		if v == vm {
			h.vms = append(h.vms[:i], h.vms[i+1:]...)
			return
		}
	}
}

// routeRemote hands the host's running VMs the completions of their
// remote GPUs that reached them by t; a paused or stalled VM's wait.
func (h *Host) routeRemote(t time.Duration) error {
	for _, vm := range h.vms {
		if vm.active() == nil {
			continue
		}
		for _, r := range vm.remotes {
			if err := r.deliver(vm, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// fireRemote puts on the host's GPUs the remote sessions' jobs and calls
// that reached them by t.
func (h *Host) fireRemote(t time.Duration) error {
	for _, r := range h.serving {
		if err := r.serverFire(t); err != nil {
			return fmt.Errorf("%w: remote session %d: %w", ErrWorkload, r.id, err)
		}
	}
	return nil
}
