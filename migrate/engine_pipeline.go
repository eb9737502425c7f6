package migrate

import (
	"context"
	"runtime"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
)

// engineSlot is one batch in flight: its encoder, the job the caller's
// goroutine gave it, and what the worker made of it. A slot belongs to the
// caller while free, to a worker from the send on jobs to the send on
// done, and to the caller again until its batch is written — or, given to
// a BatchQueue, to the queue until it calls release: its batch's payload
// aliases the encoder's buffers, so the slot is not reused before.
type engineSlot struct {
	enc   *checkpoint.BatchEncoder
	seq   int // the batch's place in the copy
	job   batchJob
	timed bool // the encode is timed, for the Chooser
	batch checkpoint.EncodedBatch
	spent time.Duration // encoding the batch took, if timed
	err   error         // a read failure, unwrapped
	// release is the done a BatchQueue is given with the slot's batch;
	// writeErr is what the queue told it.
	release  func(error)
	writeErr error
}

// encode encodes slot i's job into its batch.
func (e *Engine) encode(i int) {
	s := e.slots[i]
	s.batch, _, s.spent, s.err = s.job.timedEncode(s.enc, s.timed, e.cfg.Now)
	if e.afterEncode != nil {
		e.afterEncode()
	}
}

// work is a worker: it encodes the slots it is sent until jobs is closed.
func (e *Engine) work() {
	for i := range e.jobs {
		e.encode(i)
		e.done <- i
		// The send made the caller's goroutine, if it was waiting, this
		// P's next to run, but only once this worker blocks: with a job
		// queued it would not, and the ordered stage, which every batch
		// passes through, would wait a batch or more. Yielding runs it
		// now, while the other P, if idle, takes this worker. Measured on
		// incompressible pages, 2 workers went from 1.4x to 1.8x one.
		runtime.Gosched()
	}
}

// copyParallel is Copy with workers, or to a BatchQueue. The caller's
// goroutine cuts the set into batches, hands each to a worker in a free
// slot (or, with one worker, encodes it itself), and writes or queues the
// finished ones in order; when every slot is taken it waits, so a slow dst
// holds the engine to InFlight batches. Cutting the set costs a Seek per
// batch, not a visit per page: the workers visit the pages.
func (e *Engine) copyParallel(ctx context.Context, dst BatchWriter, j batchJob) (Traffic, error) {
	defer e.settle()
	c := parallelCopy{e: e, ctx: ctx, dst: dst, job: j}
	c.queue, _ = dst.(BatchQueue)
	c.job.first = j.set.Next(0)
	ctxDone := ctx.Done()
	for {
		c.dispatch()
		if e.encoding == 0 && e.queued == 0 {
			if c.err == nil {
				// Every batch before the one the Chooser failed on
				// was written.
				c.err = c.chooseErr
			}
			return c.tr, c.err
		}
		select {
		case i := <-e.done:
			c.encoded(i)
		case i := <-e.released:
			c.release(i)
		case <-ctxDone:
			// The workers finish their batches, which are dropped.
			ctxDone = nil
			c.fail(wrap(ErrCanceled, ctx.Err()))
		}
	}
}

// parallelCopy is the state of one copyParallel, on the caller's
// goroutine.
type parallelCopy struct {
	e     *Engine
	ctx   context.Context
	dst   BatchWriter
	queue BatchQueue // dst, if it is one
	job   batchJob   // the next batch to dispatch; job.first < 0 when none is left
	tr    Traffic
	err   error // the first error in batch order, or the cancellation
	halt  bool  // no more batches are dispatched
	// chooseErr is the Chooser's failure on the batch after the last one
	// dispatched, returned once the batches before it are written.
	chooseErr error
	seq       int // batches dispatched
	written   int // batches written or, after an error, dropped
	// released counts the batches a queue released, in order, and the
	// Chooser was told of.
	released int
}

// fail stops dispatch and records err unless an error came first.
func (c *parallelCopy) fail(err error) {
	c.halt = true
	if c.err == nil {
		c.err = err
	}
}

// dispatch hands batches to the workers while slots are free.
func (c *parallelCopy) dispatch() {
	e := c.e
	for !c.halt && c.job.first >= 0 && len(e.free) > 0 {
		if err := c.ctx.Err(); err != nil {
			c.fail(wrap(ErrCanceled, err))
			return
		}
		i := e.free[len(e.free)-1]
		s := e.slots[i]
		if s.enc == nil {
			enc, err := checkpoint.NewBatchEncoder(e.cfg.Level)
			if err != nil {
				c.fail(wrap(ErrConfig, err))
				return
			}
			enc.SetFilters(e.cfg.Filters)
			s.enc = enc
		}
		timed, err := e.choose(s.enc, &c.job)
		if err != nil {
			c.halt, c.chooseErr = true, err
			return
		}
		e.free = e.free[:len(e.free)-1]
		s.seq, s.job, s.timed = c.seq, c.job, timed
		e.encoding++
		c.seq++
		c.job.first = c.job.set.Seek(c.job.first, c.job.pages)
		if e.jobs == nil {
			// One worker, and a queue: the batch is queued as soon
			// as it is encoded, and the next one encoded while the
			// queue writes it. (writeReady frees no slot here but
			// after a failure, so it dispatches nothing further.)
			e.encode(i)
			c.encoded(i)
			continue
		}
		e.jobs <- i
	}
}

// encoded takes back slot i, encoded, and writes what is ready.
func (c *parallelCopy) encoded(i int) {
	e := c.e
	e.encoding--
	s := e.slots[i]
	c.halt = c.halt || s.err != nil
	e.order[s.seq%len(e.order)] = i
	c.writeReady()
}

// release takes back slot i from the queue, and counts its failure. The
// queue writes its batches on several streams, so they come back in any
// order; a slot is freed, and its batch told to the Chooser as written,
// once every batch before it came back. After a failure, the order no
// longer matters (some batches were never queued), and slots are freed
// as they come back.
func (c *parallelCopy) release(i int) {
	e := c.e
	e.queued--
	s := e.slots[i]
	if s.writeErr != nil {
		c.fail(wrap(ErrStream, s.writeErr))
	}
	n := len(e.releases)
	e.releases[s.seq%n] = i
	if c.err != nil {
		// Some batches were never queued, so the order is lost: every
		// slot back is freed, and the Chooser told of none.
		for k, j := range e.releases {
			if j >= 0 {
				e.releases[k] = -1
				e.unqueue(j)
			}
		}
		return
	}
	for {
		k := c.released % n
		j := e.releases[k]
		if j < 0 {
			return
		}
		e.releases[k] = -1
		c.released++
		e.observe(e.slots[j].batch, e.slots[j].spent)
		e.unqueue(j)
	}
}

// unqueue frees slot i, which a queue released.
func (e *Engine) unqueue(i int) {
	e.slots[i].batch, e.slots[i].writeErr = checkpoint.EncodedBatch{}, nil
	e.free = append(e.free, i)
}

// writeReady writes, in order, the finished batches that come next, and
// frees their slots, dispatching into each as it frees it; a batch a queue
// took keeps its slot until the queue releases it. After an error it only
// frees them.
func (c *parallelCopy) writeReady() {
	e := c.e
	for {
		k := c.written % len(e.order)
		i := e.order[k]
		if i < 0 {
			return
		}
		e.order[k] = -1
		c.written++
		s := e.slots[i]
		if c.err == nil {
			if err := c.ctx.Err(); err != nil {
				c.fail(wrap(ErrCanceled, err))
			} else if s.err != nil {
				c.fail(wrap(ErrSource, s.err))
			} else if c.hand(s) {
				continue // the queue's until it releases it
			}
		}
		s.batch, s.err = checkpoint.EncodedBatch{}, nil
		e.free = append(e.free, i)
		// Refill the slot before the next write, so that a slow dst
		// does not leave it idle.
		c.dispatch()
	}
}

// hand writes slot s's batch to dst, or queues it, and reports whether
// the queue took it.
func (c *parallelCopy) hand(s *engineSlot) (queued bool) {
	c.tr.addBatch(s.batch)
	var err error
	if c.queue != nil {
		if err = c.queue.QueueBatch(s.batch, s.release); err == nil {
			c.e.queued++
			queued = true
		}
	} else {
		err = c.dst.WriteBatch(s.batch)
	}
	switch {
	case err != nil:
		c.fail(wrap(ErrStream, err))
	case !queued:
		c.e.observe(s.batch, s.spent)
	}
	return queued
}

// settle restores the engine's bookkeeping if a copy ended without
// taking back every slot — dst, or an encode on the caller's goroutine,
// panicked — so that the next copy starts clean: it waits for the
// workers' batches and the queue's, and frees every slot.
func (e *Engine) settle() {
	if e.encoding == 0 && e.queued == 0 && len(e.free) == len(e.slots) {
		return
	}
	if e.jobs == nil {
		e.encoding = 0 // encoded on the caller's goroutine, which panicked
	}
	for ; e.encoding > 0; e.encoding-- {
		<-e.done
	}
	for ; e.queued > 0; e.queued-- {
		<-e.released
	}
	e.free = e.free[:0]
	for i := len(e.slots) - 1; i >= 0; i-- {
		e.order[i], e.releases[i] = -1, -1
		s := e.slots[i]
		s.batch, s.err, s.writeErr = checkpoint.EncodedBatch{}, nil, nil
		e.free = append(e.free, i)
	}
}
