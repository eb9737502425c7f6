package fuzz_test

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/vgpu"
)

// hostopsShadow is what the target wrote into one VM: the bytes of guest
// RAM and of each vGPU framebuffer, by offset in the VM's own view.
type hostopsShadow struct {
	ram map[int64]byte
	fb  []map[int64]byte
}

// hostopsMig is a migration the target started and what its end must be.
type hostopsMig struct {
	m        *migrate.Migration
	id       string
	src, dst *vgpu.Host
	link     string
	before   vgpu.VMState  // the source VM's state at the start
	stallAt  time.Duration // Sim time of the first stall; -1 if none
	expect   error         // the sentinel its failure must wrap; nil: any
	loose    bool          // a VM copy was destroyed under it: any failure
	checked  bool          // its end was checked
}

// hostopsGPUKey names one GPU of the world.
type hostopsGPUKey struct{ host, gpu int }

type hostopsGrant struct{ at, granted, overshoot time.Duration }

// hostopsWorld is the hosts, the Sim and the model the invariants are
// checked against.
type hostopsWorld struct {
	setup  hostopsSetup
	hosts  []*vgpu.Host
	sim    *migrate.Sim
	shadow map[string]*hostopsShadow // live VM IDs
	// ghost holds what was written into VMs destroyed under a migration,
	// whose other copy the migration holds until it notices.
	ghost map[string]*hostopsShadow
	migs  []*hostopsMig
	// taint holds, per GPU, the framebuffer offsets (in the GPU's whole
	// framebuffer) some VM's window held a written byte at.
	taint  map[hostopsGPUKey]map[int64]bool
	grants map[*vgpu.VGPU]hostopsGrant                   // per-vGPU baseline
	last   map[hostopsGPUKey]map[*vgpu.VGPU]hostopsGrant // previous check
	log    []string
}

func newHostopsWorld(s hostopsSetup) (*hostopsWorld, error) {
	w := &hostopsWorld{setup: s, shadow: map[string]*hostopsShadow{}, ghost: map[string]*hostopsShadow{},
		taint: map[hostopsGPUKey]map[int64]bool{}, grants: map[*vgpu.VGPU]hostopsGrant{},
		last: map[hostopsGPUKey]map[*vgpu.VGPU]hostopsGrant{}}
	for i := range s.Hosts {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: fmt.Sprintf("host%d", i), GPUs: s.GPUs[i],
			RAMBytes: hostopsHostRAM, Memory: memory.Sparse, FramebufferPageSize: s.FBPage, Seed: uint64(i + 1),
			Sched: sched.Config{Policy: s.Policy, Slice: s.Slice},
			// One clock, as a Sim requires of its hosts, not at zero.
			Start: time.Hour})
		if err != nil {
			return nil, err
		}
		w.hosts = append(w.hosts, h)
	}
	sim, err := migrate.NewSim(migrate.SimConfig{MaxPerHost: s.MaxPerHost}, w.hosts...)
	if err != nil {
		return nil, err
	}
	w.sim = sim
	return w, nil
}

func (w *hostopsWorld) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf(format, args...))
}

// active returns the migration of id under way, or nil.
func (w *hostopsWorld) active(id string) *hostopsMig {
	for _, mg := range w.migs {
		if mg.id == id && !mg.m.Done() {
			return mg
		}
	}
	return nil
}

// owner returns the copy of id that owns it: during a migration the
// source's until the destination acknowledged the resume, otherwise the
// one copy that is not incoming.
func (w *hostopsWorld) owner(id string) *vgpu.VM {
	if mg := w.active(id); mg != nil {
		h := mg.src
		if mg.m.Phase() >= migrate.PhaseRelease {
			h = mg.dst
		}
		vm, _ := h.VM(id)
		return vm
	}
	for _, h := range w.hosts {
		if vm, ok := h.VM(id); ok && vm.State() != vgpu.VMIncoming {
			return vm
		}
	}
	return nil
}

// written returns what was written into id: a live VM's, or a destroyed
// one's while its migration lasts.
func (w *hostopsWorld) written(id string) *hostopsShadow {
	if sh := w.shadow[id]; sh != nil {
		return sh
	}
	if w.active(id) != nil {
		return w.ghost[id]
	}
	return nil
}

func (w *hostopsWorld) hostIndex(h *vgpu.Host) int {
	for i, x := range w.hosts {
		if x == h {
			return i
		}
	}
	return -1
}

// freeID returns the first ID from the op's choice on that no host holds
// and no migration moves, or "".
func (w *hostopsWorld) freeID(o hostopsOp) string {
	for k := range hostopsMaxIDs {
		id := fmt.Sprintf("vm%d", (int(o.A)+k)%hostopsMaxIDs)
		used := w.shadow[id] != nil || w.active(id) != nil
		for _, h := range w.hosts {
			if _, ok := h.VM(id); ok {
				used = true
			}
		}
		if !used {
			return id
		}
	}
	return ""
}

// apply performs one operation. An error the library returns is an
// outcome, logged and checked for its type; a broken promise is returned.
func (w *hostopsWorld) apply(o hostopsOp) error {
	switch o.Kind {
	case hostopsCreate:
		return w.create(o)
	case hostopsDestroy:
		return w.destroy(o)
	case hostopsWriteRAM, hostopsWriteFB:
		return w.write(o)
	case hostopsPlace:
		h := w.hosts[int(o.A)%len(w.hosts)]
		return w.vgpuOutcome("place", h.SetPlacement(o.placement()))
	case hostopsMigrate:
		return w.migrate(o)
	case hostopsCancel, hostopsInject:
		return w.fail(o)
	case hostopsFailLink:
		return w.failLink(o)
	case hostopsStep:
		return w.step(o)
	case hostopsAdvance:
		_, err := w.sim.Advance(o.advance())
		return w.migrateOutcome("advance", err)
	case hostopsPower:
		return w.power(o)
	case hostopsRun:
		_, err := w.sim.Run()
		return w.migrateOutcome("run", err)
	}
	return nil
}
