package migrate

import (
	"fmt"
	"time"

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
	latency             time.Duration // waited on in the stun beyond transfer times
	devices             int
	deviceStateBytes    int64
	dirtyWireBytes      int64 // pages to send during the stun, on the wire
	bandwidthBps        int64
	usedFramebufferRaw  int64 // Legacy: framebuffer pages copied in the stun, raw
	usedFramebufferWire int64 // and on the wire
	pcieBps             int64 // 0: the device states' PCIe transfer is not modelled
}

// estimate is the one expected-stun formula of the package: the fixed
// costs (quiesce, each device checkpoint's fixed part, the device states
// over PCIe at save and at restore, resume), the dirty pages' predicted
// wire bytes and the device states over the bandwidth, the stun's latency,
// and
// in Legacy mode the used framebuffer's passage through the checkpoint
// path or the link, whichever is slower.
func (in stunInputs) estimate() StunEstimate {
	var e StunEstimate
	stateOverPCIe := time.Duration(0)
	if in.pcieBps > 0 {
		stateOverPCIe = transferTime(in.deviceStateBytes, in.pcieBps)
	}
	e.Fixed = addSat(addSat(in.costs.Quiesce, mulSat(in.devices, in.costs.DeviceCheckpoint)), addSat(mulSat(2, stateOverPCIe), in.costs.Resume))
	wire := in.dirtyWireBytes + in.deviceStateBytes
	e.dirtyWire = addSat(transferTime(wire, in.bandwidthBps), in.latency)
	e.Pages = e.dirtyWire
	if in.mode == Legacy && in.usedFramebufferRaw > 0 {
		pathBps := in.costs.CheckpointPathBytesPerSec
		if pathBps == 0 {
			pathBps = in.pcieBps
		}
		path := time.Duration(0) // a path the driver does not model: the link alone
		if pathBps > 0 {
			path = transferTime(in.usedFramebufferRaw, pathBps)
		}
		link := transferTime(in.usedFramebufferWire, in.bandwidthBps)
		e.CheckpointPath = max(path, link)
	}
	e.Total = addSat(addSat(e.Fixed, e.Pages), e.CheckpointPath)
	return e
}

// DeviceStateBytes is the size vm's device states would have if saved
// now.
func DeviceStateBytes(vm *vgpu.VM) (int64, error) {
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
// nothing left dirty (CoreConfig.floor): the floor of a PreCopy
// migration's stun (the switchover rule lets at most StunTarget more in),
// and, in Legacy mode, the stun itself, which is dominated by the used
// framebuffer's passage through the checkpoint path.
func estimate(vm *vgpu.VM, cfg Config) (StunEstimate, error) {
	if err := vm.CheckMigratable(); err != nil {
		return StunEstimate{}, wrap(ErrIncompatible, err)
	}
	stateBytes, err := DeviceStateBytes(vm)
	if err != nil {
		return StunEstimate{}, err
	}
	ccfg, err := simCoreConfig(vm, cfg, stateBytes, new(WireModel))
	if err != nil {
		return StunEstimate{}, err
	}
	return ccfg.floor(), nil
}

// EstimateStun predicts, before any migration, the stun of migrating vm
// as cfg says — its mode, link, codec and costs (zero costs are the
// mode's defaults, as for Migrate) — as vSphere reports stun-time
// estimates per bandwidth. In Legacy mode it is the stun itself (the used
// framebuffer through the device checkpoint path dominates it); in PreCopy
// mode it is the floor a converged pre-copy reaches, the fixed costs and
// the device state, to which the switchover rule adds at most the stun
// target.
func EstimateStun(vm *vgpu.VM, cfg Config) (StunEstimate, error) {
	if vm == nil {
		return StunEstimate{}, fmt.Errorf("%w: nil VM", ErrConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return StunEstimate{}, err
	}
	return estimate(vm, cfg)
}

// addSat is a+b for non-negative durations, at most the largest duration:
// a transfer at no rate takes forever, and forever plus a cost is still
// forever, never a negative stun.
func addSat(a, b time.Duration) time.Duration {
	if a > maxTime-b {
		return maxTime
	}
	return a + b
}

// mulSat is n×d for non-negative n and d, saturating like addSat.
func mulSat(n int, d time.Duration) time.Duration {
	if n > 0 && d > maxTime/time.Duration(n) {
		return maxTime
	}
	return time.Duration(n) * d
}
