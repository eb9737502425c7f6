package migrate

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
)

// Chooser picks the compression level of each batch of an Engine's
// copies, and is told what each batch cost, so that it can adapt. The
// engine calls it only from the goroutine that called Copy, never twice
// at once.
//
// Whatever the Chooser decides, the engine cuts the same batches; a
// batch's bytes depend only on its pages and its level. So the sequence
// of levels chosen decides the stream's bytes, for any number of workers:
// a Chooser whose choices depend only on what Level is told makes the
// stream as deterministic as a fixed level does.
type Chooser interface {
	// Level returns the level of the next batch, which b describes. It
	// is called in batch order, before the batch is handed to a worker;
	// with several workers, up to InFlight batches ahead of the last
	// one observed.
	Level(b BatchInfo) checkpoint.Level
	// Observe reports a batch handed to the BatchWriter without error
	// (to a BatchQueue: written, once the queue is done with it), in
	// batch order, and what it cost.
	Observe(BatchCost)
}

// BatchCost is what one batch cost, as a Chooser is told.
type BatchCost struct {
	// Level is the batch's level.
	Level checkpoint.Level
	// RawBytes is the size of its pages, zero pages included, and
	// ZeroBytes that of its zero pages and unchanged delta pages, which
	// no codec sends.
	RawBytes, ZeroBytes int
	// WireBytes is its payload, as Traffic.WireBytes counts it.
	WireBytes int
	// Encode is the wall-clock time its worker spent encoding it, pages
	// read included; zero for an Untimed Chooser.
	Encode time.Duration
}

// Untimed is a Chooser that may need no encode times: when Untimed
// reports true, Observe is told a time of zero and the engine reads no
// clock, so that a simulated mode's Chooser keeps the simulation core
// clear of the wall clock.
type Untimed interface {
	Untimed() bool
}

// BatchInfo describes a batch about to be encoded, for a Chooser.
type BatchInfo struct {
	// Region is the region's id in the stream.
	Region uint32
	// PageSize is the region's page size.
	PageSize int
	// First is the index of the batch's first page.
	First int
	// MaxPages is the most pages the batch holds: it holds fewer only
	// when the set ends sooner.
	MaxPages int
}

// choose sets enc's level for the batch j is about to encode, as the
// Chooser picks it, if there is one. It reports whether the encode is to
// be timed for the Chooser. An unknown level is the Chooser's mistake,
// an error wrapping ErrConfig.
func (e *Engine) choose(enc *checkpoint.BatchEncoder, j *batchJob) (timed bool, err error) {
	ch := e.cfg.Chooser
	if ch == nil {
		return false, nil
	}
	level := ch.Level(BatchInfo{Region: j.id, PageSize: j.r.PageSize(), First: j.first, MaxPages: j.pages})
	if err := enc.SetLevel(level); err != nil {
		return false, wrap(ErrConfig, fmt.Errorf("engine: chooser: %w", err))
	}
	if u, ok := ch.(Untimed); ok && u.Untimed() {
		return false, nil
	}
	return true, nil
}

// timedEncode is j.encode, timed on now (the wall clock if nil) if timed
// is set.
func (j *batchJob) timedEncode(enc *checkpoint.BatchEncoder, timed bool, now func() time.Time) (checkpoint.EncodedBatch, int, time.Duration, error) {
	if !timed {
		b, next, err := j.encode(enc)
		return b, next, 0, err
	}
	if now == nil {
		now = time.Now
	}
	start := now()
	b, next, err := j.encode(enc)
	return b, next, now().Sub(start), err
}

// observe tells the Chooser, if there is one, of batch b, written.
func (e *Engine) observe(b checkpoint.EncodedBatch, spent time.Duration) {
	if ch := e.cfg.Chooser; ch != nil {
		ch.Observe(BatchCost{Level: b.Level, RawBytes: b.RawBytes, ZeroBytes: (b.ZeroPages + b.UnchangedPages) * (b.RawBytes / max(b.Pages, 1)),
			WireBytes: int(b.PayloadBytes()), Encode: spent})
	}
}
