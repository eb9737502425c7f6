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
// done, and to the caller again until its batch is written: its batch's
// payload aliases the encoder's buffers, so the slot is not reused before.
type engineSlot struct {
	enc   *checkpoint.BatchEncoder
	seq   int // the batch's place in the copy
	job   batchJob
	timed bool // the encode is timed, for the Chooser
	batch checkpoint.EncodedBatch
	spent time.Duration // encoding the batch took, if timed
	err   error         // a read failure, unwrapped
}

// work is a worker: it encodes the slots it is sent until jobs is closed.
func (e *Engine) work() {
	for i := range e.jobs {
		s := e.slots[i]
		s.batch, _, s.spent, s.err = s.job.timedEncode(s.enc, s.timed, e.cfg.Now)
		if e.afterEncode != nil {
			e.afterEncode()
		}
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

// copyParallel is Copy with workers. The caller's goroutine cuts the set
// into batches, hands each to a worker in a free slot, and writes the
// finished ones in order; when every slot is taken it waits, so a slow dst
// holds the engine to InFlight batches. Cutting the set costs a Seek per
// batch, not a visit per page: the workers visit the pages.
func (e *Engine) copyParallel(ctx context.Context, dst BatchWriter, j batchJob) (Traffic, error) {
	defer e.settle()
	c := parallelCopy{e: e, ctx: ctx, dst: dst, job: j}
	c.job.first = j.set.Next(0)
	ctxDone := ctx.Done()
	for {
		c.dispatch()
		if e.encoding == 0 {
			if c.err == nil {
				// Every batch before the one the Chooser failed on
				// was written.
				c.err = c.chooseErr
			}
			return c.tr, c.err
		}
		select {
		case i := <-e.done:
			e.encoding--
			s := e.slots[i]
			c.halt = c.halt || s.err != nil
			e.order[s.seq%len(e.order)] = i
			c.writeReady()
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
	e    *Engine
	ctx  context.Context
	dst  BatchWriter
	job  batchJob // the next batch to dispatch; job.first < 0 when none is left
	tr   Traffic
	err  error // the first error in batch order, or the cancellation
	halt bool  // no more batches are dispatched
	// chooseErr is the Chooser's failure on the batch after the last one
	// dispatched, returned once the batches before it are written.
	chooseErr error
	seq       int // batches dispatched
	written   int // batches written or, after an error, dropped
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
		e.jobs <- i
		c.seq++
		c.job.first = c.job.set.Seek(c.job.first, c.job.pages)
	}
}

// writeReady writes, in order, the finished batches that come next, and
// frees their slots, dispatching into each as it frees it. After an error
// it only frees them.
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
			} else {
				c.tr.addBatch(s.batch)
				if err := c.dst.WriteBatch(s.batch); err != nil {
					c.fail(wrap(ErrStream, err))
				} else {
					e.observe(s.batch, s.spent)
				}
			}
		}
		s.batch, s.err = checkpoint.EncodedBatch{}, nil
		e.free = append(e.free, i)
		// Refill the slot before the next write, so that a slow dst
		// does not leave it idle.
		c.dispatch()
	}
}

// settle restores the engine's bookkeeping if a copy ended without
// taking back every slot — dst panicked — so that the next copy starts
// clean: it waits for the workers' batches, and frees every slot.
func (e *Engine) settle() {
	if e.encoding == 0 && len(e.free) == len(e.slots) {
		return
	}
	for ; e.encoding > 0; e.encoding-- {
		<-e.done
	}
	e.free = e.free[:0]
	for i := len(e.slots) - 1; i >= 0; i-- {
		e.order[i] = -1
		e.slots[i].batch, e.slots[i].err = checkpoint.EncodedBatch{}, nil
		e.free = append(e.free, i)
	}
}
