package checkpoint

import (
	"context"
	"io"
	"sync"
)

// parallelStream is one stream of a ParallelApplier, read on its own
// goroutine. The record layer (length, sequence, check value,
// authentication) runs there, in order; page batches go to the workers,
// and their results are counted in the stream's tally in stream order, as
// a Reader's are: the oldest as soon as more than InFlight wait, all of
// them before any record of another kind.
type parallelStream struct {
	p     *ParallelApplier
	index int
	rd    *Reader
	// pending are the stream's batches handed to workers and not yet
	// counted, in stream order: at most InFlight+1.
	pending []*batchResult
	spare   []*batchResult
	devices []DeviceState
}

// batchResult is what a worker made of one page batch; done says it is
// there.
type batchResult struct {
	sum         uint64
	pages, zero int
	err         error
	done        chan struct{}
}

// batchJob is a page batch record handed to a worker, and the buffer its
// payload lives in.
type batchJob struct {
	s   *parallelStream
	rec Record
	buf []byte
	res *batchResult
}

// run reads the stream to its end-of-stream record.
func (s *parallelStream) run(ctx context.Context) error {
	p, rr := s.p, s.rd.rr
	for {
		// A slot of the records in flight is taken before the record
		// is read, so that the stream waits, unread, while the workers
		// are behind.
		if err := p.sem.Acquire(ctx, 1); err != nil {
			return err
		}
		before := rr.Offset()
		rec, err := rr.Next()
		p.wire.Add(rr.Offset() - before)
		if err != nil {
			p.sem.Release(1)
			if err == io.EOF {
				err = newError(ErrTruncated, rr.Offset(), -1, "stream %d ends before its end-of-stream record", s.index)
			}
			return err
		}
		isBatch, err := batchRecord(rec, rr.Header())
		if err != nil {
			p.sem.Release(1)
			return err
		}
		if isBatch {
			if err := s.dispatch(ctx, rec); err != nil {
				return err
			}
			continue
		}
		p.sem.Release(1)
		if err := s.count(0); err != nil {
			return err
		}
		if (rec.Type == RecordPageRuns || rec.Type == RecordAttachment) && rr.Header().Minor >= minorSnapshot {
			// A suspend file's records: a migration's streams carry
			// pages as batches, which the workers apply. In an older
			// stream, control refuses them as its version would.
			return newError(ErrMalformed, rec.Offset, int64(rec.Seq), "%v record in one of several streams", rec.Type)
		}
		skip, err := s.rd.control(rec)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		switch rec.Type {
		case RecordDeviceState:
			ds := s.rd.DeviceState()
			ds.Data = append([]byte(nil), ds.Data...)
			s.devices = append(s.devices, ds)
			p.observe(Applied{Stream: s.index, Type: rec.Type})
		case RecordEndRound:
			last, err := p.rounds.endRound(s.index, p)
			if err != nil {
				return err
			}
			if last {
				p.requestWarm()
			}
		case RecordEndStream:
			p.rounds.finish(s.index)
			p.observe(Applied{Stream: s.index, Type: rec.Type})
			return nil
		}
	}
}

// dispatch hands page batch rec to a worker, with the buffer its payload
// lives in; the record reader reads on into a buffer a worker gave back.
func (s *parallelStream) dispatch(ctx context.Context, rec Record) error {
	var next []byte
	select {
	case next = <-s.p.bufs:
	default:
	}
	j := &batchJob{s: s, rec: rec, buf: s.rd.rr.takeBuffer(next), res: s.result()}
	s.pending = append(s.pending, j.res)
	select {
	case s.p.jobs <- j:
	case <-ctx.Done():
		j.res.err = ctx.Err()
		j.res.done <- struct{}{}
		s.p.sem.Release(1)
		return ctx.Err()
	}
	// The results wait for their turn to be counted; at most InFlight
	// of them, so that a stream of tiny batches holds no more.
	return s.count(s.p.opts.InFlight)
}

// result returns a result to fill, reusing one counted already.
func (s *parallelStream) result() *batchResult {
	if n := len(s.spare); n > 0 {
		r := s.spare[n-1]
		s.spare = s.spare[:n-1]
		r.sum, r.pages, r.zero, r.err = 0, 0, 0, nil
		return r
	}
	return &batchResult{done: make(chan struct{}, 1)}
}

// count counts the oldest pending results in the stream's tally, in
// stream order, waiting for each, until at most keep are left; the first
// that failed is the stream's failure.
func (s *parallelStream) count(keep int) error {
	for len(s.pending) > keep {
		r := s.pending[0]
		<-r.done
		s.pending = s.pending[1:]
		s.spare = append(s.spare, r)
		if r.err != nil {
			return r.err
		}
		s.rd.tally.add(r.sum, r.pages, r.zero)
	}
	if len(s.pending) == 0 {
		s.pending = s.pending[:0:0] // let the backing array go back to the start
	}
	return nil
}

// drain waits for the stream's batches in flight and returns the first
// of them, in stream order, that failed.
func (s *parallelStream) drain() error {
	var first error
	for _, r := range s.pending {
		<-r.done
		// A batch let go because the applier was stopped says less
		// than one whose failure stopped it.
		if first == nil || stopped(first) && r.err != nil && !stopped(r.err) {
			first = r.err
		}
	}
	s.pending = nil
	return first
}

// work decodes and applies page batches until the jobs end. A failure
// stops the streams; the failed batch's stream reports it, in its order.
// After a stop a worker only lets the batches go, so that no stream
// waits on one forever.
func (p *ParallelApplier) work(ctx context.Context, cancel context.CancelFunc) {
	bd := &BatchDecoder{}
	defer bd.Close()
	s0 := p.streams[0].rd
	reset := bd.Reset(s0.Header(), p.meta, s0.opts.Limits)
	for j := range p.jobs {
		switch {
		case reset != nil:
			j.res.err = reset
		case ctx.Err() != nil:
			j.res.err = ctx.Err()
		default:
			j.res.err = p.apply(bd, j)
		}
		if j.res.err != nil {
			p.stop(cancel)
		}
		select {
		case p.bufs <- j.buf:
		default:
		}
		j.buf = nil
		p.sem.Release(1)
		j.res.done <- struct{}{}
	}
}

// apply decodes the batch of j and stores its pages.
func (p *ParallelApplier) apply(bd *BatchDecoder, j *batchJob) error {
	b, err := bd.Decode(j.rec)
	if err != nil {
		return err
	}
	if p.opts.Accept != nil {
		if err := p.opts.Accept(b.Region, b.idx); err != nil {
			return newError(ErrMalformed, j.rec.Offset, int64(j.rec.Seq), "region %d: a batch its reader refuses", b.Region).withCause(err)
		}
	}
	if err := storeBatch(b, p.dst[b.region], &bd.page); err != nil {
		return storeError(err, j.rec.Offset, int64(j.rec.Seq), b.Region)
	}
	j.res.sum, j.res.pages, j.res.zero = b.Sum, b.Len(), b.ZeroPages()
	p.applied.Add(1)
	p.observe(Applied{Stream: j.s.index, Type: RecordPageBatch, Region: b.Region, Pages: b.Len(), ZeroPages: b.ZeroPages(), Indexes: b.idx})
	return nil
}

// roundBarrier holds each stream at the end of a round until every stream
// has ended it.
type roundBarrier struct {
	mu       sync.Mutex
	cond     sync.Cond
	ended    []int  // rounds each stream has ended
	finished []bool // whether each stream has ended
	aborted  bool
}

func (b *roundBarrier) reset(streams int) {
	b.cond.L = &b.mu
	b.ended, b.finished = make([]int, streams), make([]bool, streams)
}

// endRound counts the end of a round on stream i and waits for the other
// streams to end it. The last stream to arrive tells p's caller of the
// round before it wakes the others, so that no batch of the next round is
// told of first, and reports that it was the last.
func (b *roundBarrier) endRound(i int, p *ParallelApplier) (last bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended[i]++
	r := b.ended[i]
	for arriving := true; ; arriving = false {
		if b.aborted {
			return false, newError(ErrState, p.Offset(), -1, "stopped")
		}
		waiting := false
		for j, n := range b.ended {
			if n >= r {
				continue
			}
			if b.finished[j] {
				return false, newError(ErrMalformed, p.Offset(), -1, "stream %d ended after %d rounds, stream %d has more", j, n, i)
			}
			waiting = true
		}
		switch {
		case !waiting && arriving:
			// Every other stream was here first.
			p.observe(Applied{Stream: -1, Type: RecordEndRound, Round: r - 1})
			b.cond.Broadcast()
			return true, nil
		case !waiting:
			return false, nil
		}
		b.cond.Wait()
	}
}

// finish marks stream i ended, waking streams that wait for it.
func (b *roundBarrier) finish(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finished[i] = true
	b.cond.Broadcast()
}

// abort wakes every waiting stream, to fail.
func (b *roundBarrier) abort() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.aborted = true
	b.cond.Broadcast()
}
