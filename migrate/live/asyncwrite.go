package live

import (
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// The source writes each of its streams to its connection on a goroutine
// of its own: the copy engine hands batches to the streams in turn, and
// while one stream's connection takes a batch the engine goes on with the
// next, for another connection. Without it the K connections would be
// written one after the other, and add up to one.

const (
	// sendBlockBytes is the size of a block handed to a connection's
	// writer: a batch of the default size is four.
	sendBlockBytes = 256 << 10
	// sendBlocks is the number of blocks of each connection: what the
	// engine may run ahead of a slow connection.
	sendBlocks = 8
)

// asyncWriter buffers what is written to it in blocks, which its drain
// writes to the connection, in order, on a goroutine of its own. Its first
// write error is sticky. Write and Flush are for one goroutine.
type asyncWriter struct {
	w    io.Writer
	cur  []byte
	full chan []byte // blocks to write, in order
	free chan []byte
	// queued counts the blocks handed over and not yet written.
	queued sync.WaitGroup
	closed bool
	// now is the clock the writes are timed on; rate is the bytes a
	// second the connection took while it was written to, a moving
	// average over blocks (math.Float64bits; 0 until the first block).
	now  func() time.Time
	rate atomic.Uint64

	mu  sync.Mutex
	err error
}

func newAsyncWriter(w io.Writer, now func() time.Time) *asyncWriter {
	a := &asyncWriter{w: w, now: now, full: make(chan []byte, sendBlocks), free: make(chan []byte, sendBlocks)}
	for range sendBlocks - 1 {
		a.free <- nil // made when first needed
	}
	a.cur = make([]byte, 0, sendBlockBytes)
	return a
}

// drain writes the blocks handed over until the writer is closed, and
// returns the first error. After an error it only gives the blocks back,
// so that Write and Flush never wait on it.
func (a *asyncWriter) drain() error {
	for b := range a.full {
		if a.failed() == nil {
			start := a.now()
			if _, err := a.w.Write(b); err != nil {
				a.mu.Lock()
				a.err = err
				a.mu.Unlock()
			} else {
				a.observe(len(b), a.now().Sub(start))
			}
		}
		a.free <- b[:0]
		a.queued.Done()
	}
	return a.failed()
}

// rateWeight is the moving average's weight of a new block.
const rateWeight = 0.2

// observe folds a block of n bytes written in d into the connection's
// rate.
func (a *asyncWriter) observe(n int, d time.Duration) {
	r := float64(n) / max(d.Seconds(), 1e-9)
	if old := math.Float64frombits(a.rate.Load()); old > 0 {
		r = old + rateWeight*(r-old)
	}
	a.rate.Store(math.Float64bits(r))
}

func (a *asyncWriter) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Write copies p into blocks, handing each full one to the connection's
// goroutine; it waits only when every block is queued.
func (a *asyncWriter) Write(p []byte) (int, error) {
	if err := a.failed(); err != nil {
		return 0, err
	}
	n := len(p)
	for len(p) > 0 {
		k := copy(a.cur[len(a.cur):cap(a.cur)], p)
		a.cur, p = a.cur[:len(a.cur)+k], p[k:]
		if len(a.cur) == cap(a.cur) {
			a.handOver()
		}
	}
	return n, nil
}

// handOver queues the current block and takes a free one.
func (a *asyncWriter) handOver() {
	a.queued.Add(1)
	a.full <- a.cur
	b := <-a.free
	if b == nil {
		b = make([]byte, 0, sendBlockBytes)
	}
	a.cur = b
}

// Flush queues what is buffered and waits until every block is written.
func (a *asyncWriter) Flush() error {
	if len(a.cur) > 0 {
		a.handOver()
	}
	a.queued.Wait()
	return a.failed()
}

// sendStreams are the source's connections, each written through an
// asyncWriter drained on a goroutine of the group.
type sendStreams struct {
	ws []*asyncWriter
	g  errgroup.Group
}

// start starts writing to each of conns through an asyncWriter, timing
// the writes on now.
func (s *sendStreams) start(conns []io.Writer, now func() time.Time) {
	for _, c := range conns {
		a := newAsyncWriter(c, now)
		s.ws = append(s.ws, a)
		s.g.Go(a.drain)
	}
}

// rate is the link's rate as the writes measure it: the sum of what each
// connection took while written to; 0 until every connection has taken a
// block. It may be called from any goroutine once start has returned.
func (s *sendStreams) rate() float64 {
	sum := 0.0
	for _, a := range s.ws {
		r := math.Float64frombits(a.rate.Load())
		if r == 0 {
			return 0
		}
		sum += r
	}
	return sum
}

// flush flushes every connection, and returns the first error.
func (s *sendStreams) flush() error {
	var first error
	for _, a := range s.ws {
		if err := a.Flush(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// close ends the writing goroutines, after what they hold is written, and
// waits for them. A connection that stalls holds its goroutine until the
// connection's deadline, or until it is closed.
func (s *sendStreams) close() error {
	for _, a := range s.ws {
		if !a.closed {
			a.closed = true
			close(a.full)
		}
	}
	return s.g.Wait()
}
