package migrate

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// liveBufferBytes is the buffer between the stream writer and the
// connections: one frame when the stream is spread over several.
const liveBufferBytes = 256 << 10

// Send live-migrates vm to a destination running Receive at the other end
// of conns: iterative pre-copy of guest RAM and framebuffers while the VM
// runs (driven by a Runner, say), the switchover rule of the simulated mode
// fed with measured rates, then the stun — pause, device save, last dirty
// pages, device states and region digests — and the destination's
// acknowledgement of the resume, after which the source VM is destroyed.
// Time is wall time.
//
// The stream goes over every connection in conns (frames dealt in turn);
// the first also carries the handshake and the acknowledgements.
//
// On failure — a refusal, a connection closed or stalled past the timeout,
// a canceled ctx, pre-copy that does not converge under the Abort policy —
// Send closes the connections, so the destination gives up at once, and the
// VM stays on the source as it was: running if it ran, paused if it was
// paused, its memory untouched. The error is a *PhaseError. The one
// exception is ErrInDoubt, after the source told the destination to resume.
func Send(ctx context.Context, vm *vgpu.VM, conns []io.ReadWriter, cfg LiveConfig) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if vm == nil || len(conns) == 0 || len(conns) > maxConnections {
		return nil, fmt.Errorf("%w: Send needs a VM and 1 to %d connections", ErrConfig, maxConnections)
	}
	eng, err := NewEngine(cfg.Engine)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	s := &sender{cfg: cfg, vm: vm, conns: newConnSet(conns, cfg.Timeout), link: linkName(conns), eng: eng, round: -1, ctx: ctx}
	return s.run()
}

// sender is the source's side of one live migration.
type sender struct {
	cfg   LiveConfig
	vm    *vgpu.VM
	conns connSet
	link  string // the connections' name, for the report
	eng   *Engine
	ctx   context.Context
	prog  reporter

	ctl  *bufio.Reader // the destination's answers, on the first connection
	bw   *bufio.Writer
	cw   *checkpoint.Writer
	sink progressSink

	regs []*memory.Region // guest RAM, then each framebuffer
	sets []*memory.PageSet

	start      time.Time
	phase      Phase
	phaseStart time.Time
	round      int
	throttle   float64
	rep        Report
	stateBytes int64

	wasRunning, pausedByUs, committed bool
	priorThrottle                     float64
}

func (s *sender) run() (*Report, error) {
	s.start = time.Now()
	s.prog = reporter{fn: s.cfg.Progress, log: s.cfg.Logger, start: s.start, vm: s.vm.ID()}
	stop := context.AfterFunc(s.ctx, s.conns.closeAll)
	defer stop()
	s.enter(PhaseSetup)
	err := s.setup()
	if err == nil {
		err = s.precopy()
	}
	if err == nil {
		err = s.stun()
	}
	if err != nil {
		return s.fail(err)
	}
	s.enter(PhaseRelease)
	s.cfg.Lock.Lock()
	s.stopLogging()
	rerr := s.vm.Destroy()
	s.cfg.Lock.Unlock()
	if rerr != nil && s.cfg.Logger != nil {
		// The VM is already the destination's: reported, not undone.
		s.cfg.Logger.Warn("migrate: releasing the source VM", "vm", s.vm.ID(), "error", rerr)
	}
	s.enter(PhaseDone)
	s.closeReport(nil)
	s.prog.emit(Progress{Kind: Done, Phase: PhaseDone, Round: -1, WireBytes: s.cw.Offset()})
	return s.report(), nil
}

// setup checks the VM, shakes hands, and starts dirty logging.
func (s *sender) setup() error {
	s.cfg.Lock.Lock()
	spec, err := s.inspect()
	s.cfg.Lock.Unlock()
	if err != nil {
		return err
	}
	s.initReport()
	c0 := s.conns[0]
	s.ctl = bufio.NewReaderSize(c0, 4<<10)
	h := hello{Connections: len(s.conns), Encrypted: s.cfg.EncryptionKey != nil, BatchBytes: s.cfg.Engine.BatchBytes, Spec: spec,
		Source: s.rep.Source, Mode: uint8(s.cfg.Mode)}
	if err := writePreamble(c0); err != nil {
		return err
	}
	if err := writeMsg(c0, msgHello, h); err != nil {
		return err
	}
	var a accept
	if err := readMsg(s.ctl, msgAccept, &a); err != nil {
		return err
	}
	s.rep.Destination = a.Host

	var out io.Writer = c0
	if len(s.conns) > 1 {
		out = newStripeWriter(s.conns.writers())
	}
	s.bw = bufio.NewWriterSize(out, liveBufferBytes)
	opts := checkpoint.WriterOptions{Level: s.cfg.Engine.Level, BatchBytes: s.cfg.Engine.BatchBytes}
	binary.LittleEndian.PutUint64(opts.StreamID[:8], s.cfg.StreamID)
	if s.cfg.EncryptionKey != nil {
		opts.Encryption, opts.Key = checkpoint.EncryptionRequired, s.cfg.EncryptionKey
	}
	if s.cw, err = checkpoint.NewWriter(s.bw, metadataOf(s.vm, s.regs), opts); err != nil {
		return wrap(ErrConfig, err)
	}
	s.sink = progressSink{w: s.cw, s: s}
	s.cfg.Lock.Lock()
	for _, r := range s.regs {
		r.StartDirtyLog()
	}
	s.cfg.Lock.Unlock()
	return nil
}

// inspect checks that the VM can go, and notes what the migration needs of
// it. The caller holds the lock.
func (s *sender) inspect() (vgpu.IncomingSpec, error) {
	vm := s.vm
	if st := vm.State(); st != vgpu.VMRunning && st != vgpu.VMPaused {
		return vgpu.IncomingSpec{}, fmt.Errorf("%w: VM is %v; only a running or paused VM is live-migrated", ErrIncompatible, st)
	}
	if err := vm.CheckMigratable(); err != nil {
		return vgpu.IncomingSpec{}, wrap(ErrIncompatible, err)
	}
	n, err := deviceStateBytes(vm)
	if err != nil {
		return vgpu.IncomingSpec{}, err
	}
	s.stateBytes = n
	s.wasRunning, s.priorThrottle = vm.State() == vgpu.VMRunning, vm.Throttle()
	s.regs = append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...)
	for _, r := range s.regs {
		s.sets = append(s.sets, memory.NewPageSet(r.Pages()))
	}
	return vm.IncomingSpec(), nil
}

// metadataOf declares vm's regions to the stream: guest RAM as region 0,
// then each framebuffer.
func metadataOf(vm *vgpu.VM, regs []*memory.Region) checkpoint.Metadata {
	meta := checkpoint.Metadata{VMID: vm.ID(), GPUModel: vm.GPUModel()}
	for _, p := range vm.Profiles() {
		meta.Profiles = append(meta.Profiles, p.Name)
	}
	for i, r := range regs {
		meta.Regions = append(meta.Regions, checkpoint.RegionInfoOf(uint32(i), r))
	}
	return meta
}

// progressSink hands batches to the stream writer and reports the bytes.
type progressSink struct {
	w *checkpoint.Writer
	s *sender
}

func (p progressSink) WriteBatch(b checkpoint.EncodedBatch) error {
	err := p.w.WriteBatch(b)
	p.s.prog.bytes(p.s.phase, p.s.round, p.w.Offset())
	return err
}

// copyRegion sends region i's pages in set (nil: every page in use).
func (s *sender) copyRegion(i int, set *memory.PageSet) (Traffic, error) {
	return s.eng.Copy(s.ctx, s.sink, s.regs[i], uint32(i), set)
}

// enter moves to phase p, adding the phase it leaves to the stun if the VM
// was stopped in it.
func (s *sender) enter(p Phase) {
	now := time.Now()
	if s.phase.Stunned() {
		s.rep.addStun(s.phase, now.Sub(s.phaseStart))
	}
	s.phase, s.phaseStart = p, now
}

// stopLogging stops the dirty logs of the VM's regions, as a simulated
// migration's end does. The caller holds the lock.
func (s *sender) stopLogging() {
	regs := s.regs
	if regs == nil && s.vm.RAM() != nil {
		regs = append([]*memory.Region{s.vm.RAM()}, s.vm.Framebuffers()...)
	}
	for _, r := range regs {
		r.StopDirtyLog()
	}
}

// fail ends the migration with the VM on the source, as it was, unless the
// destination may already run it.
func (s *sender) fail(cause error) (*Report, error) {
	at := s.phase
	cause = liveCause(s.ctx, s.conns, cause)
	s.conns.closeAll()
	s.cfg.Lock.Lock()
	s.stopLogging()
	if s.committed {
		cause = wrap(ErrInDoubt, cause)
	}
	if st := s.vm.State(); st == vgpu.VMRunning || st == vgpu.VMPaused {
		// In doubt the copy stays paused, but is as it was in every other
		// way: the migration's throttle goes with the migration.
		_ = s.vm.SetThrottle(s.priorThrottle)
		if !s.committed && s.pausedByUs && st == vgpu.VMPaused {
			_ = s.vm.Resume()
		}
	}
	s.cfg.Lock.Unlock()
	err := &PhaseError{VM: s.vm.ID(), Phase: at, Err: cause}
	s.enter(PhaseFailed)
	s.closeReport(err)
	wire := int64(0)
	if s.cw != nil {
		wire = s.cw.Offset()
	}
	s.prog.emit(Progress{Kind: Failed, Phase: at, Round: -1, WireBytes: wire, Err: err})
	return s.report(), err
}
