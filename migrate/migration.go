package migrate

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// Migration is one VM moving from its host to another, driven by its Sim:
// the simulator's driver of a Core, which executes the Core's actions on
// modelled links in simulated time. It is not safe for concurrent use.
type Migration struct {
	sim  *Sim
	id   int
	cfg  Config
	core *Core

	src     *Source
	vm      *vgpu.VM // at the source
	in      *vgpu.VM // at the destination, incoming until the resume
	srcHost *vgpu.Host
	dst     *vgpu.Host
	srcRegs []*memory.Region // guest RAM, then each framebuffer
	dstRegs []*memory.Region
	xfer    transport
	states  [][]byte
	devices int // vGPUs whose state the device checkpoint moves

	wireBytes      int64        // the stream's, when the migration ended
	before, during vgpu.Metrics // the workload's, when it ended

	flow         *flow
	transferring bool
	linkStalled  bool // FaultLinkStall: the timer is the timeout
	timerAt      time.Duration
	timerSet     bool

	handedOver bool
	// The VM's remote GPU sessions, whether they are the destination's,
	// and what their hand-over took.
	remote         []*vgpu.RemoteGPU
	remoteHanded   bool
	remoteHandover time.Duration

	post      *postCopyRun // once the stun switched over into post-copy
	published int          // events queued in the Sim
	taken     *int         // events returned, by Step or by the Sim's; shared with the Sim's queue
}

// Migrate moves vm to dst in a Sim of its own and returns the report. It
// is the one-call form of NewSim, Start and Run; the two hosts, which must
// read the same time, are the caller's to advance again once it returns.
// Hosts joined to them by remote GPUs (vgpu.Joined) are driven with them.
func Migrate(vm *vgpu.VM, dst *vgpu.Host, cfg Config) (*Report, error) {
	if vm == nil {
		return nil, fmt.Errorf("%w: nil VM", ErrConfig)
	}
	s, err := NewSim(SimConfig{}, vgpu.Joined(vm.Host(), dst)...)
	if err != nil {
		return nil, err
	}
	defer s.releaseAll()
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
	srcHost := vm.Host()
	refuse := func(err error) (*Migration, error) {
		return nil, &PhaseError{VM: vm.ID(), Phase: PhaseSetup, Err: err}
	}
	if srcHost == dst {
		return refuse(fmt.Errorf("%w: source and destination are the same host %q", ErrConfig, dst.Name()))
	}
	if vm.Migrating() {
		// NewSource would refuse it too, after the hosts' limits; a VM's
		// own migration is the more telling refusal.
		return refuse(fmt.Errorf("%w: %w: VM %q has a migration under way", ErrMigrating, vgpu.ErrMigrating, vm.ID()))
	}
	if err := s.checkNew(srcHost, dst); err != nil {
		return refuse(err)
	}
	for _, h := range []*vgpu.Host{srcHost, dst} {
		if n := s.busy(h); n >= s.cfg.MaxPerHost {
			return refuse(fmt.Errorf("%w: host %q takes part in %d", ErrBusy, h.Name(), n))
		}
	}
	src, err := NewSource(vm)
	if err != nil {
		return refuse(err)
	}
	// From here a refusal gives the VM's migration claim back.
	refuse = func(err error) (*Migration, error) {
		src.RollBack(false)
		return nil, &PhaseError{VM: vm.ID(), Phase: PhaseSetup, Err: err}
	}
	spec := vm.IncomingSpec()
	if err := dst.CheckIncoming(spec); err != nil {
		return refuse(wrap(ErrIncompatible, err))
	}
	path, err := s.path(cfg)
	if err != nil {
		src.RollBack(false)
		return nil, err
	}
	stateBytes, err := DeviceStateBytes(vm)
	if err != nil {
		return refuse(err)
	}
	ccfg, err := simCoreConfig(vm, cfg, stateBytes, &s.costs)
	if err != nil {
		return refuse(err)
	}
	ccfg.Destination = dst.Name()
	core, err := NewCore(ccfg, s.now, fmt.Sprintf("to %s over %v, %v, %v fidelity", dst.Name(), cfg.routeNames(), cfg.Mode, cfg.Fidelity))
	if err != nil {
		return refuse(err)
	}
	in, err := dst.PrepareIncoming(spec)
	if err != nil {
		return refuse(wrap(ErrIncompatible, err))
	}
	m := &Migration{
		sim: s, id: s.nextID, cfg: cfg, core: core, src: src, vm: vm, in: in, srcHost: srcHost, dst: dst,
		devices: len(vm.VGPUs()), taken: new(int), remote: spec.Remote,
	}
	m.srcRegs = src.Regions()
	m.dstRegs = append([]*memory.Region{in.RAM()}, in.Framebuffers()...)
	if cfg.Fidelity == Bytes {
		m.xfer, err = newByteTransport(m, false)
	} else {
		m.xfer, err = newModelTransport(m, &s.costs, false)
	}
	if err != nil {
		_ = in.Abort()
		return refuse(err)
	}
	// checkHost passed for both: adding them cannot fail.
	_ = s.AddHost(srcHost)
	_ = s.AddHost(dst)
	s.nextID++
	m.flow = &flow{id: m.id, path: path}
	s.net.add(m.flow)
	src.StartLogging()
	s.active = append(s.active, m)
	m.publish()
	// The handshake: the source asks, the destination answers.
	m.setTimer(s.now + 2*cfg.latency())
	return m, nil
}

// simCoreConfig is what the simulator's Core knows of cfg's migration of
// vm: the configured costs, the link's latency for each of the stun's
// three transfers, the GPU's PCIe rate and, in Legacy mode, the
// framebuffer in use, its wire size predicted by wm.
func simCoreConfig(vm *vgpu.VM, cfg Config, stateBytes int64, wm *WireModel) (CoreConfig, error) {
	c := CoreConfig{VM: vm.ID(), Policy: cfg.Policy, Costs: cfg.Costs, StunLatency: 3 * cfg.latency(),
		NominalBandwidthBytesPerSec: cfg.goodput(), Framebuffers: len(vm.Framebuffers()),
		Devices: len(vm.VGPUs()), DeviceStateBytes: stateBytes, PCIeBytesPerSec: vm.Host().Config().GPU.PCIeDMABytesPerSec}
	if cfg.UsesPostCopy() {
		c.PageListBytes = PostCopyListBytes(vm)
	}
	if cfg.Mode != Legacy {
		return c, nil
	}
	var err error
	c.UsedFramebuffer, err = usedPagesOf(vm.Framebuffers(), func(counts *[memory.ClassExplicit]int64, ps int) (int64, error) {
		return wm.Wire(cfg.encoding(cfg.level(), ps), counts)
	})
	return c, err
}

// VM returns the VM being migrated: the source's until the switch-over, the
// destination's after it.
func (m *Migration) VM() *vgpu.VM {
	if p := m.core.Phase(); p == PhasePostCopy || p == PhaseRelease || p == PhaseDone {
		return m.in
	}
	return m.vm
}

// Phase returns the migration's phase.
func (m *Migration) Phase() Phase { return m.core.Phase() }

// Err returns why the migration failed, or nil.
func (m *Migration) Err() error { return m.core.Err() }

// Done reports whether the migration has ended, in PhaseDone or PhaseFailed.
func (m *Migration) Done() bool { return m.core.Ended() }

// Events returns the migration's events so far.
func (m *Migration) Events() []Event { return append([]Event(nil), m.core.history...) }

// Step returns this migration's earliest event not yet returned, by it or
// by the Sim's Step, Advance or Run (see Sim), advancing the Sim to the
// migration's next event if none is waiting; the Sim holds the event no
// more. It returns false once the migration has ended and every event of
// it was returned. Other migrations in the Sim move on with it, and their
// events wait in the Sim for their own Step or the Sim's.
func (m *Migration) Step() (Event, bool, error) {
	for *m.taken == len(m.core.history) {
		if m.Done() {
			return Event{}, false, nil
		}
		if err := m.sim.step(maxTime); err == errNoEvent {
			// Under way with nothing scheduled: no step would ever end it.
			if m.core.DestinationPaused() {
				return Event{}, false, fmt.Errorf("%w: post-copy of %q waits for its link (Recover)", ErrConnection, m.vm.ID())
			}
			return Event{}, false, fmt.Errorf("%w: migration of %q has nothing scheduled", ErrConnection, m.vm.ID())
		} else if err != nil {
			return Event{}, false, err
		}
	}
	m.publish()
	e := m.core.history[*m.taken]
	*m.taken++
	m.sim.took()
	return e, true, nil
}

// Run steps the migration to its end and returns its report, and its error
// if it failed. The events it steps past are returned to no one else: the
// Sim holds none of them afterwards, and Events and the report keep them.
func (m *Migration) Run() (*Report, error) {
	for {
		_, ok, err := m.Step()
		if err != nil {
			return m.Report(), err
		}
		if !ok {
			return m.Report(), m.Err()
		}
	}
}

// Cancel gives the migration up. Before the destination acknowledged the
// resume (in post-copy, before the VM resumed at the destination), the VM stays on the source — running if it ran, paused if it was
// paused, its memory and device state as they were — and the destination
// is left holding nothing; after, it returns ErrTooLate and the migration
// completes. Canceling an ended or failed migration again does nothing.
func (m *Migration) Cancel() error {
	switch m.core.Phase() {
	case PhaseFailed:
		return nil
	case PhasePostCopy, PhaseRelease, PhaseDone:
		return fmt.Errorf("%w: VM %q already resumed at %s", ErrTooLate, m.vm.ID(), m.dst.Name())
	}
	m.fail(ErrCanceled)
	return nil
}
