// Package live is the live driver of a migrate.Core: it migrates a VM
// over real connections on wall time, executing the decisions the
// simulator executes on simulated time (the code the simulation tests is
// the code that runs here). It keeps only what is about connections, time
// and goroutines; every decision — rounds, expected stun, switchover,
// throttle, stun limit, the stun's steps, failure — is the Core's, and a
// report, an event or an error means what it means in package migrate.
//
// # The protocol
//
// Send, at the source, and Receive, at the destination, run one migration
// over one or more io.ReadWriters, net.Conns in practice. The first
// connection carries a short control conversation around the stream:
//
//	source                                   destination
//	offer: magic, version, key or not, ----> checked: version, key or not
//	a nonce
//	                               <-------- challenge: key or not, a nonce
//	   both derive this migration's keys from the shared key and the nonces
//	hello: VM spec, connections, ----------> authenticated, then checked:
//	encryption, batch size, stream id,       VM, mode, connections,
//	source host, mode                        encryption, batch size
//	                               <-------- accept (memory and vGPUs
//	                                         reserved), or refuse and why
//	each other connection: bound ----------> checked
//	a checkpoint stream on every conn -----> read on a goroutine per
//	  pre-copy rounds; then, the VM paused:  conn, applied by workers,
//	  final pages, device states, digests    the rounds in order
//	                               <-------- ready: digests checked,
//	                                         devices restored, stream's
//	                                         length; or refuse and why
//	commit: resume or stay paused, --------> the VM is the destination's
//	throttle
//	                               <-------- resumed: run state, throttle
//	VM destroyed at the source
//
// A source that may switch over into post-copy (see Post-copy) says so in
// its hello, and its stun differs:
//
//	a checkpoint stream on every conn -----> as above, but the stun sends
//	  the stun's device states, no digests   no page and no digest
//	owed: how many pages follow, in -------> the pages marked absent;
//	how many bitmaps; the bitmaps            none: the rest as above
//	                               <-------- ready
//	commit                         -------->
//	                               <-------- resumed; the VM runs here
//	a second stream on every conn  -------->
//	  the pages that follow, each once,      landed as they come; a page
//	  a fetched one first                    touched first is asked for:
//	                               <-------- fetch: region, page
//	                               <-------- landed: every page is here,
//	                                         and the faults' waits
//	VM destroyed at the source
//
// Every message after the challenge carries a tag, an HMAC under its
// sender's key of the whole conversation so far, and is decoded strictly;
// the stream is sealed under a key of this migration alone, and its id is
// drawn from the conversation up to the hello; each connection's stream
// has a key and an id of its own. So no message can be
// forged, changed, reordered, replayed from another migration or moved to
// another connection, and no two migrations share a key (SECURITY.md has
// the threat model). The one message without a tag, a refusal where the
// challenge belongs (the destination's version or configuration does not
// match), is reported as unauthenticated. A destination that requires a key reserves nothing
// for the VM until the hello's tag proves the source holds it. The
// handshake has a deadline of its own (HandshakeTimeout) and the whole
// migration a minimum rate (MinBytesPerSec), so that a peer that sends a
// byte now and then cannot hold the other end's resources. Without a key
// the tags catch corruption only, and a migration is safe on a trusted
// network only.
//
// Pre-copy and the switchover are the Core's, as in the simulated mode,
// fed with the rates measured on the connections. The live mode's expected
// stun counts the costs it measured in its own setup: the device snapshot
// it took to size the states, counted twice (save at the source, restore
// at the destination), and, for latency, two round trips of its handshake
// (the stun waits for "ready" and for "resumed"); quiesce and resume are
// state changes of the emulated VM and are not counted, and neither is
// the hashing of the regions' digests, which both ends keep up to date
// while the VM runs (memory.Region.Digest caches a digest's page hashes
// and knows which pages changed since), so that the stun hashes only the
// final pages. Time is wall time unless SendConfig.Clock or
// ReceiveConfig.Clock says otherwise.
//
// # Streams and codecs
//
// Each connection carries a whole checkpoint stream of its own, as QEMU's
// multifd channels and vMotion's parallel streams do, so that nothing
// serializes them: the source deals the copy engine's batches to the
// streams in turn, and each stream's goroutine frames, hashes and writes
// its batches to its connection straight from the engine's buffers
// (migrate.BatchQueue);
// the destination reads each on a goroutine of its own and hands the
// batches to ReceiveConfig.Workers goroutines that check, decompress and
// apply them in any order, a round's end on every stream the barrier that
// keeps a page's older copy from overwriting its newer one
// (checkpoint.ParallelApplier). ReceiveConfig.InFlight bounds the batches
// read and not yet applied; a connection whose batches are all in flight
// is not read, and its source waits on the connection. Both ends must use
// the same number of connections. Pages go uncompressed, in zstd or in S2
// (SendConfig.Engine.Level), or each batch in the codec that moves memory
// fastest over the connections as measured (SendConfig.AdaptiveCodec,
// migrate.CodecAuto); the stream records every batch's codec.
// SendConfig and ReceiveConfig set the engine, the encryption key,
// the destination's limits and a Timeout after which a connection that
// makes no progress fails the migration.
//
// Until the destination reads commit, the source owns the VM: each end
// keeps a migrate.Handover, the commit rule, and does with its copy what
// it says on a failure. Any failure
// before — a refusal, a connection closed or stalled past the timeout, a
// bad stream, a canceled context, pre-copy that does not converge under
// the Abort policy — ends both sides: each closes the connections, so the
// other learns at once; the source's VM is as it was, running if it ran
// and paused if it was, its memory untouched; the destination holds
// nothing of it. Both return a *migrate.PhaseError whose sentinel says what failed
// (migrate.ErrRefused beside the destination's reason, migrate.ErrConnection, migrate.ErrStream,
// migrate.ErrAuthentication, migrate.ErrCanceled, ...). A source that wrote commit and then lost the
// connection before "resumed" cannot know where the VM runs: it keeps its
// copy paused, unchanged and held (vgpu.VM.ResolveMigration ends the hold)
// and returns migrate.ErrInDoubt, so that there are never two running
// copies and never none.
//
// # Post-copy
//
// With Policy.Mode migrate.PostCopy, or OnNonConvergence
// migrate.SwitchToPostCopy when pre-copy does not converge, the Core
// switches over early: the stun sends the device states and, instead of
// the last dirty pages, their list, a bit a page of every region; the
// destination marks those pages absent (memory.Region.SetAbsent) and
// resumes the VM, handing it to ReceiveConfig.OnResume so that its owner
// can run it while its pages come. The source then opens a second
// checkpoint stream on every connection, its id drawn from the whole
// conversation up to "resumed" and its key the migration's for an index
// no first stream has, and pushes the pages that follow,
// each once, in region and page order, a few batches a connection at a
// time. A guest access to a page that has not come sends "fetch" on the
// first connection and waits for the page; the source serves the fetches
// ahead of the next push (a fetch of a page already on its way is only
// counted). Each page is marked present once stored (memory.Region.Arrive),
// and a batch with a page that did not follow or came already is refused
// before it is stored (checkpoint.ParallelOptions.Accept), failing the
// migration, since it would overwrite what the VM wrote since; an access
// waits for a page it asked for at most ReceiveConfig.Timeout. When every
// page has landed
// the destination says "landed", with the faults' waits it measured (the
// source's report takes them, migrate.FaultWaits), and the source lets the
// VM go. The stream the stun ends carries no digests: the destination's
// memory moves on before the last page comes. Both reports hold a
// migrate.PostCopyReport: the destination counts as faulted every page it
// asked for, the source only those it sent ahead of the push.
//
// Once the destination runs the VM neither end alone holds all of it, and
// the live mode cannot yet take a lost connection back: a post-copy that
// fails — a connection closed or stalled past the timeout, a bad stream or
// message, a canceled context at either end — strands the VM, as the
// Core's failure rule says (migrate.DoStrand). The destination destroys
// its copy, whose pages can never all come; an access waiting for a page
// fails at once (memory.AbsentError), and a workload that meets one
// pauses its VM while its host goes on (vgpu.Host.Advance); the source
// keeps its own copy as of the stun, paused and held in doubt, for
// whoever manages the hosts to give back
// (vgpu.VM.ResolveMigration(false)) or drop; both ends return an
// error wrapping migrate.ErrVMLost. What the VM did at the destination is
// lost with it; no VM is ever resumed with a page missing. Once the source
// has sent every page, the destination may have them all and run the VM
// whole, its "landed" lost on the way: a failure then is in doubt at the
// source (migrate.ErrInDoubt, its copy held as above), as after a lost
// "resumed", and whoever manages the hosts asks the destination. The source's
// reads of the fetches wait on no deadline while it pushes (the VM asks
// when it touches a page, and the pushes' writes bound the peer), and the
// destination's "landed" within the timeout once every page is sent.
//
// A VM has one migration at a time: a Send of a VM that another Send or a
// simulated migration holds fails in PhaseSetup with migrate.ErrMigrating,
// before it touches the VM or writes to the connections. Its owner's
// changes follow migrate.Source's rules: one inside the stun fails the
// migration with migrate.ErrSource, also when it shows first as the
// destination hanging up (on a digest mismatch, say), and the commit
// carries the owner's throttle as of the commit.
//
// Each side keeps its own migrate.Report on its own clock; the destination's
// holds what it can see and what the hello declared (see migrate.Report), and the
// digests it hashed from its own regions. Events, if SendConfig.Progress
// or ReceiveConfig.Progress is set, reach the callback on Send's or
// Receive's goroutine, one at a time: at the source the Core's events
// (the same kinds, in the same order, as a simulated migration's) and
// BytesMoved as the stream goes out; at the destination the rounds as
// they arrive, from the goroutines that apply the stream, and the end. A slog.Logger, if set, receives the same as structured records. Send and
// Receive run goroutines of their own — the engine's workers, region
// hashing (SendConfig.Engine.Workers, ReceiveConfig.DigestWorkers), one
// per connection that writes it at the source and reads it at the
// destination, and the destination's workers (ReceiveConfig.Workers) —
// and all have ended when they return.
//
// A Runner advances a host on wall time, on a goroutine of its own from
// Start to Stop, so that its VMs' workloads write memory while Send copies
// it. It is the host's lock: Send and Receive take it (SendConfig.Lock,
// ReceiveConfig.Lock) around what they do to a VM — reserve, pause,
// throttle, save or restore its devices, resume, release — and the caller
// holds it around anything else that touches the host. A host that cannot
// keep up with wall time falls behind in bounded steps, and Runner.Lag
// says by how much.
// examples/livemigrate runs the whole over TCP.
//
// # Clock
//
// The times and rates a migration is decided by are read from
// SendConfig.Clock and ReceiveConfig.Clock, the wall clock by default. A
// test injects one it moves itself: over in-memory connections a live
// migration then runs without sleeping, and over a simulated network whose
// clock moves with the bytes sent it takes the simulator's decisions round
// by round.
package live
