// Package sched time-shares the engines of one physical GPU among its
// vGPUs, on simulated time, the way NVIDIA's vGPU manager does on a Tesla
// P40: the framebuffer is statically partitioned, the CUDA cores are not.
//
// It knows tenants, not profiles or memory. A tenant is a slot count (the
// maximum instances of its profile per GPU, which sets its fixed share and
// its default slice), a state (off, on, paused) and a FIFO queue of jobs.
// The package imports nothing from the rest of the project.
//
// # Time
//
// The caller owns the clock. Advance(d, report) moves simulated time on by
// d and says what happened: the GPU time each tenant received, the jobs
// that completed (with submission, first-run and completion times, hence
// queueing delay and latency) and the GPU's utilization. Nothing reads the
// wall clock or a global random source, so the same calls give the same
// reports, and the same saved bytes, on every machine. A decision due
// exactly at the end of an interval is taken at the start of the next
// Advance, after any jobs submitted in between; otherwise splitting an
// Advance changes nothing.
//
// Advance walks event by event (a turn starting, a job finishing, a slice
// ending) but jumps where nothing could interrupt: over idle time, over the
// renewed slices of a tenant that runs alone, and over whole periods of a
// lone tenant paced by its share. Report.Decisions still counts every slice
// decision, jumped or not. With its Report reused, a busy Advance
// allocates nothing.
//
// # Policies
//
// Best effort (the default) is work-conserving: the GPU goes round-robin
// through the tenants that have work, moving on as soon as the current one
// has none. It never idles while a tenant has work, and guarantees no share.
//
// Equal share divides the GPU's time equally among the tenants that are
// powered on (on or paused), whether or not they have work. Fixed share
// gives each tenant 1/MaxInstances of it, whatever else exists: a lone
// P40-4Q tenant (6 per GPU) gets one sixth. Under both, a slice a tenant
// leaves unused is not lent to anyone; the GPU idles instead.
//
// Both share policies are enforced by pacing. A tenant's period is its
// slice times its share's denominator (the tenants powered on, or its
// MaxInstances). Each turn moves the tenant's eligibility one period on,
// and the tenant may start a turn only once it is eligible. Eligibility
// moves from its previous value, so a tenant kept waiting by others keeps
// its share; it never moves before the turn's start, so no tenant's turns
// n and n+2 are less than a period apart, which bounds what a tenant gets
// in any window of one period to its share plus one slice (plus its
// overshoot, below). A tenant that
// was idle becomes eligible no earlier than the moment it gets work: time
// it did not use is lost, not owed.
//
// # Time slice and overshoot compensation
//
// A tenant's slice is Config.Slice, 1 to 30 ms, or by default its
// profile's: 2 ms (480 Hz) where at most 8 instances fit on the GPU, 1 ms
// (960 Hz) above that. At a slice's end the scheduler picks again; if the
// same tenant is picked its slice is renewed, otherwise it is preempted.
// A job longer than a slice is preempted and resumed at its next turn.
//
// Preemption is not instant: a job can stop only at a boundary of its Chunk
// (a kernel runs to completion once launched), so a preempted tenant runs
// on past its slice's end. That overshoot accumulates as the tenant's debt,
// and each next slice is shortened by the debt divided by the averaging
// factor (Config.AveragingFactor, default 33, 1 to 60; rounded up so the
// debt reaches zero), which is then taken off the debt. Repayment is spread
// over many slices rather than taken at once, so a tenant's turns stay
// regular while its long-run share stays fair. A slice is never shortened
// by more than half, and the debt is capped at MaxOvershootDebt.
//
// # Strict round-robin and least-scheduled order
//
// By default turns go in strict round-robin order: the next eligible
// tenant with work after the last one to start a turn. With
// Config.DisableStrictRoundRobin, equal and fixed share instead run the
// eligible tenant that has spent the least time scheduled, as vGPU releases
// did before strict round-robin became the default; overshoot is then
// repaid by that order rather than by shortened slices. A tenant powering
// on starts level with its least-scheduled neighbour, so it does not
// monopolise the GPU to catch up. Best effort is always round-robin.
//
// # Tenant lifecycle
//
// AddTenant adds a tenant, off. PowerOn and PowerOff change the equal-share
// denominator; powering off drops the tenant's queue. Pause (a migration's
// stun) stops a tenant's turns but keeps its queue, and it still counts as
// powered on; Resume undoes it. RemoveTenant removes a tenant that is off.
//
// # RmPVMRL
//
// DecodeRmPVMRL reads the RmPVMRL registry DWORD in either documented
// layout; the caller says which:
//
//	both         0x00000000  best effort, with the profile's slice and averaging factor 33
//	legacy       0x00TT00PP  PP 0x01 equal share, 0x11 fixed share
//	                         TT slice in ms: 0x00 profile default, above 0x1E capped at 30 ms
//	                         (no strict round-robin in those releases)
//	round-robin  0xAAFFF0PP  PP 0x01 equal / 0x11 fixed share, strict round-robin
//	                         AA averaging factor: 0x00 -> 33, above 0x3C capped at 60
//	                         FFF frequency in Hz: 0x000 profile default, 0x001-0x03E -> 63,
//	                         above 0x3C0 capped at 960; the slice is 1/frequency
//	             0x00TT00PP  PP 0x03 equal / 0x13 fixed share without strict round-robin, TT as legacy
//
// Best effort has no field in either layout: the guides define the slice,
// the averaging factor and the frequency for equal and fixed share only,
// so a best-effort value with TT, AA or FFF set is refused, not ignored
// (DecodeRmPVMRL gives the sources). Any other PP, or bits set outside a
// layout's fields, is an *RmPVMRLError too.
//
// Config.RmPVMRL encodes the other way, always to the canonical form of a
// value: defaults left out (AA 0x00 for 33, TT or FFF 0 for the profile's
// slice), clamped fields written clamped (TT 0x1E, AA 0x3C, FFF 0x03F or
// 0x3C0). Re-encoding a decoded value therefore gives the value back when
// it is canonical, as the guides' examples are, and otherwise the one
// canonical value that decodes to the same Config. Config.String prints
// what a driver's log line would: policy, order, slice in ms.
//
// # Save format
//
// SaveTenant writes a tenant's scheduling state for a device checkpoint,
// and RestoreTenant reads it back, on this scheduler or another. Times are
// relative, so the state moves between clocks: eligibility relative to
// now, scheduled time relative to the least of the other powered-on
// tenants' (the credit), job times as ages. All integers are little-endian;
// durations are signed nanoseconds:
//
//	offset  size  field
//	0       4     magic "VSCH"
//	4       2     version (1)
//	6       2     maxInstances, 1..64: must match the restoring tenant's
//	8       8     debtNS, overshoot not yet repaid, 0..MaxOvershootDebt
//	16      8     eligibleInNS, next turn allowed after, ±1.92 s
//	24      8     creditNS, scheduled time over the neighbours' least, ±1 h
//	32      4     jobCount, 0..MaxQueueLimit and at most the scheduler's MaxQueue
//	36      48×n  jobs, front first:
//	                +0  tag            uint64
//	                +8  workNS         (0, MaxJobWork]
//	                +16 doneNS         [0, workNS); nonzero only for the front job
//	                +24 chunkNS        [0, MaxChunk]
//	                +32 submittedAgoNS >= 0, not increasing along the queue
//	                +40 startedAgoNS   -1 if never run, else [0, submittedAgoNS]; front job only
//	36+48n  4     CRC-32C (Castagnoli) of everything before it
//
// A restore checks magic, version, checksum and length before reading any
// field, then every field, before it changes anything: hostile bytes get a
// typed error (a *CorruptStateError carries the offset), never a panic, and
// cost no allocation beyond the queue they describe. Saving a restored
// state gives back the same bytes.
//
// # Limits
//
// Everything is bounded: tenants per GPU (MaxTenantsLimit), slot counts
// (MaxInstancesLimit), queue length (MaxQueueLimit), job length
// (MaxJobWork), chunk (MaxChunk), debt (MaxOvershootDebt) and simulated
// time itself (MaxTime). A Scheduler is not safe for concurrent use and
// starts no goroutines.
package sched
