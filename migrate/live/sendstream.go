package live

import (
	"io"
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vgpusim/vgpusim/checkpoint"
)

// The source writes each of its streams to its connection on a goroutine
// of its own. The copy engine queues each batch, in batch order, to the
// stream the ParallelWriter deals it to (migrate.BatchQueue); the stream's
// goroutine frames the batch, hashes it into the stream's chain of check
// values and writes it to the connection straight from the engine's
// buffers, while the engine goes on with the next batches for the other
// connections. Done on the engine's ordered stage, the hashing and a copy
// into a connection's buffer made one goroutine the limit of every
// connection together: on 16 cores, about 4 GB/s of guest RAM over 4
// connections that carried 13 GB/s of plain writes.
//
// The streams' other records (ends of rounds, device states, the end) are
// written on the sender's goroutine, once every batch queued has been
// written: the engine's Copy returns only then. So a stream's
// checkpoint.Writer and connection are never used by two goroutines at
// once, and the batches a stream writes happen before the sender's next
// use of it.

// queuedBatch is a batch queued to a stream, and what to tell the engine
// once it is written.
type queuedBatch struct {
	b    checkpoint.EncodedBatch
	done func(error)
}

// sendStream is the source's side of one connection's stream.
type sendStream struct {
	w     *checkpoint.Writer // set once the streams are opened
	out   meteredWriter
	queue chan queuedBatch
	// rate is the bytes a second the connection took while written to,
	// a moving average over batches (math.Float64bits; 0 until the
	// first batch).
	rate atomic.Uint64
}

// write writes the batches queued to the stream until the queue is
// closed. After a failure to write, the stream's writer returns its
// sticky error at once, so the batches queued after it are only given
// back; a batch the writer refuses (ErrInvalid) fails alone, and the copy
// with it.
func (s *sendStream) write() error {
	for q := range s.queue {
		err := s.w.WriteBatch(q.b)
		if err == nil && s.out.n > 0 {
			s.observe(s.out.n, s.out.busy)
		}
		s.out.n, s.out.busy = 0, 0
		q.done(err)
	}
	return nil
}

// rateWeight is the moving average's weight of a new batch.
const rateWeight = 0.2

// observe folds n bytes written in d into the connection's rate.
func (s *sendStream) observe(n int, d time.Duration) {
	r := float64(n) / max(d.Seconds(), 1e-9)
	if old := math.Float64frombits(s.rate.Load()); old > 0 {
		r = old + rateWeight*(r-old)
	}
	s.rate.Store(math.Float64bits(r))
}

// meteredWriter is a stream's connection as its writer sees it: it times
// the writes, and counts their bytes in the stream's tally and in the
// bytes of all the streams together.
type meteredWriter struct {
	w   io.Writer
	now func() time.Time
	// n and busy are the bytes written and the time taken since the
	// stream last observed them.
	n    int
	busy time.Duration
	wire *atomic.Int64
}

func (m *meteredWriter) Write(p []byte) (int, error) {
	start := m.now()
	n, err := m.w.Write(p)
	m.busy += m.now().Sub(start)
	m.n += n
	m.wire.Add(int64(n))
	return n, err
}

// sendStreams are the source's connections, each with the goroutine that
// writes its batches.
type sendStreams struct {
	streams []*sendStream
	// wire counts the bytes written to every connection so far; any
	// goroutine may read it.
	wire atomic.Int64
	g    errgroup.Group
	// closed says the queues are closed.
	closed bool
}

// start starts a writing goroutine for each of conns, whose writes it
// times on now; queue is how many batches each may hold: the engine's
// batches in flight, so that queuing never blocks. It returns the
// connections as the streams' writers must write them.
func (s *sendStreams) start(conns []io.Writer, now func() time.Time, queue int) []io.Writer {
	outs := make([]io.Writer, len(conns))
	for i, c := range conns {
		st := &sendStream{out: meteredWriter{w: c, now: now, wire: &s.wire}, queue: make(chan queuedBatch, queue)}
		s.streams = append(s.streams, st)
		outs[i] = &st.out
	}
	return outs
}

// run binds each stream to its writer of pw and starts its goroutine.
func (s *sendStreams) run(pw *checkpoint.ParallelWriter) {
	s.bind(pw)
	for _, st := range s.streams {
		s.g.Go(st.write)
	}
}

// bind binds each stream to its writer of pw: the first streams', or the
// post-copy's, which follow them on the same connections. The goroutines
// must be idle, every batch queued written: the next batch queued to each
// happens after the bind.
func (s *sendStreams) bind(pw *checkpoint.ParallelWriter) {
	for i, st := range s.streams {
		st.w = pw.Stream(i)
	}
}

// rate is the link's rate as the writes measure it: the sum of what each
// connection took while written to; 0 until every connection has taken a
// batch. It may be called from any goroutine once start has returned.
func (s *sendStreams) rate() float64 {
	sum := 0.0
	for _, st := range s.streams {
		r := math.Float64frombits(st.rate.Load())
		if r == 0 {
			return 0
		}
		sum += r
	}
	return sum
}

// close ends the writing goroutines and waits for them. Every batch
// queued has been written or given back by then: the engine's Copy
// waits for them.
func (s *sendStreams) close() error {
	if !s.closed {
		s.closed = true
		for _, st := range s.streams {
			close(st.queue)
		}
	}
	return s.g.Wait()
}

// queueSink is the engine's migrate.BatchQueue: it deals each batch to
// its stream's goroutine, and reports the bytes written so far.
type queueSink struct {
	s *sender
}

// QueueBatch queues b to the stream it is dealt to; the stream's
// goroutine calls done once it is written.
func (q queueSink) QueueBatch(b checkpoint.EncodedBatch, done func(error)) error {
	s := q.s
	// The caller's Progress runs first: once the batch is taken, nothing
	// may keep the engine from counting it.
	s.prog.bytes(s.core.Phase(), s.core.Round(), s.out.wire.Load())
	s.out.streams[s.pw.Deal()].queue <- queuedBatch{b: b, done: done}
	return nil
}

// WriteBatch queues b and waits until it is written. The engine queues
// its batches instead; this is for a BatchWriter's other users.
func (q queueSink) WriteBatch(b checkpoint.EncodedBatch) error {
	written := make(chan error, 1)
	if err := q.QueueBatch(b, func(err error) { written <- err }); err != nil {
		return err
	}
	return <-written
}
