// Package migrate live-migrates vGPU VMs between hosts the way vMotion
// does, on simulated time: iterative pre-copy of guest RAM and of every
// vGPU framebuffer, a switchover decision, a stun whose every phase is
// accounted, the device checkpoint sent in a checkpoint stream, restore and
// resume at the destination. It builds on packages memory, checkpoint and
// vgpu, and knows nothing of how a workload is built.
//
// # Driving it
//
// A Sim holds hosts, the links between them and one clock. Start begins a
// migration; the caller then moves time on — Sim.Step to the next event of
// any migration, Migration.Step to the next of one, Sim.Advance by a
// duration from the caller's own clock, Migration.Run or Sim.Run to the end
// — and the Sim advances every host it knows by exactly that time, so the
// VMs' workloads keep writing memory while it is copied. Migrate does all
// of it in one call. Nothing reads the wall clock and nothing starts a
// goroutine: the same hosts and calls give the same events, reports and
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
//	release: scrub and free the source
//
// Until the destination acknowledges the resume the source owns the VM: a
// failure or Cancel anywhere before it (PhaseSetup to PhaseResume) ends in
// PhaseFailed with the VM on the source, running if it ran and paused if it
// was paused, its memory and device state as they were, its dirty logging
// off, and the destination holding nothing: its windows scrubbed, its
// memory released. The error is a *PhaseError naming the phase.
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
// re-dirtied whole every round), or the round limit — Config.OnNonConvergence throttles the workload in
// steps, switches over anyway or aborts. A stun-time limit
// (Config.StunLimit) refuses a migration whose estimate exceeds it and
// fails one whose expected stun at switchover does.
//
// # Calibration
//
// Legacy mode's constants reproduce VMware's published 6.7 U1 stun times
// (calibration.go explains and cites them): 1.53 s fixed plus 7.474 s for
// every GiB of used framebuffer, the checkpoint path running at 143.7 MB/s.
// PreCopyCosts states the assumptions of PreCopy mode.
//
// # Fidelity
//
// Bytes fidelity reads every page, encodes it with the checkpoint package,
// and applies the stream at the destination, which verifies every record
// and, at the end, every region's digest. Model fidelity counts pages by
// content class and sizes them from a full batch of each class compressed
// once per Sim with the real encoder; the destination stores each page's
// class and generation, which regenerates the same bytes. The two agree on
// stun and wire bytes within 2 % (a test holds them to it); Model moves a
// 24 GB framebuffer in well under a second of wall time.
//
// # Links
//
// A Link has a line rate, the goodput a stream achieves on it, and a
// latency; Links lists the presets. Migrations whose links have the same
// name share that link max-min fairly, their rates changing as transfers
// start and end; time on the wire is computed from the bytes the stream
// really encodes. SimConfig.MaxPerHost bounds the migrations a host takes
// part in at once (8 by default, as vSphere 7 allows on 10 GbE).
//
// # Reports
//
// Every migration keeps a Report: each round's pages and bytes of RAM and
// of each framebuffer, raw and on the wire, its duration, measured
// bandwidth and dirty rate; the switchover reason; the stun by phase with
// the dominant one; totals and compression ratio; the throttle applied; the
// workload's metrics before, during and after. It prints for a person and
// marshals to JSON with units in its field names.
//
// # Concurrency
//
// Nothing here is safe for concurrent use; a Sim and everything in it
// belong to one goroutine.
package migrate
