package live

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// A source whose second stream ends cleanly without one page that
// followed, and an OnResume that reads that page and waits for it: the
// access fails as soon as the stream ends, and Receive returns, the VM
// lost, rather than waiting for ever on an access that waits on it.
func TestPostCopyMissingPageFailsWaiter(t *testing.T) {
	rec := pcRecord(t, nil)
	_, dst := hostPair(t, memory.Sparse, 1)
	missing := rec.owedPages[0]
	accessErr := make(chan error, 1)
	sc := pcSourceCase{name: "one page left out",
		post: func(s *pcSource) error { return s.writePages(rec.owedPages[1:]) },
		onResume: func(in *vgpu.VM) {
			regs := append([]*memory.Region{in.RAM()}, in.Framebuffers()...)
			b := make([]byte, rec.pageSize[missing.region])
			_, err := regs[missing.region].ReadAt(b, int64(missing.page)*int64(len(b)))
			accessErr <- err
		}}
	o := pcReceive(t, dst, rec, sc)
	if !errors.Is(o.err, migrate.ErrVMLost) || !errors.Is(o.err, migrate.ErrStream) || o.in != nil {
		t.Fatalf("Receive: VM %v, %v; want the VM lost to a stream short of a page", o.in, o.err)
	}
	if err := <-accessErr; !errors.Is(err, memory.ErrAbsent) {
		t.Fatalf("the access to the page that never came: %v, want memory.ErrAbsent", err)
	}
	holdsNothing(t, dst)
}

// The second stream is cut while the VM runs: the regions keep their
// absent pages (the applier does not scrub a post-copy's regions under a
// running VM), and an access to a page that never came fails instead of
// reading zeros.
func TestPostCopyFailureKeepsAbsence(t *testing.T) {
	rec := pcRecord(t, nil)
	if len(rec.owedPages) < 3 {
		t.Fatalf("the recording owes %d pages", len(rec.owedPages))
	}
	_, dst := hostPair(t, memory.Sparse, 1)
	target := rec.owedPages[len(rec.owedPages)-1]
	type seen struct {
		absentBefore, absentAfter int
		err                       error
	}
	out := make(chan seen, 1)
	sc := pcSourceCase{name: "cut after two pages",
		post: func(s *pcSource) error {
			w, err := s.postWriter(s.postID(postCopyStreamIndex(0)), postCopyStreamIndex(0), s.rec.meta)
			if err != nil {
				return err
			}
			defer w.Release()
			if err := pcWritePages(w, s.rec, s.rec.owedPages[:2]); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
			return s.c.Close()
		},
		onResume: func(in *vgpu.VM) {
			regs := append([]*memory.Region{in.RAM()}, in.Framebuffers()...)
			var s seen
			s.absentBefore = regs[target.region].AbsentPages()
			time.Sleep(300 * time.Millisecond) // the cut and the applier's failure
			s.absentAfter = regs[target.region].AbsentPages()
			b := make([]byte, rec.pageSize[target.region])
			_, s.err = regs[target.region].ReadAt(b, int64(target.page)*int64(len(b)))
			out <- s
		}}
	o := pcReceive(t, dst, rec, sc)
	s := <-out
	if !errors.Is(o.err, migrate.ErrVMLost) || o.in != nil {
		t.Fatalf("Receive: VM %v, %v; want the VM lost", o.in, o.err)
	}
	if s.absentAfter == 0 || !errors.Is(s.err, memory.ErrAbsent) {
		t.Fatalf("after the cut: %d pages absent (%d before), an access to page %v: %v; want it absent and the access failed",
			s.absentAfter, s.absentBefore, target, s.err)
	}
	holdsNothing(t, dst)
}

// An OnResume slower than the timeout does not hold up the destination's
// word that every page landed: the source succeeds too, rather than
// failing in doubt while the destination runs the VM.
func TestPostCopySlowOnResume(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-slow", "P40-2Q", 128*MiB, 32*MiB, tinyModel, 9)
	must(t, src.Advance(200*time.Millisecond))
	must(t, vm.Pause())
	timeout := 300 * time.Millisecond
	if raceEnabled {
		timeout = time.Second
	}
	rc := ReceiveConfig{Timeout: timeout, OnResume: func(*vgpu.VM) { time.Sleep(5 * timeout) }}
	sc, dc := loopbackConns(t, 1)
	res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc), SendConfig{Timeout: timeout, Policy: migrate.Policy{Mode: migrate.PostCopy}}, rc)
	if res.srcErr != nil || res.dstErr != nil || res.in == nil || vm.State() != vgpu.VMDestroyed {
		t.Fatalf("source: %v; destination: %v (VM %v); the source's VM %v", res.srcErr, res.dstErr, res.in, vm.State())
	}
}
