package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
)

// timedConn is one of a live migration's connections, with the bounds
// that keep a slow or silent peer from holding the other end's resources.
// Each Read and Write first sets the connection's deadline, where it has
// deadlines: Timeout ahead, so that a peer that stops draining or sending
// fails the migration instead of hanging it; no later than the handshake's
// deadline while the handshake lasts; and no later than the minimum rate
// allows. The rate is kept over the whole migration, on the time the
// connection spent waiting on the peer: after a first Timeout of grace,
// each byte moved buys 1/minRate seconds more of waiting, so a peer that
// sends a byte now and then, each within Timeout, still fails. A
// connection remembers its first I/O error, which is how a failure is
// told apart from a refusal of the stream.
type timedConn struct {
	rw      io.ReadWriter
	conn    io.ReadWriter // the connection as given, which close closes
	timeout time.Duration
	rd      interface{ SetReadDeadline(time.Time) error }
	wdl     interface{ SetWriteDeadline(time.Time) error }

	mu      sync.Mutex
	err     error
	until   time.Time     // the handshake's deadline; zero once it is over
	minRate int64         // bytes per second; zero for none
	moved   int64         // bytes read and written
	waited  time.Duration // time spent in Read and Write
	// cut is the bound that set the deadline, for the error.
	cut cutBy
	// untimed: reads wait on no deadline and their waiting is not
	// counted, where the peer speaks when it needs to, not at a rate.
	untimed bool
}

// cutBy is what set a connection's deadline.
type cutBy uint8

const (
	cutByTimeout cutBy = iota
	cutByRate
	cutByHandshake
)

func newTimedConn(rw io.ReadWriter, timeout time.Duration, minRate int64) *timedConn {
	c := &timedConn{rw: rw, conn: rw, timeout: timeout, minRate: minRate}
	c.rd, _ = rw.(interface{ SetReadDeadline(time.Time) error })
	c.wdl, _ = rw.(interface{ SetWriteDeadline(time.Time) error })
	return c
}

// deadline returns the deadline of an I/O call starting at now.
func (c *timedConn) deadline(now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadlineLocked(now)
}

func (c *timedConn) deadlineLocked(now time.Time) time.Time {
	d := c.timeout
	c.cut = cutByTimeout
	if c.minRate > 0 {
		if allowed := satAdd(c.timeout, rateCredit(c.moved, c.minRate)) - c.waited; allowed < d {
			d, c.cut = max(allowed, 0), cutByRate
		}
	}
	t := now.Add(d)
	if !c.until.IsZero() && c.until.Before(t) {
		t, c.cut = c.until, cutByHandshake
	}
	return t
}

// maxDuration is the longest time.Duration.
const maxDuration = time.Duration(1<<63 - 1)

// rateCredit is the waiting that moved bytes buy at rate bytes a second:
// moved/rate seconds, saturating at maxDuration.
func rateCredit(moved, rate int64) time.Duration {
	secs := moved / rate
	if secs >= int64(maxDuration/time.Second) {
		return maxDuration
	}
	frac := time.Duration(float64(moved%rate) / float64(rate) * float64(time.Second))
	return time.Duration(secs)*time.Second + frac
}

// satAdd is a+b for non-negative durations, saturating at maxDuration.
func satAdd(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

// account counts an I/O call that moved n bytes from start on, and names
// the bound that cut it.
func (c *timedConn) account(start time.Time, n int, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moved += int64(n)
	c.waited += time.Since(start)
	if err == nil || c.cut == cutByTimeout || !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	why := "the handshake's deadline passed"
	if c.cut == cutByRate {
		why = fmt.Sprintf("below the minimum rate of %d B/s: %d bytes in %v waiting on the peer", c.minRate, c.moved, c.waited.Round(time.Millisecond))
	}
	return &slowPeerError{why: why, err: err}
}

// untimedReads makes the connection's reads wait on no deadline, and
// leaves their waiting out of the minimum rate's account: the source's
// post-copy reads the destination's fetches, which come when the VM
// touches a page that has not arrived, beside the pushes, whose writes
// bound the peer meanwhile. Turned off, the read waiting now, if any, is
// bounded again from now on.
func (c *timedConn) untimedReads(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.untimed = on
	if !on && c.rd != nil {
		_ = c.rd.SetReadDeadline(c.deadlineLocked(time.Now()))
	}
}

func (c *timedConn) Read(p []byte) (int, error) {
	start := time.Now()
	// The deadline is set under the lock, so that a read that found
	// its reads untimed cannot clear the deadline untimedReads(false)
	// set after.
	c.mu.Lock()
	untimed := c.untimed
	if c.rd != nil {
		var dl time.Time
		if !untimed {
			dl = c.deadlineLocked(start)
		}
		_ = c.rd.SetReadDeadline(dl)
	}
	c.mu.Unlock()
	n, err := c.rw.Read(p)
	if untimed {
		start = time.Now() // none of the wait counts
	}
	err = c.account(start, n, err)
	if err != nil && err != io.EOF {
		c.record(err)
	}
	return n, err
}

func (c *timedConn) Write(p []byte) (int, error) {
	start := time.Now()
	if c.wdl != nil {
		_ = c.wdl.SetWriteDeadline(c.deadline(start))
	}
	n, err := c.rw.Write(p)
	err = c.account(start, n, err)
	if err != nil {
		c.record(err)
	}
	return n, err
}

// slowPeerError is a connection cut by the handshake's deadline or the
// minimum rate rather than by Timeout. It wraps the deadline's error, a
// net.Error, so that it reads as the connection's failure.
type slowPeerError struct {
	why string
	err error
}

func (e *slowPeerError) Error() string { return "the peer is too slow: " + e.why }
func (e *slowPeerError) Unwrap() error { return e.err }

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
	if cl, ok := c.conn.(io.Closer); ok {
		_ = cl.Close()
	}
}

// connSet is a live migration's set of connections.
type connSet []*timedConn

// newConnSet wraps rws with the bounds of bounds: Timeout, and the
// minimum rate shared out among the connections, which carry the
// streams side by side.
func newConnSet(rws []io.ReadWriter, b bounds) connSet {
	cs := make(connSet, len(rws))
	perConn := b.minRate / int64(len(rws))
	if b.minRate > 0 {
		perConn = max(perConn, 1)
	}
	for i, rw := range rws {
		cs[i] = newTimedConn(rw, b.timeout, perConn)
	}
	return cs
}

// bounds are the limits a slow peer meets on every connection: Timeout
// and the minimum rate (zero for none). The handshake's deadline is set
// apart (handshaking).
type bounds struct {
	timeout time.Duration
	minRate int64
}

// handshaking sets the handshake's deadline, handshake from now, on
// every connection; zero handshake ends it, and clears the read deadline
// it left on each connection, so that no read waits on the handshake's
// deadline once the handshake is over.
func (cs connSet) handshaking(handshake time.Duration) {
	var until time.Time
	if handshake > 0 {
		until = time.Now().Add(satAdd(0, handshake))
	}
	for _, c := range cs {
		c.mu.Lock()
		c.until = until
		c.mu.Unlock()
		if handshake == 0 && c.rd != nil {
			_ = c.rd.SetReadDeadline(time.Time{})
		}
	}
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
		migrate.ErrStunLimit, migrate.ErrNotConverged, migrate.ErrConnection, migrate.ErrAuthentication} {
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
