package live

import (
	"bufio"
	"context"
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
// than the source's, or an encryption mode its key does not allow),
// applies the stream as it arrives, checks the regions' digests, restores
// the devices, and, when the source commits, resumes the VM if it ran at
// the source. It returns the VM, which then belongs to host, and the
// destination's report, which holds what the destination saw (see Report).
//
// Until the source commits, any failure — a bad or truncated stream, a
// connection closed or stalled past the timeout, a canceled ctx — gives the
// VM up: its windows are scrubbed and freed and host holds nothing of it;
// Receive closes the connections so the source learns at once, and returns
// a *PhaseError. The incoming VM has no workload; the caller gives it one.
func Receive(ctx context.Context, host *vgpu.Host, conns []io.ReadWriter, cfg ReceiveConfig) (*vgpu.VM, *migrate.Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	if host == nil || len(conns) == 0 || len(conns) > maxConnections {
		return nil, nil, fmt.Errorf("%w: Receive needs a host and 1 to %d connections", migrate.ErrConfig, maxConnections)
	}
	link := linkName(conns)
	// The connections are read ahead while the stream arrives; the reads
	// stop, here too if it fails, before Receive lets them go.
	ahead := make([]io.ReadWriter, len(conns))
	for i, c := range conns {
		ahead[i] = withReadAhead(c)
	}
	defer stopReadAhead(ahead)
	r := &receiver{cfg: cfg, host: host, conns: newConnSet(ahead, cfg.Timeout), ahead: ahead, ctx: ctx, start: cfg.Clock.Now()}
	r.prog = reporter{fn: cfg.Progress, log: cfg.Logger, clock: cfg.Clock, start: r.start}
	stop := context.AfterFunc(ctx, r.conns.closeAll)
	defer stop()
	r.rep.Destination, r.rep.Fidelity, r.rep.Live, r.rep.Link = host.Name(), migrate.Bytes, true, link
	r.phase = migrate.PhaseSetup
	if err := r.run(); err != nil {
		return nil, r.fail(err), r.err
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
	ctx   context.Context
	start time.Time
	prog  reporter
	phase migrate.Phase
	rep   migrate.Report
	err   error

	lim   checkpoint.Limits // the reader's, set by the handshake
	ctl   *bufio.Reader
	rd    *checkpoint.Reader
	ap    *checkpoint.Applier
	in    *vgpu.VM // incoming, then resumed
	tally recvTally
}

func (r *receiver) run() error {
	c0 := r.conns[0]
	r.ctl = bufio.NewReaderSize(c0, liveBufferBytes)
	h, err := r.handshake()
	if err != nil {
		return err
	}
	r.phase = migrate.PhasePreCopy
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
		return err
	}
	if err := writeMsg(c0, msgReady, nil); err != nil {
		return err
	}
	r.enter(migrate.PhaseResume)
	var c commit
	if err := readMsg(r.ctl, msgCommit, &c); err != nil {
		return err
	}
	// From here on the VM is ours: the source has let it go.
	r.cfg.Lock.Lock()
	err = r.in.SetThrottle(c.Throttle)
	if err == nil && c.Resume {
		err = r.in.Resume()
	}
	r.cfg.Lock.Unlock()
	if err != nil {
		return wrap(migrate.ErrDestination, err)
	}
	if err := writeMsg(c0, msgResumed, nil); err != nil && r.cfg.Logger != nil {
		// The VM runs here; the source, not hearing it, keeps its copy
		// paused and reports the outcome in doubt.
		r.cfg.Logger.Warn("migrate: acknowledging the resume", "vm", r.rep.VM, "error", err)
	}
	return nil
}

// handshake reads the source's declaration and answers it: the VM is
// reserved on the host, or refused.
func (r *receiver) handshake() (hello, error) {
	var h hello
	major, err := readPreamble(r.ctl)
	if err != nil {
		return h, err
	}
	if major != ProtocolMajor {
		return h, r.refuse(fmt.Errorf("%w: live protocol version %d, this destination speaks %d", migrate.ErrIncompatible, major, ProtocolMajor))
	}
	if err := readMsg(r.ctl, msgHello, &h); err != nil {
		return h, err
	}
	r.rep.VM, r.rep.Profiles, r.prog.vm = h.Spec.ID, h.Spec.Profiles, h.Spec.ID
	r.rep.Source, r.rep.Mode = peerText(h.Source, maxPeerNameBytes), migrate.Mode(h.Mode)
	switch {
	case r.rep.Mode != migrate.PreCopy && r.rep.Mode != migrate.Legacy:
		return h, r.refuse(fmt.Errorf("%w: unknown migration mode %d", migrate.ErrConfig, h.Mode))
	case h.Connections != len(r.conns):
		return h, r.refuse(fmt.Errorf("%w: the source spreads the stream over %d connections, the destination has %d", migrate.ErrConfig, h.Connections, len(r.conns)))
	case h.Encrypted != (r.cfg.EncryptionKey != nil):
		return h, r.refuse(fmt.Errorf("%w: the source encrypts: %v; the destination requires encryption: %v", migrate.ErrConfig, h.Encrypted, r.cfg.EncryptionKey != nil))
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
	return h, writeMsg(r.conns[0], msgAccept, accept{Host: r.host.Name()})
}

// refuse tells the source why, and returns the reason as the error.
func (r *receiver) refuse(cause error) error {
	_ = writeMsg(r.conns[0], msgRefuse, refusalOf(cause))
	return cause
}

// openStream starts reading the checkpoint stream and checks that it
// declares the VM the handshake announced.
func (r *receiver) openStream(data io.Reader, h hello) error {
	opts := checkpoint.ReaderOptions{Limits: r.lim}
	if r.cfg.EncryptionKey != nil {
		opts.Encryption, opts.Key = checkpoint.EncryptionRequired, r.cfg.EncryptionKey
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
	err = r.in.Restore(states)
	r.cfg.Lock.Unlock()
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
	if r.in != nil {
		// Destroy, not Abort: after the restore the VM is no longer
		// incoming, and it must go all the same.
		r.cfg.Lock.Lock()
		_ = r.in.Destroy()
		r.cfg.Lock.Unlock()
		r.in = nil
	}
	r.err = &migrate.PhaseError{VM: r.rep.VM, Phase: r.phase, Err: cause}
	rep := r.closeReport(migrate.PhaseFailed)
	r.prog.emit(migrate.Event{Kind: migrate.Failed, At: r.since(), Phase: r.phase, Round: -1, WireBytes: r.wire(), Err: r.err, Detail: r.err.Error()})
	return rep
}
