package live

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The post-copy column of the live fault table. TestLiveFaultTable fails
// a migration at every point up to the resume; these cells fail it once
// the VM runs at the destination with pages still at the source, where
// nothing can be rolled back: the destination's copy, which lacks pages
// no end can give it any more, is destroyed, and the source keeps its
// own, as of the stun, paused and held in doubt (migrate.ErrVMLost at
// both ends). A failure once every page was sent, which cannot keep them
// from landing — the destination's last word lost, or its fetch stalled
// while the push goes on — leaves the destination whole, and the source,
// not hearing so, in doubt (migrate.ErrInDoubt).

// pcTrigger is where in post-copy a cell's failure strikes. Each end's
// connections are armed when its end enters post-copy (its Progress
// event), so that a cell counts only the post-copy's own bytes.
type pcTrigger uint8

const (
	pcAtStart    pcTrigger = iota + 1 // as the end enters post-copy, before its first byte of it
	pcAfterWrite                      // once the end wrote the cut's bytes of its second stream
	pcAfterRead                       // once the end read the cut's bytes of its second stream (a cancel's)
	pcAtMessage                       // at the first message of a type the end writes in post-copy
)

// pcAction is what a cell's failure does.
type pcAction uint8

const (
	pcDrop   pcAction = iota + 1 // the link drops: both ends of the connection close
	pcStall                      // the end's writes stop without a word and block until their deadline
	pcCancel                     // the end's caller cancels its context
)

// pcVariant is how a cell's VM moves: in post-copy at once, or in the
// hybrid, two pre-copy rounds that cannot converge and then post-copy.
type pcVariant struct {
	name   string
	policy migrate.Policy
	conns  int
}

var pcVariants = []pcVariant{
	{"pure", migrate.Policy{Mode: migrate.PostCopy}, 1},
	{"hybrid", migrate.Policy{Mode: migrate.PreCopy, StunTarget: time.Microsecond, MaxRounds: 2, OnNonConvergence: migrate.SwitchToPostCopy}, 2},
}

// pcCell is one failure in post-copy, and what each end must then say.
type pcCell struct {
	name  string
	onDst bool // the destination's end fails; otherwise the source's
	trig  pcTrigger
	msg   msgType // pcAtMessage's type
	act   pcAction
	// early: the failure strikes the destination's acknowledgement of the
	// resume, which it writes once in post-copy, before the source's
	// post-copy begins. The source, which committed and hears nothing,
	// fails in the resume with the outcome in doubt (ErrInDoubt); the
	// destination strands its copy as in any post-copy failure.
	early bool
	// whole: the failure comes once every page was sent and cannot keep
	// them from landing, so the destination keeps the VM whole and
	// returns it; the source, which never hears every page landed, keeps
	// its copy in doubt (ErrInDoubt, not ErrVMLost).
	whole bool
	// The sentinels each end's error wraps beside ErrVMLost or ErrInDoubt
	// (dstErr only where the destination fails): a destination that reads
	// a stream cut short may name the stream (ErrStream) or the
	// connection.
	srcErr, dstErr error
	// pushCut: the failure comes inside the second stream, before every
	// page was sent. Where the destination fails so, the source's push
	// holds at the cut until it has (pcConn.holdUntil): the push of a few
	// kilobytes fits the connections' buffers whole, and would otherwise
	// be sent, every page of it, before the destination's failure shows.
	pushCut bool
	// pushWaits: the source's push holds at the cut until the
	// destination's failure has struck, and then goes on; longStall: it
	// must land every page while the stall lasts, so the Timeout that ends
	// the stall is a few times the stall cells' own.
	pushWaits, longStall bool
	// short: the cell runs under the race detector and -short too: the
	// source's push stalled, the destination canceled mid-push, its
	// fetch dropped and its last word stalled.
	short bool
}

var pcCells = []pcCell{
	{name: "resumed/link-dropped", onDst: true, trig: pcAtMessage, msg: msgResumed, act: pcDrop, early: true, srcErr: migrate.ErrConnection, dstErr: migrate.ErrConnection},
	{name: "resumed/link-stalled", onDst: true, trig: pcAtMessage, msg: msgResumed, act: pcStall, early: true, srcErr: migrate.ErrConnection, dstErr: migrate.ErrConnection},
	{name: "start/source-cancels", trig: pcAtStart, act: pcCancel, srcErr: migrate.ErrCanceled, dstErr: migrate.ErrConnection},
	{name: "start/destination-cancels", onDst: true, trig: pcAtStart, act: pcCancel, srcErr: migrate.ErrConnection, dstErr: migrate.ErrCanceled, pushCut: true},
	{name: "push/link-dropped", trig: pcAfterWrite, act: pcDrop, srcErr: migrate.ErrConnection, dstErr: migrate.ErrConnection, pushCut: true},
	{name: "push/link-stalled", trig: pcAfterWrite, act: pcStall, srcErr: migrate.ErrConnection, dstErr: migrate.ErrConnection, pushCut: true, short: true},
	{name: "push/source-cancels", trig: pcAfterWrite, act: pcCancel, srcErr: migrate.ErrCanceled, dstErr: migrate.ErrConnection, pushCut: true},
	{name: "push/destination-cancels", onDst: true, trig: pcAfterRead, act: pcCancel, srcErr: migrate.ErrConnection, dstErr: migrate.ErrCanceled, pushCut: true, short: true},
	{name: "fetch/link-dropped", onDst: true, trig: pcAtMessage, msg: msgFetch, act: pcDrop, srcErr: migrate.ErrConnection, dstErr: migrate.ErrConnection, pushCut: true, short: true},
	// The destination's fetch stalls, and the access with it, but the
	// push, the other way, goes on and lands every page within the
	// Timeout: the VM is whole there, and the source hears nothing more.
	{name: "fetch/link-stalled", onDst: true, trig: pcAtMessage, msg: msgFetch, act: pcStall, whole: true, srcErr: migrate.ErrConnection, pushWaits: true, longStall: true},
	{name: "landed/link-dropped", onDst: true, trig: pcAtMessage, msg: msgLanded, act: pcDrop, whole: true, srcErr: migrate.ErrConnection},
	// The source waits for the destination's word no longer than its
	// Timeout once every page is on the wire.
	{name: "landed/link-stalled", onDst: true, trig: pcAtMessage, msg: msgLanded, act: pcStall, whole: true, srcErr: migrate.ErrConnection, short: true},
}

// pcConn wraps one end's connection. Once armed it counts the bytes its
// end writes and reads, and at the cell's point acts once; it is the
// post-copy's tap, which needs no parser: after the arm, an end writes
// only its second stream (the source) or whole control messages, one a
// Write (the destination).
type pcConn struct {
	net.Conn
	peer   *pcConn // the other end's connection, which a drop closes too
	trig   pcTrigger
	at     int64
	msg    msgType
	act    pcAction
	cancel func() // the end's cancel
	onTrip func()
	// holdUntil, if set, stops the source's second stream at byte at
	// until it is closed; then, with holdFails, the write fails as one to
	// a connection reset by its peer does, and otherwise the stream goes
	// on.
	holdUntil <-chan struct{}
	holdFails bool

	mu          sync.Mutex
	armed       bool
	tripped     bool
	wrote, read int64 // since armed
	deadline    time.Time
	closed      chan struct{}
	once        sync.Once
	trippedCh   chan struct{} // closed when the cell's point is reached
	tripOnce    sync.Once
}

func newPCConn(c net.Conn) *pcConn {
	return &pcConn{Conn: c, closed: make(chan struct{}), trippedCh: make(chan struct{})}
}

var errPCCut = errors.New("connection broken by the test in post-copy")

// arm starts the count; a cell at the start trips at once.
func (c *pcConn) arm() {
	c.mu.Lock()
	c.armed = true
	trip := c.act != 0 && c.trig == pcAtStart && !c.tripped
	c.tripped = c.tripped || trip
	c.mu.Unlock()
	if !trip {
		return
	}
	c.tripNow()
	switch c.act {
	case pcCancel:
		c.cancel()
	case pcDrop:
		c.Close()
		c.peer.Close()
	}
}

func (c *pcConn) tripNow() {
	if c.onTrip != nil {
		c.onTrip()
	}
	c.tripOnce.Do(func() { close(c.trippedCh) })
}

// trip reports whether the cell's point was reached.
func (c *pcConn) trip() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tripped
}

func (c *pcConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *pcConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *pcConn) carry(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	if c.armed {
		c.wrote += int64(n)
	}
	c.mu.Unlock()
	return n, err
}

func (c *pcConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.tripped && c.act == pcStall {
		c.mu.Unlock()
		return 0, c.stall()
	}
	if c.armed && c.holdUntil != nil && c.wrote+int64(len(p)) > c.at {
		head, until, fails := int(max(c.at-c.wrote, 0)), c.holdUntil, c.holdFails
		c.holdUntil = nil
		c.mu.Unlock()
		n, err := c.carry(p[:head])
		select {
		case <-until:
		case <-time.After(peerWait):
		}
		if err != nil || fails {
			return n, net.ErrClosed
		}
		m, err := c.carry(p[head:])
		return n + m, err
	}
	head, hit := len(p), false
	if c.armed && !c.tripped {
		switch c.trig {
		case pcAfterWrite:
			if c.wrote+int64(len(p)) > c.at {
				head, hit = int(max(c.at-c.wrote, 0)), true
			}
		case pcAtMessage:
			hit = len(p) > 0 && msgType(p[0]) == c.msg
			head = 0
		}
	}
	c.tripped = c.tripped || hit
	c.mu.Unlock()
	if !hit {
		return c.carry(p)
	}
	c.tripNow()
	n, _ := c.carry(p[:head])
	switch c.act {
	case pcDrop:
		c.Close()
		c.peer.Close()
		return n, errPCCut
	case pcStall:
		return n, c.stall()
	case pcCancel:
		// The write waits for the end to close its connections, as a
		// canceled end does, so that nothing more of it goes.
		c.cancel()
		c.waitClosed()
		return n, net.ErrClosed
	}
	panic("unknown post-copy action")
}

func (c *pcConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.armed && !c.tripped && c.trig == pcAfterRead {
		if c.read >= c.at {
			c.tripped = true
			c.mu.Unlock()
			c.tripNow()
			c.cancel()
			c.waitClosed()
			return 0, net.ErrClosed
		}
		p = p[:min(int64(len(p)), c.at-c.read)]
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	if c.armed {
		c.read += int64(n)
	}
	c.mu.Unlock()
	return n, err
}

// stall blocks until the write deadline passes or the end is closed, as a
// write to a peer that stopped reading does.
func (c *pcConn) stall() error {
	c.mu.Lock()
	d := c.deadline
	c.mu.Unlock()
	wait := peerWait
	if !d.IsZero() {
		wait = time.Until(d)
	}
	select {
	case <-time.After(wait):
		return os.ErrDeadlineExceeded
	case <-c.closed:
		return net.ErrClosed
	}
}

func (c *pcConn) waitClosed() {
	select {
	case <-c.closed:
	case <-time.After(peerWait):
	}
}

// pcAttempt is one post-copy migration of the table's world, with the
// source as the failure found it.
type pcAttempt struct {
	res liveResult
	// before is the source's image at the failure: paused since the
	// stun, and what the source must keep whatever happens next.
	before   sourceImage
	tripped  bool
	hung     bool // an end did not return: the connections were closed under it
	postWire []int64
}

// pcHangBound bounds how long an end may take to give up after the
// failure: a few Timeouts, and room for the race detector.
func pcHangBound(timeout time.Duration) time.Duration {
	return 4*timeout + 10*time.Second
}

// pcAttempt migrates pw's VM to pw.dst in variant v, failing it as cell
// says (no cell: a clean run), cut bytes into the second stream where the
// cell counts them. The owner's read in OnResume of the page the push
// reaches last makes a fetch certain even where the workload's own
// faults are few. An end that has not returned a few Timeouts after the
// failure is reported hung, its connections closed to free it.
func (pw *postCopyWorld) pcAttempt(t *testing.T, v pcVariant, cell *pcCell, cut int64, timeout time.Duration) pcAttempt {
	t.Helper()
	sc, rc := pw.configs(v.policy, nil)
	sc.Timeout, rc.Timeout = timeout, timeout
	s, d := loopbackConns(t, v.conns)
	srcCtx, cancelSrc := context.WithCancel(context.Background())
	dstCtx, cancelDst := context.WithCancel(context.Background())
	defer cancelSrc()
	defer cancelDst()
	var att pcAttempt
	var sw, dw []*pcConn
	for i := range s {
		sw, dw = append(sw, newPCConn(s[i])), append(dw, newPCConn(d[i]))
		sw[i].peer, dw[i].peer = dw[i], sw[i]
	}
	var active *pcConn
	if cell != nil {
		// The second stream's cuts fall on the last connection, which
		// with several carries pages only; the destination's messages go
		// on the first.
		switch {
		case !cell.onDst:
			active = sw[len(sw)-1]
		case cell.trig == pcAtMessage:
			active = dw[0]
		default:
			active = dw[len(dw)-1]
		}
		active.trig, active.at, active.msg, active.act = cell.trig, cut, cell.msg, cell.act
		active.cancel = cancelSrc
		if cell.onDst {
			active.cancel = cancelDst
		}
		// The source's push holds at the cut until the destination's
		// failure: it has closed its end, or, where the push must go on
		// and land every page, the failure has struck.
		last := sw[len(sw)-1]
		switch {
		case cell.onDst && cell.pushCut:
			last.holdUntil, last.holdFails, last.at = dw[len(dw)-1].closed, true, cut
		case cell.pushWaits:
			last.holdUntil, last.at = active.trippedCh, cut
		}
	}
	var snapErr error
	if active != nil {
		// Under the host's lock, which Send takes to undo what it did:
		// the image is the source's before the library reacts.
		active.onTrip = func() {
			pw.srcRun.Lock()
			att.before, snapErr = snapshotOf(pw.vm)
			pw.srcRun.Unlock()
		}
		if cell.early {
			// The destination writes only whole control messages, one a
			// Write: its acknowledgement is found without the arm.
			active.arm()
		}
	}
	dirty := sc.Progress
	sc.Progress = func(e migrate.Event) {
		dirty(e)
		if e.Kind == migrate.PhaseStarted && e.Phase == migrate.PhasePostCopy {
			for _, c := range sw {
				c.arm()
			}
		}
	}
	rc.Progress = func(e migrate.Event) {
		if e.Kind == migrate.PhaseStarted && e.Phase == migrate.PhasePostCopy {
			for _, c := range dw {
				c.arm()
			}
		}
	}
	var owner sync.WaitGroup
	onResume := rc.OnResume
	rc.OnResume = func(in *vgpu.VM) {
		onResume(in)
		fb := in.Framebuffers()[0]
		off := int64(pw.w.Pages-1) * int64(fb.PageSize())
		// The owner's own access, beside OnResume rather than in it:
		// nothing waits on it but the attempt's end. A read that fails
		// with the migration is the migration's to report.
		owner.Go(func() {
			var b [8]byte
			_, _ = fb.ReadAt(b[:], off)
		})
	}
	done := make(chan struct{}, 2)
	go func() {
		att.res.in, att.res.dstRep, att.res.dstErr = Receive(dstCtx, pw.dst, rws(dw), rc)
		done <- struct{}{}
	}()
	go func() {
		att.res.srcRep, att.res.srcErr = Send(srcCtx, pw.vm, rws(sw), sc)
		done <- struct{}{}
	}()
	bound := time.After(pcHangBound(timeout))
	for range 2 {
		select {
		case <-done:
		case <-bound:
			// An end waits for a peer that will never speak: closing the
			// connections frees it, so that the test can say so.
			att.hung = true
			for _, c := range append(s, d...) {
				c.Close()
			}
			<-done
		}
	}
	owner.Wait()
	must(t, snapErr)
	if active != nil {
		att.tripped = active.trip()
	}
	for _, c := range sw {
		att.postWire = append(att.postWire, c.wrote)
	}
	return att
}

// pcCleanBytes is the second stream's bytes on the last connection in a
// migration of variant v without a fault, measured once.
var pcCleanBytes = map[string]int64{}

func pcCleanStream(t *testing.T, v pcVariant) int64 {
	t.Helper()
	if n, ok := pcCleanBytes[v.name]; ok {
		return n
	}
	pw := newPostCopyWorld(t, &counterWorkload{PagesPerSec: 200000, Pages: 2000})
	att := pw.pcAttempt(t, v, nil, 0, 20*time.Second)
	if att.res.srcErr != nil || att.res.dstErr != nil || att.res.srcRep.PostCopy == nil || att.res.srcRep.PostCopy.OwedPages == 0 {
		t.Fatalf("clean run: %v / %v, post-copy %v", att.res.srcErr, att.res.dstErr, att.res.srcRep.PostCopy)
	}
	n := att.postWire[len(att.postWire)-1]
	pcCleanBytes[v.name] = n
	return n
}

// TestLivePostCopyFaultTable fails a live post-copy migration, pure and
// hybrid, in every way once the VM runs at the destination: its
// acknowledgement of the resume dropped or stalled, either end canceled
// as post-copy begins, the source's push dropped, stalled or canceled
// inside the second stream, the destination canceled while it reads it,
// the destination's fetch or its word that every page landed dropped or
// stalled. The VM runs the counter oracle, at the source and then, from
// OnResume, at the destination. Each time the destination fails in
// PhasePostCopy with ErrVMLost and holds nothing, and its host runs on,
// and the source fails in PhasePostCopy with ErrVMLost (in PhaseResume,
// in doubt, where the acknowledgement was lost) — or, where every page
// was sent and landed, the destination returns the VM whole and only the
// source is in doubt (ErrInDoubt, in PhasePostCopy). The source's copy
// stays paused and held, unchanged since the stun, and never two copies
// run. Given back, it passes the source's oracle as of the stun, resumes,
// and moves again in pre-copy to the same destination, where the oracle
// passes; where the destination has the VM whole, the source's copy is
// destroyed and the oracle passes there.
func TestLivePostCopyFaultTable(t *testing.T) {
	variants := pcVariants
	short := raceEnabled || testing.Short()
	if short {
		variants = variants[:1]
	}
	cells, passed := 0, 0
	for _, v := range variants {
		clean := pcCleanStream(t, v)
		for _, c := range pcCells {
			// Under the race detector or -short, the cells marked so, in
			// post-copy at once: each cell migrates twice and the stalls
			// wait out their Timeout, which the race detector lengthens.
			if short && !c.short {
				continue
			}
			cells++
			if t.Run(c.name+"/"+v.name, func(t *testing.T) { pcFaultCell(t, v, c, clean) }) {
				passed++
			}
		}
	}
	t.Logf("post-copy fault table: %d scenarios of %d, each ending with the VM held once and a retry that passed the oracle", passed, cells)
}

func pcFaultCell(t *testing.T, v pcVariant, c pcCell, clean int64) {
	pw := newPostCopyWorld(t, &counterWorkload{PagesPerSec: 200000, Pages: 2000})
	timeout := 20 * time.Second
	if c.act == pcStall {
		timeout = liveStallTimeout()
		if c.longStall {
			timeout *= 4
		}
	}
	// 37 % into the clean run's second stream: past its header, short of
	// its end, in a page batch.
	cut := clean * 37 / 100
	att := pw.pcAttempt(t, v, &c, cut, timeout)
	res := att.res
	if att.hung {
		t.Fatalf("an end did not return within %v of the failure (source: %v; destination: %v)", pcHangBound(timeout), res.srcErr, res.dstErr)
	}
	if !att.tripped {
		var owed int64
		if res.srcRep != nil && res.srcRep.PostCopy != nil {
			owed = res.srcRep.PostCopy.OwedPages
		}
		t.Fatalf("the migration ended (%v / %v) without reaching the point: %d pages followed, the second streams carried %v bytes, the cut at %d",
			res.srcErr, res.dstErr, owed, att.postWire, cut)
	}

	// Both ends failed in post-copy, not before it: the VM was lost
	// there. An acknowledgement lost finds the source still in the
	// resume, in doubt; a failure once every page was sent leaves the
	// source in doubt too, since the destination may have them all.
	srcPhase, srcLost, notLost := migrate.PhasePostCopy, migrate.ErrVMLost, migrate.ErrInDoubt
	if c.early {
		srcPhase, srcLost, notLost = migrate.PhaseResume, migrate.ErrInDoubt, migrate.ErrVMLost
	}
	if c.whole {
		srcLost, notLost = migrate.ErrInDoubt, migrate.ErrVMLost
	}
	var pe *migrate.PhaseError
	if !errors.As(res.srcErr, &pe) || pe.Phase != srcPhase || !errors.Is(res.srcErr, srcLost) || errors.Is(res.srcErr, notLost) ||
		!errors.Is(res.srcErr, c.srcErr) {
		t.Fatalf("source error %v, want a *PhaseError in %v wrapping %v (not %v) and %v", res.srcErr, srcPhase, srcLost, notLost, c.srcErr)
	}
	sr := res.srcRep
	if sr == nil || sr.Outcome != migrate.PhaseFailed || sr.FailedIn != srcPhase || sr.PostCopy == nil || sr.PostCopy.OwedPages == 0 {
		t.Fatalf("source report %v", sr)
	}
	if sp := sr.PostCopy; c.pushCut && sp.Pushed.Pages+sp.Faulted.Pages >= sp.OwedPages {
		t.Fatalf("the source sent %d of %d pages: the cut fell after the push", sp.Pushed.Pages+sp.Faulted.Pages, sp.OwedPages)
	}
	if (c.early || c.trig == pcAtStart && !c.onDst) && sr.PostCopy.Pushed.Pages != 0 {
		t.Fatalf("the source pushed %d pages after the failure", sr.PostCopy.Pushed.Pages)
	}

	src := pw.vm
	if c.whole {
		pcCheckDestinationWhole(t, pw, res)
	} else {
		typed := errors.Is(res.dstErr, c.dstErr) || c.dstErr == migrate.ErrConnection && errors.Is(res.dstErr, migrate.ErrStream)
		if !errors.As(res.dstErr, &pe) || pe.Phase != migrate.PhasePostCopy || !errors.Is(res.dstErr, migrate.ErrVMLost) || !typed {
			t.Fatalf("destination error %v, want a *PhaseError in post-copy wrapping ErrVMLost and %v", res.dstErr, c.dstErr)
		}
		if res.in != nil || res.dstRep == nil || res.dstRep.Outcome != migrate.PhaseFailed {
			t.Fatalf("destination returned VM %v, report %v; want none, failed", res.in, res.dstRep)
		}
		pcLocked(pw.dstRun, func() { checkNothingAt(t, pw.dst) })
	}

	// The source's copy: paused since the stun, unchanged, held from its
	// owner until someone decides, and the only copy running, if any.
	pcLocked(pw.srcRun, func() {
		if src.State() != vgpu.VMPaused || src.Host() != pw.src || !src.Migrating() {
			t.Fatalf("source VM %v on %s, migrating %v; want paused and held at the source", src.State(), src.Host().Name(), src.Migrating())
		}
		after, err := snapshotOf(src)
		must(t, err)
		before := att.before
		// The scheduler's state holds times on the host's clock, which
		// runs on while the VM is paused: the rest must not move.
		before.States, after.States = withoutSched(before.States), withoutSched(after.States)
		if d := cmp.Diff(before, after, cmp.AllowUnexported(sourceImage{})); d != "" {
			t.Fatalf("source changed by the failure (-before +after):\n%s", d)
		}
		for _, r := range append([]*memory.Region{src.RAM()}, src.Framebuffers()...) {
			if r.DirtyLogging() || r.AbsentPages() != 0 {
				t.Fatalf("source region with dirty logging %v, %d absent pages", r.DirtyLogging(), r.AbsentPages())
			}
		}
		if err := src.Resume(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("the source's copy in doubt resumed by its owner: %v; want vgpu.ErrMigrating", err)
		}
	})
	pcLocked2(pw.srcRun, pw.dstRun, func() { checkOneOwner(t, src.ID(), pw.src, pw.dst) })

	if c.whole {
		// Whoever manages the hosts asks the destination, which runs
		// the VM whole, and destroys the source's copy.
		pcLocked(pw.srcRun, func() { must(t, src.ResolveMigration(true)) })
		must(t, pw.dstRun.Stop())
		must(t, pw.srcRun.Stop())
		pw.dstW.Check(t, res.in)
		if checkSettled(t, src.ID(), pw.src, pw.dst) != pw.dst {
			t.Fatal("the VM is not at the destination")
		}
		checkNothingAt(t, pw.src)
		return
	}

	// Given back, the source's copy is the VM as of the stun: the
	// source's own oracle passes on it, and it runs on.
	pcLocked(pw.srcRun, func() {
		must(t, src.ResolveMigration(false))
		if src.Migrating() || src.Throttle() != 0 {
			t.Fatalf("given back, the source VM is still held (%v) or throttled (%v)", src.Migrating(), src.Throttle())
		}
		pw.w.Check(t, src)
		// Slower from here on, so that the second migration is quick
		// under the race detector too; the oracle counts writes, not time.
		pw.w.PagesPerSec = 4000
		must(t, src.Resume())
		must(t, pw.src.Advance(100*time.Millisecond))
	})
	// An access of the lost copy's that failed with the migration paused
	// that copy, not its host: the destination's Runner runs on, for the
	// next migration and whatever else the host holds.
	if err := pw.dstRun.Err(); err != nil {
		t.Fatalf("the destination's host stopped with the lost copy: %v", err)
	}

	// Pre-copy, two rounds the counter outruns, then the stun: as short
	// as a migration of it goes, the race detector's included.
	sc, rc := pw.configs(migrate.Policy{StunTarget: time.Nanosecond, MaxRounds: 2}, nil)
	s, d := loopbackConns(t, 1)
	again := liveMigrate(context.Background(), src, pw.dst, rws(s), rws(d), sc, rc)
	if again.srcErr != nil || again.dstErr != nil || again.in == nil || again.in.State() != vgpu.VMRunning {
		t.Fatalf("second migration: source %v, destination %v", again.srcErr, again.dstErr)
	}
	must(t, pw.dstRun.Stop())
	must(t, pw.srcRun.Stop())
	pw.dstW.Check(t, again.in)
	if checkSettled(t, src.ID(), pw.src, pw.dst) != pw.dst {
		t.Fatal("the VM is not where it moved")
	}
	checkNothingAt(t, pw.src)
}

// pcCheckDestinationWhole checks a destination that every page reached
// though the source never heard so: it returns the VM running, with no
// page absent, and no error.
func pcCheckDestinationWhole(t *testing.T, pw *postCopyWorld, res liveResult) {
	t.Helper()
	if res.dstErr != nil || res.in == nil {
		t.Fatalf("destination: %v; want the VM whole there", res.dstErr)
	}
	pcLocked(pw.dstRun, func() {
		if res.in.State() != vgpu.VMRunning || res.in.Migrating() {
			t.Fatalf("destination VM %v, migrating %v; want running, its own", res.in.State(), res.in.Migrating())
		}
		for i, r := range append([]*memory.Region{res.in.RAM()}, res.in.Framebuffers()...) {
			if n := r.AbsentPages(); n != 0 {
				t.Fatalf("destination region %d has %d absent pages", i, n)
			}
		}
	})
	if dp := res.dstRep.PostCopy; dp == nil || dp.Pushed.Pages+dp.Faulted.Pages != dp.OwedPages {
		t.Fatalf("destination post-copy %+v: not every page landed", dp)
	}
}

// withoutSched is states without their scheduler's state.
func withoutSched(states []vgpu.DeviceState) []vgpu.DeviceState {
	out := make([]vgpu.DeviceState, len(states))
	for i, st := range states {
		st.Sched = nil
		out[i] = st
	}
	return out
}

// pcLocked runs f holding l, and lets go of it however f ends (a Fatal
// included).
func pcLocked(l sync.Locker, f func()) {
	l.Lock()
	defer l.Unlock()
	f()
}

func pcLocked2(a, b sync.Locker, f func()) {
	pcLocked(a, func() { pcLocked(b, f) })
}
