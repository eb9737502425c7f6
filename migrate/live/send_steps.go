package live

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// execute does what action a asks, on the connections, and returns the
// Core's next action. Before the Core moves on, the VM is checked for
// changes its owner made under the migration, by the simulator's rule; a
// step that fails is blamed on such a change first, if there was one.
func (s *sender) execute(a migrate.Action) (migrate.Action, error) {
	next, err := s.step(a)
	if err != nil {
		err = s.blame(err)
	}
	return next, err
}

// blame returns the cause of err, a step's failure in the stun: the
// source's own VM, if its owner changed it. An owner's write in the stun
// can make the destination find a digest mismatch and hang up, and the
// source then fails on the connection; the connection is not
// what failed. After the commit the destination may run the VM, and the
// failure stays the connection's (ErrInDoubt).
func (s *sender) blame(err error) error {
	if errors.Is(err, migrate.ErrSource) || !s.core.Phase().Stunned() || s.src.Committed() {
		return err
	}
	if cerr := s.check(); cerr != nil {
		if errors.Is(err, migrate.ErrAuthentication) {
			// Evidence of tampering stays matchable beside the owner's
			// change.
			return fmt.Errorf("%w (the step then failed: %w)", cerr, err)
		}
		return fmt.Errorf("%w (the step then failed: %v)", cerr, err)
	}
	return err
}

// step is execute's work, before blame.
func (s *sender) step(a migrate.Action) (migrate.Action, error) {
	switch a.Kind {
	case migrate.DoCopyRound:
		return s.copyRound(a)
	case migrate.DoPause:
		s.waitWarm()
		if err := s.locked(s.src.Pause); err != nil {
			return a, err
		}
	case migrate.DoSaveDevices:
		var n int64
		err := s.locked(func() (err error) {
			s.states, n, err = s.src.SaveDevices()
			return err
		})
		if err != nil {
			return a, err
		}
		s.core.DevicesSaved(n)
	case migrate.DoSendFinalRAM, migrate.DoSendFinalFramebuffers:
		if a.PostCopy {
			if err := s.owePages(a); err != nil {
				return a, err
			}
			break
		}
		if err := s.src.SendRegions(a.First, a.Regions, a.AllInUse, s.copyRegion, s.core.Sent); err != nil {
			return a, err
		}
		// The phase ends when its pages are on the connections, as a
		// round does: Copy returns once they are written.
		s.core.PagesQueued()
	case migrate.DoSendDeviceStates:
		if err := s.finishStream(); err != nil {
			return a, err
		}
		if s.cfg.UsesPostCopy() {
			if err := s.sendOwed(); err != nil {
				return a, err
			}
		}
	case migrate.DoRestore:
		// The destination applies the rest, checks the digests and
		// restores the devices, then says it is ready.
		var rd ready
		if err := s.conv.read(msgReady, &rd); err != nil {
			return a, err
		}
		if rd.StreamBytes != s.pw.Offset() {
			return a, fmt.Errorf("%w: the destination read %d bytes of stream, the source wrote %d", migrate.ErrStream, rd.StreamBytes, s.pw.Offset())
		}
	case migrate.DoResume:
		// The last check, the owner's throttle the commit carries and the
		// hold on the VM come in one instant under the host's lock: a
		// change after it could not reach the destination, so the VM
		// refuses its owner's changes from then on (vgpu.ErrMigrating).
		var c commit
		err := s.locked(func() (err error) {
			c.Resume, c.Throttle, err = s.src.Commit()
			return err
		})
		if err != nil {
			return a, err
		}
		// In doubt from the first byte of the commit on: a write that
		// failed may still have delivered it.
		s.core.Commit()
		if err := s.conv.write(msgCommit, c); err != nil {
			return a, err
		}
		var ack resumed
		if err := s.conv.read(msgResumed, &ack); err != nil {
			return a, err
		}
		// The destination runs the VM: nothing the source does now can
		// change where it runs, so no check stands between this and
		// the release; a destination that did other than it was told
		// is only reported.
		if ack.Running != c.Resume || ack.Throttle != c.Throttle {
			s.core.Notice(fmt.Sprintf("the destination acknowledged running %v at throttle %v; the source asked running %v at %v",
				ack.Running, ack.Throttle, c.Resume, c.Throttle))
		}
		return s.core.Done(s.now()), nil
	case migrate.DoPostCopy:
		if err := s.postCopy(); err != nil {
			return a, err
		}
		return s.core.Done(s.now()), nil
	case migrate.DoRelease:
		err := s.locked(s.src.Release)
		if err != nil {
			// The VM is already the destination's: reported, not undone.
			s.core.Notice("source release: " + err.Error())
		}
	}
	if err := s.check(); err != nil {
		return a, err
	}
	return s.core.Done(s.now()), nil
}

// check catches a VM its owner changed under the migration (Source.check)
// once the current phase's work is done.
func (s *sender) check() error {
	if p := s.core.Phase(); p < migrate.PhaseRelease {
		return s.locked(func() error { return s.src.Check(p) })
	}
	return nil
}

// copyRound sends a pre-copy round and reports its arrival: a round has
// arrived when the last of it has been written to the connections.
func (s *sender) copyRound(a migrate.Action) (migrate.Action, error) {
	if a.SetThrottle {
		if err := s.locked(func() error { return s.src.SetThrottle(a.Throttle) }); err != nil {
			return a, err
		}
	}
	before := s.pw.Offset()
	if err := s.src.SendRegions(a.First, a.Regions, a.AllInUse, s.copyRegion, s.core.Sent); err != nil {
		return a, err
	}
	if err := s.pw.EndRound(); err != nil {
		return a, wrap(migrate.ErrStream, err)
	}
	s.core.RoundQueued(s.pw.Offset() - before)
	if err := s.check(); err != nil {
		return a, err
	}
	// The dirty counts and page states are the memory package's own
	// synchronized reads: the host runs on meanwhile, as it did while
	// the round was copied.
	dirty, err := s.src.Dirty(a.Regions, s.predictWire)
	if err != nil {
		return a, err
	}
	var used migrate.Pages
	if s.cfg.Mode == migrate.Legacy {
		if used, err = s.src.UsedFramebuffer(s.predictWire); err != nil {
			return a, err
		}
	}
	next := s.core.RoundArrived(s.now(), dirty, used)
	s.warmDigests()
	return next, nil
}

// measureWireSizes measures, on a goroutine of its own while round 0 is
// copied, the class sizes the prediction at the end of each round needs:
// for the page size of every region, at every level the batches may be
// encoded at. A failure shows again when the prediction asks.
func (s *sender) measureWireSizes() {
	levels := []checkpoint.Level{s.cfg.Engine.Level}
	if s.chooser != nil {
		levels = migrate.AutoLevels()
	}
	var encs []migrate.PageEncoding
	for _, r := range s.src.Regions() {
		for _, l := range levels {
			encs = append(encs, s.encoding(l, r.PageSize()))
		}
	}
	s.sizing = make(chan struct{})
	go func() {
		defer close(s.sizing)
		_ = migrate.MeasureWireSizes(encs...)
	}()
}

// encoding is how the batches of pages of pageSize bytes are encoded at
// level.
func (s *sender) encoding(level checkpoint.Level, pageSize int) migrate.PageEncoding {
	return s.cfg.Filtering.Encoding(migrate.PageEncoding{PageSize: pageSize, BatchBytes: s.cfg.Engine.BatchBytes, Level: level,
		Encrypted: s.cfg.EncryptionKey != nil})
}

// predictWire sizes counts pages of each class at the level the next
// batches are encoded at: the adaptive codec's current choice, or the
// configured level.
func (s *sender) predictWire(counts *[memory.ClassExplicit]int64, pageSize int) (int64, error) {
	level := s.cfg.Engine.Level
	if s.chooser != nil {
		level = s.chooser.Choice()
	}
	return s.wire.Wire(s.encoding(level, pageSize), counts)
}

// warmDigests brings the regions' digests up to date while the VM runs and
// the next round is copied, on a goroutine of its own, so that the stun
// hashes only what changed since: the digests the stream ends with cost
// the final pages, not the whole VM. The memory package keeps a digest's
// page hashes and knows which pages changed since (memory.Region.Digest),
// so nothing the VM writes in between is missed. Nothing waits for it
// but the stun (waitWarm), so that the rounds' measured rates are the
// copy's.
func (s *sender) warmDigests() {
	s.waitWarm()
	done := make(chan struct{})
	s.warming = done
	regions, workers := s.src.Regions(), s.cfg.DigestWorkers
	go func() {
		defer close(done)
		for _, r := range regions {
			_, _ = r.DigestParallel(workers) // a failure shows again in the stun
		}
	}()
}

// waitWarm waits for the digests' warm-up, if one runs.
func (s *sender) waitWarm() {
	if s.warming != nil {
		<-s.warming
		s.warming = nil
	}
}

// finishStream sends the device states, the regions' digests and the end
// of the stream.
func (s *sender) finishStream() error {
	if s.chooser != nil {
		none, s2, zstd := s.chooser.Batches()
		s.core.Notice(fmt.Sprintf("adaptive codec: %d batches uncompressed, %d S2, %d zstd", none, s2, zstd))
	}
	for i, st := range s.states {
		ds := checkpoint.DeviceState{Device: uint32(i), Version: vgpu.StateVersion, Data: st}
		if err := s.pw.WriteDeviceState(ds); err != nil {
			return wrap(migrate.ErrStream, err)
		}
	}
	if s.postCopying() {
		// Post-copy: the destination's memory moves on before the last
		// page arrives, so no digest taken here could match it.
		return wrap0(migrate.ErrStream, s.pw.CloseWithDigests(nil))
	}
	digests := make([]checkpoint.RegionDigest, len(s.src.Regions()))
	s.digests = make([]migrate.Digest, len(s.src.Regions()))
	for i, r := range s.src.Regions() {
		d, err := r.DigestParallel(s.cfg.DigestWorkers)
		if err != nil {
			return wrap(migrate.ErrSource, err)
		}
		digests[i] = checkpoint.RegionDigest{Region: uint32(i), Digest: d}
		s.digests[i] = migrate.Digest(d)
	}
	if err := s.pw.CloseWithDigests(digests); err != nil {
		return wrap(migrate.ErrStream, err)
	}
	return nil
}

// linkName names the connections for the report.
func linkName(cs []io.ReadWriter) string {
	name := fmt.Sprintf("%d connection(s)", len(cs))
	if nc, ok := cs[0].(net.Conn); ok && nc.RemoteAddr() != nil {
		name = fmt.Sprintf("%s %s x%d", nc.RemoteAddr().Network(), nc.RemoteAddr(), len(cs))
	}
	return name
}

// report is the source's report: the Core's account, and what only the
// connections know.
func (s *sender) report() *migrate.Report {
	r := s.core.Report()
	r.Source, r.Destination, r.Fidelity, r.Live, r.Link = s.vm.Host().Name(), s.destination, migrate.Bytes, true, s.link
	for _, p := range s.vm.Profiles() {
		r.Profiles = append(r.Profiles, p.Name)
	}
	r.Events = nil
	r.WireBytes = s.wireBytes()
	r.RegionDigests = s.digests
	return r
}
