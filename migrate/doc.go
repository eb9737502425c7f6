// Package migrate live-migrates vGPU VMs between hosts the way vMotion
// does: iterative pre-copy of guest RAM and of every vGPU framebuffer, a
// switchover decision, a stun whose every phase is accounted, the device
// checkpoint sent in a checkpoint stream, restore and resume at the
// destination. It builds on packages memory, checkpoint and vgpu, and
// knows nothing of how a workload is built.
//
// # One core, two drivers
//
// Every migration's decisions are taken by a Core: the pre-copy rounds and
// what each sends, the expected stun (one formula), the switchover rule,
// the non-convergence policy and its throttle steps, the stun limit, the
// order of the stun's steps, the failure path and the report's account. A
// Core is told what happened — a round arrived, with its bytes and time; a
// step is done; something failed — and answers with the next Action. It
// never reads a clock, touches a connection or starts a goroutine, as
// etcd's raft RawNode does not.
//
// Two drivers execute it. The simulated mode (Sim, Migrate) moves a VM
// between hosts of one process over modelled links on simulated time,
// deterministically. The live mode (package live: Send, Receive) moves it
// over real connections on wall time (or an injected Clock), while a Runner
// keeps its workload writing memory. Both share the copy engine, the stream format,
// the Policy (Config and SendConfig embed it), the Event type and the
// handling of the VM at the source. Either can be replaced by a driver of
// one's own: a Core knows nothing of links or sockets.
//
// # Driving the simulated mode
//
// A Sim holds hosts, the links between them and one clock, which its hosts
// read too: a host joins (NewSim, AddHost, Start) only if it reads the
// Sim's time, and the Sim holds its clock (vgpu.Host.TakeClock) until
// RemoveHost, so nobody else advances it. Start begins a
// migration; the caller then moves time on — Sim.Step to the next event of
// any migration, Migration.Step to the next of one, Sim.Advance by a
// duration from the caller's own clock, Migration.Run or Sim.Run to the end
// — and the Sim advances every host it knows by exactly that time, so the
// VMs' workloads keep writing memory while it is copied; a discrete-event
// simulator asks Sim.NextEventAt for the next event, a workload's or a
// migration's, and moves to it with Sim.AdvanceTo. Migrate does all of it
// in one call and gives the two hosts back.
//
// Hosts joined by remote GPUs (vgpu.RemoteGPU) are moved in steps no
// longer than vgpu.Horizon allows, so that every job and completion
// crosses at its exact time; a Sim that drives one end of a session and
// not the other refuses to advance (vgpu.ErrOutOfStep). A VM whose GPUs
// are remote migrates with its guest memory alone: its sessions are
// handed to the destination at the commit, and Report.Remote gives their
// hand-over, the time after it until they answer the VM again.
//
// Sim.Evacuate empties a host, as maintenance mode does: it migrates every
// VM on it to the hosts given, each to the one its vgpu.Placement picks
// among those with room (vgpu.ChooseDestination), as many at once as
// SimConfig.MaxPerHost allows, the next starting at the instant one ends;
// the VMs it cannot move (passthrough, no room anywhere) are left on the
// host, each with its reason. Summarize sums up many migrations' reports:
// a row each, totals per link and per host, stun percentiles; it writes as
// CSV and JSON.
//
// Each event is returned once, to whichever call asks first: Sim.Step,
// Advance and Run return those of every migration, Migration.Step and Run
// only their own migration's. An event waits in the Sim until then and the
// Sim keeps nothing of it afterwards (the Migration keeps its own, in
// Events and Report), so a Sim that runs migration after migration, each
// by its own Run, holds no event between them however many it runs.
// Events nobody asks for, such as those of a migration that ended while
// another one's Run drove the Sim, wait until its Step or Run, or the
// Sim's, takes them; Sim.Pending counts them. The Sim returns events in
// the order they happened, which is their time order: one Sim.Step after
// another, the events come with nondecreasing At, never later than Now.
// Who takes an event changes nothing simulated: the same calls moving time
// give the same events.
//
// The simulated mode never reads the wall clock and starts no goroutine
// of its own: it runs on the caller's goroutine, its copy engine with one
// worker, and the same hosts and calls give the same events, reports and
// stream bytes on every machine, whatever GOMAXPROCS.
//
// # The steps
//
// A migration passes through the phases of Phases, in order:
//
//	source                                   link                destination
//	setup: compatibility check, estimate ---- handshake (2 x latency) -> reserve memory and vGPUs
//	pre-copy round 0: every page in use ---> pages ----------------> applied, unseen
//	pre-copy round k: pages dirtied in k-1 -> pages ----------------> applied
//	switchover: expected stun <= target?
//	quiesce: pause the VM                                            (stun starts)
//	device save: state over PCIe
//	final RAM, final framebuffer ----------> pages ----------------> applied
//	device state, end of stream -----------> records --------------> verified, committed
//	                                                                 restore: state over PCIe
//	                                         <-------------- resume acknowledged (stun ends)
//	(post-copy: the VM runs here while ---> pushed pages ---------> absent pages land;
//	 the rest follows)                <---- demand fetch ----- a fault stalls the VM)
//	release: scrub and free the source
//
// Until the destination acknowledges the resume the source owns the VM: a
// failure or Cancel anywhere before it (PhaseSetup to PhaseResume) ends in
// PhaseFailed with the VM on the source, running if it ran and paused if it
// was paused, its memory and device state as they were, its dirty logging
// off, and the destination holding nothing: its windows scrubbed, its
// memory released. The error is a *PhaseError naming the phase.
//
// A VM has one migration at a time, in either mode and across Sims: a
// second is refused in PhaseSetup with ErrMigrating (see Source).
//
// The VM's owner may keep driving it meanwhile. The destination resumes the
// VM as the stun finds it, so one its owner paused during pre-copy arrives
// paused, and applies the owner's throttle as of the commit; the
// migration's own throttle cut is separate and ends with it, so the
// owner's is also what a failed migration leaves. A VM its owner pauses or
// resumes during the stun (counted, so a resume undone by a pause is seen),
// or whose memory it writes during the stun, would differ from the copy
// that arrives, so the migration fails with ErrSource and the VM
// stays at the source as its owner left it. From the commit on, the
// owner's changes are refused (vgpu.ErrMigrating).
//
// Who may run the VM is each end's Handover, the commit rule: the source
// until it sends the commit, the destination once it has read it. A live
// source that sent the commit and heard no acknowledgement keeps its copy
// paused and returns ErrInDoubt, so that the VM never runs twice and is
// never lost; a simulated migration's resume and acknowledgement are one
// step, and it is never in doubt (but for a post-copy that lost its VM:
// see ErrVMLost).
//
// A simulator can make migrations fail as real ones do:
// Migration.Inject drops or stalls a migration's link, or has its
// destination refuse or die, or, in post-copy, its source die (a Fault),
// and Sim.FailLink drops or stalls
// every migration on a link. A stalled link fails the migration with
// ErrConnection after Config.Timeout of simulated time, the VM running on
// (or staying stunned) meanwhile, as at a real source waiting on a hung
// peer.
//
// # Modes and the switchover
//
// PreCopy sends every framebuffer with guest RAM, round after round, each
// from its own dirty log; Legacy, as vSphere 6.7 U1 did, pre-copies guest
// RAM only and moves the used framebuffer during the stun through the
// device checkpoint path. After each round the expected stun is the pages
// dirty now, at the wire ratio measured so far, plus the device state,
// over the bandwidth the round measured, plus the stun's fixed costs; the
// migration switches over when it is at most Config.StunTarget (1 s,
// vMotion's standard). In Legacy mode, where the framebuffer's passage is
// a floor no round changes, the dirty RAM's part alone is compared. When
// pre-copy does not converge — the dirty rate at or above the link's, a
// round that did not cut the expected stun by a tenth (a working set
// re-dirtied whole every round), or the round limit —
// Config.OnNonConvergence throttles the workload in steps, switches over
// anyway or aborts. A stun-time limit
// (Config.StunLimit) refuses a migration whose estimate exceeds it and
// fails one whose expected stun at switchover does.
//
// # Post-copy
//
// PostCopy mode switches over before any round, and OnNonConvergence
// SwitchToPostCopy switches over into post-copy when pre-copy does not
// converge (with MaxRounds, the hybrid: a bounded pre-copy, then
// post-copy, QEMU's postcopy-after-precopy). The stun then sends no page:
// only the list of the pages that follow, a bit a page, and the device
// states. The destination marks those pages absent
// (memory.Region.SetAbsent) and resumes the VM in PhasePostCopy, while a
// second stream pushes them in the background. A page the VM touches
// before it arrived faults: it is fetched ahead of the push, and the VM
// waits the link's round trip and the page's transfer (vgpu.VM.Stall), so
// inference latency, training iteration time and frame time show it.
// Report.PostCopy accounts the degradation window, the faults, their
// latency percentiles and the stall. Guest RAM and framebuffers both
// follow so; QEMU post-copies RAM only, and no vGPU stack post-copies
// framebuffer memory.
//
// Once the VM runs at the destination, neither end alone holds the whole
// VM: the destination lacks pages, and the source's copy is older than
// what ran. Nothing can be rolled back (Cancel and FaultRefused return
// ErrTooLate). A lost link (FaultLinkDown, FaultLinkStall) pauses the VM
// at the destination, held so that its owner cannot resume it, and the
// migration waits for Migration.Recover, however long, as QEMU's paused
// post-copy waits for its recovery; the migration's Step and Run return
// ErrConnection meanwhile, and the Sim's Step and Run return as when
// nothing is left to do. A destination or a source that fails (FaultDestinationGone,
// FaultSourceGone) loses the VM: the migration fails with ErrVMLost, the
// destination's copy, which lacks pages, is destroyed, and the source
// keeps its copy as of the stun paused and held
// (vgpu.VM.ResolveMigration); a VM is never resumed with a page missing.
// The live mode refuses post-copy for now (ErrConfig).
//
// # The Legacy fit
//
// Legacy mode's constants are a least-squares fit to VMware's six published
// 6.7 U1 stun times (calibration.go explains and cites them): 1.53 s fixed
// plus 7.474 s for every GiB of used framebuffer, the checkpoint path
// running at 143.7 MB/s. The model reproduces the six figures it was
// fitted to within 0.5 %; fitted to five, it predicts the sixth within
// 0.5 %. Refusing up front a migration whose estimate exceeds
// VSphere67U1StunLimit is a modelling choice (6.7 U1 failed such a
// migration at its 100 s timeout).
//
// # Presets and the published figures
//
// Presets names three sets of costs, each with the published figures it
// reproduces (docs/CALIBRATION.md lists every modelled constant, its
// source and its error): vsphere-6.7u1 (the Legacy fit above),
// vsphere-7.0 (Legacy mode with the faster checkpoint path of vSphere 7.0,
// fitted to its worst-case Tesla V100 PCIe 32 GB table: the fitted points
// within the published whole seconds, the largest, left out, within
// 1.1 %), and fb-precopy, PreCopy mode's default costs: 100 ms of fixed
// costs, which put the stun of every P40 Q type's inference VM over 10 GbE
// within the 119-302 ms average downtimes gMig published for GPU live
// migration with graphics memory pre-copied. PublishedStunTables holds the
// tables.
//
// The switchover's expected stun predicts the pages left dirty from their
// own content classes (Source.Dirty, WireModel), not from the ratio of
// what pre-copy sent before: over 120 random migrations (VMs, workloads,
// links, modes, policies, codecs) it is within 10 % of the stun that
// follows in all of them (TestSwitchoverPrediction).
//
// # Fidelity
//
// Bytes fidelity reads every page, encodes it with the checkpoint package,
// and applies the stream at the destination, which verifies every record
// and, at the end, every region's digest. Model fidelity counts pages by
// content class and sizes them from a full batch of each class compressed
// once per process with the real encoder; the destination stores each page's
// class and generation, which regenerates the same bytes. The two agree on
// wire bytes within 0.5 % and on the part of the stun the wire sets (the
// stun less its fixed costs and Legacy's checkpoint path) within 2 %; a
// test holds them to it. Model moves a 24 GB framebuffer in well under a
// second of wall time, and is the default; Bytes, which encodes for real,
// is for testing the copy path. Bytes applies each batch at the
// destination as it is encoded, so its memory is a batch's, not a
// round's, and a Synthetic destination stores a page whose bytes are
// generated content as its class, so it holds a synthetic VM as compactly
// as its source.
//
// # Links
//
// A Link has a line rate, the goodput a stream achieves on it, and a
// latency; Links lists the presets. Migrations whose links have the same
// name share that link max-min fairly, their rates changing as transfers
// start and end; time on the wire is computed from the bytes the stream
// really encodes. A migration's stream may cross several links
// (Config.Via: the source host's NIC, a switch, the destination's NIC);
// the rates are then max-min fair across the whole network, by
// progressive filling, so a destination NIC that several migrations cross
// holds each of them back, and its source NIC carries only what is left. SimConfig.MaxPerHost bounds the migrations a host takes
// part in at once (8 by default, as vSphere 7 allows on 10 GbE). A link's
// line rate can change while migrations use it (Sim.SetLinkCapacity), and
// an idle link be forgotten (Sim.RemoveLink).
//
// # The copy engine
//
// An Engine encodes a region's pages — those a dirty log collected, or
// every page in use — into checkpoint page batches, skipping zero pages'
// contents and compressing the rest, and hands them to a BatchWriter (a
// checkpoint.Writer) in page order on the caller's goroutine. With
// EngineConfig.Workers above one, NewEngine starts that many goroutines,
// which encode up to InFlight batches at once while the caller's goroutine
// writes the finished ones in order; Close stops them. The batches and
// every byte of them are the same for any number of workers, batches in
// flight or GOMAXPROCS: parallelism changes how fast the stream is made,
// never what it is. A BatchWriter that is also a BatchQueue is handed each
// batch to write later, on a goroutine of its own, and gives the batch's
// buffers back when it is done; Copy returns once every batch is. The
// simulated mode uses one worker, which encodes on the caller's goroutine
// and starts none; package live's Send uses SendConfig.Engine, and queues
// each batch to the goroutine of its connection's stream.
//
// # Page filters
//
// Filtering, in Config and in package live's SendConfig, turns on the
// page filters of the checkpoint format: pages of float32 data shuffled
// (their bytes grouped by significance) before compression, and pages
// sent again as deltas, the XOR with what the destination holds, from a
// bounded cache of what was sent (checkpoint.DeltaCache), guest RAM and
// framebuffers alike. The engine commits the cache after each region's
// copy and discards it after a failure, so it never claims a page the
// destination may not hold, and its choices do not depend on the workers'
// order. Model fidelity sizes filtered pages by class as it sizes the
// others, measured with the same encoder sent whole, sent again changed
// and sent again unchanged, and keeps its cache by each page's class and
// generation by the same slot rule, so that it sends the deltas the Bytes
// fidelity sends.
//
// # The live mode
//
// Package live (migrate/live) is the Core's second driver: Send and
// Receive move a VM over real connections on wall time. It is a package of
// its own so that a simulator that imports migrate links no network code.
//
// # Reports
//
// Every migration keeps a Report: each round's pages and bytes of RAM and
// of each framebuffer, raw and on the wire, its duration, measured
// bandwidth and dirty rate; the switchover reason; the stun by phase with
// the dominant one; totals and compression ratio; the region digests of a
// live migration; the throttle applied; the workload's metrics before,
// during and after. It prints for a person and marshals to JSON with units
// in its field names.
//
// # Concurrency
//
// A Sim and everything in it belong to one goroutine; so does an Engine
// (one Copy at a time, whatever its workers). Send and Receive are each
// one call on one goroutine, and share a host with a Runner only through
// its lock.
package migrate
