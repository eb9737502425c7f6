package live

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// The wire matrix in post-copy: the same man in the middle (mitm, in
// wire_matrix_test.go) between a source that switches over into
// post-copy and its destination, acting on the messages only post-copy
// sends, and on the commit and its acknowledgement, after which a
// post-copy failure no longer rolls back but strands the VM. Every cell
// must end as mitmPostCheck says: one running copy at most, never one
// with a page missing, and the VM either moved, left at the source as it
// was, or held at the source in doubt with the destination holding
// nothing (or, once the destination had every page, the VM).

// mitmPostMessages are the messages of the post-copy matrix in the order
// they cross the wire: after the first stream, the list of the pages that
// follow (owed) and its first page bitmap; the commit and resumed, as in
// pre-copy; the post-copy stream's first record, its metadata; the
// destination's first fetch; and its word that every page landed.
var mitmPostMessages = []string{"owed", "bitmap", "commit", "resumed", "postcopy-stream", "fetch", "landed"}

// The counter walks mitmPostPages pages of guest RAM and of the
// framebuffer, mitmPostPagesPerSec a second in each: every page it
// touches at the destination before the pages landed is absent there, and
// one tick of the destination's Runner touches several.
const (
	mitmPostPages       = 8
	mitmPostPagesPerSec = 20000
)

// mitmPostWorld is one post-copy cell's world: a small VM running the
// counter oracle at the source, and a destination whose Runner takes the
// workload on once the VM resumes there (as postCopyWorld does, smaller).
type mitmPostWorld struct {
	src, dst       *vgpu.Host
	vm             *vgpu.VM
	w, dstW        *counterWorkload
	srcRun, dstRun *Runner
	resumeErr      error // the destination's SetWorkload, in OnResume
}

func newMitmPostWorld(t *testing.T) *mitmPostWorld {
	t.Helper()
	// Small framebuffer pages: the pages that follow cost little to
	// encode, so that no connection idles near the timeout while the
	// source encodes a batch for another, even on a busy machine.
	src, dst := migtest.SmallPageHosts(t)
	pw := &mitmPostWorld{src: src, dst: dst, w: &counterWorkload{PagesPerSec: mitmPostPagesPerSec, Pages: mitmPostPages}}
	var err error
	pw.vm, err = src.CreateVM(vgpu.VMSpec{ID: "mitm", RAMBytes: 64 << 10, RAMFootprintBytes: 16 << 10, Profiles: []string{"P40-1Q"}, Workload: pw.w})
	must(t, err)
	must(t, pw.vm.Start())
	must(t, pw.vm.SetThrottle(mitmOwnerThrottle))
	// Every page the counter walks written at the source, and so owed
	// at the destination: the first it touches there faults.
	must(t, src.Advance(10*time.Millisecond))
	pw.srcRun, pw.dstRun = NewRunner(src, 0), NewRunner(dst, 0)
	pw.srcRun.Start()
	pw.dstRun.Start()
	t.Cleanup(func() {
		_ = pw.srcRun.Stop()
		_ = pw.dstRun.Stop()
	})
	return pw
}

// onResume hands the source's workload, as the stun left it, to the VM
// resumed at the destination, where its next step touches absent pages.
func (pw *mitmPostWorld) onResume(in *vgpu.VM) {
	pw.srcRun.Lock()
	w := *pw.w
	pw.srcRun.Unlock()
	pw.dstW = &w
	pw.dstRun.Lock()
	defer pw.dstRun.Unlock()
	pw.resumeErr = in.SetWorkload(pw.dstW)
}

// mitmPostHangAfter is how long a post-copy cell may take before it
// counts as hung: many times the longest wait a cell can cause, a message
// held for two timeouts and an end's own timeout after it.
func mitmPostHangAfter(timeout time.Duration) time.Duration { return 10 * timeout }

// mitmPostRun migrates a fresh mitmPostWorld's VM in post-copy through
// m, and returns the world and what both ends did. An end that does not
// return within mitmPostHangAfter fails the cell; its connections are
// then closed under it, so that the check can still see how it ends.
func mitmPostRun(t *testing.T, m *mitm, key []byte, timeout time.Duration) (*mitmPostWorld, liveResult) {
	t.Helper()
	pw := newMitmPostWorld(t)
	m.seen = map[string][]byte{}
	m.gateWait, m.fetched, m.received = timeout/2, make(chan struct{}), make(chan struct{})
	sEnd, dEnd, relay := vgpusimtest.NewRelayPipe(vgpusimtest.RelayPlan{Framing: m.framer, Rule: m.rule})
	// A second connection, which the man in the middle leaves alone,
	// carries a second stream of each kind: a failure on the first must
	// end the other too.
	s1, d1 := net.Pipe()
	closeAll := func() {
		for _, c := range []net.Conn{sEnd, dEnd, s1, d1} {
			c.Close()
		}
	}
	// No minimum rate: the matrix holds messages past the timeout, and a
	// VM this small moves too few bytes for the rate's account, which
	// counts the gate's wait too, to mean anything on a busy machine.
	scfg := SendConfig{Policy: migrate.Policy{Mode: migrate.PostCopy}, EncryptionKey: key, Timeout: timeout, MinBytesPerSec: -1,
		DigestWorkers: 1, Lock: pw.srcRun}
	rcfg := ReceiveConfig{EncryptionKey: key, Timeout: timeout, MinBytesPerSec: -1, DigestWorkers: 1, Lock: pw.dstRun, OnResume: pw.onResume}
	// Each end writes fields of its own.
	var res liveResult
	sent, received := make(chan struct{}), m.received
	go func() {
		defer close(received)
		res.in, res.dstRep, res.dstErr = Receive(context.Background(), pw.dst, []io.ReadWriter{dEnd, d1}, rcfg)
	}()
	go func() {
		defer close(sent)
		res.srcRep, res.srcErr = Send(context.Background(), pw.vm, []io.ReadWriter{sEnd, s1}, scfg)
	}()
	bound := mitmPostHangAfter(timeout)
	if stuck := mitmPostWait(bound, sent, received); stuck != "" {
		t.Errorf("%s hung: still running %v after the migration started (%v %s)", stuck, bound, m.act, m.target)
		_ = relay.Close()
		closeAll()
		if stuck := mitmPostWait(bound, sent, received); stuck != "" {
			t.Fatalf("%s did not return even once its connections were closed", stuck)
		}
	}
	closeAll()
	if err := relay.Close(); err != nil {
		t.Errorf("the man in the middle: %v", err)
	}
	if pw.resumeErr != nil {
		t.Errorf("handing the workload to the destination: %v", pw.resumeErr)
	}
	return pw, res
}

// mitmPostWait waits up to d for both ends, and names those that did not
// return.
func mitmPostWait(d time.Duration, sent, received <-chan struct{}) string {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for sent != nil || received != nil {
		select {
		case <-sent:
			sent = nil
		case <-received:
			received = nil
		case <-timer.C:
			switch {
			case sent != nil && received != nil:
				return "Send and Receive"
			case sent != nil:
				return "Send"
			default:
				return "Receive"
			}
		}
	}
	return ""
}

// TestWireMatrixPostCopy runs every message of mitmPostMessages through
// every action of the man in the middle, in post-copy.
func TestWireMatrixPostCopy(t *testing.T) {
	timeout := 300 * time.Millisecond
	if raceEnabled {
		timeout = time.Second
	}
	// Two clean migrations give the messages to replay (same key) and to
	// forge the post-copy stream with (another key). Their gates make a
	// fetch cross.
	reference := func(key []byte) map[string][]byte {
		m := &mitm{act: mitmPass, gate: true}
		pw, res := mitmPostRun(t, m, key, timeout)
		if res.srcErr != nil || res.dstErr != nil {
			t.Fatalf("a clean post-copy migration: source %v, destination %v", res.srcErr, res.dstErr)
		}
		if p := res.srcRep.PostCopy; p == nil || p.OwedPages == 0 || p.Fetches == 0 {
			t.Fatalf("a clean post-copy migration with no post-copy or no fetch: %+v", p)
		}
		for _, name := range mitmPostMessages {
			if m.seen[name] == nil {
				t.Fatalf("the man in the middle never saw %s", name)
			}
		}
		mitmPostCheck(t, "", mitmPass, pw, res)
		return m.seen
	}
	replay, forged := reference(mitmKey), reference(mitmOtherKey)
	cells := 0
	for _, name := range mitmPostMessages {
		for _, act := range mitmActs {
			t.Run(fmt.Sprintf("%s/%v", name, act), func(t *testing.T) {
				// The first fetch is the workload's: the gate makes it
				// come, and come before the push has landed the page.
				m := &mitm{target: name, act: act, hold: 2 * timeout, replay: replay, forged: forged, gate: name == "fetch"}
				pw, res := mitmPostRun(t, m, mitmKey, timeout)
				if !m.hit {
					t.Fatalf("%s never crossed: source %v, destination %v", name, res.srcErr, res.dstErr)
				}
				mitmPostCheck(t, name, act, pw, res)
			})
			cells++
		}
	}
	t.Logf("post-copy wire matrix: %d messages × %d actions = %d cells", len(mitmPostMessages), len(mitmActs), cells)
}
