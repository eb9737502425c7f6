package vgpu

import (
	"fmt"
	"strings"
)

// CanPlace reports whether CreateVM could place a VM of spec on the host
// now, reserving nothing: nil, or the error CreateVM would return (a
// workload's fit is checked by CreateVM alone, on the VM it makes).
func (h *Host) CanPlace(spec VMSpec) error {
	_, err := h.check(spec, false)
	return err
}

// vGPUCount returns the number of vGPUs on the host's GPUs.
func (h *Host) vGPUCount() int {
	n := 0
	for _, g := range h.gpus {
		n += g.count
	}
	return n
}

// ChooseHost returns the host of hosts that a VM of spec goes to under
// placement p, the rule a host applies to its GPUs applied to hosts:
// BreadthFirst takes the host with the fewest vGPUs, spreading VMs over
// the cluster; DepthFirst the one with the most that can still take it,
// packing them and leaving whole hosts, and GPUs, free for other types.
// Ties go to the earlier host. Hosts that cannot take it (CanPlace) are
// skipped; if none can, the error is a *NoHostError with each one's reason.
func ChooseHost(hosts []*Host, spec VMSpec, p Placement) (*Host, error) {
	return chooseHost(hosts, spec.ID, p, func(h *Host) error { return h.CanPlace(spec) })
}

// ChooseDestination is ChooseHost for a migrating VM: the host of hosts
// that could take it incoming (CheckIncoming) under placement p.
func ChooseDestination(hosts []*Host, spec IncomingSpec, p Placement) (*Host, error) {
	return chooseHost(hosts, spec.ID, p, func(h *Host) error { return h.CheckIncoming(spec) })
}

// PlaceVM creates a VM of spec on the host ChooseHost picks.
func PlaceVM(hosts []*Host, spec VMSpec, p Placement) (*VM, error) {
	h, err := ChooseHost(hosts, spec, p)
	if err != nil {
		return nil, err
	}
	return h.CreateVM(spec)
}

func chooseHost(hosts []*Host, vm string, p Placement, can func(*Host) error) (*Host, error) {
	var best *Host
	bestLoad := 0
	var refused []HostRefusal
	for _, h := range hosts {
		if h == nil {
			return nil, configError("nil host")
		}
		if err := can(h); err != nil {
			refused = append(refused, HostRefusal{Host: h.cfg.Name, Err: err})
			continue
		}
		load := h.vGPUCount()
		if best == nil || p == BreadthFirst && load < bestLoad || p == DepthFirst && load > bestLoad {
			best, bestLoad = h, load
		}
	}
	if best == nil {
		return nil, &NoHostError{VM: vm, Hosts: refused}
	}
	return best, nil
}

// HostRefusal is why one host cannot take a VM.
type HostRefusal struct {
	Host string
	Err  error
}

// NoHostError reports that no host of a cluster can take a VM, with each
// host's reason. It unwraps to those reasons, so errors.As finds a
// *PlacementError or a *CapacityError among them, and errors.Is
// ErrNoCapacity or ErrInsufficientRAM.
type NoHostError struct {
	VM    string
	Hosts []HostRefusal
}

func (e *NoHostError) Error() string {
	if len(e.Hosts) == 0 {
		return fmt.Sprintf("vgpu: no host for VM %q: no hosts", e.VM)
	}
	parts := make([]string, len(e.Hosts))
	for i, r := range e.Hosts {
		parts[i] = r.Host + ": " + r.Err.Error()
	}
	return fmt.Sprintf("vgpu: no host for VM %q: %s", e.VM, strings.Join(parts, "; "))
}

// Unwrap returns each host's reason.
func (e *NoHostError) Unwrap() []error {
	out := make([]error, len(e.Hosts))
	for i, r := range e.Hosts {
		out[i] = r.Err
	}
	return out
}
