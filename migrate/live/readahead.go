package live

import (
	"io"
	"time"
)

// The destination reads each connection ahead of the stream, on a
// goroutine of its own, into a few blocks: the socket reads, a tenth of its
// work, then overlap decoding and applying instead of adding to them. A
// read-ahead needs a connection with read deadlines (a net.Conn), because
// it must be stopped before Receive returns, lest it take bytes the caller
// reads next; a deadline in the past is the one way to stop a blocked Read.

const (
	readAheadBlocks     = 4
	readAheadBlockBytes = 256 << 10
)

// readDeadliner is a connection whose reads can be stopped.
type readDeadliner interface {
	io.ReadWriter
	SetReadDeadline(time.Time) error
}

// readAheadConn is a connection whose reads come from a read-ahead
// goroutine; its writes, deadlines and Close go to the connection.
type readAheadConn struct {
	conn readDeadliner
	full chan readBlock // filled blocks, in order
	free chan []byte
	stop chan struct{}
	done chan struct{}

	cur  []byte // unread bytes of the current block
	held []byte // the current block, returned to free when read
	err  error  // what the connection said after the last byte

	stopped bool
}

type readBlock struct {
	buf []byte
	n   int
	err error
}

// withReadAhead returns c reading ahead when it can be stopped, and c as it
// is otherwise.
func withReadAhead(c io.ReadWriter) io.ReadWriter {
	rd, ok := c.(readDeadliner)
	if !ok {
		return c
	}
	r := &readAheadConn{conn: rd, full: make(chan readBlock, readAheadBlocks),
		free: make(chan []byte, readAheadBlocks), stop: make(chan struct{}), done: make(chan struct{})}
	for range readAheadBlocks {
		r.free <- make([]byte, readAheadBlockBytes)
	}
	go r.fill()
	return r
}

func (r *readAheadConn) fill() {
	defer close(r.done)
	for {
		var buf []byte
		select {
		case buf = <-r.free:
		case <-r.stop:
			return
		}
		n, err := r.conn.Read(buf)
		// Never blocks, there being no more blocks than full holds; and
		// what was read is delivered even if a stop came meanwhile.
		r.full <- readBlock{buf, n, err}
		if err != nil {
			return
		}
	}
}

func (r *readAheadConn) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		switch {
		case r.err != nil:
			return 0, r.err
		case r.stopped:
			return r.conn.Read(p)
		}
		if r.held != nil {
			r.free <- r.held // never blocks: free has room for every block
			r.held = nil
		}
		b := <-r.full
		r.held, r.cur, r.err = b.buf, b.buf[:b.n], b.err
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *readAheadConn) Write(p []byte) (int, error) { return r.conn.Write(p) }

func (r *readAheadConn) SetReadDeadline(t time.Time) error { return r.conn.SetReadDeadline(t) }

func (r *readAheadConn) SetWriteDeadline(t time.Time) error {
	if w, ok := r.conn.(interface{ SetWriteDeadline(time.Time) error }); ok {
		return w.SetWriteDeadline(t)
	}
	return nil
}

func (r *readAheadConn) Close() error {
	if c, ok := r.conn.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// stopReading stops the read-ahead goroutine and waits for it; later reads
// go to the connection, after whatever the goroutine had read. Errors it
// met are dropped: the deadline that stopped it is not the connection's,
// and any other the connection says again. It must be called from the
// goroutine that reads; later calls do nothing.
func (r *readAheadConn) stopReading() {
	if r.stopped {
		return
	}
	r.stopped = true
	close(r.stop)
	_ = r.conn.SetReadDeadline(time.Unix(1, 0))
	<-r.done
	_ = r.conn.SetReadDeadline(time.Time{})
	rest := append([]byte(nil), r.cur...)
	for len(r.full) > 0 {
		b := <-r.full
		rest = append(rest, b.buf[:b.n]...)
	}
	r.cur, r.held, r.err = rest, nil, nil
}

// stopReadAhead stops the read-ahead of every connection in rws that has
// one.
func stopReadAhead(rws []io.ReadWriter) {
	for _, c := range rws {
		if r, ok := c.(*readAheadConn); ok {
			r.stopReading()
		}
	}
}
