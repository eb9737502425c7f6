package checkpoint

import (
	"context"

	"github.com/vgpusim/vgpusim/memory"
	"golang.org/x/sync/errgroup"
)

// regionBatch is one batch of a region being written by several workers:
// its pages, the encoder that encodes it, and the batch it made.
type regionBatch struct {
	pages []int
	enc   *BatchEncoder
	out   EncodedBatch
	done  chan error
}

// batchEncoders are the encoders of the batches a parallel write has in
// flight, two a worker, made once for all the regions of a Save: each
// holds a zstd encoder, which is costly to make.
type batchEncoders struct {
	workers int
	free    chan *BatchEncoder
}

func newBatchEncoders(workers int, level Level, filters PageFilters) (*batchEncoders, error) {
	e := &batchEncoders{workers: workers, free: make(chan *BatchEncoder, 2*workers)}
	for range 2 * workers {
		enc, err := NewBatchEncoder(level)
		if err != nil {
			e.close()
			return nil, err
		}
		enc.SetFilters(filters)
		e.free <- enc
	}
	return e, nil
}

// close frees the encoders, all of which are back.
func (e *batchEncoders) close() {
	close(e.free)
	for enc := range e.free {
		_ = enc.Close()
	}
}

// writeRegionParallel is WriteRegion of the pages of set on encs.workers
// goroutines: each reads its batch's pages (generating them, and learning
// their sums for the region's digest, as BatchEncoder.AddFrom does) and
// compresses them; the batches are written in order, cut where WriteRegion
// cuts them, so that the stream's bytes are the same whatever the number
// of workers. At most two batches a worker are in flight, each with an
// encoder of its own: memory stays a few batches a worker whatever the
// region's size.
func (w *Writer) writeRegionParallel(id uint32, src *memory.Region, set *memory.PageSet, encs *batchEncoders) error {
	if err := w.Flush(); err != nil {
		return err
	}
	ri, err := w.source(id, src)
	if err != nil {
		return err
	}
	free := encs.free
	per := PagesPerBatch(w.opts.BatchBytes, ri.PageSize)
	// Cancelled when a batch fails: the dealer stops dealing.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var g errgroup.Group
	g.SetLimit(encs.workers + 1) // the workers, and the goroutine that deals them batches
	ordered := make(chan *regionBatch, cap(free))
	g.Go(func() error {
		defer close(ordered)
		for p := set.Next(0); p >= 0 && ctx.Err() == nil; {
			var e *BatchEncoder
			select {
			case e = <-free:
			case <-ctx.Done():
				return nil
			}
			b := &regionBatch{enc: e, done: make(chan error, 1)}
			for ; p >= 0 && len(b.pages) < per; p = set.Next(p + 1) {
				b.pages = append(b.pages, p)
			}
			ordered <- b
			g.Go(func() error {
				b.done <- b.encode(src, id, ri.PageSize)
				return nil
			})
		}
		return nil
	})
	var werr error
	for b := range ordered {
		err := <-b.done
		if werr == nil {
			werr = err
			if werr == nil {
				werr = w.writeBatch(b.out)
			}
			if werr != nil {
				cancel()
			}
		}
		free <- b.enc
	}
	// Every batch dealt was written or dropped, and its encoder returned.
	_ = g.Wait() // its goroutines report through the batches
	return werr
}

// encode reads and compresses the batch's pages of region id of src.
func (b *regionBatch) encode(src *memory.Region, id uint32, pageSize int) error {
	if err := b.enc.Begin(id, pageSize); err != nil {
		return err
	}
	for _, p := range b.pages {
		if err := b.enc.AddFrom(src, p); err != nil {
			return err
		}
	}
	var err error
	b.out, err = b.enc.Finish()
	return err
}
