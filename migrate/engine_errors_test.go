package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

// failingWriter passes batches on to w until batch failAt, which fails.
type failingWriter struct {
	w      BatchWriter
	failAt int
	calls  int
}

var errDiskFull = errors.New("disk full")

func (f *failingWriter) WriteBatch(b checkpoint.EncodedBatch) error {
	f.calls++
	if f.calls > f.failAt {
		return errDiskFull
	}
	return f.w.WriteBatch(b)
}

func TestEngineErrors(t *testing.T) {
	const pages, batchPages = 64, 4
	r := engineRegion(t, memory.Dense, pages, 4096, 4, memory.MixRealistic())
	// A set reaching past the region: every page from 64 on fails to
	// read, the first in batch 16.
	beyond := memory.NewPageSet(pages + 3*batchPages)
	for p := range beyond.Cap() {
		beyond.Add(p)
	}
	refEnc, err := checkpoint.NewBatchEncoder(checkpoint.LevelFastest)
	must(t, err)
	defer refEnc.Close()
	refWriter := &batchCounter{}
	_, refErr := encodePages(refEnc, r, 0, beyond, batchPages*4096, refWriter.WriteBatch)
	if !errors.Is(refErr, ErrSource) {
		t.Fatalf("reference: %v", refErr)
	}
	want, _ := referenceStream(t, r, nil, checkpoint.LevelFastest, batchPages*4096)

	for _, workers := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			e, err := NewEngine(EngineConfig{Workers: workers, InFlight: 3 * workers, BatchBytes: batchPages * 4096})
			must(t, err)
			defer e.Close()
			var encoded atomic.Int64
			e.afterEncode = func() { encoded.Add(1) }

			// A read failure: the batches before it are written, and
			// the error is the first failing page's, as the reference's.
			cw := &batchCounter{}
			sw := &slowWriter{w: cw, delay: 100 * time.Microsecond, encoded: &encoded, inFlight: int64(3 * workers)}
			_, err = e.Copy(context.Background(), sw, r, 0, beyond)
			if !errors.Is(err, ErrSource) || err.Error() != refErr.Error() {
				t.Errorf("read failure: %v, want %v", err, refErr)
			}
			if cw.batches != refWriter.batches || cw.payload != refWriter.payload {
				t.Errorf("read failure: %d batches (%d bytes) written, want %d (%d)", cw.batches, cw.payload, refWriter.batches, refWriter.payload)
			}
			checkIdle(t, e)

			// A write failure at the sixth batch: five written, then no
			// call.
			fw := &failingWriter{w: &batchCounter{}, failAt: 5}
			_, err = e.Copy(context.Background(), fw, r, 0, nil)
			if !errors.Is(err, ErrStream) || !errors.Is(err, errDiskFull) {
				t.Errorf("write failure: %v, want ErrStream and the writer's error", err)
			}
			if fw.calls != 6 {
				t.Errorf("write failure: %d calls to the writer, want 6", fw.calls)
			}
			checkIdle(t, e)

			// The engine is still good.
			if got, _ := engineStream(t, e, r, nil); !bytes.Equal(got, want) {
				t.Error("after the failures, the stream differs from the reference's")
			}
		})
	}
}

// cancelingWriter cancels its context when batch cancelAt comes, and
// counts the batches it was handed once it had canceled.
type cancelingWriter struct {
	cancel   context.CancelFunc
	cancelAt int
	calls    int
	late     int
}

func (c *cancelingWriter) WriteBatch(checkpoint.EncodedBatch) error {
	c.calls++
	if c.calls > c.cancelAt {
		c.late++
	}
	if c.calls == c.cancelAt {
		c.cancel()
	}
	return nil
}

// lateWriter takes batches slowly, counting those it was handed after its
// context was canceled.
type lateWriter struct {
	ctx         context.Context
	delay       time.Duration
	calls, late int
}

func (l *lateWriter) WriteBatch(checkpoint.EncodedBatch) error {
	l.calls++
	if l.ctx.Err() != nil {
		l.late++
	}
	time.Sleep(l.delay)
	return nil
}

func TestEngineCancel(t *testing.T) {
	r := engineRegion(t, memory.Dense, 256, 4096, 5, memory.MixText())
	for _, workers := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			e, err := NewEngine(EngineConfig{Workers: workers, BatchBytes: 2 * 4096})
			must(t, err)
			defer e.Close()

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			cw := &batchCounter{}
			if _, err := e.Copy(ctx, cw, r, 0, nil); !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
				t.Errorf("canceled before: %v", err)
			}
			if cw.batches != 0 {
				t.Errorf("canceled before: %d batches written", cw.batches)
			}
			checkIdle(t, e)

			// Canceled by the writer: not one batch after.
			ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			w := &cancelingWriter{cancel: cancel, cancelAt: 3}
			if _, err := e.Copy(ctx, w, r, 0, nil); !errors.Is(err, ErrCanceled) {
				t.Errorf("canceled at batch 3: %v", err)
			}
			if w.late != 0 {
				t.Errorf("canceled at batch 3: %d batches written after", w.late)
			}
			checkIdle(t, e)

			// Canceled by another goroutine, mid-way: the copy stops long
			// before its 128 batches, having written at most one after.
			ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			timer := time.AfterFunc(2*time.Millisecond, cancel)
			defer timer.Stop()
			lw := &lateWriter{ctx: ctx, delay: 200 * time.Microsecond}
			start := time.Now()
			_, err = e.Copy(ctx, lw, r, 0, nil)
			if !errors.Is(err, ErrCanceled) {
				t.Errorf("canceled mid-way: %v", err)
			}
			t.Logf("canceled mid-way: %d batches written, returned %v after start", lw.calls, time.Since(start))
			if lw.calls >= 128 || lw.late > 1 {
				t.Errorf("canceled mid-way: %d of 128 batches written, %d after the cancel", lw.calls, lw.late)
			}
			checkIdle(t, e)
		})
	}
}
