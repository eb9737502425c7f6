package migrate

import (
	"errors"
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

// The simulator's side of the Core: each action becomes simulated work —
// pages encoded onto a modelled link, or a timer for a fixed cost — and
// the end of that work, a timer firing or a transfer arriving (wake), is
// reported back to the Core for the next action.

func (m *Migration) setTimer(at time.Duration) { m.timerAt, m.timerSet = at, true }

// publish has the Sim hold the Core's new events until they are returned.
func (m *Migration) publish() {
	for _, e := range m.core.Events() {
		m.sim.enqueue(e, m.published, m.taken)
		m.published++
	}
}

// transfer puts the bytes written since the last transfer on the link; the
// timer fires when the last of them has arrived. capBps, if positive,
// bounds the flow's rate.
func (m *Migration) transfer(capBps int64) {
	n := m.xfer.pending()
	m.xfer.markSent()
	if m.post != nil {
		n += m.post.pending
		m.post.pending = 0
	}
	if n == 0 {
		m.setTimer(m.sim.now + m.cfg.latency())
		return
	}
	m.sim.net.start(m.flow, n, capBps)
	m.transferring = true
}

// wake handles the end of the current step's work: a timer or a transfer
// that arrived. It finishes the step at the destination, asks the Core
// what comes next, and starts it.
func (m *Migration) wake() {
	defer m.publish()
	if m.linkStalled {
		m.fail(fmt.Errorf("%w: the link to %s carried nothing for %v", ErrConnection, m.dst.Name(), m.cfg.Timeout))
		return
	}
	if err := m.checkVMs(); err != nil {
		m.fail(err)
		return
	}
	now := m.sim.now
	var a Action
	switch phase := m.core.Phase(); phase {
	case PhasePreCopy:
		if err := m.deliver(); err != nil {
			m.fail(err)
			return
		}
		dirty, used, err := m.pending()
		if err != nil {
			m.fail(err)
			return
		}
		a = m.core.RoundArrived(now, dirty, used)
	case PhasePostCopy:
		// Pages touched since the hosts last moved (the owner's own
		// accesses) are paid for before the push can end the post-copy.
		if err := m.serveFaults(); err != nil {
			m.fail(err)
			return
		}
		done, err := m.pushArrived()
		if err != nil {
			m.fail(err)
			return
		}
		if !done {
			return
		}
		a = m.core.Done(now)
	default:
		if err := m.complete(phase); err != nil {
			m.fail(err)
			return
		}
		a = m.core.Done(now)
	}
	if err := m.execute(a); err != nil {
		m.fail(err)
	}
}

// pending takes stock, when a round arrives, of the pages the tracked
// regions logged as dirty and, in Legacy mode, of the framebuffer in use.
func (m *Migration) pending() (dirty, used Pages, err error) {
	if m.cfg.Mode == Legacy {
		if used, err = m.src.UsedFramebuffer(m.xfer.predictWire); err != nil {
			return dirty, used, err
		}
	}
	dirty, err = m.src.Dirty(m.cfg.tracked(len(m.srcRegs)), m.xfer.predictWire)
	return dirty, used, err
}

// checkVMs catches a VM changed under the migration by someone else.
func (m *Migration) checkVMs() error {
	switch p := m.core.Phase(); {
	case p >= PhaseRelease:
		return nil
	case p == PhasePostCopy:
		// The source's copy is committed: its owner can change it no
		// more (vgpu.ErrMigrating), and its workload runs at the
		// destination. Checking its every dirty log again at each push
		// would cost a scan of its memory a step.
	default:
		if err := m.src.Check(p); err != nil {
			return err
		}
	}
	if m.in.State() == vgpu.VMDestroyed {
		return fmt.Errorf("%w: incoming VM was destroyed", ErrDestination)
	}
	return nil
}

// complete finishes at the destination the work of phase, before the
// Core moves on: it takes in the pages that arrived, verifies the stream
// and restores the devices once the device states arrived, and resumes the
// VM when its resume time has passed.
func (m *Migration) complete(phase Phase) error {
	switch phase {
	case PhaseFinalRAM, PhaseFinalFramebuffer:
		return m.deliver()
	case PhaseDeviceState:
		if err := m.deliver(); err != nil {
			return err
		}
		states, err := m.xfer.states()
		if err != nil {
			return err
		}
		return wrap0(ErrDestination, m.in.Restore(states))
	case PhaseResume:
		return m.acknowledged()
	case PhaseRelease:
		m.release()
	}
	return nil
}

// execute starts the work of action a.
func (m *Migration) execute(a Action) error {
	now := m.sim.now
	switch a.Kind {
	case DoCopyRound:
		if a.SetThrottle {
			if err := m.src.SetThrottle(a.Throttle); err != nil {
				return err
			}
		}
		if err := m.src.SendRegions(a.First, a.Regions, a.AllInUse, m.xfer.send, m.core.Sent); err != nil {
			return err
		}
		if err := m.xfer.endRound(); err != nil {
			return err
		}
		// The round's wire bytes include its records' framing and the
		// stream's header, which no region's count has.
		m.core.RoundQueued(m.xfer.pending())
		m.transfer(0)
	case DoSwitchOver, DoRelease:
		m.setTimer(now)
	case DoPause:
		if err := m.src.Pause(); err != nil {
			return err
		}
		m.setTimer(now + m.cfg.Costs.Quiesce)
	case DoSaveDevices:
		states, n, err := m.src.SaveDevices()
		if err != nil {
			return err
		}
		m.states = states
		m.core.DevicesSaved(n)
		m.setTimer(now + m.pcieTime(n))
	case DoSendFinalRAM, DoSendFinalFramebuffers:
		if a.PostCopy {
			return m.sendPageList(a)
		}
		var sum Traffic
		sent := func(i int, t Traffic) { m.core.Sent(i, t); sum.Add(t) }
		if err := m.src.SendRegions(a.First, a.Regions, a.AllInUse, m.xfer.send, sent); err != nil {
			return err
		}
		capBps := int64(0)
		if a.Kind == DoSendFinalFramebuffers && m.cfg.Mode == Legacy && sum.RawBytes > 0 {
			// 6.7 U1 moved the framebuffer through the device checkpoint
			// path, whose raw rate, not the link, set the pace.
			capBps = max(1, scaleBytes(m.checkpointPathRate(), sum.WireBytes, sum.RawBytes))
		}
		m.core.PagesQueued()
		m.transfer(capBps)
	case DoSendDeviceStates:
		if err := m.xfer.finish(m.states); err != nil {
			return err
		}
		m.transfer(0)
	case DoRestore:
		m.setTimer(now + m.pcieTime(m.core.rep.DeviceStateBytes))
	case DoResume:
		m.setTimer(now + m.cfg.Costs.Resume)
	case DoRollBack, DoStrand:
		m.rollBack(a)
	case DoPostCopy:
		return m.startPostCopy()
	case DoNothing:
		m.finish()
	}
	return nil
}

// pcieTime is one side of the device checkpoint: the fixed cost, half of
// StunCosts.DeviceCheckpoint per vGPU (the other half is the restore's),
// and the state's bytes at the GPU's DMA rate. Assumption: save and
// restore cost the same, because the published stun tables give only
// their sum (within the fit's fixed part) and no source splits it.
func (m *Migration) pcieTime(stateBytes int64) time.Duration {
	n := time.Duration(m.devices)
	return n*m.cfg.Costs.DeviceCheckpoint/2 + transferTime(stateBytes, m.dst.Config().GPU.PCIeDMABytesPerSec)
}

func (m *Migration) checkpointPathRate() int64 {
	if r := m.cfg.Costs.CheckpointPathBytesPerSec; r > 0 {
		return r
	}
	return m.srcHost.Config().GPU.PCIeDMABytesPerSec
}

// acknowledged is the source's commit and the destination's
// acknowledgement of the resume, in one instant of simulated time: from
// here on the VM is the destination's, run or paused as the source left it
// and with its owner's throttle as of the commit.
func (m *Migration) acknowledged() error {
	resume, throttle, err := m.src.Commit()
	if err != nil {
		return err
	}
	if err := m.handOver(); err != nil {
		return err
	}
	if err := m.in.SetThrottle(throttle); err != nil {
		return m.handBack(err)
	}
	if m.post != nil {
		if err := m.markAbsent(); err != nil {
			return m.handBack(err)
		}
	}
	if resume {
		if err := m.in.Resume(); err != nil {
			return m.handBack(err)
		}
	}
	return nil
}

// handOver moves what runs the VM to the destination at the commit: its
// workload, and its remote GPU sessions, which stay on their servers.
func (m *Migration) handOver() error {
	if m.vm.Workload() != nil {
		if err := m.vm.HandOverWorkload(m.in); err != nil {
			return wrap(ErrDestination, err)
		}
		m.handedOver = true
	}
	if len(m.remote) > 0 {
		took, err := m.vm.HandOverRemote(m.in)
		if err != nil {
			return m.handBack(err)
		}
		m.remoteHanded, m.remoteHandover = true, took
	}
	return nil
}

// giveBack returns to the source what handOver moved, and says what
// could not be.
func (m *Migration) giveBack() error {
	var errs []error
	if m.handedOver {
		if err := m.in.HandOverWorkload(m.vm); err != nil {
			errs = append(errs, err)
		} else {
			m.handedOver = false
		}
	}
	if m.remoteHanded {
		if _, err := m.in.HandOverRemote(m.vm); err != nil {
			errs = append(errs, err)
		} else {
			m.remoteHanded, m.remoteHandover = false, 0
		}
	}
	return errors.Join(errs...)
}

// handBack returns the workload to the source when the destination fails
// to resume, before it acknowledged.
func (m *Migration) handBack(cause error) error {
	if err := m.giveBack(); err != nil {
		cause = errors.Join(cause, err)
	}
	return wrap(ErrDestination, cause)
}

// release frees the VM at the source.
func (m *Migration) release() {
	m.xfer.close()
	if m.post != nil && m.post.xfer != nil {
		m.post.xfer.close()
	}
	if err := m.src.Release(); err != nil {
		// The VM is already the destination's; a source that cannot
		// release it is reported, not undone.
		m.core.noticeAt(m.sim.now, "source release: "+err.Error())
	}
}

// deliver has the destination take in what has arrived.
func (m *Migration) deliver() error {
	if err := m.xfer.deliver(); err != nil {
		return wrap(ErrStream, err)
	}
	return nil
}

// fail ends the migration with the VM on the source, as it was.
func (m *Migration) fail(cause error) {
	if m.Done() {
		return
	}
	m.rollBack(m.core.Fail(m.sim.now, cause))
	m.publish()
}

// rollBack gives the VM back to the source and frees what the destination
// holds.
func (m *Migration) rollBack(a Action) {
	if a.Kind == DoStrand {
		m.strand(false)
		return
	}
	if a.Kind != DoRollBack {
		return
	}
	m.xfer.abort()
	m.xfer.close()
	if m.in != nil && m.in.State() != vgpu.VMDestroyed {
		_ = m.giveBack()
		_ = m.in.Destroy()
	}
	m.transferring = false
	m.sim.net.start(m.flow, 0, 0)
	m.src.RollBack(a.InDoubt)
	m.finish()
}

// finish takes the ended migration out of the Sim and closes its report.
func (m *Migration) finish() {
	m.timerSet = false
	m.sim.net.remove(m.flow)
	m.sim.remove(m)
	m.wireBytes = m.xfer.total()
	if pc := m.post; pc != nil {
		m.wireBytes += pc.wire
		if pc.xfer != nil {
			m.wireBytes += pc.xfer.total()
		}
	}
	r := m.core.rep
	w := m.cfg.MetricsWindow
	m.before = m.metrics(r.Start-w, r.Start)
	m.during = m.metrics(r.Start, r.End)
}
