package fuzz_test

import (
	"errors"
	"fmt"
	"slices"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The invariants FuzzHostOps checks after every operation.

// hostopsWindow is one vGPU's window in its GPU's framebuffer, in pages.
type hostopsWindow struct {
	v           *vgpu.VGPU
	first, size int
}

func (w *hostopsWorld) check() error {
	for _, c := range []func() error{w.checkEnded, w.checkOwners, w.checkMemory, w.checkWindows, w.checkSched} {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

// windows returns the windows of the vGPUs of every VM on a GPU, incoming
// ones included, in address order.
func (w *hostopsWorld) windows(k hostopsGPUKey) []hostopsWindow {
	var out []hostopsWindow
	for _, vm := range w.hosts[k.host].VMs() {
		for _, v := range vm.VGPUs() {
			if v.GPU().Index() == k.gpu {
				fb := v.Framebuffer()
				out = append(out, hostopsWindow{v, fb.FirstPage(), fb.Pages()})
			}
		}
	}
	slices.SortFunc(out, func(a, b hostopsWindow) int { return a.first - b.first })
	return out
}

// checkWindows: on each GPU the windows lie inside the framebuffer, do
// not overlap, are of one type, start at their slot, and are the windows
// mapped on the GPU's framebuffer. A byte a VM wrote that now lies in
// another VM's window, or in none, reads as zero: no access across
// tenants, and a released window is scrubbed.
func (w *hostopsWorld) checkWindows() error {
	for hi, h := range w.hosts {
		for _, g := range h.GPUs() {
			k := hostopsGPUKey{hi, g.Index()}
			wins := w.windows(k)
			root := g.Framebuffer()
			for i, x := range wins {
				p := x.v.Profile()
				switch {
				case x.first < 0 || x.first+x.size > root.Pages():
					return fmt.Errorf("%s GPU %d: window [%d, %d) outside %d pages", h.Name(), k.gpu, x.first, x.first+x.size, root.Pages())
				case i > 0 && wins[i-1].first+wins[i-1].size > x.first:
					return fmt.Errorf("%s GPU %d: windows at pages %d and %d overlap", h.Name(), k.gpu, wins[i-1].first, x.first)
				case p.Name != wins[0].v.Profile().Name:
					return fmt.Errorf("%s GPU %d holds %s and %s", h.Name(), k.gpu, wins[0].v.Profile().Name, p.Name)
				case int64(x.first)*int64(root.PageSize()) != int64(x.v.Slot())*p.FramebufferBytes:
					return fmt.Errorf("%s GPU %d: slot %d window starts at page %d", h.Name(), k.gpu, x.v.Slot(), x.first)
				}
			}
			if n := len(root.Windows()); n != len(wins) || g.VGPUCount() != len(wins) {
				return fmt.Errorf("%s GPU %d: %d windows mapped, %d vGPUs counted, %d held by VMs", h.Name(), k.gpu, n, g.VGPUCount(), len(wins))
			}
			if err := w.checkTaint(k, wins); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTaint first notes where each VM's written bytes lie now, then reads
// every such place: in a window of the VM that wrote it, checkMemory has
// compared it; anywhere else it must read as zero.
func (w *hostopsWorld) checkTaint(k hostopsGPUKey, wins []hostopsWindow) error {
	g := w.hosts[k.host].GPU(k.gpu)
	ps := int64(g.Framebuffer().PageSize())
	t := w.taint[k]
	if t == nil {
		t = map[int64]bool{}
		w.taint[k] = t
	}
	for _, x := range wins {
		if sh := w.written(x.v.VM().ID()); sh != nil && x.v.Index() < len(sh.fb) {
			for off := range sh.fb[x.v.Index()] {
				t[int64(x.first)*ps+off] = true
			}
		}
	}
	var b [1]byte
	for phys := range t {
		i, _ := slices.BinarySearchFunc(wins, phys/ps, func(x hostopsWindow, page int64) int {
			return x.first + x.size - 1 - int(page) // ends before page: negative
		})
		var err error
		where := "outside any window"
		if i < len(wins) && int64(wins[i].first)*ps <= phys {
			x := wins[i]
			off := phys - int64(x.first)*ps
			if sh := w.written(x.v.VM().ID()); sh != nil && x.v.Index() < len(sh.fb) {
				if _, mine := sh.fb[x.v.Index()][off]; mine {
					continue
				}
			}
			where = fmt.Sprintf("in %s's vGPU %d at %#x", x.v.VM().ID(), x.v.Index(), off)
			_, err = x.v.ReadAt(b[:], off)
		} else {
			_, err = g.Framebuffer().ReadAt(b[:], phys)
		}
		if err != nil {
			return fmt.Errorf("%s GPU %d at %#x (%s): %w", w.hosts[k.host].Name(), k.gpu, phys, where, err)
		}
		if b[0] != 0 {
			return fmt.Errorf("%s GPU %d at %#x (%s) holds %#02x another VM wrote, want 0",
				w.hosts[k.host].Name(), k.gpu, phys, where, b[0])
		}
	}
	return nil
}

// checkMemory: the owner of every live VM holds what was written into it.
func (w *hostopsWorld) checkMemory() error {
	var b [1]byte
	for id, sh := range w.shadow {
		vm := w.owner(id)
		if vm == nil {
			return fmt.Errorf("%s: no host owns it", id)
		}
		for off, want := range sh.ram {
			if _, err := vm.RAM().ReadAt(b[:], off); err != nil || b[0] != want {
				return fmt.Errorf("%s on %s: RAM at %#x holds %#02x (%v), want %#02x", id, vm.Host().Name(), off, b[0], err, want)
			}
		}
		devs := vm.VGPUs()
		if len(devs) != len(sh.fb) {
			return fmt.Errorf("%s on %s has %d vGPUs, want %d", id, vm.Host().Name(), len(devs), len(sh.fb))
		}
		for d, m := range sh.fb {
			for off, want := range m {
				if _, err := devs[d].ReadAt(b[:], off); err != nil || b[0] != want {
					return fmt.Errorf("%s on %s: vGPU %d at %#x holds %#02x (%v), want %#02x", id, vm.Host().Name(), d, off, b[0], err, want)
				}
			}
		}
	}
	return nil
}

// checkOwners: a VM runs on at most one host; it is held, not incoming, by
// one host, or by two from the acknowledgement to the release with the
// source's copy paused; a destination's copy never runs before the
// acknowledgement; a destroyed VM is held nowhere once no migration moves
// it.
func (w *hostopsWorld) checkOwners() error {
	for k := range hostopsMaxIDs {
		id := fmt.Sprintf("vm%d", k)
		mg := w.active(id)
		running, held := 0, 0
		var where []string
		for _, h := range w.hosts {
			vm, ok := h.VM(id)
			if !ok {
				continue
			}
			where = append(where, fmt.Sprintf("%s:%v", h.Name(), vm.State()))
			if vm.State() == vgpu.VMRunning {
				running++
			}
			if mg != nil && h == mg.dst && mg.m.Phase() < migrate.PhaseRelease {
				// Before the acknowledgement the destination's copy is
				// incoming; the Sim restores it (vgpu: incoming -> paused)
				// in PhaseRestore and resumes it only at the
				// acknowledgement, so from PhaseRestore it reads paused
				// beside the paused source, as vgpu.VMState documents.
				// That copy is not counted as an owner.
				restored := vm.State() == vgpu.VMPaused && mg.m.Phase() >= migrate.PhaseRestore
				if vm.State() != vgpu.VMIncoming && !restored {
					return fmt.Errorf("%s is %v at the destination %s in %v, before the acknowledgement",
						id, vm.State(), h.Name(), mg.m.Phase())
				}
				continue
			}
			if vm.State() != vgpu.VMIncoming {
				held++
			}
		}
		released := mg != nil && mg.m.Phase() >= migrate.PhaseRelease
		switch {
		case running > 1, held > 2, held == 2 && !released:
			return fmt.Errorf("%s has several owners: %v", id, where)
		case w.shadow[id] == nil && mg == nil && len(where) > 0:
			return fmt.Errorf("destroyed %s is still held: %v", id, where)
		}
	}
	return nil
}

// checkEnded: a migration that failed left the VM on its source in the
// state it had, dirty logging off, and nothing at the destination, with a
// *PhaseError wrapping the cause; one that completed left the VM only at
// the destination, in the same state. A stalled migration fails by its
// timeout.
func (w *hostopsWorld) checkEnded() error {
	for i, mg := range w.migs {
		if !mg.m.Done() {
			if mg.stallAt >= 0 && w.sim.Now() > mg.stallAt+w.setup.Timeout {
				return fmt.Errorf("migration #%d of %s stalled at %v is still in %v at %v, past its %v timeout",
					i, mg.id, mg.stallAt, mg.m.Phase(), w.sim.Now(), w.setup.Timeout)
			}
			continue
		}
		if mg.checked {
			continue
		}
		mg.checked = true
		srcVM, onSrc := mg.src.VM(mg.id)
		dstVM, onDst := mg.dst.VM(mg.id)
		w.logf("migration #%d of %s ended in %v: %v", i, mg.id, mg.m.Phase(), mg.m.Err())
		if mg.m.Phase() == migrate.PhaseDone {
			switch {
			case mg.m.Err() != nil || mg.stallAt >= 0 || mg.expect != nil:
				return fmt.Errorf("migration #%d of %s completed (err %v) after a stall or failure (want %v)", i, mg.id, mg.m.Err(), mg.expect)
			case onSrc:
				return fmt.Errorf("migration #%d of %s completed but the source still holds it (%v)", i, mg.id, srcVM.State())
			case !mg.loose && (!onDst || dstVM.State() != mg.before):
				return fmt.Errorf("migration #%d of %s completed: destination holds it %v, want %v", i, mg.id, onDst, mg.before)
			}
			continue
		}
		var pe *migrate.PhaseError
		if !errors.As(mg.m.Err(), &pe) || pe.VM != mg.id {
			return fmt.Errorf("migration #%d of %s failed with %v, not a *PhaseError naming it", i, mg.id, mg.m.Err())
		}
		if !mg.loose && mg.expect != nil && !errors.Is(mg.m.Err(), mg.expect) {
			return fmt.Errorf("migration #%d of %s failed with %v, want %v", i, mg.id, mg.m.Err(), mg.expect)
		}
		if onDst {
			return fmt.Errorf("migration #%d of %s failed but the destination holds it (%v)", i, mg.id, dstVM.State())
		}
		if mg.loose {
			continue
		}
		switch {
		case !onSrc:
			return fmt.Errorf("migration #%d of %s failed and the source lost it", i, mg.id)
		case srcVM.State() != mg.before:
			return fmt.Errorf("migration #%d of %s failed: source left %v, was %v", i, mg.id, srcVM.State(), mg.before)
		case srcVM.RAM().DirtyLogging():
			return fmt.Errorf("migration #%d of %s failed with RAM dirty logging still on", i, mg.id)
		}
		for d, fb := range srcVM.Framebuffers() {
			if fb.DirtyLogging() {
				return fmt.Errorf("migration #%d of %s failed with vGPU %d dirty logging still on", i, mg.id, d)
			}
		}
	}
	return nil
}
