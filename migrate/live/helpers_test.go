package live

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// loopbackConns returns k connected TCP pairs over loopback: the source's
// ends and the destination's, accepted in the order they were dialled.
func loopbackConns(t testing.TB, k int) (src, dst []net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	for range k {
		c, err := net.Dial("tcp", ln.Addr().String())
		must(t, err)
		a, err := ln.Accept()
		must(t, err)
		src, dst = append(src, c), append(dst, a)
	}
	t.Cleanup(func() {
		for _, c := range append(src, dst...) {
			c.Close()
		}
	})
	return src, dst
}

func rws[C io.ReadWriter](cs []C) []io.ReadWriter {
	out := make([]io.ReadWriter, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

// liveResult is what both ends of a live migration returned.
type liveResult struct {
	srcRep, dstRep *migrate.Report
	srcErr, dstErr error
	in             *vgpu.VM
}

// liveMigrate runs Send and Receive against each other over the given
// connections and waits for both.
func liveMigrate(ctx context.Context, vm *vgpu.VM, dst *vgpu.Host, srcConns, dstConns []io.ReadWriter,
	scfg SendConfig, rcfg ReceiveConfig) liveResult {
	var res liveResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res.in, res.dstRep, res.dstErr = Receive(ctx, dst, dstConns, rcfg)
	}()
	res.srcRep, res.srcErr = Send(ctx, vm, srcConns, scfg)
	wg.Wait()
	return res
}

// holdsNothing fails t unless host holds no VM and every GPU's framebuffer
// is free.
func holdsNothing(t testing.TB, host *vgpu.Host) {
	t.Helper()
	if vms := host.VMs(); len(vms) != 0 {
		t.Fatalf("destination holds %d VM(s) after a failed migration", len(vms))
	}
	for _, g := range host.GPUs() {
		if n, w := g.VGPUCount(), len(g.Framebuffer().Windows()); n != 0 || w != 0 {
			t.Fatalf("destination GPU %d holds %d vGPU(s) and %d window(s) after a failed migration", g.Index(), n, w)
		}
	}
}

// faultConn wraps a connection and breaks it once its writes pass a
// number of bytes: it writes up to that offset, then closes the connection
// (the peer sees it end) or, with stall, stops writing without a word (the
// peer sees nothing more, and the writer blocks until its deadline).
type faultConn struct {
	net.Conn
	mu       sync.Mutex
	left     int64 // bytes still written before the fault; < 0: never
	stall    bool
	tripped  bool
	written  int64
	deadline time.Time
	closed   chan struct{}
	once     sync.Once
}

func newFaultConn(c net.Conn, at int64, stall bool) *faultConn {
	return &faultConn{Conn: c, left: at, stall: stall, closed: make(chan struct{})}
}

var errInjected = errors.New("injected fault")

func (f *faultConn) SetWriteDeadline(t time.Time) error {
	f.mu.Lock()
	f.deadline = t
	f.mu.Unlock()
	return f.Conn.SetWriteDeadline(t)
}

func (f *faultConn) SetDeadline(t time.Time) error {
	f.mu.Lock()
	f.deadline = t
	f.mu.Unlock()
	return f.Conn.SetDeadline(t)
}

func (f *faultConn) Close() error {
	f.once.Do(func() { close(f.closed) })
	return f.Conn.Close()
}

func (f *faultConn) Write(p []byte) (int, error) {
	f.mu.Lock()
	if f.tripped {
		f.mu.Unlock()
		return 0, errInjected
	}
	if f.left < 0 || int64(len(p)) <= f.left {
		f.mu.Unlock()
		n, err := f.Conn.Write(p)
		f.mu.Lock()
		f.written += int64(n)
		if f.left >= 0 {
			f.left -= int64(n)
		}
		f.mu.Unlock()
		return n, err
	}
	f.tripped = true
	head, deadline := p[:f.left], f.deadline
	f.mu.Unlock()
	n, _ := f.Conn.Write(head)
	f.mu.Lock()
	f.written += int64(n)
	f.mu.Unlock()
	if !f.stall {
		f.Close()
		return n, errInjected
	}
	wait := time.Hour
	if !deadline.IsZero() {
		wait = time.Until(deadline)
	}
	select {
	case <-time.After(wait):
		return n, os.ErrDeadlineExceeded
	case <-f.closed:
		return n, net.ErrClosed
	}
}

// bytesWritten returns how many bytes went through.
func (f *faultConn) bytesWritten() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.written
}
