package script

import (
	"fmt"
	"strings"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// cmdSim configures the Sim; it must come before anything that makes it.
func (w *world) cmdSim(a *args) (string, error) {
	cfg := migrate.SimConfig{
		MaxPerHost:  a.int("max-per-host", 0, 0, 1<<20),
		HostWorkers: a.int("host-workers", 0, 0, 64),
	}
	if a.err != nil {
		return "", a.err
	}
	if w.sim != nil {
		return "", fmt.Errorf("%w: sim comes first, before any command that makes the Sim (or first after reset)", errOrder)
	}
	w.simCfg = cfg
	_, err := w.ensureSim()
	return "ok\n", err
}

// cmdReset forgets the world: the next command starts a new one.
func (w *world) cmdReset(*args) (string, error) {
	*w = *newWorld()
	return "ok\n", nil
}

// maxGPUsPerHost is vgpu.MaxGPUs, the most a host may have.
const maxGPUsPerHost = vgpu.MaxGPUs

func (w *world) cmdHost(a *args) (string, error) {
	cfg := vgpu.HostConfig{
		Name:                a.need("name"),
		GPUs:                a.int("gpus", 1, 1, maxGPUsPerHost),
		RAMBytes:            a.size("ram", vgpu.DefaultRAMBytes),
		FramebufferPageSize: int(a.size("fb-page", vgpu.DefaultFramebufferPageSize)),
		RAMPageSize:         int(a.size("ram-page", vgpu.DefaultRAMPageSize)),
		Seed:                a.uint("seed", uint64(len(w.hosts)+1)),
		ECC:                 a.flag("ecc"),
	}
	model := a.str("gpu", "P40")
	mem := a.str("memory", "synthetic")
	placement := a.str("placement", "breadth")
	if a.err != nil {
		return "", a.err
	}
	spec, err := vgpu.SpecByModel(model)
	if err != nil {
		return "", err
	}
	cfg.GPU = spec
	switch mem {
	case "synthetic":
		cfg.Memory = memory.Synthetic
	case "sparse":
		cfg.Memory = memory.Sparse
	case "dense":
		// Dense allocates every framebuffer in full, 24 GiB for one P40:
		// a script must not take a machine's memory. Sparse holds the
		// same bytes.
		return "", fmt.Errorf("%w: memory=dense allocates every framebuffer in full; use sparse, which holds the same bytes", errUnsupported)
	default:
		return "", fmt.Errorf("%w: host: memory=%s is not synthetic or sparse", errBadValue, mem)
	}
	switch placement {
	case "breadth":
		cfg.Placement = vgpu.BreadthFirst
	case "depth":
		cfg.Placement = vgpu.DepthFirst
	default:
		return "", fmt.Errorf("%w: host: placement=%s is not breadth or depth", errBadValue, placement)
	}
	if _, err := w.host(cfg.Name); err == nil {
		return "", fmt.Errorf("%w: host %q", errExists, cfg.Name)
	}
	s, err := w.ensureSim()
	if err != nil {
		return "", err
	}
	cfg.Start = s.Now()
	h, err := vgpu.NewHost(cfg)
	if err != nil {
		return "", err
	}
	if err := s.AddHost(h); err != nil {
		return "", err
	}
	w.hosts = append(w.hosts, h)
	return fmt.Sprintf("%s: %d x %s, %s RAM, %v memory\n", h.Name(), len(h.GPUs()), spec.Model, gib(h.RAMBytes()), cfg.Memory), nil
}

func (w *world) cmdVM(a *args) (string, error) {
	spec := vgpu.VMSpec{
		ID:                a.need("id"),
		Seed:              a.uint("seed", 0),
		RAMBytes:          a.size("ram", 4<<30),
		RAMFootprintBytes: a.size("footprint", 0),
		Passthrough:       a.flag("passthrough"),
	}
	hostName := a.need("host")
	spec.Profiles = append(a.list("profile"), a.list("profiles")...)
	start := !a.has("start") || a.flag("start")
	paused := a.flag("paused")
	if a.err != nil {
		return "", a.err
	}
	h, err := w.host(hostName)
	if err != nil {
		return "", err
	}
	if _, err := w.vm(spec.ID); err == nil {
		return "", fmt.Errorf("%w: VM %q", errExists, spec.ID)
	}
	vm, err := h.CreateVM(spec)
	if err != nil {
		return "", err
	}
	w.vms = append(w.vms, spec.ID)
	if start || paused {
		if err := vm.Start(); err != nil {
			return vmLine(vm), err
		}
	}
	if paused {
		if err := vm.Pause(); err != nil {
			return vmLine(vm), err
		}
	}
	return vmLine(vm), nil
}

// vmLine says where a VM is, its vGPUs and its state.
func vmLine(vm *vgpu.VM) string {
	var devs []string
	for _, v := range vm.VGPUs() {
		devs = append(devs, fmt.Sprintf("%s on gpu %d slot %d", v.Profile().Name, v.GPU().Index(), v.Slot()))
	}
	return fmt.Sprintf("%s on %s: %s, %v\n", vm.ID(), vm.Host().Name(), strings.Join(devs, ", "), vm.State())
}

func (w *world) cmdPause(a *args) (string, error) {
	return w.vmOp(a, (*vgpu.VM).Pause)
}

func (w *world) cmdResume(a *args) (string, error) {
	return w.vmOp(a, (*vgpu.VM).Resume)
}

// vmOp does what the VM's owner does to it, and prints its state.
func (w *world) vmOp(a *args, op func(*vgpu.VM) error) (string, error) {
	id := a.need("vm")
	if a.err != nil {
		return "", a.err
	}
	vm, err := w.vm(id)
	if err != nil {
		return "", err
	}
	err = op(vm)
	return fmt.Sprintf("%s on %s: %v\n", vm.ID(), vm.Host().Name(), vm.State()), err
}

func (w *world) cmdLink(a *args) (string, error) {
	name := a.need("name")
	from := a.str("from", name)
	if a.err != nil {
		return "", a.err
	}
	if _, ok := w.links[name]; ok {
		return "", fmt.Errorf("%w: link %q", errExists, name)
	}
	l, err := migrate.LinkByName(from)
	if err != nil {
		return "", err
	}
	l.Name = name
	l.BandwidthBitsPerSec = a.bits("capacity", l.BandwidthBitsPerSec)
	l.Efficiency = a.float("efficiency", l.Efficiency, 0, 1)
	l.Latency = a.dur("latency", l.Latency)
	if a.err != nil {
		return "", a.err
	}
	w.links[name] = l
	return fmt.Sprintf("%v, goodput %d B/s\n", l, l.GoodputBytesPerSec()), nil
}

// cmdCapacity changes a link's line rate in the Sim, under the migrations
// on it.
func (w *world) cmdCapacity(a *args) (string, error) {
	name := a.need("link")
	a.need("rate")
	bps := a.bits("rate", 0)
	if a.err != nil {
		return "", a.err
	}
	s, err := w.ensureSim()
	if err != nil {
		return "", err
	}
	if err := s.SetLinkCapacity(name, bps); err != nil {
		return "", err
	}
	for _, l := range s.Links() {
		if l.Name == name {
			return fmt.Sprintf("%v\n", l), nil
		}
	}
	return "ok\n", nil
}
