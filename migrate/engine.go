package migrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

// ErrClosed reports a Copy on an Engine already closed. Such an error also
// wraps ErrConfig, since using a closed engine is the caller's mistake.
var ErrClosed = errors.New("migrate: engine closed")

// EngineConfig configures an Engine.
type EngineConfig struct {
	// Workers is the number of goroutines encoding batches; 0 means 1.
	// With 1, Copy encodes on the caller's goroutine and the engine starts
	// no goroutine at all, so a single-threaded caller (the simulated
	// mode) stays deterministic and cheap.
	Workers int
	// InFlight is the number of batches being encoded or waiting to be
	// written at once; 0 means 2*Workers, and it must be at least Workers
	// so that no worker is idle for want of a batch. It bounds memory:
	// each batch in flight owns one checkpoint.BatchEncoder and its
	// buffers, about 2 x BatchBytes.
	InFlight int
	// BatchBytes is the raw page bytes of one batch (zero pages
	// included); 0 means checkpoint.DefaultBatchBytes. It must hold at
	// least memory.MinPageSize; a batch of a region whose pages are larger
	// holds one page, as checkpoint.Writer's batches do.
	BatchBytes int
	// Level is the compression level of every batch, unless Chooser is
	// set; then it is only the level the encoders start at.
	Level checkpoint.Level
	// Chooser, if set, picks the level of each batch and is told what
	// each cost. The stream the batches go to must allow every level it
	// picks (checkpoint.Codec.Allows): a mixed stream
	// (checkpoint.WriterOptions.Mixed) allows them all. Without a
	// Chooser the engine never reads the clock.
	Chooser Chooser
	// Now is the clock a Chooser's encode times are taken on; nil means
	// the wall clock. The live mode passes its injected clock.
	Now func() time.Time
	// Filters are the page filters of every batch; the stream must
	// declare them (checkpoint.WriterOptions.Filters) unless they are
	// zero. A Delta cache is laid out by its owner (Reset) and told of
	// every page each Copy sends: a Copy that succeeds commits what it
	// sent (checkpoint.DeltaCache.Commit), one that fails or panics
	// discards it, so that the cache never claims a page the destination
	// may not hold. A destination applies the batches of one round in any
	// order and those of the next only after them (checkpoint's
	// ParallelApplier), so with a Delta cache a region is copied at most
	// once between two of the stream's end-of-round records: a delta
	// against a page sent earlier in the same round could arrive first,
	// and fail the stream (checkpoint.ErrDeltaBase).
	Filters checkpoint.PageFilters
}

// withDefaults fills in the zero fields and checks the result.
func (c EngineConfig) withDefaults() (EngineConfig, error) {
	if c.Workers < 0 || c.InFlight < 0 || c.BatchBytes < 0 {
		return c, fmt.Errorf("%w: engine: negative workers (%d), batches in flight (%d) or batch size (%d)",
			ErrConfig, c.Workers, c.InFlight, c.BatchBytes)
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.InFlight == 0 {
		c.InFlight = 2 * c.Workers
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = checkpoint.DefaultBatchBytes
	}
	switch {
	case c.InFlight < c.Workers:
		return c, fmt.Errorf("%w: engine: %d batches in flight for %d workers", ErrConfig, c.InFlight, c.Workers)
	case c.BatchBytes < memory.MinPageSize || c.BatchBytes > checkpoint.MaxBatchBytes:
		return c, fmt.Errorf("%w: engine: batch of %d bytes outside [%d, %d]",
			ErrConfig, c.BatchBytes, memory.MinPageSize, checkpoint.MaxBatchBytes)
	case c.Level > checkpoint.LevelS2:
		return c, fmt.Errorf("%w: engine: unknown level %v", ErrConfig, c.Level)
	}
	return c, nil
}

// BatchWriter takes encoded batches in stream order; *checkpoint.Writer
// satisfies it. The batch's payload is valid only during the call.
type BatchWriter interface {
	WriteBatch(checkpoint.EncodedBatch) error
}

// BatchQueue is a BatchWriter that may keep a batch after taking it, to
// write it later on a goroutine of its own: the live mode queues each
// batch to its connection's stream, so that the streams are framed, hashed
// and written side by side and no payload is copied. Copy hands a queue
// its batches with QueueBatch, in stream order, and keeps each batch's
// payload untouched until the queue calls the batch's done.
//
// A queue calls done exactly once for each batch it took, from any
// goroutine, when it no longer needs the payload: with nil once the batch
// is written, with the error of writing it otherwise. If QueueBatch
// returns an error it did not take the batch and does not call done; it
// must not panic once it took one. Copy returns only after every batch
// it queued is done.
type BatchQueue interface {
	BatchWriter
	QueueBatch(b checkpoint.EncodedBatch, done func(error)) error
}

// Engine encodes a region's pages into checkpoint page batches, on several
// goroutines if so configured, and hands them to a BatchWriter in page
// order. Whatever the number of workers, batches in flight or GOMAXPROCS,
// the batches are those checkpoint.Writer would cut and their bytes are
// the same.
//
// An Engine is reused from copy to copy so that, once its buffers have
// grown, a copy allocates nothing. It is not safe for concurrent use: one
// Copy at a time, and Close after the last.
type Engine struct {
	cfg EngineConfig
	// slots are the batches in flight, one encoder each. Only slot 0's
	// encoder is made up front; the others are made when first needed,
	// so that an engine whose copies are small holds little.
	slots []*engineSlot
	// free holds the indices of slots not in flight; only the caller's
	// goroutine touches it.
	free []int
	// order is the reorder ring: order[seq%InFlight] is the slot holding
	// finished batch seq, or -1. At most InFlight batches are in flight,
	// so their sequence numbers never collide in it.
	order []int
	// releases is the ring of slots a BatchQueue released: releases[seq%
	// InFlight] is the slot of batch seq, held until every batch before
	// it is released too, so that the Chooser is told of the batches in
	// order; or -1.
	releases []int
	// jobs carries slot indices to the workers, and done carries them
	// back once encoded; both are nil with one worker. released carries
	// the slots a BatchQueue is done with. Their buffers hold InFlight,
	// so no side ever blocks on a send.
	jobs, done, released chan int
	workers              sync.WaitGroup
	// encoding counts batches handed to workers and not yet taken back;
	// queued, batches handed to a BatchQueue and not yet released.
	encoding, queued int
	used             *memory.PageSet // scratch for Copy with a nil set
	closed           bool
	// afterEncode, if set (by tests), runs on the worker after each batch
	// is encoded, before the worker hands it back.
	afterEncode func()
}

// NewEngine returns an engine configured by cfg, its workers started and
// idle. An invalid cfg is an error wrapping ErrConfig.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	enc, err := checkpoint.NewBatchEncoder(cfg.Level)
	if err != nil {
		return nil, wrap(ErrConfig, err)
	}
	e := &Engine{
		cfg:      cfg,
		slots:    make([]*engineSlot, cfg.InFlight),
		free:     make([]int, 0, cfg.InFlight),
		order:    make([]int, cfg.InFlight),
		releases: make([]int, cfg.InFlight),
		used:     memory.NewPageSet(0),
	}
	e.released = make(chan int, cfg.InFlight)
	for i := range e.slots {
		s := &engineSlot{}
		// Made once, so that queuing a batch allocates nothing.
		s.release = func(err error) {
			s.writeErr = err
			e.released <- i
		}
		e.slots[i] = s
		e.order[i], e.releases[i] = -1, -1
	}
	enc.SetFilters(cfg.Filters)
	e.slots[0].enc = enc
	// Popped from the end: slot 0, whose encoder exists, goes first.
	for i := cfg.InFlight - 1; i >= 0; i-- {
		e.free = append(e.free, i)
	}
	if cfg.Workers > 1 {
		e.jobs = make(chan int, cfg.InFlight)
		e.done = make(chan int, cfg.InFlight)
		for range cfg.Workers {
			e.workers.Go(e.work)
		}
	}
	return e, nil
}

// Config returns the engine's configuration, its defaults filled in.
func (e *Engine) Config() EngineConfig { return e.cfg }

// Close stops the workers, waits for them to end and releases the
// encoders. Closing twice is harmless; a Copy after Close fails with
// ErrClosed.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	if e.jobs != nil {
		close(e.jobs)
		e.workers.Wait()
	}
	var errs []error
	for _, s := range e.slots {
		if s.enc != nil {
			errs = append(errs, s.enc.Close())
			s.enc = nil
		}
	}
	return errors.Join(errs...)
}

// Copy encodes pages of r, declared in the stream as region id: those in
// set, or, if set is nil, every page not in its initial state (zero at
// generation 0). A batch holds the next pages of set, as many as fit in
// BatchBytes and at least one, as checkpoint.Writer cuts them; Copy hands
// the batches to dst in page order, on the caller's goroutine. The
// Traffic it returns counts the pages and their raw bytes; its WireBytes
// are the payload bytes handed to dst, without the records' framing (nor
// the codec byte of a coded page batch record), which only dst knows. A
// dst that is a BatchQueue is given the batches with QueueBatch, and Copy
// returns once it is done with all of them.
//
// A failure to read r wraps ErrSource, one of dst wraps ErrStream and a
// ctx done wraps ErrCanceled; the first in batch order is returned (a
// queue's failure to write, which comes later, counts when it is told),
// after the batches before it were written and every worker has let go
// of r and set. The engine stays usable. set must not change during Copy.
func (e *Engine) Copy(ctx context.Context, dst BatchWriter, r *memory.Region, id uint32, set *memory.PageSet) (Traffic, error) {
	if e.closed {
		return Traffic{}, wrap(ErrConfig, ErrClosed)
	}
	if set == nil {
		if err := r.UsedPages(e.used); err != nil {
			return Traffic{}, wrap(ErrSource, err)
		}
		set = e.used
	}
	j := batchJob{r: r, set: set, id: id, pages: checkpoint.PagesPerBatch(e.cfg.BatchBytes, r.PageSize())}
	d := e.cfg.Filters.Delta
	if d == nil {
		return e.copy(ctx, dst, j)
	}
	committed := false
	defer func() {
		if !committed {
			d.Discard() // a failure, or a panic of dst's
		}
	}()
	tr, err := e.copy(ctx, dst, j)
	if err == nil {
		d.Commit()
		committed = true
	}
	return tr, err
}

// copy is Copy of the batches of j, serial or parallel.
func (e *Engine) copy(ctx context.Context, dst BatchWriter, j batchJob) (Traffic, error) {
	if _, queue := dst.(BatchQueue); e.jobs == nil && !queue {
		return e.copySerial(ctx, dst, j)
	}
	return e.copyParallel(ctx, dst, j)
}

// batchJob is one batch to encode: up to pages pages of set from first,
// read from r and declared as region id.
type batchJob struct {
	r     *memory.Region
	set   *memory.PageSet
	id    uint32
	first int
	pages int
}

// encode encodes j into enc, returning the batch and the first page of
// set after it (-1 if none). It reads every page once, straight into the
// encoder, which also tells zero pages.
func (j *batchJob) encode(enc *checkpoint.BatchEncoder) (checkpoint.EncodedBatch, int, error) {
	if err := enc.Begin(j.id, j.r.PageSize()); err != nil {
		return checkpoint.EncodedBatch{}, -1, err
	}
	p := j.first
	for n := 0; n < j.pages && p >= 0; n++ {
		if err := enc.AddFrom(j.r, p); err != nil {
			return checkpoint.EncodedBatch{}, -1, err
		}
		p = j.set.Next(p + 1)
	}
	b, err := enc.Finish()
	return b, p, err
}

// copySerial is Copy with one worker: the caller's goroutine encodes and
// writes each batch in turn with slot 0's encoder.
func (e *Engine) copySerial(ctx context.Context, dst BatchWriter, j batchJob) (Traffic, error) {
	var tr Traffic
	enc := e.slots[0].enc
	for j.first = j.set.Next(0); j.first >= 0; {
		if err := ctx.Err(); err != nil {
			return tr, wrap(ErrCanceled, err)
		}
		timed, err := e.choose(enc, &j)
		if err != nil {
			return tr, err
		}
		b, next, spent, err := j.timedEncode(enc, timed, e.cfg.Now)
		if err != nil {
			return tr, wrap(ErrSource, err)
		}
		tr.addBatch(b)
		if err := dst.WriteBatch(b); err != nil {
			return tr, wrap(ErrStream, err)
		}
		e.observe(b, spent)
		j.first = next
	}
	return tr, nil
}

// addBatch counts batch b: its pages, and its payload as wire bytes.
func (t *Traffic) addBatch(b checkpoint.EncodedBatch) {
	t.Pages += int64(b.Pages)
	t.ZeroPages += int64(b.ZeroPages)
	t.DeltaPages += int64(b.DeltaPages)
	t.UnchangedPages += int64(b.UnchangedPages)
	t.RawBytes += int64(b.RawBytes)
	t.WireBytes += b.PayloadBytes()
}
