package live

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
)

// timedConn is one of a live migration's connections: each Read and Write
// first pushes the connection's deadline Timeout ahead, where it has
// deadlines, so that a peer that stops draining or sending fails the
// migration instead of hanging it. It remembers the first I/O error, which
// is how a failure is told apart from a refusal of the stream.
type timedConn struct {
	rw      io.ReadWriter
	timeout time.Duration
	rd      interface{ SetReadDeadline(time.Time) error }
	wdl     interface{ SetWriteDeadline(time.Time) error }

	mu  sync.Mutex
	err error
}

func newTimedConn(rw io.ReadWriter, timeout time.Duration) *timedConn {
	c := &timedConn{rw: rw, timeout: timeout}
	c.rd, _ = rw.(interface{ SetReadDeadline(time.Time) error })
	c.wdl, _ = rw.(interface{ SetWriteDeadline(time.Time) error })
	return c
}

func (c *timedConn) Read(p []byte) (int, error) {
	if c.rd != nil {
		_ = c.rd.SetReadDeadline(time.Now().Add(c.timeout))
	}
	n, err := c.rw.Read(p)
	if err != nil && err != io.EOF {
		c.record(err)
	}
	return n, err
}

func (c *timedConn) Write(p []byte) (int, error) {
	if c.wdl != nil {
		_ = c.wdl.SetWriteDeadline(time.Now().Add(c.timeout))
	}
	n, err := c.rw.Write(p)
	if err != nil {
		c.record(err)
	}
	return n, err
}

func (c *timedConn) record(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// failed returns the connection's first I/O error, if any.
func (c *timedConn) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// close closes the connection if it can be closed.
func (c *timedConn) close() {
	if cl, ok := c.rw.(io.Closer); ok {
		_ = cl.Close()
	}
}

// conns is a live migration's set of connections.
type connSet []*timedConn

func newConnSet(rws []io.ReadWriter, timeout time.Duration) connSet {
	cs := make(connSet, len(rws))
	for i, rw := range rws {
		cs[i] = newTimedConn(rw, timeout)
	}
	return cs
}

func (cs connSet) closeAll() {
	for _, c := range cs {
		c.close()
	}
}

// failed returns the first I/O error of any of the connections.
func (cs connSet) failed() error {
	for _, c := range cs {
		if err := c.failed(); err != nil {
			return err
		}
	}
	return nil
}

func (cs connSet) writers() []io.Writer {
	ws := make([]io.Writer, len(cs))
	for i, c := range cs {
		ws[i] = c
	}
	return ws
}

// liveCause says why a live migration failed, each sentinel once: the
// cancel if ctx is done; ErrConnection around a cause that comes from the
// connections — one of them failed, or the cause is a closed or timed-out
// connection — unless the cause is already a failure of something else
// (reading the VM's own memory, a refusal, a configuration), which says
// more and must not be blamed on the link; the cause as it is otherwise.
// A stream error is the connections' when they failed: writing the stream
// is how a broken connection shows at the source.
func liveCause(ctx context.Context, cs connSet, cause error) error {
	switch {
	case ctx.Err() != nil:
		return canceled(ctx, cause)
	case saysWhatFailed(cause):
		return cause
	case cs.failed() != nil || isConnErr(cause):
		return wrap(migrate.ErrConnection, cause)
	}
	return cause
}

// saysWhatFailed reports a cause that names what failed already: something
// other than the connections, or the connections themselves.
func saysWhatFailed(cause error) bool {
	for _, s := range []error{migrate.ErrSource, migrate.ErrDestination, migrate.ErrConfig, migrate.ErrIncompatible, migrate.ErrBusy, migrate.ErrRefused,
		migrate.ErrStunLimit, migrate.ErrNotConverged, migrate.ErrConnection} {
		if errors.Is(cause, s) {
			return true
		}
	}
	return false
}

// canceled is the error of a live migration whose ctx is done: ErrCanceled
// and the context's cause, each said once. The failure the cancel provoked
// — the connections closed under the migration, the copy engine's own
// ErrCanceled — is matched by errors.Is but not repeated; any other is.
func canceled(ctx context.Context, cause error) error {
	why := context.Cause(ctx)
	msg := migrate.ErrCanceled.Error()
	if !errors.Is(why, context.Canceled) {
		msg += ": " + why.Error() // a deadline, or the caller's own cause
	}
	errs := []error{migrate.ErrCanceled, why}
	if err := ctx.Err(); err != why {
		errs = append(errs, err)
	}
	if cause != nil {
		errs = append(errs, cause)
		if !errors.Is(cause, migrate.ErrCanceled) && !errors.Is(cause, ctx.Err()) && !errors.Is(cause, why) && !isConnErr(cause) {
			msg += "; " + cause.Error()
		}
	}
	return &labeledError{msg: msg, errs: errs}
}

// isConnErr reports an error of the connection itself: the peer closed it,
// or a deadline passed.
func isConnErr(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}
