package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

// testQueue is a BatchQueue that deals the batches it takes to lanes, in
// turn, as the live source deals them to its connections; each lane keeps
// a copy of its batches' payloads, after a pause that grows with the
// lane's index, so that the batches come back out of order and an engine
// that touched a batch's buffers before its done would change the copy.
// replay writes the copies, in order. The queue fails the batch failAt
// (counted from 1; 0 for none) and every one after, refuses to take the
// batch refuseAt, and counts the batches taken and not yet done.
type testQueue struct {
	pause    time.Duration
	failAt   int
	refuseAt int
	offered  int
	lanes    []chan queuedTestBatch
	wg       sync.WaitGroup
	mu       sync.Mutex
	copies   []checkpoint.EncodedBatch // by batch, once written
	// open counts the batches taken whose done is not yet called.
	open atomic.Int64
}

type queuedTestBatch struct {
	n    int
	b    checkpoint.EncodedBatch
	done func(error)
}

func newTestQueue(lanes int, pause time.Duration) *testQueue {
	q := &testQueue{pause: pause}
	for k := range lanes {
		lane := make(chan queuedTestBatch, 1024)
		q.lanes = append(q.lanes, lane)
		q.wg.Go(func() { q.write(lane, time.Duration(k+1)*pause) })
	}
	return q
}

func (q *testQueue) write(lane chan queuedTestBatch, pause time.Duration) {
	for b := range lane {
		time.Sleep(pause)
		var err error
		if q.failAt > 0 && b.n+1 >= q.failAt {
			err = errDiskFull
		} else {
			c := b.b
			c.Payload = [][]byte{bytes.Join(b.b.Payload, nil)}
			q.mu.Lock()
			q.copies[b.n] = c
			q.mu.Unlock()
		}
		q.open.Add(-1)
		b.done(err)
	}
}

func (q *testQueue) QueueBatch(b checkpoint.EncodedBatch, done func(error)) error {
	n := q.offered
	q.offered++
	if q.offered == q.refuseAt {
		return errDiskFull
	}
	q.open.Add(1)
	q.mu.Lock()
	q.copies = append(q.copies, checkpoint.EncodedBatch{})
	q.mu.Unlock()
	q.lanes[n%len(q.lanes)] <- queuedTestBatch{n, b, done}
	return nil
}

// WriteBatch is never called by the engine when it can queue.
func (q *testQueue) WriteBatch(checkpoint.EncodedBatch) error {
	return errors.New("WriteBatch called on a queue")
}

// close ends the lanes' goroutines.
func (q *testQueue) close() {
	for _, lane := range q.lanes {
		close(lane)
	}
	q.wg.Wait()
}

// replay writes the batches' copies to w, in order.
func (q *testQueue) replay(w BatchWriter) error {
	for _, b := range q.copies {
		if err := w.WriteBatch(b); err != nil {
			return err
		}
	}
	return nil
}

// copyQueued runs e.Copy into q and checks that every batch the queue
// took was done when Copy returned.
func copyQueued(t tb, e *Engine, q *testQueue, r *memory.Region, set *memory.PageSet) (Traffic, error) {
	t.Helper()
	defer q.close()
	tr, err := e.Copy(context.Background(), q, r, 0, set)
	if n := q.open.Load(); n != 0 {
		t.Fatalf("Copy returned with %d queued batches not done", n)
	}
	return tr, err
}

// queuedStream is the stream of e copying set (nil for every used page)
// into a testQueue of lanes, replayed into a Writer of opts.
func queuedStream(t tb, e *Engine, r *memory.Region, set *memory.PageSet, lanes int, pause time.Duration) ([]byte, Traffic) {
	t.Helper()
	cfg := e.Config()
	opts := checkpoint.WriterOptions{Level: cfg.Level, BatchBytes: cfg.BatchBytes, Mixed: cfg.Chooser != nil}
	var tr Traffic
	stream := streamWith(t, r, opts, set == nil, func(w *checkpoint.Writer) error {
		q := newTestQueue(lanes, pause)
		var err error
		if tr, err = copyQueued(t, e, q, r, set); err != nil {
			return err
		}
		return q.replay(w)
	})
	return stream, tr
}

// TestEngineQueueFailures checks a queue's failures: one told by done
// stops the copy with ErrStream, after every batch taken is done; one
// from QueueBatch too, without a done; a cancel mid-way waits for the
// batches taken. The engine stays good after each.
func TestEngineQueueFailures(t *testing.T) {
	const batchBytes = 2 * 4096
	r := engineRegion(t, memory.Sparse, 256, 4096, 9, memory.MixRealistic())
	want, _ := referenceStream(t, r, nil, checkpoint.LevelFastest, batchBytes)
	for _, workers := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			e, err := NewEngine(EngineConfig{Workers: workers, BatchBytes: batchBytes})
			must(t, err)
			defer e.Close()

			fails := newTestQueue(3, 20*time.Microsecond)
			fails.failAt = 6
			if _, err := copyQueued(t, e, fails, r, nil); !errors.Is(err, ErrStream) || !errors.Is(err, errDiskFull) {
				t.Errorf("write failure: %v, want ErrStream and the queue's error", err)
			}
			checkIdle(t, e)

			refuses := newTestQueue(2, 0)
			refuses.refuseAt = 4
			if _, err := copyQueued(t, e, refuses, r, nil); !errors.Is(err, ErrStream) || !errors.Is(err, errDiskFull) {
				t.Errorf("refusal: %v, want ErrStream and the queue's error", err)
			}
			if refuses.offered != 4 {
				t.Errorf("refusal: %d batches offered, want 4", refuses.offered)
			}
			checkIdle(t, e)

			ctx, cancel := context.WithCancel(context.Background())
			slow := newTestQueue(2, 300*time.Microsecond)
			timer := time.AfterFunc(2*time.Millisecond, cancel)
			_, err = e.Copy(ctx, slow, r, 0, nil)
			timer.Stop()
			cancel()
			if n := slow.open.Load(); n != 0 {
				t.Errorf("canceled: Copy returned with %d queued batches not done", n)
			}
			slow.close()
			if !errors.Is(err, ErrCanceled) {
				t.Errorf("canceled mid-way: %v", err)
			}
			checkIdle(t, e)

			if got, _ := queuedStream(t, e, r, nil, 2, 0); !bytes.Equal(got, want) {
				t.Error("after the failures, the queued stream differs from the reference's")
			}
		})
	}
}

// TestEngineQueuePanic checks that an encode that panics on the caller's
// goroutine (one worker, a queue: here the Chooser's clock) leaves the
// engine usable: the next copy's stream is the reference's.
func TestEngineQueuePanic(t *testing.T) {
	const batchBytes = 2 * 4096
	r := engineRegion(t, memory.Sparse, 64, 4096, 3, memory.MixRealistic())
	ch := &stripeChooser{levels: chooserLevels}
	want, _ := chosenReference(t, r, nil, batchBytes, ch.pick)
	calls := 0
	e, err := NewEngine(EngineConfig{Workers: 1, BatchBytes: batchBytes, Chooser: ch, Now: func() time.Time {
		if calls++; calls == 5 {
			panic("clock")
		}
		return time.Now()
	}})
	must(t, err)
	defer e.Close()
	q := newTestQueue(2, 10*time.Microsecond)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the clock's panic did not reach Copy's caller")
			}
		}()
		_, _ = e.Copy(context.Background(), q, r, 0, nil)
	}()
	if n := q.open.Load(); n != 0 {
		t.Errorf("Copy panicked with %d queued batches not done", n)
	}
	q.close()
	checkIdle(t, e)
	if got, _ := queuedStream(t, e, r, nil, 2, 0); !bytes.Equal(got, want) {
		t.Error("after the panic, the queued stream differs from the reference's")
	}
}
