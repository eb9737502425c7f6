package live

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
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

// newFaultConn wraps a connection that breaks once its writes pass at
// bytes (never if at < 0): it writes up to that offset, then closes the
// connection (the peer sees it end) or, with stall, stops writing without
// a word (the peer sees nothing more, and the writer blocks until its
// deadline).
func newFaultConn(c net.Conn, at int64, stall bool) *vgpusimtest.FaultConn {
	var cut vgpusimtest.Cut
	switch {
	case at < 0:
	case stall:
		cut = vgpusimtest.StallAfter(at)
	default:
		cut = vgpusimtest.CloseAfter(at)
	}
	return vgpusimtest.NewFaultConn(c, vgpusimtest.Fault{Write: cut})
}
