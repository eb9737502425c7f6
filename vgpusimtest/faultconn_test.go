package vgpusimtest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// pipe returns a FaultConn with plan f over one end of a net.Pipe, and
// the other end.
func pipe(t *testing.T, f Fault) (*FaultConn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	fc := NewFaultConn(a, f)
	t.Cleanup(func() { fc.Close(); b.Close() })
	return fc, b
}

// drain reads c to its end on a goroutine and returns what it read.
func drain(c net.Conn) <-chan []byte {
	out := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		out <- b
	}()
	return out
}

func payload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i)
	}
	return p
}

// wantFault fails t unless err is a *FaultError of op, mode and offset
// that wraps ErrInjected and cause (nil: none).
func wantFault(t *testing.T, err error, op string, mode CutMode, off int64, cause error) {
	t.Helper()
	var fe *FaultError
	if !errors.As(err, &fe) || !errors.Is(err, ErrInjected) || fe.Op != op || fe.Mode != mode || fe.Offset != off {
		t.Fatalf("error %v, want a %s %v fault at byte %d", err, op, mode, off)
	}
	if cause != nil && !errors.Is(err, cause) {
		t.Fatalf("error %v does not wrap %v", err, cause)
	}
}

// TestFaultConnCloseAfterWrite: a write that crosses the cut writes the
// bytes up to it, closes the connection and fails; the peer reads exactly
// those bytes, then the end.
func TestFaultConnCloseAfterWrite(t *testing.T) {
	for _, at := range []int64{0, 1, 40, 100} {
		fc, peer := pipe(t, Fault{Write: CloseAfter(at)})
		got := drain(peer)
		p := payload(60)
		n1, err1 := fc.Write(p)
		n2, err2 := fc.Write(p)
		total := int64(n1 + n2)
		if total != min(at, 120) || fc.BytesWritten() != total {
			t.Fatalf("cut at %d: wrote %d+%d bytes, counted %d", at, n1, n2, fc.BytesWritten())
		}
		if at >= 120 {
			continue
		}
		err := err1
		if at >= 60 {
			err = err2
		}
		wantFault(t, err, "write", CutClose, at, nil)
		if b := <-got; !bytes.Equal(b, slices.Concat(p, p)[:at]) {
			t.Fatalf("cut at %d: the peer read %d bytes", at, len(b))
		}
		if !strings.HasPrefix(err.Error(), "vgpusimtest: ") {
			t.Fatalf("message %q", err)
		}
	}
}

// TestFaultConnCloseAfterRead: reads return the bytes up to the cut, then
// the connection closes and the next read fails.
func TestFaultConnCloseAfterRead(t *testing.T) {
	fc, peer := pipe(t, Fault{Read: CloseAfter(10)})
	go func() { _, _ = peer.Write(payload(30)) }()
	got, err := io.ReadAll(fc)
	wantFault(t, err, "read", CutClose, 10, nil)
	if !bytes.Equal(got, payload(10)) || fc.BytesRead() != 10 {
		t.Fatalf("read %d bytes, counted %d", len(got), fc.BytesRead())
	}
	if _, err := peer.Write([]byte{1}); err == nil {
		t.Fatal("the peer wrote to a closed connection")
	}
}

// TestFaultConnStall: a stalled direction blocks until its deadline, set
// before the stall or while it lasts, or until Close.
func TestFaultConnStall(t *testing.T) {
	t.Run("write deadline", func(t *testing.T) {
		fc, peer := pipe(t, Fault{Write: StallAfter(5)})
		got := drain(peer)
		must(t, fc.SetWriteDeadline(time.Now().Add(30*time.Millisecond)))
		start := time.Now()
		n, err := fc.Write(payload(20))
		wantFault(t, err, "write", CutStall, 5, os.ErrDeadlineExceeded)
		var ne net.Error
		if n != 5 || time.Since(start) < 25*time.Millisecond || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("wrote %d bytes in %v: %v", n, time.Since(start), err)
		}
		fc.Close()
		if b := <-got; len(b) != 5 {
			t.Fatalf("the peer read %d bytes", len(b))
		}
	})
	t.Run("deadline set while stalled", func(t *testing.T) {
		fc, _ := pipe(t, Fault{Read: StallAfter(0)})
		go func() {
			time.Sleep(10 * time.Millisecond)
			_ = fc.SetDeadline(time.Now())
		}()
		_, err := fc.Read(make([]byte, 4))
		wantFault(t, err, "read", CutStall, 0, os.ErrDeadlineExceeded)
	})
	t.Run("close", func(t *testing.T) {
		fc, peer := pipe(t, Fault{Write: StallAfter(0)})
		drain(peer)
		go func() {
			time.Sleep(10 * time.Millisecond)
			fc.Close()
		}()
		_, err := fc.Write([]byte{1})
		wantFault(t, err, "write", CutStall, 0, net.ErrClosed)
	})
}

// TestFaultConnFlips: the bits named arrive flipped, each way, and the
// writer's buffer is left as it was.
func TestFaultConnFlips(t *testing.T) {
	fc, peer := pipe(t, Fault{FlipWriteBits: []int64{0, 8*7 + 7, 8 * 100}, FlipReadBits: []int64{8*3 + 1}})
	got := drain(peer)
	p := payload(8)
	for _, half := range [][]byte{p[:3], p[3:]} {
		_, err := fc.Write(half)
		must(t, err)
	}
	if !bytes.Equal(p, payload(8)) {
		t.Fatal("Write modified the caller's buffer")
	}
	fc.Close()
	want := payload(8)
	want[0] ^= 1
	want[7] ^= 0x80
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the peer read %x, want %x", b, want)
	}

	fc, peer = pipe(t, Fault{FlipReadBits: []int64{8*3 + 1}})
	go func() { _, _ = peer.Write(payload(6)); peer.Close() }()
	b, err := io.ReadAll(fc)
	must(t, err)
	want = payload(6)
	want[3] ^= 2
	if !bytes.Equal(b, want) {
		t.Fatalf("read %x, want %x", b, want)
	}
}

// TestFaultConnPacing: a delay holds each write back; a deadline cuts the
// delay short; a rate cap spreads the bytes out.
func TestFaultConnPacing(t *testing.T) {
	fc, peer := pipe(t, Fault{WriteDelay: 20 * time.Millisecond})
	drain(peer)
	start := time.Now()
	_, err := fc.Write([]byte{1})
	must(t, err)
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("a delayed write took %v", d)
	}
	must(t, fc.SetWriteDeadline(time.Now().Add(5*time.Millisecond)))
	if n, err := fc.Write([]byte{2}); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a write delayed past its deadline: %d, %v", n, err)
	}

	fc, peer = pipe(t, Fault{WriteBytesPerSec: 50_000})
	got := drain(peer)
	start = time.Now()
	_, err = fc.Write(payload(5000)) // 100 ms at the cap, the first piece free
	must(t, err)
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Fatalf("5000 bytes at 50 kB/s took %v", d)
	}
	fc.Close()
	if b := <-got; !bytes.Equal(b, payload(5000)) {
		t.Fatal("a paced write lost bytes")
	}
}

// sizesConn records the sizes of the writes it is given.
type sizesConn struct {
	net.Conn
	sizes []int
}

func (c *sizesConn) Write(p []byte) (int, error) {
	c.sizes = append(c.sizes, len(p))
	return len(p), nil
}

// TestFaultConnChunks: a write goes on in pieces drawn from the seed:
// the same seed, the same pieces; another seed, others.
func TestFaultConnChunks(t *testing.T) {
	pieces := func(seed uint64) []int {
		c := &sizesConn{}
		fc := NewFaultConn(c, Fault{WriteChunkBytes: 16, Seed: seed})
		for range 4 {
			if n, err := fc.Write(payload(100)); n != 100 || err != nil {
				t.Fatalf("wrote %d: %v", n, err)
			}
		}
		for _, s := range c.sizes {
			if s < 1 || s > 16 {
				t.Fatalf("a piece of %d bytes", s)
			}
		}
		return c.sizes
	}
	a, b, c := pieces(1), pieces(1), pieces(2)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Fatalf("seed 1: %v and %v; seed 2: %v", a, b, c)
	}
}

// TestFaultConnConcurrent uses every method at once, as net.Conn allows,
// for the race detector.
func TestFaultConnConcurrent(t *testing.T) {
	a, b := net.Pipe()
	fa := NewFaultConn(a, Fault{Write: CloseAfter(5000), FlipWriteBits: []int64{77}, WriteChunkBytes: 64, Seed: 9})
	fb := NewFaultConn(b, Fault{Read: StallAfter(1 << 20)})
	var wg sync.WaitGroup
	for _, c := range []*FaultConn{fa, fb} {
		wg.Go(func() {
			for {
				if _, err := c.Write(payload(100)); err != nil {
					return
				}
			}
		})
		wg.Go(func() {
			buf := make([]byte, 64)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		})
		wg.Go(func() {
			for range 50 {
				_ = c.SetDeadline(time.Now().Add(time.Second))
				_ = c.BytesRead() + c.BytesWritten()
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	fb.Close()
	wg.Wait()
	if fa.BytesWritten() > 5000 {
		t.Fatalf("wrote %d bytes past a cut at 5000", fa.BytesWritten())
	}
}

// TestFaultValidate: a plan that cannot be carried out is refused, and
// NewFaultConn panics on it.
func TestFaultValidate(t *testing.T) {
	for _, f := range []Fault{
		{Write: CloseAfter(-1)}, {Read: Cut{Mode: 7}}, {FlipReadBits: []int64{-3}},
		{WriteDelay: -time.Second}, {WriteBytesPerSec: -1}, {WriteChunkBytes: -2},
	} {
		if err := f.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", f, err)
		}
	}
	if err := (Fault{}).Validate(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewFaultConn took an invalid plan")
		}
	}()
	NewFaultConn(nil, Fault{WriteChunkBytes: -1})
}
