package migrate

import (
	"fmt"
	"slices"

	"github.com/vgpusim/vgpusim/vgpu"
)

// EvacuateConfig describes an evacuation: how each VM migrates and where.
type EvacuateConfig struct {
	// Migration configures each VM's migration.
	Migration Config
	// Placement chooses each VM's destination among the hosts with room
	// (vgpu.ChooseDestination): BreadthFirst spreads the VMs over them,
	// DepthFirst packs them.
	Placement vgpu.Placement
	// Path, if set, gives the links a migration to dst crosses, in order,
	// in place of Migration's Link and Via: the evacuated host's NIC,
	// then dst's, for a network whose NICs are its bottlenecks. A VM whose
	// Path is empty is left, with ErrConfig.
	Path func(dst *vgpu.Host) []Link
}

// Evacuation empties a host, as a host entering maintenance mode is
// emptied: every VM on it migrates to another host, as many at once as
// SimConfig.MaxPerHost lets the host and its destinations take part in,
// the next starting as soon as one ends, at the same simulated instant.
// The Sim drives it: its migrations are the Sim's, their events come from
// Step, Advance and Run like any other's.
type Evacuation struct {
	sim   *Sim
	from  *vgpu.Host
	to    []*vgpu.Host
	cfg   EvacuateConfig
	queue []*vgpu.VM
	migs  []*Migration
	left  []Left
}

// Left is a VM an evacuation could not start migrating, and why: a VM
// with a passthrough GPU, one that no destination can take, or one whose
// migration was refused.
type Left struct {
	VM  *vgpu.VM
	Err error
}

// Evacuate starts evacuating from to the hosts to: every VM on from but
// one arriving there (incoming), in the host's order. A VM that another
// migration holds when its turn comes is left, as is one none of the hosts
// can take; Empty says whether every VM left the host. Hosts not yet in the
// Sim are added, refused as AddHost refuses them. It fails, wrapping
// ErrConfig, for a nil host, no destination, or from among them.
func (s *Sim) Evacuate(from *vgpu.Host, to []*vgpu.Host, cfg EvacuateConfig) (*Evacuation, error) {
	if from == nil || len(to) == 0 || slices.Contains(to, from) || slices.Contains(to, nil) {
		return nil, fmt.Errorf("%w: evacuate needs a host and other hosts to evacuate it to", ErrConfig)
	}
	all := append([]*vgpu.Host{from}, to...)
	// Every host is checked before any is taken, so that a refusal leaves
	// the hosts as they were.
	if err := s.checkNew(all...); err != nil {
		return nil, err
	}
	for _, h := range all {
		_ = s.AddHost(h) // checked above
	}
	ev := &Evacuation{sim: s, from: from, to: slices.Clone(to), cfg: cfg}
	for _, vm := range from.VMs() {
		if st := vm.State(); st != vgpu.VMIncoming && st != vgpu.VMDestroyed {
			ev.queue = append(ev.queue, vm)
		}
	}
	s.evacs = append(s.evacs, ev)
	s.pump()
	return ev, nil
}

// Host returns the host being evacuated.
func (ev *Evacuation) Host() *vgpu.Host { return ev.from }

// Migrations returns the evacuation's migrations, in the order they
// started.
func (ev *Evacuation) Migrations() []*Migration { return slices.Clone(ev.migs) }

// Waiting returns the VMs that wait for a migration slot, in the order
// they will start.
func (ev *Evacuation) Waiting() []*vgpu.VM { return slices.Clone(ev.queue) }

// Left returns the VMs the evacuation could not start migrating.
func (ev *Evacuation) Left() []Left { return slices.Clone(ev.left) }

// Done reports whether every VM started migrating or was left, and every
// migration ended. The host is empty if, besides, no VM was left and no
// migration failed (Empty).
func (ev *Evacuation) Done() bool {
	return len(ev.queue) == 0 && !slices.ContainsFunc(ev.migs, func(m *Migration) bool { return !m.Done() })
}

// Empty reports whether the evacuation is done and moved every VM.
func (ev *Evacuation) Empty() bool {
	return ev.Done() && len(ev.left) == 0 && !slices.ContainsFunc(ev.migs, func(m *Migration) bool { return m.Err() != nil })
}

// pump starts the migrations of every evacuation that can start now.
func (s *Sim) pump() {
	s.pumpDue = false
	for _, ev := range s.evacs {
		ev.pump()
	}
	s.evacs = slices.DeleteFunc(s.evacs, func(ev *Evacuation) bool { return len(ev.queue) == 0 })
}

// pump starts the next VMs' migrations while the host has a slot: each to
// the destination its placement picks among those with a slot and room.
// A VM no destination can take now waits if migrations under way may
// free a slot or room, and is left if none are.
func (ev *Evacuation) pump() {
	s := ev.sim
	for len(ev.queue) > 0 && s.busy(ev.from) < s.cfg.MaxPerHost {
		vm := ev.queue[0]
		if err := vm.CheckMigratable(); err != nil {
			ev.leave(err)
			continue
		}
		open := slices.DeleteFunc(slices.Clone(ev.to), func(h *vgpu.Host) bool { return s.busy(h) >= s.cfg.MaxPerHost })
		dst, err := vgpu.ChooseDestination(open, vm.IncomingSpec(), ev.cfg.Placement)
		if err != nil {
			if ev.underWay() {
				return
			}
			ev.leave(err)
			continue
		}
		cfg := ev.cfg.Migration
		if ev.cfg.Path != nil {
			path := ev.cfg.Path(dst)
			if len(path) == 0 {
				ev.leave(fmt.Errorf("%w: no path to %s", ErrConfig, dst.Name()))
				continue
			}
			cfg.Link, cfg.Via = path[0], path[1:]
		}
		m, err := s.Start(vm, dst, cfg)
		if err != nil {
			ev.leave(err)
			continue
		}
		ev.migs = append(ev.migs, m)
		ev.queue = ev.queue[1:]
	}
}

// underWay reports whether a migration from the host or to one of its
// destinations is under way.
func (ev *Evacuation) underWay() bool {
	if ev.sim.busy(ev.from) > 0 {
		return true
	}
	return slices.ContainsFunc(ev.to, func(h *vgpu.Host) bool { return ev.sim.busy(h) > 0 })
}

// leave gives up the first VM waiting.
func (ev *Evacuation) leave(err error) {
	ev.left = append(ev.left, Left{VM: ev.queue[0], Err: err})
	ev.queue = ev.queue[1:]
}
