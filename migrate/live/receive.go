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
// The incoming VM has no workload; the caller gives it one.
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
	// The connections are read ahead while the stream arrives, from the
	// end of the handshake on; the reads stop, here too if it fails,
	// before Receive lets them go.
	defer func() { stopReadAhead(r.ahead) }()
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
	_ = r.rd.Close()
	rep := r.closeReport(migrate.PhaseDone)
	r.prog.emit(migrate.Event{Kind: migrate.Done, At: r.since(), Phase: migrate.PhaseDone, Round: -1, WireBytes: r.wire()})
	return r.in, rep, nil
}

// receiver is the destination's side of one live migration.
type receiver struct {
	cfg   ReceiveConfig
	host  *vgpu.Host
	conns connSet
	ahead []io.ReadWriter // the connections, read ahead until the stream ends
	conv  *conversation
	// streamID is the id the stream must carry, drawn from the
	// handshake.
	streamID [checkpoint.StreamIDSize]byte
	handover migrate.Handover
	claim    *vgpu.MigrationClaim // the restored copy's, until the commit
	ctx      context.Context
	start    time.Time
	prog     reporter
	phase    migrate.Phase
	rep      migrate.Report
	err      error

	lim   checkpoint.Limits // the reader's, set by the handshake
	ctl   *bufio.Reader     // the first connection, read ahead, once the handshake is over
	rd    *checkpoint.Reader
	ap    *checkpoint.Applier
	in    *vgpu.VM // incoming, then resumed
	tally recvTally
}

func (r *receiver) run() error {
	h, err := r.handshake()
	if err != nil {
		return err
	}
	r.phase = migrate.PhasePreCopy
	// The peer proved it holds the key (where there is one): only now do
	// the connections get their read-ahead buffers.
	r.ahead = make([]io.ReadWriter, len(r.conns))
	for i, c := range r.conns {
		r.ahead[i] = withReadAhead(c.rw)
		c.setConn(r.ahead[i])
	}
	r.ctl = bufio.NewReaderSize(r.conns[0], liveBufferBytes)
	r.conv.r = r.ctl
	var data io.Reader = r.ctl
	if len(r.conns) > 1 {
		rs := []io.Reader{r.ctl}
		for _, c := range r.conns[1:] {
			rs = append(rs, bufio.NewReaderSize(c, liveBufferBytes))
		}
		data = newStripeReader(rs)
	}
	if err := r.openStream(data, h); err != nil {
		return err
	}
	r.tally.begin(r.rd.Metadata(), r.wire(), r.since())
	if err := r.apply(); err != nil {
		return err
	}
	// Nothing follows the stream until this side says it is ready: stop
	// reading ahead, so that a long restore cannot trip a read deadline.
	stopReadAhead(r.ahead)
	r.enter(migrate.PhaseRestore)
	if err := r.restore(); err != nil {
		// The source waits for ready: it learns why.
		return r.refuse(err)
	}
	if err := r.conv.write(msgReady, ready{StreamBytes: r.rd.Offset()}); err != nil {
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
	r.cfg.Lock.Lock()
	r.claim.Release()
	err = r.in.SetThrottle(c.Throttle)
	if err == nil && c.Resume {
		err = r.in.Resume()
	}
	ack := resumed{Running: r.in.State() == vgpu.VMRunning, Throttle: r.in.Throttle()}
	r.cfg.Lock.Unlock()
	if err != nil {
		// The source, not hearing back, keeps its copy paused.
		return wrap(migrate.ErrDestination, err)
	}
	if err := r.conv.write(msgResumed, ack); err != nil && r.cfg.Logger != nil {
		// The VM runs here; the source, not hearing it, keeps its copy
		// paused and reports the outcome in doubt.
		r.cfg.Logger.Warn("migrate: acknowledging the resume", "vm", r.rep.VM, "error", err)
	}
	return nil
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
	r.streamID = r.conv.t.streamID(h.StreamID)
	r.rep.VM, r.rep.Profiles, r.prog.vm = h.Spec.ID, h.Spec.Profiles, h.Spec.ID
	r.rep.Source, r.rep.Mode = peerText(h.Source, maxPeerNameBytes), migrate.Mode(h.Mode)
	switch {
	case r.rep.Mode != migrate.PreCopy && r.rep.Mode != migrate.Legacy:
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

// openStream starts reading the checkpoint stream and checks that it
// declares the VM the handshake announced.
func (r *receiver) openStream(data io.Reader, h hello) error {
	opts := checkpoint.ReaderOptions{Limits: r.lim}
	if r.cfg.EncryptionKey != nil {
		opts.Encryption, opts.Key = checkpoint.EncryptionRequired, r.conv.t.keys.stream
	}
	var err error
	if r.rd, err = checkpoint.NewReader(data, opts); err != nil {
		return wrap(migrate.ErrStream, err)
	}
	regs := append([]*memory.Region{r.in.RAM()}, r.in.Framebuffers()...)
	meta := r.rd.Metadata()
	if meta.VMID != h.Spec.ID || meta.GPUModel != h.Spec.GPUModel || !slices.Equal(meta.Profiles, h.Spec.Profiles) || len(meta.Regions) != len(regs) {
		return fmt.Errorf("%w: the stream declares VM %q (%s %v, %d regions), the handshake %q (%s %v, %d regions)", migrate.ErrStream,
			meta.VMID, meta.GPUModel, meta.Profiles, len(meta.Regions), h.Spec.ID, h.Spec.GPUModel, h.Spec.Profiles, len(regs))
	}
	refs := make([]checkpoint.RegionRef, len(regs))
	for i, reg := range regs {
		// The handshake sized and seeded the regions; a stream that
		// declares them otherwise is not the VM the hello announced.
		if got, want := meta.Regions[i], checkpoint.RegionInfoOf(uint32(i), reg); got != want {
			return fmt.Errorf("%w: the stream declares region %d as %+v, the handshake as %+v", migrate.ErrStream, i, got, want)
		}
		refs[i] = checkpoint.RegionRef{ID: uint32(i), Region: reg}
	}
	// What the metadata does not declare — the guest OS footprint, the
	// batch size, the source, the mode — the stream's id vouches for: it
	// was drawn from the handshake, the hello as the source wrote it
	// included.
	if r.rd.Header().StreamID != r.streamID {
		return fmt.Errorf("%w: the stream's id is not this migration's: another hello or another migration", migrate.ErrAuthentication)
	}
	if r.ap, err = checkpoint.NewApplier(r.rd, refs); err != nil {
		return wrap(migrate.ErrStream, err)
	}
	r.ap.SetDigestWorkers(r.cfg.DigestWorkers)
	return nil
}

// apply applies records until the end of the stream.
func (r *receiver) apply() error {
	round := 0
	for {
		t, err := r.ap.Step()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return wrap(migrate.ErrStream, err)
		}
		switch t {
		case checkpoint.RecordEndRound:
			r.tally.endRound(r.wire(), r.since())
			r.prog.emit(migrate.Event{Kind: migrate.RoundEnded, At: r.since(), Phase: r.phase, Round: round, WireBytes: r.wire()})
			round++
		case checkpoint.RecordPageBatch:
			r.tally.batch(r.rd.Batch(), r.wire(), r.since())
			r.prog.bytes(r.phase, round, r.wire())
		case checkpoint.RecordDeviceState:
			r.phase = migrate.PhaseDeviceState
		}
	}
}

// restore commits the stream — the digests checked — and restores the
// devices.
func (r *receiver) restore() error {
	if err := r.ap.Commit(); err != nil {
		return wrap(migrate.ErrStream, err)
	}
	states, err := migrate.DeviceStates(r.ap.DeviceStates(), len(r.in.Framebuffers()))
	if err != nil {
		return err
	}
	// The digests Commit computed from this side's own regions, which it
	// checked against the stream's.
	for _, d := range r.ap.RegionDigests() {
		r.rep.RegionDigests = append(r.rep.RegionDigests, migrate.Digest(d.Digest))
	}
	for _, ds := range r.ap.DeviceStates() {
		r.rep.DeviceStateBytes += int64(len(ds.Data))
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
	if r.rd == nil {
		return 0
	}
	return r.rd.Offset()
}

// fail gives the VM up, so the host holds nothing of it.
func (r *receiver) fail(cause error) *migrate.Report {
	cause = liveCause(r.ctx, r.conns, cause)
	r.conns.closeAll()
	if r.ap != nil {
		r.ap.Abort()
	}
	if r.rd != nil {
		_ = r.rd.Close()
	}
	if r.in != nil && r.handover.OnFailure() == migrate.Discard {
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
