// Package vgpu models, on the hypervisor side, NVIDIA vGPU on a Tesla P40
// and the GPUs after it (V100, T4, A100): the physical GPU and its profile
// table, the placement of vGPUs on a host's GPUs, the vGPU device with its
// framebuffer window and device state, VMs, hosts, and the workloads that
// run in them — everything a live migration moves, on simulated time.
//
// It builds on package memory (framebuffers and guest RAM as page-granular
// regions with dirty logs) and package sched (one time-sliced scheduler per
// physical GPU). It knows nothing of links or migration policy.
//
// # GPUs and profiles
//
// GPUSpec holds a GPU model's published figures: P40 (the default), T4,
// V100 (PCIe 16GB), V100D (PCIe 32GB, whose types NVIDIA names V100D-) and
// A100 (PCIe 40GB), in the order of Specs. Each has a table of vGPU types,
// Profile rows (framebuffer, instances per GPU, display heads, resolution,
// frame-rate limit, licence, multi-vGPU, mdev type, PCI subsystem ID), each
// fact with its source beside it in profiles_*.go: Q, B (with B4), A and C
// series on the P40, V100, V100D and T4 (from 1 GB to the whole GPU), the
// time-sliced C series only on the A100 (A100-4C to A100-40C; MIG-backed
// types are not modelled). ParseProfile accepts "P40-8Q", "GRID P40-8Q",
// "NVIDIA A100-4C" and "nvidia-51"; an unknown name is an
// *UnknownProfileError that lists the valid ones.
// Profile.ReservedFramebufferBytes is NVIDIA's per-vGPU framebuffer
// reservation, taken from the top of each window: its ECC term applies on
// GDDR only (P40, T4), its compression term on Turing only (the T4's 16 GB
// types). Profile.DefaultTimeSlice is the equal and fixed share schedulers'
// default time slice, 2 ms or 1 ms by the type's instances per GPU.
//
// # Hosts and placement
//
// A Host has GPUs (all of one model) and guest memory. A GPU's framebuffer
// is partitioned statically: a vGPU of type p gets the window of one of the
// GPU's p.MaxInstances slots, aligned to its size, and a GPU holds one type
// at a time, as NVIDIA's homogeneous rule requires of these GPUs. On a P40
// ECC must be off for a vGPU to be created (vGPU release 8.0); the later
// models run vGPUs with ECC on (GPUSpec.ECCWithVGPU). CreateVM reserves a
// VM's guest memory in full and places each vGPU breadth-first (the GPU
// with the fewest vGPUs, the default) or depth-first (the most, with room);
// when nothing fits, a *PlacementError gives each GPU's reason. A VM with
// Passthrough takes a whole GPU and cannot be migrated.
//
// Across hosts, the same two rules choose a host (ChooseHost, PlaceVM; for
// a migrating VM, ChooseDestination): breadth-first the host with the
// fewest vGPUs, depth-first the one with the most that can still take the
// VM, which packs VMs and leaves whole GPUs free for other types. CanPlace
// and CheckIncoming ask a host without reserving anything; when no host
// can take a VM, a *NoHostError gives each host's reason.
//
// # VMs and devices
//
// A VM's run state moves created -> running <-> paused, -> stopped ->
// running, -> destroyed; a migration's destination holds it incoming
// (PrepareIncoming) until Commit or Abort. A vGPU is created, running,
// paused, stopped or destroyed. Refused transitions are *TransitionError.
// Pause is a stun: the workload stops and the scheduler tenant gets no
// turns, but queued work and memory are kept. A stall (VM.Stall) is a
// pause of the hypervisor's for a set time, with the VM left running: a
// migration's destination stalls the VM while a page it touched comes from
// the source (post-copy). Its workload waits as in a pause — requests
// arriving meanwhile wait, an iteration or a frame takes longer — and runs
// on when the stall ends, at a step of the host's Advance
// (Host.NextEventAt stops there). Making and starting a VM is all or
// nothing: CreateVM refuses a workload that does not fit the VM (a Fitter
// says so before it starts), and a VM whose start fails stays as it was,
// its vGPUs stopped.
//
// A vGPU's device state — PCI configuration space, a BAR0 register file,
// channels, contexts with their page-table roots, its scheduler tenant's
// state, its generation ID, GPU model and profile — is saved as versioned,
// checksummed bytes (the layout is drawn at DeviceState) by SaveState and
// installed by RestoreState, which checks version, model, profile and PCI
// identity before changing anything and gives the device a new generation
// ID. DecodeState treats its input as hostile. Destroying a vGPU unmaps its window, which
// scrubs it before another vGPU can map it.
//
// # Time
//
// Every host has a simulated clock. Host.Advance(d) moves all its GPUs'
// schedulers and all its running VMs' workloads on by exactly d, event by
// event inside: at each workload event it first advances the schedulers
// (routing each completed job to its workload by tag) and the workloads'
// continuous memory writes, then fires the event, so submitted work starts
// at its exact time. Event times depend only on the workloads' state (and
// the remote GPU sessions', below), and writes to a page agree on its
// content class, so many small Advance calls give the same memory, device
// states and metrics as one large call.
//
// A driver of many hosts keeps their clocks in step by holding them:
// Host.TakeClock hands it a Clock, and until Clock.Release the host's own
// Advance is refused (ErrDriven), so no other caller can move one host on
// and leave it out of step with the rest. migrate.Sim holds the clock of
// every host it drives. Host.NextEventAt says when the next workload event
// is due, for a driver that goes from event to event.
//
// # Observation
//
// GPU.Scheduler is a read-only view of a GPU's scheduler (sched.View): its
// tenants and the GPU time it granted. GPU.Utilization is the fraction of
// any interval of the retained history (HostConfig.UsageRetention, by
// UsageResolution) the GPU was busy; the host stops at every boundary of
// the history, so over whole buckets it is exact. VGPU.GPUTime and
// VM.GPUTime are the GPU time of the work a vGPU completed, kept in its
// device state, so that it survives a migration.
//
// # Workloads
//
// A Workload is driven by its host through an Env. Four are provided, in
// physical units and deterministic from their seeds: Inference (Poisson
// requests, each the model's MACs over the GPU's sustained throughput;
// presets InceptionV3 and MobileNet), Training (iterations of forward and
// backward passes, rewriting weights in the framebuffer and optimizer state
// in guest RAM; with TrainingConfig.DataLoad, each first loads its batch on
// the host while its vGPUs idle, the idle time the scheduler policies treat
// differently), CAD (frames at a target rate, rewriting render targets)
// and Desktop (light dirtying, little GPU work). Each reports Metrics over
// any interval. Their framebuffer footprint ("used framebuffer") is set by
// FootprintBytes. VM.SetThrottle cuts a workload's dirty rates and GPU work
// rate; VM.HandOverWorkload moves a workload, random state and history, to
// a migration's destination.
//
// No call a workload makes panics. An Env method given an argument out of
// range (a vGPU index the VM does not have) returns an error wrapping
// ErrWorkload that names the VM and the argument; the regions it hands out
// refuse an access outside themselves with a *memory.AccessError. An error
// a workload's hook returns fails the call that ran it — Host.Advance,
// VM.Start, VM.Resume, VM.SetThrottle — with an error wrapping ErrWorkload
// and the hook's own error.
//
// # Migration support
//
// A migration uses: VM.CheckMigratable and Host.CheckIncoming (the
// compatibility check), VM.IncomingSpec and Host.PrepareIncoming (the
// destination, windows mapped with the source's seeds so generated content
// regenerates), VM.RAM and VM.Framebuffers (the regions to copy, with their
// dirty logs), VM.SaveDeviceStates, VM.HandOverWorkload, VM.Commit or
// VM.Abort, and VM.Destroy at the source. DeviceState.Diff compares the two
// ends.
//
// At the source a migration holds the VM's MigrationClaim
// (VM.ClaimMigration), so that a VM has one migration at a time
// (ErrMigrating for a second), and pauses, resumes and throttles it
// through the claim. What the VM's owner does meanwhile stays apart: its
// Pause, Resume, Stop, Start and Restore are counted (VM.Changes), so a
// migration sees any made while it holds the VM stunned, however they net
// out; its throttle (VM.Throttle) is kept under the migration's cut
// (VM.EffectiveThrottle is the larger) and outlives it. Once the claim is
// committed the owner's changes are refused with ErrMigrating.
//
// # Remote GPUs
//
// A GPU server's host opens a session on one of its GPUs for a VM of
// another host (Host.OpenRemote, a RemoteGPU), as VMware vSphere Bitfusion
// gives a VM a GPU, or part of one, across the network (seed 002): a vGPU
// of the session's profile, placed and scheduled as any other, whose
// framebuffer stays on the server. The client VM names it in
// VMSpec.Remote, and its workload uses it as a vGPU of its own, numbered
// after its local ones. A job's inputs cross the session's RemoteLink
// before it can run and its outputs after, at the link's rate and one-way
// latency, one transfer at a time each way; its calls that wait for an
// answer (JobIO.Calls, Env.SubmitIO) split its work into parts, each
// reaching the GPU a round trip after the previous one ended, the GPU free
// for the server's other vGPUs and sessions meanwhile; a session's jobs
// run one at a time, in order. The workloads say what their jobs move:
// an inference its image in and its scores out, a training iteration its
// batch in and its loss out, and two calls per convolution layer and pass
// (Model.RemoteCalls). With the links of seed 002's set-ups
// (RemoteVMXNET3, RemotePVRDMA, RemoteRoCE) a training iteration of
// Inception V3 or ResNet-50 pays 4 to 22 % over a local vGPU on 10 GbE, at
// most 2 % on RoCE, less as the batch grows (TestRemoteOverheadShapes,
// BenchmarkRemoteTraining).
//
// A client and its server keep one clock: a host a session joins to
// another refuses Host.Advance (ErrOutOfStep), and AdvanceHosts moves
// them together, in steps no longer than Horizon allows — until the
// earliest a job or a completion could cross a link — so that every job
// reaches the server, and every completion its VM, at its exact time, and
// an advance split anywhere gives the same result. migrate.Sim does the
// same for the hosts it drives, on one goroutine or several. A paused or
// stalled VM's completions wait for it; its Stop drops the session's work,
// and its Destroy ends its hold on the session, which Close then ends.
//
// A client VM migrates with no framebuffer to move: a migration hands its
// sessions to the destination at the commit (VM.HandOverRemote), and they
// answer it after two round trips of their link, the client's connection
// from its new host. The live mode refuses such a VM (a session is a
// pointer into this process), and so does Suspend.
//
// # Suspend and resume
//
// VM.Suspend writes a running or paused VM to a file in one call — its
// spec, its workload's whole state (StatefulWorkload, which every workload
// of the package is), its guest memory and framebuffers, its vGPUs' device
// states — as one checkpoint stream, and releases it; Host.Resume makes
// it again on any host that could take it, restores everything, every
// record checked, and runs it on as it was. A VM on a Synthetic host is
// written in compact form, as runs of pages (a content class and a
// generation each): kilobytes whatever its memory. A failed suspend
// leaves the VM as it was; a failed resume leaves nothing on the host.
//
// # Concurrency
//
// Nothing in the package is safe for concurrent use, and it starts no
// goroutines; the regions it hands out are safe for concurrent use as
// package memory documents.
package vgpu
