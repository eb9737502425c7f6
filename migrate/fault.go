package migrate

import (
	"fmt"
	"slices"
)

// Fault is a failure injected into a simulated migration, so that a
// simulator built on this one can play out what happens when a migration
// fails: a link that drops or hangs, a destination that says no or dies,
// and, in post-copy, a source that dies. What each does in post-copy is
// Inject's to say.
// The live mode meets the same failures on real connections.
type Fault uint8

const (
	// FaultLinkDown drops the migration's connection: the source learns
	// at once and the migration fails with ErrConnection.
	FaultLinkDown Fault = iota + 1
	// FaultLinkStall stops the connection carrying bytes without closing
	// it: the migration fails with ErrConnection once Config.Timeout of
	// simulated time has passed. The VM runs on meanwhile (or stays
	// stunned, if the stall caught it stunned), as at a real source
	// waiting on a hung peer.
	FaultLinkStall
	// FaultRefused has the destination turn the migration down: it fails
	// with ErrRefused.
	FaultRefused
	// FaultDestinationGone ends the destination's process: what it held of
	// the VM is freed and the migration fails with ErrDestination.
	FaultDestinationGone

	numFaults = iota
)

// FaultSourceGone ends the source's process once the VM runs at the
// destination in post-copy: the pages the destination still lacks are
// lost with it, and so is the VM (ErrVMLost): nothing of it is left. Before post-copy Inject refuses it with ErrConfig, since a
// source that fails then takes its running VM with it, whatever the
// migration does; Faults does not list it.
const FaultSourceGone Fault = numFaults + 1

var faultNames = [...]string{FaultLinkDown: "link-down", FaultLinkStall: "link-stall",
	FaultRefused: "refused", FaultDestinationGone: "destination-gone", FaultSourceGone: "source-gone"}

func (f Fault) String() string {
	if f > 0 && int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("Fault(%d)", uint8(f))
}

// MarshalText writes the fault's name.
func (f Fault) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// ParseFault returns the fault whose String is s ("link-down",
// "link-stall", "refused", "destination-gone" or "source-gone"). Any
// other name is an error wrapping ErrConfig.
func ParseFault(s string) (Fault, error) {
	return parseName("fault", s, append(Faults(), FaultSourceGone))
}

// Faults returns every fault kind that applies in every phase, in order:
// all but FaultSourceGone.
func Faults() []Fault {
	out := make([]Fault, 0, numFaults)
	for f := FaultLinkDown; f <= FaultDestinationGone; f++ {
		out = append(out, f)
	}
	return out
}

// Inject makes f happen to the migration now. Before the destination
// acknowledged the resume, the migration fails as Cancel fails it — the VM
// stays on the source, running if it ran and paused if it was paused, its
// memory and device state as they were; the destination holds nothing —
// with a *PhaseError naming the phase it was in and wrapping the fault's
// sentinel; a stall fails it only when the timeout has passed, and a
// second stall does not restart the wait. From the acknowledgement on it
// returns ErrTooLate and the migration completes, but in post-copy (below);
// on a migration that ended already it does nothing.
//
// In post-copy (PhasePostCopy) the VM runs at the destination with pages
// only the source has, and there is no going back. A lost link
// (FaultLinkDown, or FaultLinkStall, which the destination cannot wait
// out with its VM blocked on faults) pauses the VM at the destination
// and the migration waits, however long, for Recover. FaultDestinationGone
// and FaultSourceGone lose the VM: the migration fails with ErrVMLost
// (see ErrVMLost for what is left of it). FaultRefused returns
// ErrTooLate.
func (m *Migration) Inject(f Fault) error {
	if f < FaultLinkDown || f > FaultSourceGone {
		return fmt.Errorf("%w: unknown fault %v", ErrConfig, f)
	}
	switch m.core.Phase() {
	case PhaseFailed, PhaseDone:
		return nil
	case PhaseRelease:
		return fmt.Errorf("%w: VM %q already resumed at %s", ErrTooLate, m.vm.ID(), m.dst.Name())
	case PhasePostCopy:
		return m.injectPostCopy(f)
	}
	switch f {
	case FaultLinkDown:
		m.fail(fmt.Errorf("%w: the link to %s dropped", ErrConnection, m.dst.Name()))
	case FaultLinkStall:
		m.stall()
	case FaultRefused:
		m.fail(fmt.Errorf("%w: %s turned the migration down", ErrRefused, m.dst.Name()))
	case FaultDestinationGone:
		m.fail(fmt.Errorf("%w: the process on %s ended", ErrDestination, m.dst.Name()))
	case FaultSourceGone:
		return m.sourceGone()
	}
	return nil
}

// injectPostCopy is Inject in PhasePostCopy.
func (m *Migration) injectPostCopy(f Fault) error {
	switch f {
	case FaultLinkDown, FaultLinkStall:
		m.linkLost(fmt.Errorf("%w: the link to %s was lost (%v)", ErrConnection, m.dst.Name(), f))
	case FaultRefused:
		return fmt.Errorf("%w: VM %q already runs at %s", ErrTooLate, m.vm.ID(), m.dst.Name())
	case FaultDestinationGone:
		m.fail(fmt.Errorf("%w: the process on %s ended", ErrDestination, m.dst.Name()))
	case FaultSourceGone:
		return m.sourceGone()
	}
	return nil
}

// stall stops the migration's flow where it is: nothing more arrives, and
// the timer that would have moved the migration on becomes the timeout.
func (m *Migration) stall() {
	if m.linkStalled {
		return
	}
	m.linkStalled = true
	m.transferring = false
	m.sim.net.start(m.flow, 0, 0)
	m.setTimer(m.sim.now + m.cfg.Timeout)
	m.core.noticeAt(m.sim.now, fmt.Sprintf("link to %s stalled; giving up in %v", m.dst.Name(), m.cfg.Timeout))
	m.publish()
}

// crosses reports whether the migration's path crosses the link named name.
func (m *Migration) crosses(name string) bool {
	return slices.ContainsFunc(m.cfg.route(), func(l Link) bool { return l.Name == name })
}

// FailLink injects f, FaultLinkDown or FaultLinkStall, into every active
// migration over the link named name, in their start order, and returns
// how many it hit; a link no migration uses hits none.
func (s *Sim) FailLink(name string, f Fault) (int, error) {
	if f != FaultLinkDown && f != FaultLinkStall {
		return 0, fmt.Errorf("%w: %v is not a link fault", ErrConfig, f)
	}
	n := 0
	for _, m := range s.Active() {
		if !m.crosses(name) || m.Done() {
			continue
		}
		if err := m.Inject(f); err != nil {
			// Past the acknowledgement the VM has moved; the link's loss
			// only delays the source's release, which the Sim models as
			// instant.
			continue
		}
		n++
	}
	return n, nil
}
