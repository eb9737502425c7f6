package migrate

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// StunEstimate is a stun time predicted before it happens, by part.
type StunEstimate struct {
	// Total is the whole stun.
	Total time.Duration `json:"total_ns"`
	// Fixed is the stun's fixed costs: quiesce, the device checkpoint's
	// save and restore (fixed part and PCIe transfer of the device state)
	// and resume.
	Fixed time.Duration `json:"fixed_ns"`
	// Pages is the transfer of the dirty pages and the device state over
	// the link, with the link's latency for each of the stun's transfers.
	Pages time.Duration `json:"pages_ns"`
	// CheckpointPath is, in Legacy mode, the used framebuffer's passage
	// through the device checkpoint path (or the link, if slower).
	CheckpointPath time.Duration `json:"checkpoint_path_ns"`

	dirtyWire time.Duration // Pages, which pre-copy can shrink
}

// stunInputs are what an estimate is computed from.
type stunInputs struct {
	mode                Mode
	costs               StunCosts
	link                Link
	devices             int
	deviceStateBytes    int64
	dirtyRawBytes       int64 // pages to send during the stun, raw
	wireNum, wireDen    int64 // wire bytes per raw byte
	bandwidthBps        int64
	usedFramebufferRaw  int64 // Legacy: framebuffer pages copied in the stun
	pcieBps, checkpoint int64
}

func (in stunInputs) estimate() StunEstimate {
	var e StunEstimate
	stateOverPCIe := transferTime(in.deviceStateBytes, in.pcieBps)
	e.Fixed = in.costs.Quiesce + time.Duration(in.devices)*in.costs.DeviceCheckpoint + 2*stateOverPCIe + in.costs.Resume
	wire := scaleBytes(in.dirtyRawBytes, in.wireNum, in.wireDen) + in.deviceStateBytes
	// Three transfers in the stun — final RAM, final framebuffer, device
	// state — each waits for its last byte's flight.
	e.dirtyWire = transferTime(wire, in.bandwidthBps) + 3*in.link.Latency
	e.Pages = e.dirtyWire
	if in.mode == Legacy && in.usedFramebufferRaw > 0 {
		path := transferTime(in.usedFramebufferRaw, in.checkpoint)
		link := transferTime(scaleBytes(in.usedFramebufferRaw, in.wireNum, in.wireDen), in.bandwidthBps)
		e.CheckpointPath = max(path, link)
	}
	e.Total = e.Fixed + e.Pages + e.CheckpointPath
	return e
}

// expectedStun is the switchover rule's prediction after a round: the
// pages dirty now, at the wire ratio measured so far, over the bandwidth
// measured in the round, plus the fixed costs.
func (m *Migration) expectedStun(dirtyRaw, bandwidthBps int64) StunEstimate {
	in := m.stunInputs(m.vm)
	in.dirtyRawBytes = dirtyRaw
	in.wireNum, in.wireDen = m.wireNum(), m.wireDen()
	in.bandwidthBps = bandwidthBps
	if m.cfg.Mode == Legacy {
		for _, r := range m.srcRegs[1:] {
			in.usedFramebufferRaw += usedBytes(r)
		}
	}
	return in.estimate()
}

func (m *Migration) stunInputs(vm *vgpu.VM) stunInputs {
	in := stunInputs{mode: m.cfg.Mode, costs: m.cfg.Costs, link: m.cfg.Link, devices: len(vm.VGPUs()),
		deviceStateBytes: m.stateBytes, pcieBps: vm.Host().Config().GPU.PCIeDMABytesPerSec}
	in.checkpoint = m.checkpointPathRate()
	return in
}

// usedBytes is the size of r's pages not in their initial state.
func usedBytes(r *memory.Region) int64 {
	n := int64(0)
	for p := range r.Pages() {
		if st, err := r.PageState(p); err == nil && (st.Gen != 0 || st.Class != memory.ClassZero) {
			n++
		}
	}
	return n * int64(r.PageSize())
}

// deviceStateBytes is the size the VM's device states would have if saved
// now.
func deviceStateBytes(vm *vgpu.VM) (int64, error) {
	snaps, err := vm.Snapshots()
	if err != nil {
		return 0, wrap(ErrSource, err)
	}
	n := int64(0)
	var buf []byte
	for _, s := range snaps {
		if buf, err = vgpu.EncodeState(buf[:0], s); err != nil {
			return 0, wrap(ErrSource, err)
		}
		n += int64(len(buf))
	}
	return n, nil
}

// estimate is the stun of cfg's migration of vm if pre-copy converged with
// nothing left dirty: the floor of a PreCopy migration's stun (the
// switchover rule lets at most StunTarget more in), and, in Legacy mode,
// the stun itself, which is dominated by the used framebuffer's passage
// through the checkpoint path.
func estimate(vm *vgpu.VM, cfg Config) (StunEstimate, error) {
	if err := vm.CheckMigratable(); err != nil {
		return StunEstimate{}, wrap(ErrIncompatible, err)
	}
	stateBytes, err := deviceStateBytes(vm)
	if err != nil {
		return StunEstimate{}, err
	}
	gpu := vm.Host().Config().GPU
	in := stunInputs{mode: cfg.Mode, costs: cfg.Costs, link: cfg.Link, devices: len(vm.VGPUs()),
		deviceStateBytes: stateBytes, wireNum: 1, wireDen: 1, bandwidthBps: cfg.Link.GoodputBytesPerSec(),
		pcieBps: gpu.PCIeDMABytesPerSec, checkpoint: cfg.Costs.CheckpointPathBytesPerSec}
	if in.checkpoint == 0 {
		in.checkpoint = gpu.PCIeDMABytesPerSec
	}
	if cfg.Mode == Legacy {
		for _, r := range vm.Framebuffers() {
			in.usedFramebufferRaw += usedBytes(r)
		}
	}
	return in.estimate(), nil
}

// EstimateStun predicts, before any migration, the stun of migrating vm
// over link in mode with that mode's default costs, as vSphere reports
// stun-time estimates per bandwidth. In Legacy mode it is the stun itself
// (the used framebuffer through the device checkpoint path dominates it);
// in PreCopy mode it is the floor a converged pre-copy reaches, the fixed
// costs and the device state, to which the switchover rule adds at most the
// stun target.
func EstimateStun(vm *vgpu.VM, link Link, mode Mode) (StunEstimate, error) {
	if vm == nil {
		return StunEstimate{}, fmt.Errorf("%w: nil VM", ErrConfig)
	}
	cfg, err := Config{Mode: mode, Link: link}.withDefaults()
	if err != nil {
		return StunEstimate{}, err
	}
	return estimate(vm, cfg)
}
