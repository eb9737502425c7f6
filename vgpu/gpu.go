package vgpu

import (
	"fmt"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// GPU is one physical GPU of a host: its framebuffer, statically
// partitioned into windows of one vGPU type, and the scheduler that
// time-shares its engines.
//
// The framebuffer is divided into MaxInstances slots of the type's size,
// slot i starting at i times the size, so every window is aligned to its
// own size and windows never overlap. All vGPUs resident on a GPU are of
// the same type, as NVIDIA's vGPU manager requires of every model here:
// the release 8.0 user guide allows only homogeneous vGPUs on a physical
// GPU (P40, V100, T4); the V100 and T4 never gained the mixed-size mode of
// vGPU 17, and on the A100, which offers only C-series types, the default
// equal-size mode means one type (each table's file cites its source). The
// type is free again once the last vGPU is destroyed.
type GPU struct {
	host  *Host
	index int
	spec  GPUSpec
	fb    *memory.Region
	sched *sched.Scheduler
	ecc   bool

	typ         *Profile // type of the resident vGPUs; nil when none
	slots       []*VGPU  // by slot; len is typ.MaxInstances
	count       int
	passthrough *VM
	byTenant    map[sched.TenantID]*VGPU
	rep         sched.Report
	usage       usageHistory
}

func newGPU(h *Host, index int) (*GPU, error) {
	cfg := h.cfg
	fb, err := memory.New(memory.Config{
		SizeBytes: cfg.GPU.FramebufferBytes, PageSize: cfg.FramebufferPageSize,
		Kind: cfg.Memory, Seed: derive(cfg.Seed, seedGPU<<32|uint64(index)),
		// A migration collects the dirty pages of each vGPU's window,
		// never those of the whole framebuffer.
		DirtyLogOff: true,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: GPU %d framebuffer: %w", ErrConfig, index, err)
	}
	sc := cfg.Sched
	sc.Start = cfg.Start
	s, err := sched.New(sc)
	if err != nil {
		return nil, fmt.Errorf("%w: GPU %d scheduler: %w", ErrConfig, index, err)
	}
	return &GPU{host: h, index: index, spec: cfg.GPU, fb: fb, sched: s, ecc: cfg.ECC,
		byTenant: make(map[sched.TenantID]*VGPU), usage: newUsageHistory(cfg.UsageResolution, cfg.UsageRetention)}, nil
}

// Index returns the GPU's position on its host, from 0.
func (g *GPU) Index() int { return g.index }

// Framebuffer returns the GPU's whole framebuffer, of which every vGPU's
// framebuffer is a window.
func (g *GPU) Framebuffer() *memory.Region { return g.fb }

// Scheduler returns a read-only view of the scheduler that shares the
// GPU's engines among its vGPUs: its tenants (VGPU.Tenant names a vGPU's)
// and the GPU time it granted. Only the host drives the scheduler.
func (g *GPU) Scheduler() sched.View { return g.sched.View() }

// ECCEnabled reports whether ECC memory is on.
func (g *GPU) ECCEnabled() bool { return g.ecc }

// SetECC turns ECC memory on or off. As on the real board (nvidia-smi -e
// with a reset), the GPU must hold no vGPU and no passthrough VM. On a
// model whose spec has ECCWithVGPU false (the P40), ECC must be off before
// a vGPU can be created; on the others vGPUs run with it on, and on GDDR
// (the T4) it costs each vGPU framebuffer (Profile.ReservedFramebufferBytes).
func (g *GPU) SetECC(on bool) error {
	if g.count > 0 || g.passthrough != nil {
		return fmt.Errorf("%w: GPU %d holds %d vGPUs", ErrGPUBusy, g.index, g.count)
	}
	g.ecc = on
	return nil
}

// Type returns the type of the vGPUs resident on the GPU, and false when
// there are none (any type may then be placed).
func (g *GPU) Type() (Profile, bool) {
	if g.typ == nil {
		return Profile{}, false
	}
	return *g.typ, true
}

// VGPUs returns the resident vGPUs in slot order.
func (g *GPU) VGPUs() []*VGPU {
	out := make([]*VGPU, 0, g.count)
	for _, v := range g.slots {
		if v != nil {
			out = append(out, v)
		}
	}
	return out
}

// VGPUCount returns the number of resident vGPUs.
func (g *GPU) VGPUCount() int { return g.count }

// PassthroughVM returns the VM the GPU is given to whole, or nil.
func (g *GPU) PassthroughVM() *VM { return g.passthrough }

// Free returns how many more vGPUs of p the GPU could take now, and why
// none if zero.
func (g *GPU) Free(p Profile) (int, Refusal) {
	switch {
	case !equalModel(g.spec.Model, p.GPUModel):
		return 0, RefusedModel
	case g.passthrough != nil:
		return 0, RefusedPassthrough
	case g.ecc && !g.spec.ECCWithVGPU:
		return 0, RefusedECC
	case g.typ != nil && g.typ.Name != p.Name:
		return 0, RefusedOtherType
	case g.count >= p.MaxInstances:
		return 0, RefusedFull
	}
	return p.MaxInstances - g.count, 0
}

// freeSlot returns the lowest free slot for p; the caller has checked that
// one exists.
func (g *GPU) freeSlot(p Profile) int {
	if g.typ == nil {
		return 0
	}
	for i, v := range g.slots {
		if v == nil {
			return i
		}
	}
	return -1
}

// mapSlot maps the window of slot for p with seed, making p the GPU's type
// if it had none.
func (g *GPU) mapSlot(p Profile, slot int, seed uint64) (*memory.Region, error) {
	pages := int(p.FramebufferBytes / int64(g.fb.PageSize()))
	w, err := g.fb.Map(slot*pages, pages, seed)
	if err != nil {
		return nil, err
	}
	w.StopDirtyLog() // off but while migrating: see VM
	if g.typ == nil {
		t := p
		g.typ = &t
		g.slots = make([]*VGPU, p.MaxInstances)
	}
	return w, nil
}

// release frees v's slot, and the GPU's type with its last vGPU.
func (g *GPU) release(v *VGPU) {
	if v.profile.Passthrough {
		g.passthrough = nil
		return
	}
	if g.slots[v.slot] == v {
		g.slots[v.slot] = nil
		g.count--
	}
	if g.count == 0 {
		g.typ, g.slots = nil, nil
	}
}

// advance moves the GPU's scheduler to t and hands each completion to the
// vGPU that submitted it.
func (g *GPU) advance(t time.Duration) error {
	if err := g.sched.Advance(t-g.sched.Now(), &g.rep); err != nil {
		return fmt.Errorf("%w: GPU %d: %w", ErrInvalidDuration, g.index, err)
	}
	g.usage.add(g.rep.Start, g.rep.End, g.rep.Busy)
	for _, c := range g.rep.Completions {
		if v := g.byTenant[c.Tenant]; v != nil {
			if err := v.complete(c); err != nil {
				return err
			}
		}
	}
	return nil
}

func equalModel(a, b string) bool { return strings.EqualFold(a, b) }
