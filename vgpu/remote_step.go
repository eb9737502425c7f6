package vgpu

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/sched"
)

// sessions returns the remote sessions with one end on h and the other on
// another host: those it serves, then those its VMs use.
func (h *Host) sessions() []*RemoteGPU {
	var out []*RemoteGPU
	for _, r := range h.serving {
		if c := r.Client(); c != nil && c.host != h {
			out = append(out, r)
		}
	}
	for _, vm := range h.vms {
		for _, r := range vm.remotes {
			// A migration's destination lists its source's sessions
			// before it holds them.
			if r.server != h && r.Client() == vm {
				out = append(out, r)
			}
		}
	}
	return out
}

// Horizon returns how far the hosts, all at one time, can be advanced
// together without a job or a completion crossing between two of them at a
// time either end has reached: for each remote session joining two of the
// hosts, the earliest its client's host could submit (its next event) and
// the earliest its first job could come back, each plus the link's
// one-way latency, less a nanosecond, so that whatever crosses arrives
// after the step, whichever host moves first. It is NoEvent when no
// session joins two hosts, and the hosts' time at the least (a step of
// nothing, after which what is due has fired and the horizon moved on). A
// session with one end outside hosts, or hosts whose clocks differ, are
// an error wrapping ErrOutOfStep.
//
// A driver that advances the hosts to min(target, Horizon) and again
// moves them exactly as one Advance of a single host would: every message
// arrives at a host that has not passed its time. AdvanceHosts does this;
// migrate.Sim does it for the hosts it drives.
func Horizon(hosts []*Host) (time.Duration, error) {
	h := NoEvent
	for _, host := range hosts {
		if host.now != hosts[0].now {
			return 0, fmt.Errorf("%w: host %q is at %v, host %q at %v", ErrOutOfStep, host.cfg.Name, host.now, hosts[0].cfg.Name, hosts[0].now)
		}
		// Each session is counted once, by its server; a client's own
		// sessions are looked at only for a server left out.
		for _, r := range host.serving {
			c := r.Client()
			if c == nil || c.host == host {
				continue
			}
			if !containsHost(hosts, c.host) {
				return 0, outOfStep(c.host, host)
			}
			if t, ok := c.host.NextEventAt(); ok {
				h = min(h, t+r.link.latency()-1)
			}
			h = min(h, r.earliestToClient()-1)
		}
		for _, vm := range host.vms {
			for _, r := range vm.remotes {
				if r.server != host && r.Client() == vm && !containsHost(hosts, r.server) {
					return 0, outOfStep(host, r.server)
				}
			}
		}
	}
	return h, nil
}

func outOfStep(client, server *Host) error {
	return fmt.Errorf("%w: host %q uses a GPU of host %q, and only one of them is advanced", ErrOutOfStep, client.cfg.Name, server.cfg.Name)
}

func containsHost(hosts []*Host, h *Host) bool {
	for _, x := range hosts {
		if x == h {
			return true
		}
	}
	return false
}

// AdvanceHosts moves hosts, all at one time and none driven by another
// (TakeClock), on by d together: hosts joined by remote GPU sessions
// (RemoteGPU) must be moved this way, since each alone refuses Advance.
// It goes in steps no longer than Horizon allows, each host in turn, and
// gives the result one host's Advance would; it stops at the first error.
func AdvanceHosts(d time.Duration, hosts ...*Host) error {
	if len(hosts) == 0 {
		return nil
	}
	for _, h := range hosts {
		if h.clock != nil {
			return fmt.Errorf("%w: host %q is driven by %s", ErrDriven, h.cfg.Name, h.clock.driver)
		}
	}
	start := hosts[0].now
	if d < 0 || d > sched.MaxTime-start {
		return fmt.Errorf("%w: advance by %v from %v", ErrInvalidDuration, d, start)
	}
	end := start + d
	for {
		limit, err := Horizon(hosts)
		if err != nil {
			return err
		}
		t := max(min(end, limit), hosts[0].now)
		for _, h := range hosts {
			if err := h.advance(t - h.now); err != nil {
				return err
			}
		}
		if t == end {
			return nil
		}
	}
}

// checkAlone refuses to move h on alone when it shares a remote session
// with another host.
func (h *Host) checkAlone() error {
	for _, r := range h.sessions() {
		if c := r.Client(); c != nil {
			return fmt.Errorf("%w: host %q shares a remote GPU of host %q with host %q: move them together (AdvanceHosts)",
				ErrOutOfStep, h.cfg.Name, r.server.cfg.Name, c.host.cfg.Name)
		}
	}
	return nil
}

// Joined returns hosts and every host joined to them by remote GPU
// sessions, directly or through others, each once, hosts first: the hosts
// that must be advanced together (AdvanceHosts) for hosts to be.
func Joined(hosts ...*Host) []*Host {
	var out []*Host
	for _, h := range hosts {
		if h != nil && !containsHost(out, h) {
			out = append(out, h)
		}
	}
	for i := 0; i < len(out); i++ {
		for _, r := range out[i].sessions() {
			c := r.Client()
			if c == nil {
				continue
			}
			for _, peer := range []*Host{r.server, c.host} {
				if !containsHost(out, peer) {
					out = append(out, peer)
				}
			}
		}
	}
	return out
}
