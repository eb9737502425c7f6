package checkpoint

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vgpusim/vgpusim/memory"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// A migration may carry its pages over several streams at once, one per
// connection, as QEMU's multifd channels and vMotion's parallel streams
// do. Each stream is a whole stream of this format — its own header,
// metadata, chain of check values and tally — so nothing serializes them:
// a ParallelApplier reads every stream on a goroutine of its own and hands
// the page batches to workers that decode and apply them in any order.
//
// Order matters only where a page is sent twice: a page re-sent in a later
// round must not be overwritten by its older copy. A round sends each page
// at most once, over all the streams together, so the end-of-round records
// are the barrier: a stream that reaches the end of a round waits until its
// own batches of the round are applied and every other stream has ended
// the round too, before it reads on. What comes after the last end of
// round — the final pages and the device states — is one more such
// segment, ended by the end-of-stream records.

// ParallelOptions configures a ParallelApplier.
type ParallelOptions struct {
	// Workers is the number of goroutines that decode and apply page
	// batches; 0 means 1.
	Workers int
	// InFlight bounds the page batch records read and not yet applied,
	// over all the streams; 0 means 2*Workers plus one per stream, and
	// fewer than one per stream means one per stream: a stream takes its
	// slot before it reads a record, so that with fewer slots than
	// streams, the streams blocked reading (their senders writing to
	// another stream first) could hold them all, and the stream that has
	// data none. Each
	// holds a record buffer (at most Limits.MaxRecordBytes, a batch's
	// size in practice) and a worker's decoder holds one more batch: this
	// is the destination's memory besides the regions. A stream whose
	// batches are all in flight is not read until one is applied, so a
	// fast sender is held back by the connection's flow control.
	InFlight int
	// DigestWorkers hash each destination region when the streams have
	// ended (memory.Region.DigestParallel).
	DigestWorkers int
	// Stop, if set, is called once, on the first failure, from the
	// goroutine that met it, so that reads blocked on the other streams
	// return: a caller on network connections closes them.
	Stop func()
	// Applied, if set, is told of each record applied, one call at a
	// time, from the ParallelApplier's goroutines. It must not block.
	Applied func(Applied)
	// Continue says the streams continue others into the same regions,
	// as NewContinuingApplier's stream does: the regions are not
	// scrubbed first, and keep what they hold beside what these streams
	// send. Nor are they scrubbed on a failure or by Abort: they may hold
	// a VM that runs on them meanwhile (a post-copy's), which is the
	// caller's to stop and dispose of.
	Continue bool
	// Accept, if set, is asked about each page batch before its pages
	// are stored: region's pages indexes (in increasing order; the
	// slice is the applier's, valid during the call only). An error
	// refuses the batch, stores none of it, and fails the streams
	// (ErrMalformed, wrapping it): a post-copy's destination refuses a
	// page it did not ask for, or one that came already, before it
	// overwrites what the VM wrote there. It is called from the workers,
	// several at once, and must not block.
	Accept func(region uint32, indexes []int) error
}

// Applied is what a ParallelApplier tells of a record it applied.
type Applied struct {
	// Stream is the index of the stream that carried the record; -1 for
	// the end of a round, which the streams pass together.
	Stream int
	// Type is the record's type: a page batch, a device state, an end
	// of round (once, when every stream has ended the round) or an end
	// of stream (one per stream).
	Type RecordType
	// Round is the round a RecordEndRound ended.
	Round int
	// Region, Pages and ZeroPages describe a page batch.
	Region           uint32
	Pages, ZeroPages int
	// Indexes are a page batch's pages, in increasing order: the pages
	// stored by the time Applied is called. The slice is the applier's,
	// valid during the call only.
	Indexes []int
	// WireBytes counts the bytes read from all the streams so far.
	WireBytes int64
}

// ParallelStream is one of the streams of a ParallelApplier.
type ParallelStream struct {
	// R is where the stream is read from. A ParallelApplier reads each
	// record header and each payload with one call; a connection is best
	// wrapped in a bufio.Reader. It never reads past the stream's
	// end-of-stream record.
	R io.Reader
	// Key is the stream's key, if it is encrypted: every stream has its
	// own, since the nonces of two streams under one key would repeat.
	Key []byte
}

// ParallelApplier applies several streams of one VM, written side by side
// (see the comment at the top of this file), to destination regions, on
// several goroutines. It keeps every promise of Applier: a page is applied
// only after its record's check value and authentication verified; a
// failure, or Abort, scrubs every destination region; Commit succeeds only
// after every stream's end has been read and verified, the regions'
// content digests included. Besides, every stream must declare the same
// metadata and codec, and carry the same number of rounds.
//
// Run is called once; the other methods are safe to call after it
// returned, and Abort at any time before Commit from the goroutine that
// calls Run or after it returned.
type ParallelApplier struct {
	opts    ParallelOptions
	streams []*parallelStream
	meta    *Metadata
	dst     []*memory.Region
	jobs    chan *batchJob
	sem     *semaphore.Weighted
	bufs    chan []byte // record buffers given back by the workers
	warmReq chan struct{}
	wire    atomic.Int64
	// applied counts the page batches applied; warmedAt is its value at
	// the last digest warm-up.
	applied, warmedAt atomic.Int64
	// beforeFinish, if set, runs as the streams' joint check begins: a
	// test cancels Run's ctx there.
	beforeFinish func()

	mu      sync.Mutex // guards what follows
	state   applierState
	err     error
	running bool
	stopped bool
	rounds  roundBarrier
	devices []DeviceState
	digests []RegionDigest

	observeMu sync.Mutex
}

// NewParallelApplier reads the header and metadata of every stream, which
// must agree, binds the destination regions to the metadata as
// NewApplier does, and scrubs them (unless popts.Continue). opts' Key and Encryption mode apply to
// every stream, each with its own key: streams[i].Key overrides opts.Key.
func NewParallelApplier(streams []ParallelStream, opts ReaderOptions, dst []RegionRef, popts ParallelOptions) (*ParallelApplier, error) {
	if len(streams) == 0 {
		return nil, invalid("no streams")
	}
	if popts.Workers < 0 || popts.InFlight < 0 {
		return nil, invalid("negative workers (%d) or records in flight (%d)", popts.Workers, popts.InFlight)
	}
	popts.Workers = max(popts.Workers, 1)
	if popts.InFlight == 0 {
		popts.InFlight = 2*popts.Workers + len(streams)
	}
	popts.InFlight = max(popts.InFlight, len(streams))
	p := &ParallelApplier{opts: popts, jobs: make(chan *batchJob, popts.InFlight),
		sem: semaphore.NewWeighted(int64(popts.InFlight)), bufs: make(chan []byte, popts.InFlight), warmReq: make(chan struct{}, 1)}
	for i, st := range streams {
		o := opts
		if st.Key != nil {
			o.Key = st.Key
		}
		rd, err := NewReader(st.R, o)
		if err != nil {
			return nil, err
		}
		s := &parallelStream{p: p, index: i, rd: rd}
		p.streams = append(p.streams, s)
		if i == 0 {
			continue
		}
		first := p.streams[0].rd
		if !sameMetadata(first.Metadata(), rd.Metadata()) {
			return nil, newError(ErrMalformed, rd.Offset(), 0, "stream %d declares other metadata than stream 0", i)
		}
		if h, h0 := rd.Header(), first.Header(); h.Codec != h0.Codec || h.Encrypted != h0.Encrypted || h.Minor != h0.Minor {
			return nil, newError(ErrMalformed, 0, -1, "stream %d's header (%v, encrypted %v, minor %d) differs from stream 0's (%v, %v, %d)",
				i, h.Codec, h.Encrypted, h.Minor, h0.Codec, h0.Encrypted, h0.Minor)
		}
	}
	p.meta = p.streams[0].rd.Metadata()
	for _, s := range p.streams {
		p.wire.Add(s.rd.Offset())
	}
	var err error
	if p.dst, err = bindRegions(p.meta, dst, !popts.Continue); err != nil {
		return nil, err
	}
	p.rounds.reset(len(streams))
	return p, nil
}

// sameMetadata reports whether two streams declare the same VM.
func sameMetadata(a, b *Metadata) bool {
	return a.VMID == b.VMID && a.GPUModel == b.GPUModel && slices.Equal(a.Profiles, b.Profiles) && slices.Equal(a.Regions, b.Regions)
}

// Metadata returns the metadata every stream declared.
func (p *ParallelApplier) Metadata() *Metadata { return p.meta }

// Streams returns the number of streams.
func (p *ParallelApplier) Streams() int { return len(p.streams) }

// Header returns the header of stream i, or the zero Header if there is
// no stream i.
func (p *ParallelApplier) Header(i int) Header {
	if i < 0 || i >= len(p.streams) {
		return Header{}
	}
	return p.streams[i].rd.Header()
}

// Offset returns the bytes read from all the streams so far; it may be
// called from any goroutine.
func (p *ParallelApplier) Offset() int64 { return p.wire.Load() }

// Run reads and applies every stream to its end, then checks the regions'
// content digests. It returns the first failure, after every goroutine it
// started has ended, the destination regions scrubbed (but with
// ParallelOptions.Continue). A ctx done stops
// it between records (a read in progress ends as the caller's Stop or the
// reader's own deadline makes it).
func (p *ParallelApplier) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.state != applying || p.stopped || p.running {
		err := p.err
		p.mu.Unlock()
		if err == nil {
			err = newError(ErrState, p.Offset(), -1, "Run called twice")
		}
		return err
	}
	p.running = true
	p.mu.Unlock()
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The caller's ctx done fails the streams, and stops them, as a
	// failure does; Run's own cancel, at its end, does not.
	stop := context.AfterFunc(parent, func() { p.fail(parent.Err(), cancel) })
	defer stop()

	var workers errgroup.Group
	for range p.opts.Workers {
		workers.Go(func() error { p.work(ctx, cancel); return nil })
	}
	workers.Go(func() error { p.warm(ctx); return nil })
	var streams errgroup.Group
	for _, s := range p.streams {
		streams.Go(func() error {
			if err := s.run(ctx); err != nil {
				// A batch of the stream in flight that failed came
				// first, unless it was only let go because of the
				// stop this failure caused.
				if earlier := s.drain(); earlier != nil && (!stopped(earlier) || stopped(err)) {
					err = earlier
				}
				if stopped(err) && p.isStopped() && parent.Err() == nil {
					// Stopped by a failure elsewhere, which the
					// failed batch's stream reports: the cancel
					// it caused is not the cause. (A reader's own
					// error that wraps a cancellation, before any
					// stop, is a failure like any other.)
					return nil
				}
				p.fail(err, cancel)
			}
			return nil
		})
	}
	_ = streams.Wait()
	close(p.jobs)
	close(p.warmReq)
	_ = workers.Wait()
	if p.Err() == nil && ctx.Err() != nil {
		// Stopped, with no stream saying why: not a success.
		p.fail(ctx.Err(), cancel)
	}
	if p.Err() == nil {
		if p.beforeFinish != nil {
			p.beforeFinish()
		}
		if err := p.finish(); err != nil {
			p.fail(err, cancel)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		// Every goroutine has let go of the regions.
		if !p.opts.Continue {
			for _, r := range p.dst {
				_ = r.Scrub()
			}
		}
		return p.err
	}
	p.state = verified
	return nil
}

// isStopped reports whether stop was called.
func (p *ParallelApplier) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// stopped reports whether err says only that the applier was stopped: a
// batch let go, or a stream that stopped waiting, after a failure.
func stopped(err error) bool { return errors.Is(err, context.Canceled) }

// fail records err as the failure unless one came first, and stops the
// other goroutines; Run scrubs the destinations once they have ended (but
// with ParallelOptions.Continue). It
// returns the failure. After Run succeeded it does nothing.
func (p *ParallelApplier) fail(err error, cancel context.CancelFunc) error {
	p.mu.Lock()
	if p.state.succeeded() {
		p.mu.Unlock()
		return nil
	}
	if p.err == nil {
		p.err, p.state, p.devices = err, failed, nil
	}
	err = p.err
	p.mu.Unlock()
	p.stop(cancel)
	return err
}

// stop stops every goroutine of Run, once: the workers and the streams
// between records, and, through the caller's Stop, the reads in progress.
// A worker that fails calls it alone: its stream reports the failure, in
// the stream's order.
func (p *ParallelApplier) stop(cancel context.CancelFunc) {
	p.mu.Lock()
	first := !p.stopped
	p.stopped = true
	p.mu.Unlock()
	if first {
		cancel()
		p.rounds.abort()
		if p.opts.Stop != nil {
			p.opts.Stop()
		}
	}
}

// finish checks what only the streams together say: that they carried
// the same rounds, no device state twice and no region digest twice, and
// that the destination regions match the digests.
func (p *ParallelApplier) finish() error {
	var digests []RegionDigest
	var devices []DeviceState
	rounds := p.streams[0].rd.StreamEnd().Rounds
	for _, s := range p.streams {
		end := s.rd.StreamEnd()
		if end.Rounds != rounds {
			return newError(ErrMalformed, p.Offset(), -1, "stream %d has %d rounds, stream 0 has %d", s.index, end.Rounds, rounds)
		}
		for _, d := range end.RegionDigests {
			if slices.ContainsFunc(digests, func(o RegionDigest) bool { return o.Region == d.Region }) {
				return newError(ErrMalformed, p.Offset(), -1, "two digests of region %d", d.Region)
			}
			digests = append(digests, d)
		}
		devices = append(devices, s.devices...)
	}
	seen := make(map[uint32]bool, len(devices))
	for _, ds := range devices {
		if seen[ds.Device] {
			return newError(ErrMalformed, p.Offset(), -1, "two states of device %d", ds.Device)
		}
		seen[ds.Device] = true
	}
	got, err := verifyRegionDigests(p.meta, p.dst, digests, p.opts.DigestWorkers, p.Offset())
	// Under the lock: a cancel of the caller's ctx may fail Run at any
	// moment, and fail drops the device states.
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.devices, p.digests = devices, got
	}
	return err
}

// Commit hands the destination regions back to the caller, to run the VM
// on. It fails with ErrState unless Run succeeded.
func (p *ParallelApplier) Commit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case verified:
		p.state = committed
		return nil
	case committed:
		return nil
	case failed:
		return newError(ErrState, p.Offset(), -1, "stream failed").withCause(p.err)
	}
	return newError(ErrState, p.Offset(), -1, "streams not verified")
}

// Abort gives up the streams: the destination regions are scrubbed (but
// with ParallelOptions.Continue). It does nothing after Commit, and is
// harmless after a failure. It must not be called while Run runs.
func (p *ParallelApplier) Abort() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == committed || p.state == failed {
		return
	}
	p.state, p.err, p.devices = failed, newError(ErrState, p.Offset(), -1, "aborted"), nil
	for _, r := range p.dst {
		if p.opts.Continue {
			break
		}
		_ = r.Scrub()
	}
}

// Err returns the failure that stopped the ParallelApplier, if any.
func (p *ParallelApplier) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// DeviceStates returns the device states the streams carried, stream by
// stream in stream order, once Run succeeded; nil before or after a
// failure. The blobs are copies the caller owns.
func (p *ParallelApplier) DeviceStates() []DeviceState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.state.succeeded() {
		return nil
	}
	return slices.Clone(p.devices)
}

// RegionDigests returns the digests of the destination's regions, hashed
// from their contents once Run succeeded, not copied from the streams;
// nil before or after a failure.
func (p *ParallelApplier) RegionDigests() []RegionDigest {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.state.succeeded() {
		return nil
	}
	return slices.Clone(p.digests)
}

// Close releases the streams' decoders and the record buffers kept for
// reuse. It does not close the readers.
func (p *ParallelApplier) Close() error {
	for _, s := range p.streams {
		_ = s.rd.Close()
	}
	for {
		select {
		case <-p.bufs:
		default:
			return nil
		}
	}
}

// requestWarm asks the warming goroutine to bring the destination
// regions' digests up to date, so that the check at the end of the
// streams hashes only the pages sent after the last round: the final
// ones, sent while the VM is stopped. The last stream to reach a round's
// end asks; nothing waits for it but the end of the streams, and the
// digests are the memory package's, safe beside the workers' stores.
func (p *ParallelApplier) requestWarm() {
	select {
	case p.warmReq <- struct{}{}:
	default: // one is pending already
	}
}

// warm runs warmDigests on request until the requests end.
func (p *ParallelApplier) warm(ctx context.Context) {
	for range p.warmReq {
		if ctx.Err() == nil {
			p.warmDigests()
		}
	}
}

// warmDigests brings the destination regions' digests up to date.
func (p *ParallelApplier) warmDigests() {
	// A round that applied nothing changed nothing: a stream of empty
	// rounds costs no hashing.
	n, prev := p.applied.Load(), p.warmedAt.Load()
	if n == prev || !p.warmedAt.CompareAndSwap(prev, n) {
		return
	}
	for _, r := range p.dst {
		_, _ = r.DigestParallel(p.opts.DigestWorkers) // a failure shows again at the end
	}
}

// observe hands a to the caller's Applied, one call at a time.
func (p *ParallelApplier) observe(a Applied) {
	if p.opts.Applied == nil {
		return
	}
	p.observeMu.Lock()
	defer p.observeMu.Unlock()
	a.WireBytes = p.Offset()
	p.opts.Applied(a)
}
