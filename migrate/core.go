package migrate

import (
	"fmt"
	"time"
)

// A Core makes one migration's decisions. It is the one place where the
// switchover rule, the expected stun, the non-convergence policy, the stun
// limit, the order of the stun's steps, the failure path and the report's
// accounting live; the simulator (Migration) and the live mode (Send) are
// two drivers that execute what it says, on simulated and on wall time.
//
// A driver tells the Core what happened, with the time it happened on the
// driver's clock, and the Core answers with an Action: the next thing to
// do. The driver does it — copies a round's pages, pauses the VM, saves the
// devices, sends the final pages and states, waits for the destination —
// and reports back: RoundArrived after a round, Done after any other step,
// Fail when something failed; in post-copy, Owe for the pages the stun
// left, Sent for those pushed, Faulted for each demand fetch, LinkLost and
// LinkRestored for the link. Events returns what the decisions produced,
// Report the account so far.
//
// A Core never reads a clock, touches a connection or starts a goroutine,
// and is not safe for concurrent use; the same calls give the same
// actions, events and report. Its shape is etcd's raft RawNode's: the
// decisions in one value, the I/O in whoever drives it.
type Core struct {
	cfg CoreConfig

	phase      Phase
	phaseStart time.Duration
	round      int
	cur        Round // the round being sent
	throttle   float64
	handover   Handover       // the source's commit rule
	post       *postCopyState // once switched over into post-copy

	rep     Report
	history []Event
	drained int
	err     error
}

// CoreConfig is what a Core knows of its migration from the start.
type CoreConfig struct {
	// VM names the migrating VM, in events and errors.
	VM string
	// Destination names the destination host, if known, in events.
	Destination string
	// Policy is the migration's policy; NewCore fills its defaults.
	Policy Policy
	// Costs are the stun's fixed costs, which every expected stun counts.
	// Costs.CheckpointPathBytesPerSec zero means PCIeBytesPerSec.
	Costs StunCosts
	// StunLatency is the latency the stun waits on beyond its transfers'
	// time (the simulator's three transfers in the stun each wait for
	// their last byte's flight; the live mode's stun waits on two round
	// trips, for ready and for resumed).
	StunLatency time.Duration
	// NominalBandwidthBytesPerSec is the rate assumed for a round whose
	// own could not be measured (nothing on the wire, or no time passed),
	// and the rate of the estimate before round 0; zero when the driver
	// knows none (the live mode), which skips that estimate.
	NominalBandwidthBytesPerSec int64
	// Framebuffers is how many framebuffer regions the VM has; guest RAM
	// is region 0 and framebuffer i is region i+1.
	Framebuffers int
	// Devices and DeviceStateBytes are the VM's vGPUs and the size of
	// their saved states, as estimated before the stun.
	Devices          int
	DeviceStateBytes int64
	// PCIeBytesPerSec is the DMA rate the device states cross at save and
	// at restore; zero when the driver does not model it (the costs then
	// hold the device checkpoint's whole time).
	PCIeBytesPerSec int64
	// UsedFramebuffer is, in Legacy mode, the framebuffer in use when the
	// migration starts (Source.UsedFramebuffer), for the estimate before
	// round 0.
	UsedFramebuffer Pages
	// PageListBytes is what the list of the pages that follow takes on
	// the wire, which the stun of a post-copy migration sends instead of
	// the pages (see Action.PostCopy): a bit a page of every region.
	PageListBytes int64
}

// ActionKind says what a driver does next.
type ActionKind uint8

const (
	// DoCopyRound: send pre-copy round Action.Round — regions
	// Action.First to Action.Regions-1, every page in use if
	// Action.AllInUse, else the
	// pages each dirty log collected — after cutting the workload to
	// Action.Throttle if Action.SetThrottle; report each region's traffic
	// with Sent, the round's wire bytes with RoundQueued, and its arrival
	// with RoundArrived.
	DoCopyRound ActionKind = iota + 1
	// DoSwitchOver: pre-copy ended; nothing to do but call Done.
	DoSwitchOver
	// DoPause: stop the VM at the source.
	DoPause
	// DoSaveDevices: save the vGPUs' states; report their size with
	// DevicesSaved.
	DoSaveDevices
	// DoSendFinalRAM: send guest RAM's dirty pages, regions Action.First
	// to Action.Regions-1 (Sent, PagesQueued).
	DoSendFinalRAM
	// DoSendFinalFramebuffers: send each framebuffer's dirty pages
	// (regions Action.First to Action.Regions-1), or, if Action.AllInUse
	// (Legacy, or PostCopy mode's list), every page in use (Sent,
	// PagesQueued).
	DoSendFinalFramebuffers
	// DoSendDeviceStates: send the device states and end the stream.
	DoSendDeviceStates
	// DoRestore: the destination verifies the stream and restores the
	// devices.
	DoRestore
	// DoResume: the destination resumes the VM and acknowledges it; from
	// the acknowledgement on the VM is the destination's.
	DoResume
	// DoRelease: free the VM at the source.
	DoRelease
	// DoRollBack: the migration failed (Action.Err): give the VM back to
	// the source as it was — unless Action.InDoubt, when the source keeps
	// its copy paused — and free what the destination holds.
	DoRollBack
	// DoNothing: the migration has ended.
	DoNothing
	// DoPostCopy: the VM runs at the destination; push the pages it still
	// lacks (Sent counts them), serve the pages it touches first
	// (Faulted), and call Done when none is left.
	DoPostCopy
	// DoPauseDestination: the link was lost in post-copy; pause the VM at
	// the destination and send nothing until the link is back
	// (LinkRestored).
	DoPauseDestination
	// DoResumePostCopy: the link is back; resume the VM at the destination
	// if it ran before the loss, and go on with the post-copy.
	DoResumePostCopy
	// DoStrand: the migration failed in post-copy (Action.Err, wrapping
	// ErrVMLost): neither end holds the whole VM. Each end keeps what it
	// still has, paused; nothing is resumed or freed but what the failure
	// itself took. After PushedAll the error wraps ErrInDoubt instead: the
	// destination may run the whole VM, and the source's copy waits,
	// held, for whoever manages the hosts to ask it.
	DoStrand
)

var actionNames = [...]string{DoCopyRound: "copy round", DoSwitchOver: "switch over", DoPause: "pause",
	DoSaveDevices: "save devices", DoSendFinalRAM: "send final RAM", DoSendFinalFramebuffers: "send final framebuffers",
	DoSendDeviceStates: "send device states", DoRestore: "restore", DoResume: "resume", DoRelease: "release",
	DoRollBack: "roll back", DoNothing: "nothing", DoPostCopy: "post-copy", DoPauseDestination: "pause destination",
	DoResumePostCopy: "resume post-copy", DoStrand: "strand"}

func (k ActionKind) String() string {
	if k > 0 && int(k) < len(actionNames) {
		return actionNames[k]
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// Action is what a Core tells its driver to do next.
type Action struct {
	Kind ActionKind
	// Round is the pre-copy round to send, for DoCopyRound.
	Round int
	// First and Regions bound the regions a step that sends pages sends:
	// First up to Regions-1, guest RAM being region 0.
	First, Regions int
	// AllInUse sends every page in use rather than the dirty log's
	// (which is collected all the same, so that later writes are seen).
	AllInUse bool
	// PostCopy, for DoSendFinalRAM and DoSendFinalFramebuffers, sends
	// not the pages but their list (Sent counts its wire bytes, Owe the
	// pages): they follow in post-copy, and the destination resumes the
	// VM with them absent.
	PostCopy bool
	// SetThrottle asks the driver to cut the workload by Throttle before
	// the round (never by less than the VM's own throttle).
	SetThrottle bool
	Throttle    float64
	// Err is why the migration failed, a *PhaseError, for DoRollBack.
	Err error
	// InDoubt says the source had told the destination to resume when
	// the migration failed: it keeps its copy paused (ErrInDoubt).
	InDoubt bool
}

// NewCore starts deciding a migration at time now, in PhaseSetup; detail
// describes the migration in the first event. Where the driver knows a
// nominal bandwidth, a stun limit is checked against the estimated stun
// first: a migration that would exceed it is refused with ErrStunLimit.
func NewCore(cfg CoreConfig, now time.Duration, detail string) (*Core, error) {
	var err error
	if cfg.Policy, err = cfg.Policy.WithDefaults(); err != nil {
		return nil, err
	}
	switch {
	case cfg.Framebuffers < 0 || cfg.Devices < 0 || cfg.DeviceStateBytes < 0 || cfg.UsedFramebuffer.RawBytes < 0:
		return nil, fmt.Errorf("%w: negative region, device or byte count", ErrConfig)
	case cfg.StunLatency < 0 || cfg.NominalBandwidthBytesPerSec < 0 || cfg.PCIeBytesPerSec < 0 || cfg.PageListBytes < 0:
		return nil, fmt.Errorf("%w: negative latency or rate", ErrConfig)
	case cfg.Costs.Quiesce < 0 || cfg.Costs.DeviceCheckpoint < 0 || cfg.Costs.Resume < 0 || cfg.Costs.CheckpointPathBytesPerSec < 0:
		return nil, fmt.Errorf("%w: negative stun cost", ErrConfig)
	}
	if lim := cfg.Policy.StunLimit; lim > 0 && cfg.NominalBandwidthBytesPerSec > 0 {
		if est := cfg.floor(); est.Total > lim {
			return nil, fmt.Errorf("%w: estimated stun %v, limit %v", ErrStunLimit, est.Total, lim)
		}
	}
	c := &Core{cfg: cfg, round: -1}
	c.rep.VM, c.rep.Mode, c.rep.Start = cfg.VM, cfg.Policy.Mode, now
	c.rep.Final.Framebuffers = make([]Traffic, cfg.Framebuffers)
	c.enter(now, PhaseSetup, PhaseStarted, detail)
	return c, nil
}

// Phase returns the migration's phase.
func (c *Core) Phase() Phase { return c.phase }

// Round returns the pre-copy round being sent or last sent, -1 before the
// first.
func (c *Core) Round() int { return c.round }

// Err returns why the migration failed, a *PhaseError, or nil.
func (c *Core) Err() error { return c.err }

// Ended reports whether the migration is over, in PhaseDone or
// PhaseFailed.
func (c *Core) Ended() bool { return c.phase == PhaseDone || c.phase == PhaseFailed }

// Events returns the events produced since the last call.
func (c *Core) Events() []Event {
	out := c.history[c.drained:]
	c.drained = len(c.history)
	return append([]Event(nil), out...)
}

// Done reports at now that the current step is complete — the handshake
// in PhaseSetup, or the action the Core last asked for — and returns the
// next. In pre-copy a round ends with RoundArrived instead.
func (c *Core) Done(now time.Duration) Action {
	switch c.phase {
	case PhaseSetup:
		if c.cfg.Policy.Mode == PostCopy {
			return c.switchToPostCopy(now, NoPreCopy, c.cfg.NominalBandwidthBytesPerSec)
		}
		return c.beginRound(now)
	case PhasePreCopy:
		return c.Fail(now, fmt.Errorf("%w: a pre-copy round ends with RoundArrived", ErrConfig))
	case PhaseSwitchover:
		c.enter(now, PhaseQuiesce, StunStarted, "stopping vCPUs and GPU work")
		return Action{Kind: DoPause}
	case PhaseQuiesce:
		c.enter(now, PhaseDeviceSave, PhaseStarted, fmt.Sprintf("saving %d device state(s) over PCIe", c.cfg.Devices))
		return Action{Kind: DoSaveDevices}
	case PhaseDeviceSave:
		c.enter(now, PhaseFinalRAM, PhaseStarted, "")
		return Action{Kind: DoSendFinalRAM, First: 0, Regions: 1, PostCopy: c.post != nil, AllInUse: c.post != nil && c.round < 0}
	case PhaseFinalRAM:
		c.enter(now, PhaseFinalFramebuffer, PhaseStarted, "")
		return Action{Kind: DoSendFinalFramebuffers, First: 1, Regions: c.cfg.Framebuffers + 1,
			AllInUse: c.cfg.Policy.Mode == Legacy || (c.post != nil && c.round < 0), PostCopy: c.post != nil}
	case PhaseFinalFramebuffer:
		c.enter(now, PhaseDeviceState, PhaseStarted, fmt.Sprintf("sending %d bytes of device state", c.rep.DeviceStateBytes))
		return Action{Kind: DoSendDeviceStates}
	case PhaseDeviceState:
		c.enter(now, PhaseRestore, PhaseStarted, "loading device state into the destination's vGPUs over PCIe")
		return Action{Kind: DoRestore}
	case PhaseRestore:
		c.enter(now, PhaseResume, PhaseStarted, "starting the VM at the destination")
		return Action{Kind: DoResume}
	case PhaseResume:
		// The destination acknowledged. A simulated migration sends no
		// commit message: its resume is the commit, and its
		// acknowledgement comes in the same step.
		if c.handover.Holder() == HeldBySource {
			_ = c.handover.CommitSent()
		}
		_ = c.handover.Acknowledged()
		if c.post != nil {
			return c.enterPostCopy(now)
		}
		c.enter(now, PhaseRelease, PhaseStarted, "destination acknowledged the resume; releasing the source")
		return Action{Kind: DoRelease}
	case PhasePostCopy:
		if c.post.paused {
			return c.Fail(now, fmt.Errorf("%w: post-copy ended with the link lost", ErrConfig))
		}
		c.closePostCopy(now)
		c.enter(now, PhaseRelease, PhaseStarted, "every page arrived; releasing the source")
		return Action{Kind: DoRelease}
	case PhaseRelease:
		where := "the destination"
		if c.cfg.Destination != "" {
			where = c.cfg.Destination
		}
		c.finish(now, PhaseDone, Done, "VM runs at "+where)
	}
	return Action{Kind: DoNothing}
}

// Sent counts pages of region i (guest RAM 0, framebuffer k at k+1) that
// the current round, or the stun's final pages, put on their way.
func (c *Core) Sent(i int, t Traffic) {
	switch {
	case i < 0 || i > c.cfg.Framebuffers:
	case c.phase == PhasePreCopy && i == 0:
		c.cur.RAM.Add(t)
	case c.phase == PhasePreCopy:
		c.cur.Framebuffers[i-1].Add(t)
	case c.phase == PhaseFinalRAM && i == 0:
		c.rep.Final.RAM.Add(t)
	case c.phase == PhaseFinalFramebuffer && i > 0:
		c.rep.Final.Framebuffers[i-1].Add(t)
	case c.phase == PhasePostCopy:
		c.post.rep.Pushed.Add(t)
	}
}

// RoundQueued says that the round's records are all written, wireBytes in
// all with their framing and the end of the round.
func (c *Core) RoundQueued(wireBytes int64) {
	if c.phase != PhasePreCopy {
		return
	}
	c.cur.WireBytes = wireBytes
	t := c.cur.Total()
	c.emit(Event{Kind: RoundSent, Round: c.round, WireBytes: wireBytes,
		Detail: fmt.Sprintf("round %d: %d pages, %d bytes raw, %d on the wire", c.round, t.Pages, t.RawBytes, wireBytes)})
}

// PagesQueued says that the stun's final pages of the current phase are
// written.
func (c *Core) PagesQueued() {
	if c.post != nil && (c.phase == PhaseFinalRAM || c.phase == PhaseFinalFramebuffer) {
		t := c.rep.Final.RAM
		if c.phase == PhaseFinalFramebuffer {
			t = Traffic{}
			for _, f := range c.rep.Final.Framebuffers {
				t.Add(f)
			}
		}
		c.emit(Event{Kind: PagesSent, Round: -1, WireBytes: t.WireBytes,
			Detail: fmt.Sprintf("sending the list of the pages that follow in post-copy, %d bytes on the wire", t.WireBytes)})
		return
	}
	switch c.phase {
	case PhaseFinalRAM:
		t := c.rep.Final.RAM
		c.emit(Event{Kind: PagesSent, Round: -1, WireBytes: t.WireBytes,
			Detail: fmt.Sprintf("sending %d dirty RAM pages, %d bytes on the wire", t.Pages, t.WireBytes)})
	case PhaseFinalFramebuffer:
		var t Traffic
		for _, f := range c.rep.Final.Framebuffers {
			t.Add(f)
		}
		c.emit(Event{Kind: PagesSent, Round: -1, WireBytes: t.WireBytes,
			Detail: fmt.Sprintf("sending %d framebuffer pages, %d bytes on the wire", t.Pages, t.WireBytes)})
	}
}

// DevicesSaved records the size of the device states saved.
func (c *Core) DevicesSaved(stateBytes int64) {
	c.cfg.DeviceStateBytes, c.rep.DeviceStateBytes = stateBytes, stateBytes
}

// UpdateCosts replaces the stun's fixed costs and latency, for a driver
// that measures them once the migration has begun (the live mode, in its
// handshake). Later expected stuns count the new ones.
// Negative costs or latency are refused with ErrConfig, as NewCore refuses
// them.
func (c *Core) UpdateCosts(costs StunCosts, stunLatency time.Duration) error {
	if stunLatency < 0 || costs.Quiesce < 0 || costs.DeviceCheckpoint < 0 || costs.Resume < 0 || costs.CheckpointPathBytesPerSec < 0 {
		return fmt.Errorf("%w: negative stun cost or latency", ErrConfig)
	}
	c.cfg.Costs, c.cfg.StunLatency = costs, stunLatency
	return nil
}

// SetDestination names the destination in later events, for a driver
// that learns it once the migration has begun (the live mode, from the
// destination's answer to its hello).
func (c *Core) SetDestination(name string) { c.cfg.Destination = name }

// Notice records something the migration met and went on from, as a
// Notice event at the time of the last event.
func (c *Core) Notice(detail string) { c.noticeAt(c.lastAt(), detail) }

// noticeAt records a Notice event at now, for a driver whose clock is the
// Core's (the simulator's).
func (c *Core) noticeAt(now time.Duration, detail string) {
	c.emitAt(now, Event{Kind: Notice, Round: -1, Detail: detail})
}

// Commit records that the source told the destination to resume the VM:
// a failure from here on leaves the outcome in doubt (see Handover). A
// second Commit does nothing.
func (c *Core) Commit() { _ = c.handover.CommitSent() }

// Holder says who may run the VM, as the source knows it. After a
// post-copy lost its VM (ErrVMLost) it is HeldInDoubt: the destination's
// copy is gone, and the source's, as of the stun, if the failure left one
// (not when the source itself is gone), is neither run nor discarded until
// whoever manages the hosts decides (vgpu.VM.ResolveMigration).
func (c *Core) Holder() Holder { return c.handover.Holder() }

// Fail ends the migration at now because of cause, unless it has ended,
// and returns DoRollBack with a *PhaseError naming the phase it failed in.
// After Commit the error wraps ErrInDoubt too.
//
// In PhasePostCopy the VM runs at the destination with pages only the
// source holds: nothing can be rolled back and the VM cannot be released
// either. The error wraps ErrVMLost and the answer is DoStrand; once every
// page was sent (PushedAll) the destination may hold the whole VM, and the
// error wraps ErrInDoubt instead. (A lost link is not a failure there: see
// LinkLost.)
//
// From PhaseRelease on the destination has acknowledged the resume and the
// VM is its own: nothing is rolled back. The cause is kept as a Notice and
// the answer is DoRelease: the source must still let the VM go.
func (c *Core) Fail(now time.Duration, cause error) Action {
	if c.Ended() {
		return Action{Kind: DoNothing, Err: c.err}
	}
	if cause == nil {
		cause = fmt.Errorf("%w: a failure without a cause", ErrConfig)
	}
	if c.phase == PhasePostCopy {
		c.handover.Stranded()
		lost := ErrVMLost
		if c.post.pushedAll {
			lost = ErrInDoubt
		}
		c.err = &PhaseError{VM: c.cfg.VM, Phase: c.phase, Err: wrap(lost, cause)}
		c.finish(now, PhaseFailed, Failed, c.err.Error())
		return Action{Kind: DoStrand, Err: c.err}
	}
	fate := c.handover.OnFailure()
	if fate == Release {
		c.emitAt(now, Event{Kind: Notice, Round: -1, Detail: "after the acknowledgement: " + cause.Error()})
		return Action{Kind: DoRelease}
	}
	if fate == KeepPaused {
		cause = wrap(ErrInDoubt, cause)
	}
	c.err = &PhaseError{VM: c.cfg.VM, Phase: c.phase, Err: cause}
	c.finish(now, PhaseFailed, Failed, c.err.Error())
	return Action{Kind: DoRollBack, Err: c.err, InDoubt: fate == KeepPaused}
}

// enter moves to phase p at now, adding the phase it leaves to the stun if
// the VM was stopped in it, and records the event.
func (c *Core) enter(now time.Duration, p Phase, kind EventKind, detail string) {
	if c.phase.Stunned() {
		c.rep.AddStun(c.phase, now-c.phaseStart)
	}
	c.phase, c.phaseStart = p, now
	round := -1
	if p == PhasePreCopy {
		round = c.round
	}
	c.emitAt(now, Event{Kind: kind, Round: round, Detail: detail})
}

// emit records an event at the time of the last phase change or report.
func (c *Core) emit(e Event) { c.emitAt(c.lastAt(), e) }

func (c *Core) emitAt(now time.Duration, e Event) {
	e.At, e.VM, e.Phase = now, c.cfg.VM, c.phase
	if e.Kind == Failed {
		e.Err = c.err
	}
	c.history = append(c.history, e)
}

// lastAt is the time of the last event, or of the start before any (a
// Core not made by NewCore).
func (c *Core) lastAt() time.Duration {
	if n := len(c.history); n > 0 {
		return c.history[n-1].At
	}
	return c.rep.Start
}

func (c *Core) finish(now time.Duration, p Phase, kind EventKind, detail string) {
	if c.phase == PhasePostCopy {
		c.closePostCopy(now)
	}
	c.enter(now, p, kind, detail)
	r := &c.rep
	r.Outcome, r.End = p, now
	r.Total = r.End - r.Start
	if pe, ok := c.err.(*PhaseError); ok {
		r.Error, r.FailedIn = pe.Error(), pe.Phase
	}
	r.PostCopy = c.postCopyReport(now)
	r.Settle()
}

// Report returns the Core's account of the migration so far: the rounds,
// switchover, throttle, stun by phase, pages and events; a driver adds
// what it alone knows (hosts, link, wire bytes, digests, metrics).
func (c *Core) Report() *Report {
	r := c.rep
	r.Outcome = c.phase
	r.Rounds = append([]Round(nil), r.Rounds...)
	r.StunPhases = append([]StunPhase(nil), r.StunPhases...)
	r.Final.Framebuffers = append([]Traffic(nil), r.Final.Framebuffers...)
	r.Events = append([]Event(nil), c.history...)
	r.PostCopy = c.postCopyReport(c.lastAt())
	return &r
}
