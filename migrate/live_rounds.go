package migrate

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/vgpu"
)

// tracked returns how many regions pre-copy follows: guest RAM and, in
// PreCopy mode, every framebuffer.
func (s *sender) tracked() int {
	if s.cfg.Mode == Legacy {
		return 1
	}
	return len(s.regs)
}

// precopy sends rounds until the switchover rule stops it.
func (s *sender) precopy() error {
	s.enter(PhasePreCopy)
	for {
		s.round++
		cur := Round{Index: s.round, Start: time.Since(s.start), Throttle: s.throttle,
			Framebuffers: make([]Traffic, len(s.regs)-1)}
		s.prog.emit(Progress{Kind: RoundStarted, Phase: PhasePreCopy, Round: s.round, WireBytes: s.cw.Offset()})
		t0, before := time.Now(), s.cw.Offset()
		for i := range s.tracked() {
			set := s.sets[i]
			s.regs[i].CollectDirty(set)
			if s.round == 0 {
				set = nil // every page in use; the collect cleared the log
			}
			t, err := s.copyRegion(i, set)
			if err != nil {
				return err
			}
			if i == 0 {
				cur.RAM = t
			} else {
				cur.Framebuffers[i-1] = t
			}
		}
		if _, err := s.cw.EndRound(); err != nil {
			return wrap(ErrStream, err)
		}
		if err := s.bw.Flush(); err != nil {
			return err
		}
		cur.Duration, cur.WireBytes = time.Since(t0), s.cw.Offset()-before
		cur.BandwidthBytesPerSec = max(rateOf(cur.WireBytes, cur.Duration), 1)
		for i := range s.tracked() {
			cur.DirtyBytes += int64(s.regs[i].DirtyCount()) * int64(s.regs[i].PageSize())
		}
		cur.DirtyRateBytesPerSec = rateOf(cur.DirtyBytes, cur.Duration)
		total, judged := s.expectedStun(cur.DirtyBytes, cur.BandwidthBytesPerSec)
		cur.ExpectedStun = total
		s.rep.Rounds = append(s.rep.Rounds, cur)
		s.rep.PreCopy.add(cur.total())
		s.prog.emit(Progress{Kind: RoundFinished, Phase: PhasePreCopy, Round: s.round, WireBytes: s.cw.Offset(),
			BandwidthBytesPerSec: cur.BandwidthBytesPerSec, DirtyRateBytesPerSec: cur.DirtyRateBytesPerSec, ExpectedStun: total})

		num, den := s.wireRatio()
		why, stop := judgeRound(judged, s.cfg.StunTarget, s.round, s.cfg.MaxRounds,
			scaleBytes(cur.DirtyRateBytesPerSec, num, den), cur.BandwidthBytesPerSec, stalled(s.rep.Rounds))
		if !stop {
			continue
		}
		if why != Converged {
			next, switchWhy, err := onNonConvergence(s.cfg.OnNonConvergence, s.cfg.Throttle, why, s.throttle)
			if err != nil {
				return fmt.Errorf("%w after %d rounds, expected stun %v", err, s.round+1, total)
			}
			if switchWhy == 0 {
				s.cfg.Lock.Lock()
				err := s.vm.SetThrottle(max(next, s.priorThrottle))
				s.cfg.Lock.Unlock()
				if err != nil {
					return wrap(ErrSource, err)
				}
				s.throttle, s.rep.MaxThrottle = next, max(s.rep.MaxThrottle, next)
				continue
			}
			why = switchWhy
		}
		s.rep.Switchover, s.rep.ExpectedStun = why, total
		if s.cfg.StunLimit > 0 && total > s.cfg.StunLimit {
			return fmt.Errorf("%w: expected stun %v at switchover, limit %v", ErrStunLimit, total, s.cfg.StunLimit)
		}
		return nil
	}
}

// wireRatio is the wire-to-raw ratio of what pre-copy sent, 1 before
// anything was.
func (s *sender) wireRatio() (num, den int64) {
	if s.rep.PreCopy.RawBytes == 0 {
		return 1, 1
	}
	return max(s.rep.PreCopy.WireBytes, 1), s.rep.PreCopy.RawBytes
}

// expectedStun predicts the stun from the dirty bytes and the measured
// rate: their wire size, the device states and, in Legacy mode, every used
// framebuffer page, all at that rate. judged is what the switchover rule
// compares with the target, as in the simulated mode: the whole, or, in
// Legacy mode, where the framebuffer's passage is a floor no round
// changes, the dirty pages and device states alone.
func (s *sender) expectedStun(dirtyRaw, bandwidth int64) (total, judged time.Duration) {
	num, den := s.wireRatio()
	dirty := scaleBytes(dirtyRaw, num, den) + s.stateBytes
	var floor int64
	if s.cfg.Mode == Legacy {
		for _, r := range s.regs[1:] {
			floor += scaleBytes(usedBytes(r), num, den)
		}
	}
	total = transferTime(dirty+floor, bandwidth)
	if s.cfg.Mode == Legacy {
		return total, transferTime(dirty, bandwidth)
	}
	return total, total
}

// stun stops the VM, sends what is left, and hands the VM over.
func (s *sender) stun() error {
	s.enter(PhaseSwitchover)
	s.prog.emit(Progress{Kind: SwitchedOver, Phase: PhaseSwitchover, Round: -1, WireBytes: s.cw.Offset(), ExpectedStun: s.rep.ExpectedStun})
	s.enter(PhaseQuiesce)
	s.cfg.Lock.Lock()
	var err error
	// The destination resumes the VM as the stun finds it: paused, if its
	// owner paused it during pre-copy.
	s.wasRunning = s.vm.State() == vgpu.VMRunning
	if s.wasRunning {
		if err = s.vm.Pause(); err == nil {
			s.pausedByUs = true
		}
	}
	s.cfg.Lock.Unlock()
	if err != nil {
		return wrap(ErrSource, err)
	}
	s.enter(PhaseDeviceSave)
	s.cfg.Lock.Lock()
	states, err := s.vm.SaveDeviceStates()
	s.cfg.Lock.Unlock()
	if err != nil {
		return wrap(ErrSource, err)
	}
	for _, st := range states {
		s.rep.DeviceStateBytes += int64(len(st))
	}
	s.enter(PhaseFinalRAM)
	s.regs[0].CollectDirty(s.sets[0])
	t, err := s.copyRegion(0, s.sets[0])
	if err != nil {
		return err
	}
	s.rep.Final.RAM.add(t)
	s.enter(PhaseFinalFramebuffer)
	for i := 1; i < len(s.regs); i++ {
		// Legacy sends every used page, during the stun; the log is
		// cleared all the same, so that a write after this is seen.
		set := s.sets[i]
		s.regs[i].CollectDirty(set)
		if s.cfg.Mode == Legacy {
			set = nil
		}
		t, err := s.copyRegion(i, set)
		if err != nil {
			return err
		}
		s.rep.Final.Framebuffers[i-1].add(t)
	}
	s.enter(PhaseDeviceState)
	if err := s.finishStream(states); err != nil {
		return err
	}
	// The destination applies the rest, checks the digests and restores
	// the devices, then says it is ready.
	s.enter(PhaseRestore)
	if err := readMsg(s.ctl, msgReady, nil); err != nil {
		return err
	}
	s.enter(PhaseResume)
	s.cfg.Lock.Lock()
	st, written := s.vm.State(), writtenInStun(s.regs)
	s.cfg.Lock.Unlock()
	switch {
	case st != vgpu.VMPaused:
		// Its owner resumed (or ended) it during the stun: what it wrote
		// since never reached the destination.
		return fmt.Errorf("%w: source VM was %v during the stun", ErrSource, st)
	case written != nil:
		return written
	}
	if err := writeMsg(s.conns[0], msgCommit, commit{Resume: s.wasRunning, Throttle: s.priorThrottle}); err != nil {
		return err
	}
	s.committed = true
	return readMsg(s.ctl, msgResumed, nil)
}

// finishStream sends the device states, the regions' digests and the end
// of the stream.
func (s *sender) finishStream(states [][]byte) error {
	for i, st := range states {
		ds := checkpoint.DeviceState{Device: uint32(i), Version: vgpu.StateVersion, Data: st}
		if err := s.cw.WriteDeviceState(ds); err != nil {
			return wrap(ErrStream, err)
		}
	}
	digests := make([]checkpoint.RegionDigest, len(s.regs))
	s.rep.RegionDigests = make([]Digest, len(s.regs))
	for i, r := range s.regs {
		d, err := r.DigestParallel(s.cfg.DigestWorkers)
		if err != nil {
			return wrap(ErrSource, err)
		}
		digests[i] = checkpoint.RegionDigest{Region: uint32(i), Digest: d}
		s.rep.RegionDigests[i] = Digest(d)
	}
	if err := s.cw.CloseWithDigests(digests); err != nil {
		return wrap(ErrStream, err)
	}
	return s.bw.Flush()
}

func (s *sender) initReport() {
	r := &s.rep
	r.VM, r.Source, r.Mode, r.Fidelity = s.vm.ID(), s.vm.Host().Name(), s.cfg.Mode, Live
	for _, p := range s.vm.Profiles() {
		r.Profiles = append(r.Profiles, p.Name)
	}
	r.Link = s.link
	r.Final.Framebuffers = make([]Traffic, len(s.regs)-1)
}

// linkName names the connections for the report.
func linkName(cs []io.ReadWriter) string {
	name := fmt.Sprintf("%d connection(s)", len(cs))
	if nc, ok := cs[0].(net.Conn); ok && nc.RemoteAddr() != nil {
		name = fmt.Sprintf("%s %s x%d", nc.RemoteAddr().Network(), nc.RemoteAddr(), len(cs))
	}
	return name
}

func (s *sender) closeReport(err error) {
	r := &s.rep
	r.Outcome, r.End = s.phase, time.Since(s.start)
	r.Total = r.End - r.Start
	if pe, ok := err.(*PhaseError); ok {
		r.Error, r.FailedIn = pe.Error(), pe.Phase
	}
	r.settle()
	if s.cw != nil {
		r.WireBytes = s.cw.Offset()
	}
}

func (s *sender) report() *Report {
	r := s.rep
	return &r
}
