package live

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// Receive takes in a VM that Send migrates over conns and places it on
// host. It answers the handshake (refusing a VM the host cannot take, an
// unknown major version or migration mode, another number of connections
// than the source's, a source that does not hold its key, or holds one it
// does not), applies the stream as it arrives, checks the regions'
// digests, restores the devices, and, when the source commits, resumes
// the VM if it ran at the source. It returns the VM, which then belongs to
// host, and the destination's report, which holds what the destination
// saw (see Report).
//
// Until the source commits, any failure — a bad or truncated stream, a
// message that fails its authentication, a connection closed, stalled past
// the timeout or below the minimum rate, a canceled ctx — gives the VM
// up: its windows are scrubbed and freed and host holds nothing of it;
// Receive closes the connections so the source learns at once, and returns
// a *PhaseError. A failure after the commit was read (the VM would not
// resume) keeps the VM, which is the destination's: Receive returns it
// with the error, and the source, not acknowledged, keeps its copy paused.
// The incoming VM has no workload; the caller gives it one, in
// ReceiveConfig.OnResume or once Receive returned.
//
// In post-copy (see the package doc) the stream the stun ends carries no
// digests; the VM resumes with the pages that follow absent, OnResume
// runs while they land, and Receive returns once every page has landed
// and OnResume has returned. A failure from the commit on then destroys
// the VM, which lacks pages that can never come: Receive returns no VM and
// an error wrapping migrate.ErrVMLost.
func Receive(ctx context.Context, host *vgpu.Host, conns []io.ReadWriter, cfg ReceiveConfig) (*vgpu.VM, *migrate.Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	if host == nil || len(conns) == 0 || len(conns) > maxConnections {
		return nil, nil, fmt.Errorf("%w: Receive needs a host and 1 to %d connections", migrate.ErrConfig, maxConnections)
	}
	link := linkName(conns)
	r := &receiver{cfg: cfg, host: host, conns: newConnSet(conns, cfg.bounds()), ctx: ctx, start: cfg.Clock.Now(),
		handover: migrate.NewHandover(migrate.DestinationEnd)}
	r.prog = reporter{fn: cfg.Progress, log: cfg.Logger, clock: cfg.Clock, start: r.start}
	stop := context.AfterFunc(ctx, r.conns.closeAll)
	defer stop()
	r.rep.Destination, r.rep.Fidelity, r.rep.Live, r.rep.Link = host.Name(), migrate.Bytes, true, link
	r.phase = migrate.PhaseSetup
	if err := r.run(); err != nil {
		rep := r.fail(err)
		if r.handover.OnFailure() == migrate.Keep {
			return r.in, rep, r.err
		}
		return nil, rep, r.err
	}
	_ = r.pa.Close()
	if r.postPA != nil {
		_ = r.postPA.Close()
	}
	rep := r.closeReport(migrate.PhaseDone)
	r.prog.emit(migrate.Event{Kind: migrate.Done, At: r.since(), Phase: migrate.PhaseDone, Round: -1, WireBytes: r.wire()})
	return r.in, rep, nil
}

// receiver is the destination's side of one live migration.
type receiver struct {
	cfg   ReceiveConfig
	host  *vgpu.Host
	conns connSet
	conv  *conversation
	// streamIDs are the ids the streams must carry, one a connection,
	// drawn from the handshake up to the hello.
	streamIDs [][checkpoint.StreamIDSize]byte
	handover  migrate.Handover
	claim     *vgpu.MigrationClaim // the restored copy's, until the commit
	ctx       context.Context
	start     time.Time
	prog      reporter
	phase     migrate.Phase
	rep       migrate.Report
	err       error

	lim  checkpoint.Limits // the reader's, set by the handshake
	ctl  *bufio.Reader     // the first connection, once the handshake is over
	pa   *checkpoint.ParallelApplier
	data []io.Reader // the connections' readers, the first's ctl
	in   *vgpu.VM    // incoming, then resumed
	// post is the post-copy, if the source left pages for it, and
	// postPA its streams' applier once they opened.
	post   *recvPostCopy
	postPA *checkpoint.ParallelApplier
	tally  recvTally
	round  int // rounds applied
}

func (r *receiver) run() error {
	h, err := r.handshake()
	if err != nil {
		return err
	}
	r.phase = migrate.PhasePreCopy
	// The peer proved it holds the key (where there is one): only now do
	// the connections get their buffers. Each stream is read to its end
	// record and no further, so the first connection's reader goes on
	// with the control messages after it.
	r.ctl = bufio.NewReaderSize(r.conns[0], liveBufferBytes)
	r.conv.r = r.ctl
	r.data = []io.Reader{r.ctl}
	for _, c := range r.conns[1:] {
		r.data = append(r.data, bufio.NewReaderSize(c, liveBufferBytes))
	}
	if err := r.openStreams(r.data, h); err != nil {
		return err
	}
	r.tally.begin(r.pa.Metadata(), r.wire(), r.since())
	if err := r.pa.Run(r.ctx); err != nil {
		return wrap(migrate.ErrStream, err)
	}
	if h.PostCopy {
		if err := r.readOwed(); err != nil {
			return err
		}
	}
	r.enter(migrate.PhaseRestore)
	if err := r.restore(); err != nil {
		// The source waits for ready: it learns why.
		return r.refuse(err)
	}
	if err := r.conv.write(msgReady, ready{StreamBytes: r.pa.Offset()}); err != nil {
		return err
	}
	r.enter(migrate.PhaseResume)
	var c commit
	if err := r.conv.read(msgCommit, &c); err != nil {
		return err
	}
	// From here on the VM is ours: the source has let it go.
	if err := r.handover.CommitRead(); err != nil {
		return err
	}
	if r.post != nil {
		// The VM is the destination's, and some of its pages are still
		// the source's: from here on a failure strands it (strand).
		r.phase = migrate.PhasePostCopy
	}
	r.cfg.Lock.Lock()
	r.claim.Release()
	r.claim = nil
	err = r.in.SetThrottle(c.Throttle)
	if err == nil && r.post != nil {
		// Claimed, the VM cannot be migrated on while pages are missing.
		// Its pages are marked absent here, under the host's lock with
		// the resume, so that no access of its owner's waits for a page
		// while this end needs the lock.
		if r.claim, err = r.in.ClaimMigration(); err == nil {
			err = r.markAbsent()
		}
	}
	if err == nil && c.Resume {
		err = r.in.Resume()
	}
	ack := resumed{Running: r.in.State() == vgpu.VMRunning, Throttle: r.in.Throttle()}
	r.cfg.Lock.Unlock()
	if err != nil {
		// The source, not hearing back, keeps its copy paused.
		return wrap(migrate.ErrDestination, err)
	}
	err = r.conv.write(msgResumed, ack)
	if r.post != nil {
		// The fetches, which waited for it, go after the acknowledgement
		// and the second streams' ids drawn up to it.
		r.post.ready(r.conv.t, h.StreamID, len(r.conns), err)
	}
	if err != nil {
		if r.post != nil {
			return err // the pages that follow will not come
		}
		if r.cfg.Logger != nil {
			// The VM runs here; the source, not hearing it, keeps its
			// copy paused and reports the outcome in doubt.
			r.cfg.Logger.Warn("migrate: acknowledging the resume", "vm", r.rep.VM, "error", err)
		}
	}
	r.tally.stunEnd = r.since()
	if r.post == nil {
		r.onResume()
		return nil
	}
	return r.postCopy()
}

// onResume hands the VM to the caller's OnResume, if any.
func (r *receiver) onResume() {
	if r.cfg.OnResume != nil {
		r.cfg.OnResume(r.in)
	}
}

// handshake answers the source's offer with a challenge, authenticates
// and checks its hello, and answers it: the VM is reserved on the host,
// or refused. Until the hello is authenticated, nothing but the offer,
// the challenge and one bounded message is held for the peer.
func (r *receiver) handshake() (hello, error) {
	var h hello
	r.conns.handshaking(r.cfg.HandshakeTimeout)
	defer r.conns.handshaking(0)
	c0 := r.conns[0]
	r.conv = &conversation{w: c0, r: c0, end: migrate.DestinationEnd, t: newTranscript()}
	major, pre, err := readPreamble(c0)
	if err != nil {
		return h, err
	}
	if major != ProtocolMajor {
		return h, r.refuse(fmt.Errorf("%w: %w %d, this destination speaks %d", migrate.ErrIncompatible, errVersion, major, ProtocolMajor))
	}
	o, err := readOfferRest(c0, r.conv.t, pre[:])
	if err != nil {
		return h, err
	}
	keyed := r.cfg.EncryptionKey != nil
	if o.keyed != keyed {
		return h, r.refuse(fmt.Errorf("%w: the source holds a key: %v; the destination requires one: %v", migrate.ErrConfig, o.keyed, keyed))
	}
	nonce, err := newNonce(r.cfg.Rand)
	if err != nil {
		return h, err
	}
	if err := r.conv.writeRaw(msgChallenge, challengeBody(keyed, nonce)); err != nil {
		return h, err
	}
	keys, err := deriveKeys(r.cfg.EncryptionKey, &o.nonce, nonce)
	if err != nil {
		return h, err
	}
	r.conv.t.keyed(keys, migrate.DestinationEnd)
	r.conv.tagged = true
	if err := r.conv.read(msgHello, &h); err != nil {
		if errors.Is(err, migrate.ErrAuthentication) {
			return h, r.refuse(err)
		}
		return h, err
	}
	for i := range r.conns {
		r.streamIDs = append(r.streamIDs, r.conv.t.streamID(h.StreamID, i))
	}
	r.rep.VM, r.rep.Profiles, r.prog.vm = h.Spec.ID, h.Spec.Profiles, h.Spec.ID
	r.rep.Source, r.rep.Mode = peerText(h.Source, maxPeerNameBytes), migrate.Mode(h.Mode)
	switch {
	case r.rep.Mode != migrate.PreCopy && r.rep.Mode != migrate.Legacy && r.rep.Mode != migrate.PostCopy:
		return h, r.refuse(fmt.Errorf("%w: unknown migration mode %d", migrate.ErrConfig, h.Mode))
	case h.Connections != len(r.conns):
		return h, r.refuse(fmt.Errorf("%w: the source spreads the stream over %d connections, the destination has %d", migrate.ErrConfig, h.Connections, len(r.conns)))
	case h.Encrypted != keyed:
		return h, r.refuse(fmt.Errorf("%w: the source encrypts: %v; the destination requires encryption: %v", migrate.ErrConfig, h.Encrypted, keyed))
	case h.BatchBytes <= 0 || h.BatchBytes > r.cfg.MaxBatchBytes:
		return h, r.refuse(fmt.Errorf("%w: batches of %d bytes, limit %d", migrate.ErrConfig, h.BatchBytes, r.cfg.MaxBatchBytes))
	}
	r.lim = receiveLimits(r.cfg.Limits, h.BatchBytes)
	if r.lim.MaxBatchBytes < h.BatchBytes {
		return h, r.refuse(fmt.Errorf("%w: batches of %d bytes, the destination's Limits.MaxBatchBytes is %d", migrate.ErrConfig, h.BatchBytes, r.lim.MaxBatchBytes))
	}
	r.cfg.Lock.Lock()
	r.in, err = r.host.PrepareIncoming(h.Spec) // checks the spec as CheckIncoming does
	r.cfg.Lock.Unlock()
	if err != nil {
		return h, r.refuse(wrap(migrate.ErrIncompatible, err))
	}
	if err := r.conv.write(msgAccept, accept{Host: r.host.Name()}); err != nil {
		return h, err
	}
	for i, c := range r.conns[1:] {
		if err := readBind(c, r.conv.t, i+1); err != nil {
			return h, err
		}
	}
	return h, nil
}

// refuse tells the source why, and returns the reason as the error.
func (r *receiver) refuse(cause error) error {
	_ = r.conv.write(msgRefuse, refusalOf(cause))
	return cause
}

// openStreams starts reading the checkpoint streams, one on each
// connection, and checks that they declare the VM the handshake
// announced.
func (r *receiver) openStreams(data []io.Reader, h hello) error {
	opts := checkpoint.ReaderOptions{Limits: r.lim}
	streams := make([]checkpoint.ParallelStream, len(data))
	for i, d := range data {
		streams[i].R = d
		if r.cfg.EncryptionKey != nil {
			opts.Encryption = checkpoint.EncryptionRequired
			var err error
			if streams[i].Key, err = r.conv.t.keys.streamKey(i); err != nil {
				return err
			}
		}
	}
	regs := append([]*memory.Region{r.in.RAM()}, r.in.Framebuffers()...)
	refs := make([]checkpoint.RegionRef, len(regs))
	for i, reg := range regs {
		refs[i] = checkpoint.RegionRef{ID: uint32(i), Region: reg}
	}
	popts := checkpoint.ParallelOptions{Workers: r.cfg.Workers, InFlight: r.cfg.InFlight,
		DigestWorkers: r.cfg.DigestWorkers, Stop: r.conns.closeAll, Applied: r.applied}
	var err error
	if r.pa, err = checkpoint.NewParallelApplier(streams, opts, refs, popts); err != nil {
		return wrap(migrate.ErrStream, err)
	}
	meta := r.pa.Metadata()
	if meta.VMID != h.Spec.ID || meta.GPUModel != h.Spec.GPUModel || !slices.Equal(meta.Profiles, h.Spec.Profiles) || len(meta.Regions) != len(regs) {
		return fmt.Errorf("%w: the stream declares VM %q (%s %v, %d regions), the handshake %q (%s %v, %d regions)", migrate.ErrStream,
			meta.VMID, meta.GPUModel, meta.Profiles, len(meta.Regions), h.Spec.ID, h.Spec.GPUModel, h.Spec.Profiles, len(regs))
	}
	for i, reg := range regs {
		// The handshake sized and seeded the regions; a stream that
		// declares them otherwise is not the VM the hello announced.
		if got, want := meta.Regions[i], checkpoint.RegionInfoOf(uint32(i), reg); got != want {
			return fmt.Errorf("%w: the stream declares region %d as %+v, the handshake as %+v", migrate.ErrStream, i, got, want)
		}
	}
	// What the metadata does not declare — the guest OS footprint, the
	// batch size, the source, the mode — the streams' ids vouch for: they
	// were drawn from the handshake, the hello as the source wrote it
	// included, and each names its connection.
	for i := range streams {
		if r.pa.Header(i).StreamID != r.streamIDs[i] {
			return fmt.Errorf("%w: stream %d's id is not this migration's: another hello, another migration or another connection", migrate.ErrAuthentication, i)
		}
	}
	return nil
}

// applied counts a record the streams' applier applied. It is called one
// call at a time, from the applier's goroutines, while Receive's waits in
// Run.
func (r *receiver) applied(a checkpoint.Applied) {
	switch a.Type {
	case checkpoint.RecordEndRound:
		r.tally.endRound(a.WireBytes, r.since())
		r.prog.emit(migrate.Event{Kind: migrate.RoundEnded, At: r.since(), Phase: r.phase, Round: r.round, WireBytes: a.WireBytes})
		r.round++
	case checkpoint.RecordPageBatch:
		r.tally.batch(a.Region, a.Pages, a.ZeroPages, a.WireBytes, r.since())
		r.prog.bytes(r.phase, r.round, a.WireBytes)
	case checkpoint.RecordDeviceState:
		r.phase = migrate.PhaseDeviceState
	}
}

// restore commits the stream — the digests checked — and restores the
// devices.
func (r *receiver) restore() error {
	if err := r.pa.Commit(); err != nil {
		return wrap(migrate.ErrStream, err)
	}
	states, err := migrate.DeviceStates(r.pa.DeviceStates(), len(r.in.Framebuffers()))
	if err != nil {
		return err
	}
	// The digests Commit computed from this side's own regions, which it
	// checked against the stream's.
	for _, d := range r.pa.RegionDigests() {
		r.rep.RegionDigests = append(r.rep.RegionDigests, migrate.Digest(d.Digest))
	}
	for _, ds := range r.pa.DeviceStates() {
		r.rep.DeviceStateBytes += int64(len(ds.Data))
	}
	if r.post == nil && len(r.pa.RegionDigests()) != len(r.regions()) {
		// Only a post-copy's stream ends without them.
		return fmt.Errorf("%w: the stream ended with %d region digests, the VM has %d regions", migrate.ErrStream, len(r.pa.RegionDigests()), len(r.regions()))
	}
	r.cfg.Lock.Lock()
	defer r.cfg.Lock.Unlock()
	if err := r.in.Restore(states); err != nil {
		return wrap(migrate.ErrDestination, err)
	}
	// Restored, the copy is paused and could be resumed by this host's
	// owner: held until the commit, it cannot run beside the source's,
	// nor be migrated on.
	if r.claim, err = r.in.ClaimMigration(); err == nil {
		err = r.claim.Hold()
	}
	return wrap0(migrate.ErrDestination, err)
}

// since is the time since the destination's start on its clock.
func (r *receiver) since() time.Duration { return r.cfg.Clock.Now().Sub(r.start) }

func (r *receiver) wire() int64 {
	var n int64
	for _, pa := range []*checkpoint.ParallelApplier{r.pa, r.postPA} {
		if pa != nil {
			n += pa.Offset()
		}
	}
	return n
}

// fail gives the VM up, so the host holds nothing of it.
func (r *receiver) fail(cause error) *migrate.Report {
	cause = liveCause(r.ctx, r.conns, cause)
	r.conns.closeAll()
	if r.pa != nil {
		r.pa.Abort()
		_ = r.pa.Close()
	}
	if r.post != nil && r.phase == migrate.PhasePostCopy {
		r.strand()
		cause = wrap(migrate.ErrVMLost, cause)
	} else if r.in != nil && r.handover.OnFailure() == migrate.Discard {
		// Destroy, not Abort: after the restore the VM is no longer
		// incoming, and it must go all the same; held, through its
		// claim.
		r.cfg.Lock.Lock()
		if r.claim != nil {
			_ = r.claim.Destroy()
		} else {
			_ = r.in.Destroy()
		}
		r.cfg.Lock.Unlock()
		r.in = nil
	}
	r.err = &migrate.PhaseError{VM: r.rep.VM, Phase: r.phase, Err: cause}
	rep := r.closeReport(migrate.PhaseFailed)
	r.prog.emit(migrate.Event{Kind: migrate.Failed, At: r.since(), Phase: r.phase, Round: -1, WireBytes: r.wire(), Err: r.err, Detail: r.err.Error()})
	return rep
}
