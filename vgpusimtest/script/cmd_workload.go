package script

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vgpusim/vgpusim/vgpu"
)

var workloadKeys = []string{"vm", "kind", "seed", "model", "rate", "footprint", "ram-working-set", "ram-dirty",
	"fb-dirty", "efficiency", "batch", "data-load", "fps", "updates"}

// kindKeys are the keys each kind of workload takes beyond vm, kind and
// seed; a key of another kind is a script error, not ignored.
var kindKeys = map[string][]string{
	"inference": {"model", "rate", "footprint", "ram-working-set", "ram-dirty", "fb-dirty", "efficiency"},
	"training":  {"model", "batch", "footprint", "ram-dirty", "data-load", "efficiency"},
	"cad":       {"fps", "footprint", "ram-working-set", "ram-dirty", "efficiency"},
	"desktop":   {"updates", "footprint", "ram-working-set", "ram-dirty", "efficiency"},
	"none":      {},
}

// maxRatePerSec bounds request, frame and update rates: far beyond any
// GPU's, short of a script that never ends.
const maxRatePerSec = 1e5

// cmdWorkload gives a VM a workload; kind=none says it runs none, and
// fails if it does.
func (w *world) cmdWorkload(a *args) (string, error) {
	id, kind := a.need("vm"), a.need("kind")
	if a.err != nil {
		return "", a.err
	}
	allowed, ok := kindKeys[kind]
	if !ok {
		return "", fmt.Errorf("%w: workload: kind=%s is not inference, training, cad, desktop or none", errBadValue, kind)
	}
	for _, k := range slices.Sorted(maps.Keys(a.byKey)) {
		if k != "vm" && k != "kind" && k != "seed" && !slices.Contains(allowed, k) {
			return "", fmt.Errorf("%w: workload: kind=%s takes no key %q (it takes: seed %s)", errUnknownKey, kind, k, strings.Join(allowed, " "))
		}
	}
	vm, err := w.vm(id)
	if err != nil {
		return "", err
	}
	if kind == "none" {
		if wl := vm.Workload(); wl != nil {
			return "", fmt.Errorf("%w: VM %q runs %s", errExists, id, wl.Name())
		}
		return fmt.Sprintf("%s runs no workload\n", id), nil
	}
	wl, err := w.newWorkload(a, kind, vm)
	if err != nil {
		return "", err
	}
	if err := vm.SetWorkload(wl); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s runs %s\n", id, wl.Name()), nil
}

// newWorkload builds a workload of kind from the keys; a zero field takes
// the workload's own default.
func (w *world) newWorkload(a *args, kind string, vm *vgpu.VM) (vgpu.Workload, error) {
	seed := a.uint("seed", 0)
	eff := a.float("efficiency", 0, 0, 1)
	ramDirty := a.rate("ram-dirty", 0)
	ramSet := a.size("ram-working-set", 0)
	model := parsed(a, "model", vgpu.InceptionV3(), "inception or mobilenet", parseModel)
	// "usable" fills the vGPU's usable framebuffer, as VMware's
	// worst-case tables assume.
	footprint := int64(0)
	if a.str("footprint", "") == "usable" {
		if len(vm.VGPUs()) == 0 {
			return nil, fmt.Errorf("%w: workload: footprint=usable on VM %q, which has no vGPU", errBadValue, vm.ID())
		}
		footprint = vm.VGPUs()[0].UsableFramebufferBytes()
	} else {
		footprint = a.size("footprint", 0)
	}
	var wl vgpu.Workload
	var err error
	switch kind {
	case "inference":
		cfg := vgpu.InferenceConfig{Model: model, RequestsPerSec: a.float("rate", 0, 0, maxRatePerSec), Efficiency: eff,
			FootprintBytes: footprint, RAMWorkingSetBytes: ramSet, RAMDirtyBytesPerSec: ramDirty,
			FramebufferDirtyBytesPerSec: a.rate("fb-dirty", 0), Seed: seed}
		if a.err == nil {
			wl, err = vgpu.NewInference(cfg)
		}
	case "training":
		cfg := vgpu.TrainingConfig{Model: model, BatchSize: a.int("batch", 0, 0, 1<<16), Efficiency: eff,
			FootprintBytes: footprint, RAMDirtyBytesPerSec: ramDirty, DataLoad: a.dur("data-load", 0), Seed: seed}
		if a.err == nil {
			wl, err = vgpu.NewTraining(cfg)
		}
	case "cad":
		cfg := vgpu.CADConfig{TargetFPS: a.float("fps", 0, 0, maxRatePerSec), Efficiency: eff, FootprintBytes: footprint,
			RAMWorkingSetBytes: ramSet, RAMDirtyBytesPerSec: ramDirty, Seed: seed}
		if a.err == nil {
			wl, err = vgpu.NewCAD(cfg)
		}
	case "desktop":
		cfg := vgpu.DesktopConfig{UpdatesPerSec: a.float("updates", 0, 0, maxRatePerSec), Efficiency: eff,
			SurfaceBytes: footprint, RAMWorkingSetBytes: ramSet, RAMDirtyBytesPerSec: ramDirty, Seed: seed}
		if a.err == nil {
			wl, err = vgpu.NewDesktop(cfg)
		}
	}
	if a.err != nil {
		return nil, a.err
	}
	return wl, err
}

// parseModel reads a network's name: inception (Inception V3) or
// mobilenet.
func parseModel(s string) (vgpu.Model, error) {
	switch strings.ToLower(strings.NewReplacer(" ", "", "-", "", "_", "").Replace(s)) {
	case "inception", "inceptionv3":
		return vgpu.InceptionV3(), nil
	case "mobilenet":
		return vgpu.MobileNet(), nil
	}
	return vgpu.Model{}, errBadValue
}
