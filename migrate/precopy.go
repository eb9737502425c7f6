package migrate

import (
	"fmt"
	"time"
)

// tracked returns how many of the source's regions pre-copy follows: guest
// RAM and, in PreCopy mode, every framebuffer.
func (m *Migration) tracked() int {
	if m.cfg.Mode == Legacy {
		return 1
	}
	return len(m.srcRegs)
}

// beginRound collects the pages to send and puts them on the link. Round 0
// sends every page in use; later rounds send the pages dirtied while the
// previous round was on the wire.
func (m *Migration) beginRound() error {
	m.round++
	m.cur = Round{Index: m.round, Start: m.sim.now, Throttle: m.throttle,
		Framebuffers: make([]Traffic, len(m.srcRegs)-1)}
	m.enter(PhasePreCopy, "")
	for i := range m.tracked() {
		t, err := m.sendDirty(i)
		if err != nil {
			return err
		}
		if i == 0 {
			m.cur.RAM = t
		} else {
			m.cur.Framebuffers[i-1] = t
		}
	}
	if err := m.xfer.endRound(); err != nil {
		return err
	}
	t := m.cur.total()
	// The round's wire bytes include its records' framing and the stream's
	// header, which no region's count has.
	m.cur.WireBytes = m.xfer.pending()
	m.event(m.round, fmt.Sprintf("round %d: %d pages, %d bytes raw, %d on the wire", m.round, t.Pages, t.RawBytes, m.cur.WireBytes))
	m.transfer(0)
	return nil
}

// sendDirty sends region i's pages: in round 0 every page in use, later
// the pages its dirty log collected.
func (m *Migration) sendDirty(i int) (Traffic, error) {
	if m.round == 0 && m.phase == PhasePreCopy {
		// Clear the log: what round 0 reads now is sent now.
		m.srcRegs[i].CollectDirty(m.sets[i])
		return m.xfer.send(i, nil)
	}
	m.srcRegs[i].CollectDirty(m.sets[i])
	return m.xfer.send(i, m.sets[i])
}

// endRound closes a round that has arrived and decides what comes next.
func (m *Migration) endRound() error {
	if err := m.deliver(); err != nil {
		return err
	}
	now := m.sim.now
	r := &m.cur
	r.Duration = now - r.Start
	r.BandwidthBytesPerSec = rateOf(r.WireBytes, r.Duration)
	if r.WireBytes == 0 || r.BandwidthBytesPerSec == 0 {
		// Nothing measured: assume the link's whole goodput.
		r.BandwidthBytesPerSec = m.cfg.Link.GoodputBytesPerSec()
	}
	for i := range m.tracked() {
		r.DirtyBytes += int64(m.srcRegs[i].DirtyCount()) * int64(m.srcRegs[i].PageSize())
	}
	r.DirtyRateBytesPerSec = rateOf(r.DirtyBytes, r.Duration)
	est := m.expectedStun(r.DirtyBytes, r.BandwidthBytesPerSec)
	r.ExpectedStun = est.Total
	m.rep.Rounds = append(m.rep.Rounds, *r)
	m.rep.PreCopy.add(r.total())

	// Pre-copy can shrink only the part of the stun that the dirty pages
	// make; in Legacy mode the framebuffer's checkpoint path and the fixed
	// costs are a floor no round changes, so convergence is judged on the
	// dirty RAM's transfer alone.
	judged := est.Total
	if m.cfg.Mode == Legacy {
		judged = est.dirtyWire
	}
	dirtyWireRate := scaleBytes(r.DirtyRateBytesPerSec, m.wireNum(), m.wireDen())
	why, stop := judgeRound(judged, m.cfg.StunTarget, m.round, m.cfg.MaxRounds, dirtyWireRate, r.BandwidthBytesPerSec, m.stalled())
	switch {
	case !stop:
		return m.beginRound()
	case why == Converged:
		return m.switchover(why, est.Total)
	}
	return m.nonConvergence(why, est.Total)
}

// stalled reports whether the last round stalled (see stalled).
func (m *Migration) stalled() bool { return stalled(m.rep.Rounds) }

// wireNum and wireDen are the wire-to-raw ratio of everything pre-copy has
// sent, 1 before anything was.
func (m *Migration) wireNum() int64 {
	if m.rep.PreCopy.RawBytes == 0 {
		return 1
	}
	return max(m.rep.PreCopy.WireBytes, 1)
}

func (m *Migration) wireDen() int64 { return max(m.rep.PreCopy.RawBytes, 1) }

func (m *Migration) nonConvergence(why Reason, expected time.Duration) error {
	next, switchWhy, err := onNonConvergence(m.cfg.OnNonConvergence, m.cfg.Throttle, why, m.throttle)
	switch {
	case err != nil:
		return fmt.Errorf("%w after %d rounds, expected stun %v", err, m.round+1, expected)
	case switchWhy != 0:
		return m.switchover(switchWhy, expected)
	}
	if err := m.setThrottle(next); err != nil {
		return err
	}
	m.event(m.round, fmt.Sprintf("%v: throttling the workload by %.0f %%", why, 100*next))
	return m.beginRound()
}

// setThrottle applies the migration's cut, never less than the VM's own.
func (m *Migration) setThrottle(f float64) error {
	m.throttle = f
	m.rep.MaxThrottle = max(m.rep.MaxThrottle, f)
	if err := m.vm.SetThrottle(max(f, m.priorThrottle)); err != nil {
		return wrap(ErrSource, err)
	}
	return nil
}

func (m *Migration) switchover(why Reason, expected time.Duration) error {
	m.rep.Switchover, m.rep.ExpectedStun = why, expected
	if m.cfg.StunLimit > 0 && expected > m.cfg.StunLimit {
		return fmt.Errorf("%w: expected stun %v at switchover, limit %v", ErrStunLimit, expected, m.cfg.StunLimit)
	}
	m.enter(PhaseSwitchover, fmt.Sprintf("%v after %d round(s); expected stun %v", why, m.round+1, expected))
	m.setTimer(m.sim.now)
	return nil
}
