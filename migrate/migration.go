package migrate

import (
	"errors"
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// Migration is one VM moving from its host to another, driven by its Sim.
// It is not safe for concurrent use.
type Migration struct {
	sim *Sim
	id  int
	cfg Config

	vm       *vgpu.VM // at the source
	in       *vgpu.VM // at the destination, incoming until the resume
	src, dst *vgpu.Host
	srcRegs  []*memory.Region // guest RAM, then each framebuffer
	dstRegs  []*memory.Region
	sets     []*memory.PageSet
	xfer     transport

	ls           *linkState
	flow         *flow
	transferring bool
	linkStalled  bool // FaultLinkStall: the timer is the timeout
	timerAt      time.Duration
	timerSet     bool

	phase      Phase
	phaseStart time.Duration
	round      int
	cur        Round // the round being sent
	states     [][]byte
	stateBytes int64 // the device states' size: estimated, then as saved

	wasRunning    bool // the VM ran: when the migration started, then when the stun began
	pausedByUs    bool
	priorThrottle float64
	throttle      float64 // the migration's own cut, 0 when none

	handedOver bool
	srcBase    time.Duration // source host's clock minus the Sim's
	dstBase    time.Duration
	rep        Report
	events     []Event
	seen       int
	err        error
}

// Migrate moves vm to dst in a Sim of its own and returns the report. It
// is the one-call form of NewSim, Start and Run.
func Migrate(vm *vgpu.VM, dst *vgpu.Host, cfg Config) (*Report, error) {
	if vm == nil {
		return nil, fmt.Errorf("%w: nil VM", ErrConfig)
	}
	s, err := NewSim(SimConfig{}, vm.Host(), dst)
	if err != nil {
		return nil, err
	}
	m, err := s.Start(vm, dst, cfg)
	if err != nil {
		return nil, err
	}
	return m.Run()
}

// Start begins migrating vm to dst. Everything that can be checked before
// the VM is touched is checked here — the GPU model, the vGPU types and the
// room for them and for the guest memory at dst, passthrough devices, the
// concurrency limit of both hosts, the estimated stun against cfg.StunLimit
// — and a refusal is a *PhaseError in PhaseSetup with nothing changed. On
// success the destination holds the VM incoming and the source's dirty
// logs are on; the first event is the end of the setup handshake.
func (s *Sim) Start(vm *vgpu.VM, dst *vgpu.Host, cfg Config) (*Migration, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if vm == nil || dst == nil {
		return nil, fmt.Errorf("%w: nil VM or destination", ErrConfig)
	}
	src := vm.Host()
	refuse := func(err error) (*Migration, error) {
		return nil, &PhaseError{VM: vm.ID(), Phase: PhaseSetup, Err: err}
	}
	if src == dst {
		return refuse(fmt.Errorf("%w: source and destination are the same host %q", ErrConfig, dst.Name()))
	}
	for _, m := range s.active {
		if m.vm == vm {
			return refuse(fmt.Errorf("%w: VM is already migrating", ErrBusy))
		}
	}
	for _, h := range []*vgpu.Host{src, dst} {
		if n := s.busy(h); n >= s.cfg.MaxPerHost {
			return refuse(fmt.Errorf("%w: host %q takes part in %d", ErrBusy, h.Name(), n))
		}
	}
	if err := vm.CheckMigratable(); err != nil {
		return refuse(wrap(ErrIncompatible, err))
	}
	if st := vm.State(); st != vgpu.VMRunning && st != vgpu.VMPaused {
		return refuse(fmt.Errorf("%w: VM is %v; only a running or paused VM is live-migrated", ErrIncompatible, st))
	}
	spec := vm.IncomingSpec()
	if err := dst.CheckIncoming(spec); err != nil {
		return refuse(wrap(ErrIncompatible, err))
	}
	ls, err := s.link(cfg.Link)
	if err != nil {
		return nil, err
	}
	if cfg.StunLimit > 0 {
		est, err := estimate(vm, cfg)
		if err != nil {
			return refuse(err)
		}
		if est.Total > cfg.StunLimit {
			return refuse(fmt.Errorf("%w: estimated stun %v, limit %v", ErrStunLimit, est.Total, cfg.StunLimit))
		}
	}
	stateBytes, err := deviceStateBytes(vm)
	if err != nil {
		return refuse(err)
	}
	in, err := dst.PrepareIncoming(spec)
	if err != nil {
		return refuse(wrap(ErrIncompatible, err))
	}
	s.AddHost(src)
	s.AddHost(dst)
	m := &Migration{
		sim: s, id: s.nextID, cfg: cfg, vm: vm, in: in, src: src, dst: dst, ls: ls,
		wasRunning: vm.State() == vgpu.VMRunning, priorThrottle: vm.Throttle(),
		srcBase: src.Now() - s.now, dstBase: dst.Now() - s.now, round: -1, stateBytes: stateBytes,
	}
	m.srcRegs = append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...)
	m.dstRegs = append([]*memory.Region{in.RAM()}, in.Framebuffers()...)
	for _, r := range m.srcRegs {
		m.sets = append(m.sets, memory.NewPageSet(r.Pages()))
	}
	if cfg.Fidelity == Bytes {
		m.xfer, err = newByteTransport(m)
	} else {
		m.xfer, err = newModelTransport(m, s.costs.get)
	}
	if err != nil {
		_ = in.Abort()
		return refuse(err)
	}
	s.nextID++
	m.flow = &flow{id: m.id}
	ls.share.add(m.flow)
	for _, r := range m.srcRegs {
		r.StartDirtyLog()
	}
	m.initReport()
	s.active = append(s.active, m)
	m.enter(PhaseSetup, fmt.Sprintf("to %s over %v, %v, %v fidelity", dst.Name(), cfg.Link.Name, cfg.Mode, cfg.Fidelity))
	// The handshake: the source asks, the destination answers.
	m.setTimer(s.now + 2*cfg.Link.Latency)
	return m, nil
}

// VM returns the VM being migrated: the source's until the switch-over, the
// destination's after it.
func (m *Migration) VM() *vgpu.VM {
	if m.phase == PhaseRelease || m.phase == PhaseDone {
		return m.in
	}
	return m.vm
}

// Phase returns the migration's phase.
func (m *Migration) Phase() Phase { return m.phase }

// Err returns why the migration failed, or nil.
func (m *Migration) Err() error { return m.err }

// Done reports whether the migration has ended, in PhaseDone or PhaseFailed.
func (m *Migration) Done() bool { return m.phase == PhaseDone || m.phase == PhaseFailed }

// Events returns the migration's events so far.
func (m *Migration) Events() []Event { return append([]Event(nil), m.events...) }

// Step advances the Sim to this migration's next event and returns it; it
// returns false once the migration has ended and every event was returned.
// Other migrations in the Sim move on with it.
func (m *Migration) Step() (Event, bool, error) {
	for m.seen == len(m.events) {
		if m.Done() {
			return Event{}, false, nil
		}
		if err := m.sim.step(maxTime); err != nil && err != errNoEvent {
			return Event{}, false, err
		}
	}
	e := m.events[m.seen]
	m.seen++
	return e, true, nil
}

// Run steps the migration to its end and returns its report, and its error
// if it failed.
func (m *Migration) Run() (*Report, error) {
	for {
		_, ok, err := m.Step()
		if err != nil {
			return m.Report(), err
		}
		if !ok {
			return m.Report(), m.err
		}
	}
}

// Cancel gives the migration up. Before the destination acknowledged the
// resume, the VM stays on the source — running if it ran, paused if it was
// paused, its memory and device state as they were — and the destination
// is left holding nothing; after, it returns ErrTooLate and the migration
// completes. Canceling an ended or failed migration again does nothing.
func (m *Migration) Cancel() error {
	switch m.phase {
	case PhaseFailed:
		return nil
	case PhaseRelease, PhaseDone:
		return fmt.Errorf("%w: VM %q already resumed at %s", ErrTooLate, m.vm.ID(), m.dst.Name())
	}
	m.fail(ErrCanceled)
	return nil
}

func (m *Migration) setTimer(at time.Duration) { m.timerAt, m.timerSet = at, true }

// enter moves to phase p, closing the phase it leaves in the report.
func (m *Migration) enter(p Phase, detail string) {
	now := m.sim.now
	if m.phase.Stunned() {
		m.rep.addStun(m.phase, now-m.phaseStart)
	}
	m.phase, m.phaseStart = p, now
	round := -1
	if p == PhasePreCopy {
		round = m.round
	}
	m.event(round, detail)
}

func (m *Migration) event(round int, detail string) {
	e := Event{At: m.sim.now, VM: m.vm.ID(), Phase: m.phase, Round: round, Detail: detail}
	m.events = append(m.events, e)
	m.sim.emit(e)
}

// transfer puts the bytes written since the last transfer on the link; the
// timer fires when the last of them has arrived. capBps, if positive,
// bounds the flow's rate.
func (m *Migration) transfer(capBps int64) {
	n := m.xfer.pending()
	m.xfer.markSent()
	if n == 0 {
		m.setTimer(m.sim.now + m.cfg.Link.Latency)
		return
	}
	m.ls.share.start(m.flow, n, capBps)
	m.transferring = true
}

// wake handles the end of the current phase's work: a timer or a transfer
// that arrived.
func (m *Migration) wake() {
	if m.linkStalled {
		m.fail(fmt.Errorf("%w: the link to %s carried nothing for %v", ErrConnection, m.dst.Name(), m.cfg.Timeout))
		return
	}
	if err := m.checkVMs(); err != nil {
		m.fail(err)
		return
	}
	var err error
	switch m.phase {
	case PhaseSetup:
		err = m.beginRound()
	case PhasePreCopy:
		err = m.endRound()
	case PhaseSwitchover:
		err = m.quiesce()
	case PhaseQuiesce:
		err = m.deviceSave()
	case PhaseDeviceSave:
		err = m.finalRAM()
	case PhaseFinalRAM:
		err = m.finalFramebuffer()
	case PhaseFinalFramebuffer:
		err = m.sendDeviceState()
	case PhaseDeviceState:
		err = m.restore()
	case PhaseRestore:
		m.enter(PhaseResume, "starting the VM at the destination")
		m.setTimer(m.sim.now + m.cfg.Costs.Resume)
	case PhaseResume:
		err = m.acknowledged()
	case PhaseRelease:
		m.release()
	}
	if err != nil {
		m.fail(err)
	}
}

// checkVMs catches a VM changed under the migration by someone else.
func (m *Migration) checkVMs() error {
	if m.phase >= PhaseRelease {
		return nil
	}
	st := m.vm.State()
	switch {
	case st == vgpu.VMDestroyed || st == vgpu.VMStopped:
		return fmt.Errorf("%w: source VM was %v during the migration", ErrSource, st)
	case st == vgpu.VMRunning && m.phase >= PhaseQuiesce:
		// Its owner resumed it during the stun: what it writes now would
		// never reach the destination.
		return fmt.Errorf("%w: source VM was resumed during the stun", ErrSource)
	case m.in.State() == vgpu.VMDestroyed:
		return fmt.Errorf("%w: incoming VM was destroyed", ErrDestination)
	}
	// Written, and paused again, since its final pages left: a resume
	// between two events, or a write by its owner.
	sent := 0
	switch {
	case m.phase >= PhaseFinalFramebuffer:
		sent = len(m.srcRegs)
	case m.phase >= PhaseFinalRAM:
		sent = 1
	}
	return writtenInStun(m.srcRegs[:sent])
}

// writtenInStun returns ErrSource if any of regs, whose final pages the stun
// has sent, logged a write since.
func writtenInStun(regs []*memory.Region) error {
	for i, r := range regs {
		if n := r.DirtyCount(); n > 0 {
			return fmt.Errorf("%w: %d pages of the source VM's region %d written during the stun, after its final pages left", ErrSource, n, i)
		}
	}
	return nil
}

func (m *Migration) quiesce() error {
	m.enter(PhaseQuiesce, "stopping vCPUs and GPU work")
	// The destination resumes the VM as the stun finds it: paused, if its
	// owner paused it during pre-copy.
	m.wasRunning = m.vm.State() == vgpu.VMRunning
	if m.wasRunning {
		if err := m.vm.Pause(); err != nil {
			return wrap(ErrSource, err)
		}
		m.pausedByUs = true
	}
	m.setTimer(m.sim.now + m.cfg.Costs.Quiesce)
	return nil
}

func (m *Migration) deviceSave() error {
	states, err := m.vm.SaveDeviceStates()
	if err != nil {
		return wrap(ErrSource, err)
	}
	m.states = states
	n := int64(0)
	for _, s := range states {
		n += int64(len(s))
	}
	m.rep.DeviceStateBytes, m.stateBytes = n, n
	m.enter(PhaseDeviceSave, fmt.Sprintf("saving %d device state(s), %d bytes, over PCIe", len(states), n))
	m.setTimer(m.sim.now + m.pcieTime(n))
	return nil
}

// pcieTime is one side of the device checkpoint: the fixed cost, half of
// StunCosts.DeviceCheckpoint per vGPU (the other half is the restore's),
// and the state's bytes at the GPU's DMA rate.
func (m *Migration) pcieTime(stateBytes int64) time.Duration {
	n := time.Duration(len(m.states))
	return n*m.cfg.Costs.DeviceCheckpoint/2 + transferTime(stateBytes, m.dst.Config().GPU.PCIeDMABytesPerSec)
}

func (m *Migration) finalRAM() error {
	m.enter(PhaseFinalRAM, "")
	t, err := m.sendDirty(0)
	if err != nil {
		return err
	}
	m.rep.Final.RAM.add(t)
	m.event(-1, fmt.Sprintf("sending %d dirty RAM pages, %d bytes on the wire", t.Pages, t.WireBytes))
	m.transfer(0)
	return nil
}

func (m *Migration) finalFramebuffer() error {
	if err := m.deliver(); err != nil {
		return err
	}
	m.enter(PhaseFinalFramebuffer, "")
	var sum Traffic
	for i := 1; i < len(m.srcRegs); i++ {
		// Legacy sends every used page; the log is cleared all the same,
		// so that a write after this is seen.
		m.srcRegs[i].CollectDirty(m.sets[i])
		set := m.sets[i]
		if m.cfg.Mode == Legacy {
			set = nil
		}
		t, err := m.xfer.send(i, set)
		if err != nil {
			return err
		}
		m.rep.Final.Framebuffers[i-1].add(t)
		sum.add(t)
	}
	capBps := int64(0)
	if m.cfg.Mode == Legacy && sum.RawBytes > 0 {
		// 6.7 U1 moved the framebuffer through the device checkpoint path,
		// whose raw rate, not the link, set the pace.
		capBps = max(1, scaleBytes(m.checkpointPathRate(), sum.WireBytes, sum.RawBytes))
	}
	m.event(-1, fmt.Sprintf("sending %d framebuffer pages, %d bytes on the wire", sum.Pages, sum.WireBytes))
	m.transfer(capBps)
	return nil
}

func (m *Migration) checkpointPathRate() int64 {
	if r := m.cfg.Costs.CheckpointPathBytesPerSec; r > 0 {
		return r
	}
	return m.src.Config().GPU.PCIeDMABytesPerSec
}

func (m *Migration) sendDeviceState() error {
	if err := m.deliver(); err != nil {
		return err
	}
	m.enter(PhaseDeviceState, fmt.Sprintf("sending %d bytes of device state", m.rep.DeviceStateBytes))
	if err := m.xfer.finish(m.states); err != nil {
		return err
	}
	m.transfer(0)
	return nil
}

func (m *Migration) restore() error {
	if err := m.deliver(); err != nil {
		return err
	}
	states, err := m.xfer.states()
	if err != nil {
		return err
	}
	if err := m.in.Restore(states); err != nil {
		return wrap(ErrDestination, err)
	}
	m.enter(PhaseRestore, "loading device state into the destination's vGPUs over PCIe")
	m.setTimer(m.sim.now + m.pcieTime(m.rep.DeviceStateBytes))
	return nil
}

// acknowledged is the destination's acknowledgement of the resume: from
// here on the VM is the destination's.
func (m *Migration) acknowledged() error {
	if m.vm.Workload() != nil {
		if err := m.vm.HandOverWorkload(m.in); err != nil {
			return wrap(ErrDestination, err)
		}
		m.handedOver = true
	}
	if err := m.in.SetThrottle(m.priorThrottle); err != nil {
		return m.handBack(err)
	}
	if m.wasRunning {
		if err := m.in.Resume(); err != nil {
			return m.handBack(err)
		}
	}
	m.enter(PhaseRelease, "destination acknowledged the resume; releasing the source")
	m.setTimer(m.sim.now)
	return nil
}

// handBack returns the workload to the source when the destination fails
// to resume, before it acknowledged.
func (m *Migration) handBack(cause error) error {
	if m.handedOver {
		if err := m.in.HandOverWorkload(m.vm); err != nil {
			cause = errors.Join(cause, err)
		}
		m.handedOver = false
	}
	return wrap(ErrDestination, cause)
}

func (m *Migration) release() {
	m.xfer.close()
	if err := m.vm.Destroy(); err != nil {
		// The VM is already the destination's; a source that cannot
		// release it is reported, not undone.
		m.event(-1, "source release: "+err.Error())
	}
	m.finish(PhaseDone, "VM runs at "+m.dst.Name())
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
	at := m.phase
	m.xfer.abort()
	m.xfer.close()
	if m.in != nil && m.in.State() != vgpu.VMDestroyed {
		if m.handedOver {
			_ = m.in.HandOverWorkload(m.vm)
			m.handedOver = false
		}
		_ = m.in.Destroy()
	}
	m.transferring = false
	m.ls.share.start(m.flow, 0, 0)
	for _, r := range m.srcRegs {
		r.StopDirtyLog()
	}
	if st := m.vm.State(); st == vgpu.VMRunning || st == vgpu.VMPaused {
		_ = m.vm.SetThrottle(m.priorThrottle)
		if m.pausedByUs && st == vgpu.VMPaused {
			_ = m.vm.Resume()
		}
	}
	m.err = &PhaseError{VM: m.vm.ID(), Phase: at, Err: cause}
	m.finish(PhaseFailed, m.err.Error())
}

func (m *Migration) finish(p Phase, detail string) {
	m.timerSet = false
	m.ls.share.remove(m.flow)
	m.sim.remove(m)
	m.enter(p, detail)
	m.closeReport()
}
