package vgpusimtest

import (
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"
)

// FaultConn is a net.Conn that breaks as its Fault plan says. It is safe
// for the concurrent use net.Conn allows: Reads and Writes on goroutines
// of their own, each direction's calls taken in turn (so that offsets
// count the bytes in the order they went), and Close and the deadline
// setters from any goroutine, which end a stall, a delay or a rate cap's
// wait at once, as they end a blocked call on a real connection.
type FaultConn struct {
	net.Conn
	plan Fault

	wmu    sync.Mutex // one Write at a time; guards rng and paceAt
	rmu    sync.Mutex // one Read at a time
	rng    *rand.Rand
	paceAt time.Time // when the rate cap lets the next piece go

	mu        sync.Mutex
	written   int64
	read      int64
	readDL    time.Time
	writeDL   time.Time
	changed   chan struct{} // closed and replaced when a deadline changes
	closed    chan struct{}
	closeOnce sync.Once
}

// NewFaultConn wraps c with the plan f. It panics if f.Validate fails: a
// plan is the test's own, and an invalid one is a bug in the test.
func NewFaultConn(c net.Conn, f Fault) *FaultConn {
	if err := f.Validate(); err != nil {
		panic(err)
	}
	return &FaultConn{
		Conn:    c,
		plan:    f,
		rng:     rand.New(rand.NewPCG(f.Seed, 0x76677075)),
		changed: make(chan struct{}),
		closed:  make(chan struct{}),
	}
}

// NetConn returns the wrapped connection.
func (f *FaultConn) NetConn() net.Conn { return f.Conn }

// BytesWritten returns how many bytes the wrapped connection accepted.
func (f *FaultConn) BytesWritten() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.written
}

// BytesRead returns how many bytes Read returned.
func (f *FaultConn) BytesRead() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.read
}

// Write writes p as the plan says: delayed, paced, in pieces, with bits
// flipped, and up to the write cut, where it fails with a *FaultError.
func (f *FaultConn) Write(p []byte) (int, error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if d := f.plan.WriteDelay; d > 0 {
		if err := f.wait(time.Now().Add(d), true); err != nil {
			return 0, err
		}
	}
	cut := f.plan.Write
	n := 0
	for {
		off := f.BytesWritten()
		if cut.Mode != CutNone && off >= cut.After && (n < len(p) || len(p) == 0) {
			return n, f.trip("write", cut.Mode, off)
		}
		if n == len(p) {
			return n, nil
		}
		k := len(p) - n
		if cut.Mode != CutNone {
			k = int(min(int64(k), cut.After-off))
		}
		if c := f.plan.WriteChunkBytes; c > 0 {
			k = min(k, 1+f.rng.IntN(c))
		}
		if err := f.pace(&k); err != nil {
			return n, err
		}
		m, err := f.Conn.Write(flipped(p[n:n+k], off, f.plan.FlipWriteBits, true))
		f.mu.Lock()
		f.written += int64(m)
		f.mu.Unlock()
		n += m
		if err != nil {
			return n, err
		}
	}
}

// pace shortens a piece of k bytes to a fiftieth of a second's worth at
// the rate cap, and waits until the cap lets it go.
func (f *FaultConn) pace(k *int) error {
	rate := f.plan.WriteBytesPerSec
	if rate == 0 {
		return nil
	}
	*k = int(min(int64(*k), max(rate/50, 1)))
	start := time.Now()
	if f.paceAt.After(start) {
		start = f.paceAt
	}
	if err := f.wait(start, true); err != nil {
		return err
	}
	f.paceAt = start.Add(time.Duration(float64(*k) / float64(rate) * float64(time.Second)))
	return nil
}

// Read reads as the plan says: with bits flipped, and up to the read cut,
// where it fails with a *FaultError.
func (f *FaultConn) Read(p []byte) (int, error) {
	f.rmu.Lock()
	defer f.rmu.Unlock()
	off := f.BytesRead()
	if cut := f.plan.Read; cut.Mode != CutNone {
		if off >= cut.After {
			return 0, f.trip("read", cut.Mode, off)
		}
		p = p[:min(int64(len(p)), cut.After-off)]
	}
	n, err := f.Conn.Read(p)
	flipped(p[:n], off, f.plan.FlipReadBits, false)
	f.mu.Lock()
	f.read += int64(n)
	f.mu.Unlock()
	return n, err
}

// trip carries out the cut of direction op at offset off.
func (f *FaultConn) trip(op string, mode CutMode, off int64) error {
	e := &FaultError{Op: op, Offset: off, Mode: mode}
	if mode == CutClose {
		f.Close()
		return e
	}
	e.Err = f.wait(time.Time{}, op == "write")
	return e
}

// wait blocks until the time until (forever if zero), the direction's
// deadline or Close, whichever comes first, following deadline changes
// made meanwhile. It returns nil, os.ErrDeadlineExceeded or net.ErrClosed.
func (f *FaultConn) wait(until time.Time, write bool) error {
	for {
		f.mu.Lock()
		dl, changed := f.readDL, f.changed
		if write {
			dl = f.writeDL
		}
		f.mu.Unlock()
		select {
		case <-f.closed:
			return net.ErrClosed
		default:
		}
		now := time.Now()
		if !dl.IsZero() && !now.Before(dl) {
			return os.ErrDeadlineExceeded
		}
		if !until.IsZero() && !now.Before(until) {
			return nil
		}
		next := until
		if next.IsZero() || !dl.IsZero() && dl.Before(next) {
			next = dl
		}
		var tick <-chan time.Time
		var t *time.Timer
		if !next.IsZero() {
			t = time.NewTimer(next.Sub(now))
			tick = t.C
		}
		select {
		case <-tick:
		case <-changed:
		case <-f.closed:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// flipped flips the bits of p, which starts at offset off of its
// direction, that bits name: in a copy if clone is set and any does.
func flipped(p []byte, off int64, bits []int64, clone bool) []byte {
	copied := !clone
	for _, b := range bits {
		i := b/8 - off
		if i < 0 || i >= int64(len(p)) {
			continue
		}
		if !copied {
			p, copied = append([]byte(nil), p...), true
		}
		p[i] ^= 1 << (b % 8)
	}
	return p
}

// SetDeadline sets both deadlines, here and on the wrapped connection.
func (f *FaultConn) SetDeadline(t time.Time) error {
	f.setDeadlines(&t, &t)
	return f.Conn.SetDeadline(t)
}

// SetReadDeadline sets the read deadline, here and on the wrapped
// connection.
func (f *FaultConn) SetReadDeadline(t time.Time) error {
	f.setDeadlines(&t, nil)
	return f.Conn.SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline, here and on the wrapped
// connection.
func (f *FaultConn) SetWriteDeadline(t time.Time) error {
	f.setDeadlines(nil, &t)
	return f.Conn.SetWriteDeadline(t)
}

func (f *FaultConn) setDeadlines(read, write *time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if read != nil {
		f.readDL = *read
	}
	if write != nil {
		f.writeDL = *write
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// Close closes the wrapped connection and ends every wait of a stall, a
// delay or a rate cap.
func (f *FaultConn) Close() error {
	f.closeOnce.Do(func() { close(f.closed) })
	return f.Conn.Close()
}
