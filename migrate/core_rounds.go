package migrate

import (
	"fmt"
	"time"
)

// beginRound starts the next pre-copy round at now. Round 0 sends every
// page in use; later rounds send the pages dirtied while the previous one
// was on the wire.
func (c *Core) beginRound(now time.Duration) Action {
	c.round++
	c.cur = Round{Index: c.round, Start: now, Throttle: c.throttle, Framebuffers: make([]Traffic, c.cfg.Framebuffers)}
	c.enter(now, PhasePreCopy, RoundStarted, "")
	return Action{Kind: DoCopyRound, Round: c.round, Regions: c.cfg.Policy.tracked(c.cfg.Framebuffers + 1), AllInUse: c.round == 0}
}

// RoundArrived reports at now that the round sent has arrived, with dirty
// the pages the tracked regions logged as dirty meanwhile (Source.Dirty)
// and, in Legacy mode, usedFramebuffer the framebuffer in use
// (Source.UsedFramebuffer). It closes the round and decides: another round
// (throttled, perhaps), the switchover, or failure.
func (c *Core) RoundArrived(now time.Duration, dirty, usedFramebuffer Pages) Action {
	if c.phase != PhasePreCopy {
		return c.Fail(now, fmt.Errorf("%w: a round arrived in %v", ErrConfig, c.phase))
	}
	r := &c.cur
	r.Duration = now - r.Start
	r.BandwidthBytesPerSec = BytesPerSec(r.WireBytes, r.Duration)
	if r.WireBytes == 0 || r.BandwidthBytesPerSec == 0 {
		// Nothing measured: assume the nominal rate, or the least one.
		r.BandwidthBytesPerSec = max(c.cfg.NominalBandwidthBytesPerSec, 1)
	}
	r.DirtyBytes = max(dirty.RawBytes, 0)
	r.DirtyRateBytesPerSec = BytesPerSec(r.DirtyBytes, r.Duration)
	// The dirty pages' wire size is predicted from their own content
	// classes; only pages of unknown content take the wire ratio of the
	// rounds before this one. The dirty rate, below, is judged at the
	// ratio of the pages it dirtied.
	r.DirtyWireBytes = dirty.wire(c.wireRatio())
	est := c.expectedStun(r.DirtyWireBytes, r.BandwidthBytesPerSec, usedFramebuffer)
	r.ExpectedStun = est.Total
	c.rep.Rounds = append(c.rep.Rounds, *r)
	c.rep.PreCopy.Add(r.Total())
	c.emitAt(now, Event{Kind: RoundEnded, Round: c.round, WireBytes: r.WireBytes, BandwidthBytesPerSec: r.BandwidthBytesPerSec,
		DirtyRateBytesPerSec: r.DirtyRateBytesPerSec, ExpectedStun: est.Total, Throttle: c.throttle,
		Detail: fmt.Sprintf("round %d arrived after %v: %d B/s on the wire, %d B/s dirtied; expected stun %v",
			c.round, r.Duration, r.BandwidthBytesPerSec, r.DirtyRateBytesPerSec, est.Total)})

	// Pre-copy can shrink only the part of the stun that the dirty pages
	// make; in Legacy mode the framebuffer's checkpoint path and the fixed
	// costs are a floor no round changes, so convergence is judged on the
	// dirty pages' transfer alone.
	judged := est.Total
	if c.cfg.Policy.Mode == Legacy {
		judged = est.dirtyWire
	}
	p := c.cfg.Policy
	why, stop := judgeRound(judged, p.StunTarget, c.round, p.MaxRounds, scaleBytes(r.DirtyRateBytesPerSec, r.DirtyWireBytes, r.DirtyBytes),
		r.BandwidthBytesPerSec, stalled(c.rep.Rounds))
	switch {
	case !stop:
		return c.beginRound(now)
	case why == Converged:
		return c.switchOver(now, why, est.Total)
	}
	next, switchWhy, err := onNonConvergence(p.OnNonConvergence, p.Throttle, why, c.throttle)
	switch {
	case err != nil:
		return c.Fail(now, fmt.Errorf("%w after %d rounds, expected stun %v", err, c.round+1, est.Total))
	case switchWhy != 0 && p.OnNonConvergence == SwitchToPostCopy:
		return c.switchToPostCopy(now, switchWhy, r.BandwidthBytesPerSec)
	case switchWhy != 0:
		return c.switchOver(now, switchWhy, est.Total)
	}
	c.throttle = next
	c.rep.MaxThrottle = max(c.rep.MaxThrottle, next)
	c.emitAt(now, Event{Kind: Throttled, Round: c.round, Throttle: next,
		Detail: fmt.Sprintf("%v: throttling the workload by %.0f %%", why, 100*next)})
	a := c.beginRound(now)
	a.SetThrottle, a.Throttle = true, next
	return a
}

// switchOver ends pre-copy for why, unless the expected stun exceeds the
// stun limit. A negative expected stun is not known (no rate measured
// yet): the report holds zero and no limit is checked against it.
func (c *Core) switchOver(now time.Duration, why Reason, expected time.Duration) Action {
	c.rep.Switchover, c.rep.ExpectedStun = why, max(expected, 0)
	if lim := c.cfg.Policy.StunLimit; lim > 0 && expected > lim {
		c.post = nil // refused: no post-copy began
		return c.Fail(now, fmt.Errorf("%w: expected stun %v at switchover, limit %v", ErrStunLimit, expected, lim))
	}
	into := ""
	if c.post != nil {
		into = " into post-copy"
	}
	stun := fmt.Sprintf("expected stun %v", expected)
	if expected < 0 {
		stun = "expected stun not known: no rate measured yet"
	}
	c.enter(now, PhaseSwitchover, SwitchedOver, fmt.Sprintf("%v after %d round(s)%s; %s", why, c.round+1, into, stun))
	c.history[len(c.history)-1].ExpectedStun = max(expected, 0)
	return Action{Kind: DoSwitchOver}
}

// switchToPostCopy ends pre-copy for why, into post-copy: the stun it
// expects sends the page list and the device states at bandwidthBps (not
// known if zero: the live mode, before any round).
func (c *Core) switchToPostCopy(now time.Duration, why Reason, bandwidthBps int64) Action {
	c.post = &postCopyState{}
	if bandwidthBps <= 0 {
		return c.switchOver(now, why, -1)
	}
	in := c.cfg.inputs()
	in.dirtyWireBytes, in.bandwidthBps = c.cfg.PageListBytes, bandwidthBps
	return c.switchOver(now, why, in.estimate().Total)
}

// wireRatio is the wire-to-raw ratio of everything pre-copy has sent, 1
// before anything was.
func (c *Core) wireRatio() (num, den int64) {
	if c.rep.PreCopy.RawBytes == 0 {
		return 1, 1
	}
	return max(c.rep.PreCopy.WireBytes, 1), c.rep.PreCopy.RawBytes
}

// inputs are the estimate's inputs that the configuration fixes.
func (cfg CoreConfig) inputs() stunInputs {
	return stunInputs{mode: cfg.Policy.Mode, costs: cfg.Costs, latency: cfg.StunLatency, devices: cfg.Devices,
		deviceStateBytes: cfg.DeviceStateBytes, bandwidthBps: cfg.NominalBandwidthBytesPerSec,
		pcieBps: cfg.PCIeBytesPerSec, usedFramebufferRaw: max(cfg.UsedFramebuffer.RawBytes, 0),
		usedFramebufferWire: cfg.UsedFramebuffer.wire(1, 1)}
}

// floor is the stun if pre-copy converged with nothing left dirty, at the
// nominal rate: the floor of a PreCopy migration's stun and, in Legacy
// mode, the stun itself.
func (cfg CoreConfig) floor() StunEstimate { return cfg.inputs().estimate() }

// expectedStun is the switchover rule's prediction after a round: the
// pages dirty now, dirtyWire bytes on the wire, and the device state, over
// the bandwidth measured in the round, plus the fixed costs and, in Legacy
// mode, the used framebuffer's passage.
func (c *Core) expectedStun(dirtyWire, bandwidthBps int64, usedFramebuffer Pages) StunEstimate {
	in := c.cfg.inputs()
	in.dirtyWireBytes = dirtyWire
	in.bandwidthBps = bandwidthBps
	in.usedFramebufferRaw = max(usedFramebuffer.RawBytes, 0)
	in.usedFramebufferWire = usedFramebuffer.wire(c.wireRatio())
	return in.estimate()
}
