package live

import (
	"io"
	"sync"

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

	mu  sync.Mutex
	err error
}

func newAsyncWriter(w io.Writer) *asyncWriter {
	a := &asyncWriter{w: w, full: make(chan []byte, sendBlocks), free: make(chan []byte, sendBlocks)}
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
			if _, err := a.w.Write(b); err != nil {
				a.mu.Lock()
				a.err = err
				a.mu.Unlock()
			}
		}
		a.free <- b[:0]
		a.queued.Done()
	}
	return a.failed()
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

// start starts writing to each of conns through an asyncWriter.
func (s *sendStreams) start(conns []io.Writer) {
	for _, c := range conns {
		a := newAsyncWriter(c)
		s.ws = append(s.ws, a)
		s.g.Go(a.drain)
	}
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
