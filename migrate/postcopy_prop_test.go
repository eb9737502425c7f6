package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
	"pgregory.net/rapid"
)

// postCopyPlan is one drawn post-copy migration: the world, the policy
// into post-copy, and what happens once the VM runs at the destination.
// Running a plan draws nothing, so a plan runs the same every time.
type postCopyPlan struct {
	fid    Fidelity
	policy Policy
	link   Link
	batch  int
	rate   int64 // the counter's page writes a second
	pages  int   // the counter's pages
	warmup time.Duration
	ops    []postCopyOp
}

// postCopyOpKind is something that happens to a migration in post-copy.
type postCopyOpKind int

const (
	pcAdvance     postCopyOpKind = iota // the Sim moves on by d
	pcStep                              // the migration takes n steps (events)
	pcTick                              // the Sim moves to its next moment n times
	pcLinkDown                          // the link drops; d later, Recover
	pcLinkStall                         // the link stalls; d later, Recover
	pcOwnerPause                        // the owner pauses the VM
	pcOwnerResume                       // the owner resumes the VM
	pcTooLate                           // Cancel (n odd) or FaultRefused (n even)
	numPostCopyOps
)

var postCopyOpNames = [...]string{pcAdvance: "advance", pcStep: "step", pcTick: "tick", pcLinkDown: "link-down", pcLinkStall: "link-stall",
	pcOwnerPause: "owner-pause", pcOwnerResume: "owner-resume", pcTooLate: "too-late"}

type postCopyOp struct {
	kind postCopyOpKind
	d    time.Duration
	n    int
}

func (o postCopyOp) String() string {
	return fmt.Sprintf("%s(%v, %d)", postCopyOpNames[o.kind], o.d, o.n)
}

// drawPostCopyPlan draws a plan small enough to run in a few
// milliseconds: a 16 MiB VM with 2 MiB in use and a counter over at most
// 128 pages.
func drawPostCopyPlan(t *rapid.T) postCopyPlan {
	p := postCopyPlan{
		fid:   rapid.SampledFrom([]Fidelity{Bytes, Model}).Draw(t, "fidelity"),
		link:  rapid.SampledFrom([]Link{slowLink, GbE1()}).Draw(t, "link"),
		batch: rapid.SampledFrom([]int{64 << 10, 256 << 10, 1 << 20}).Draw(t, "batch"),
		rate:  rapid.Int64Range(100, 2000).Draw(t, "pagesPerSec"),
		pages: rapid.IntRange(8, 128).Draw(t, "pages"),
	}
	// At least one pass over the counter's pages, so that all of them are
	// in use and follow in post-copy.
	p.warmup = time.Duration(int64(p.pages)*int64(time.Second)/p.rate) + time.Duration(rapid.IntRange(0, 300).Draw(t, "warmupMs"))*time.Millisecond
	if rapid.Bool().Draw(t, "hybrid") {
		// A stun target below the fixed costs never converges: pre-copy
		// ends at its round limit, into post-copy.
		p.policy = Policy{Mode: PreCopy, OnNonConvergence: SwitchToPostCopy, MaxRounds: rapid.IntRange(1, 3).Draw(t, "maxRounds"),
			StunTarget: time.Millisecond}
	} else {
		p.policy = Policy{Mode: PostCopy}
	}
	op := rapid.Custom(func(t *rapid.T) postCopyOp {
		return postCopyOp{
			kind: postCopyOpKind(rapid.IntRange(0, int(numPostCopyOps)-1).Draw(t, "kind")),
			d:    time.Duration(rapid.Int64Range(0, int64(40*time.Millisecond)).Draw(t, "d")),
			n:    rapid.IntRange(1, 4).Draw(t, "n"),
		}
	})
	p.ops = rapid.SliceOfN(op, 0, 10).Draw(t, "ops")
	return p
}

// postCopyRunner runs a plan and checks the invariants after every step.
type postCopyRunner struct {
	t         *rapid.T
	p         postCopyPlan
	sim       *Sim
	src, dst  *vgpu.Host
	vm        *vgpu.VM // the source's
	w         *counterWorkload
	m         *Migration
	postBegan bool
	checks    int
	inPost    int           // ops carried out in post-copy
	lostFor   time.Duration // the Sim's time with the link lost, in all
	absent    int           // pages absent at the destination at the last check in post-copy
}

func newPostCopyRunner(t *rapid.T, p postCopyPlan) *postCopyRunner {
	mk := func(name string, seed uint64) *vgpu.Host {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: name, Memory: memory.Sparse, FramebufferPageSize: 4096, Seed: seed, RAMBytes: 4 * GiB})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	r := &postCopyRunner{t: t, p: p, src: mk("src", 1), dst: mk("dst", 2), absent: -1}
	r.w = &counterWorkload{PagesPerSec: p.rate, Pages: p.pages}
	vm, err := r.src.CreateVM(vgpu.VMSpec{ID: "oracle", RAMBytes: 16 * MiB, RAMFootprintBytes: 2 * MiB, Profiles: []string{"P40-1Q"}, Workload: r.w})
	must(t, err)
	must(t, vm.Start())
	r.vm = vm
	must(t, r.src.Advance(p.warmup))
	sameClock(t, r.src, r.dst)
	r.sim, err = NewSim(SimConfig{}, r.src, r.dst)
	must(t, err)
	r.m, err = r.sim.Start(vm, r.dst, Config{Policy: p.policy, Fidelity: p.fid, Link: p.link, BatchBytes: p.batch})
	must(t, err)
	return r
}

// check is the invariants that hold after every step: one copy of the VM
// runs at most, none at the source once post-copy began; a destination
// VM runs in post-copy only while its link is up; the post-copy account
// is consistent so far.
func (r *postCopyRunner) check() {
	t, m := r.t, r.m
	t.Helper()
	r.checks++
	if p := m.Phase(); p == PhasePostCopy || p == PhaseRelease || p == PhaseDone {
		r.postBegan = true
	}
	srcRuns, dstRuns := r.vm.State() == vgpu.VMRunning, m.in.State() == vgpu.VMRunning
	if srcRuns && dstRuns {
		t.Fatalf("in %v both copies of the VM run", m.Phase())
	}
	if r.postBegan && srcRuns {
		t.Fatalf("in %v the source's copy runs after post-copy began", m.Phase())
	}
	if m.Phase() == PhasePostCopy && dstRuns && m.core.DestinationPaused() {
		t.Fatal("the destination's copy runs while its link is lost")
	}
	if m.core.DestinationPaused() && m.Phase() != PhasePostCopy {
		t.Fatalf("the destination holds the VM paused in %v", m.Phase())
	}
	rep := m.Report()
	if r.postBegan && rep.PostCopy == nil {
		t.Fatalf("no post-copy report in %v", m.Phase())
	}
	if pc := rep.PostCopy; pc != nil {
		checkPostCopyAccount(t, pc)
		if m.Phase() == PhasePostCopy {
			n := m.absentLeft()
			if int64(n) > pc.OwedPages {
				t.Fatalf("%d pages absent, %d owed", n, pc.OwedPages)
			}
			// A page arrives once: a push the link took away sends
			// its pages again, but they stayed absent meanwhile.
			if r.absent >= 0 && n > r.absent {
				t.Fatalf("%d pages absent, %d at the last step", n, r.absent)
			}
			r.absent = n
		}
	}
}

// checkPostCopyAccount checks what a post-copy report says of itself, at
// any time.
func checkPostCopyAccount(t tb, pc *PostCopyReport) {
	t.Helper()
	switch {
	case pc.Window < 0 || pc.Stall < 0 || pc.Paused < 0 || pc.OwedPages < 0:
		t.Fatalf("negative post-copy account %+v", *pc)
	case pc.Faults != pc.Faulted.Pages:
		t.Fatalf("%d faults but %d pages faulted in", pc.Faults, pc.Faulted.Pages)
	case pc.Fetches > pc.Faults:
		t.Fatalf("%d fetches for %d faults", pc.Fetches, pc.Faults)
	case pc.FaultLatencyP50 > pc.FaultLatencyP99 || pc.FaultLatencyP99 > pc.FaultLatencyMax:
		t.Fatalf("fault latencies p50 %v p99 %v max %v", pc.FaultLatencyP50, pc.FaultLatencyP99, pc.FaultLatencyMax)
	case pc.Faults == 0 && (pc.FaultLatencyMax != 0 || pc.Stall != 0):
		t.Fatalf("no fault, but max latency %v, stall %v", pc.FaultLatencyMax, pc.Stall)
	case pc.Faults > 0 && pc.FaultLatencyP50 <= 0:
		t.Fatalf("%d faults of median latency %v", pc.Faults, pc.FaultLatencyP50)
	}
}

// step takes one step of the migration, if it has one left.
func (r *postCopyRunner) step() {
	if _, _, err := r.m.Step(); err != nil {
		r.t.Fatalf("step in %v: %v", r.m.Phase(), err)
	}
	r.check()
}

// untilPostCopy steps the migration until the VM runs at the destination.
func (r *postCopyRunner) untilPostCopy() {
	for !r.postBegan {
		if r.m.Done() {
			r.t.Fatalf("the migration ended in %v before post-copy: %v", r.m.Phase(), r.m.Err())
		}
		r.step()
	}
}

// do carries out one op.
func (r *postCopyRunner) do(o postCopyOp) {
	t, m := r.t, r.m
	if m.Phase() == PhasePostCopy {
		r.inPost++
	}
	switch o.kind {
	case pcAdvance:
		if _, err := r.sim.Advance(o.d); err != nil {
			t.Fatal(err)
		}
		r.check()
	case pcStep:
		for range o.n {
			r.step()
		}
	case pcTick:
		// A push arriving, a timer firing: finer than the migration's
		// events, which post-copy makes only at its end.
		for range o.n {
			at, ok := r.sim.NextEventAt()
			if !ok {
				break
			}
			if _, err := r.sim.AdvanceTo(at); err != nil {
				t.Fatal(err)
			}
			r.check()
		}
	case pcLinkDown, pcLinkStall:
		f := FaultLinkDown
		if o.kind == pcLinkStall {
			f = FaultLinkStall
		}
		r.loseLink(f, o.d)
	case pcOwnerPause:
		vm := m.VM()
		if vm.State() != vgpu.VMRunning {
			return
		}
		if err := vm.Pause(); err != nil {
			t.Fatalf("owner pause in %v: %v", m.Phase(), err)
		}
		r.check()
	case pcOwnerResume:
		vm := m.VM()
		if vm.State() != vgpu.VMPaused {
			return
		}
		if err := vm.Resume(); err != nil {
			t.Fatalf("owner resume in %v: %v", m.Phase(), err)
		}
		r.check()
	case pcTooLate:
		var err error
		if o.n%2 == 1 {
			err = m.Cancel()
		} else if err = m.Inject(FaultRefused); err == nil && m.Phase() == PhaseDone {
			// An ended migration takes no fault.
			err = ErrTooLate
		}
		if !errors.Is(err, ErrTooLate) {
			t.Fatalf("%v in %v: %v, want ErrTooLate", o, m.Phase(), err)
		}
		r.check()
	}
}

// loseLink injects f, a link fault: in post-copy the destination holds
// the VM paused until Recover, d later, and the VM does not run
// meanwhile; after post-copy it is too late or does nothing.
func (r *postCopyRunner) loseLink(f Fault, d time.Duration) {
	t, m := r.t, r.m
	switch m.Phase() {
	case PhaseRelease:
		if err := m.Inject(f); !errors.Is(err, ErrTooLate) {
			t.Fatalf("%v in %v: %v, want ErrTooLate", f, m.Phase(), err)
		}
		return
	case PhaseDone:
		if err := m.Inject(f); err != nil {
			t.Fatalf("%v after the end: %v", f, err)
		}
		if err := m.Recover(); !errors.Is(err, ErrConfig) {
			t.Fatalf("recover after the end: %v", err)
		}
		return
	}
	in := m.in
	ran := in.State() == vgpu.VMRunning
	if err := m.Recover(); !errors.Is(err, ErrConfig) {
		t.Fatalf("recover with the link up: %v", err)
	}
	must(t, m.Inject(f))
	r.check()
	if !m.core.DestinationPaused() || in.State() != vgpu.VMPaused || m.Done() {
		t.Fatalf("after %v: destination holds %v, VM %v, done %v", f, m.core.DestinationPaused(), in.State(), m.Done())
	}
	if err := in.Resume(); !errors.Is(err, vgpu.ErrMigrating) {
		t.Fatalf("the owner resumed a VM whose pages cannot come: %v", err)
	}
	// Stepping returns the events waiting, then says it waits for Recover.
	for {
		_, ok, err := m.Step()
		if err != nil {
			if !errors.Is(err, ErrConnection) {
				t.Fatalf("step with the link lost: %v", err)
			}
			break
		}
		if !ok {
			t.Fatalf("the migration ended in %v with its link lost", m.Phase())
		}
		r.check()
	}
	pos := r.w.Pos
	if _, err := r.sim.Advance(d); err != nil {
		t.Fatal(err)
	}
	r.lostFor += d
	r.check()
	if r.w.Pos != pos {
		t.Fatalf("the VM wrote %d pages with its link lost", r.w.Pos-pos)
	}
	must(t, m.Recover())
	r.check()
	if m.core.DestinationPaused() {
		t.Fatal("the destination holds the VM after Recover")
	}
	if ran != (in.State() == vgpu.VMRunning) {
		t.Fatalf("the VM ran %v before the link was lost, %v after Recover", ran, in.State())
	}
}

// finish runs the migration to its end and checks the outcome: done,
// every page at the destination and every counter right there, the
// post-copy accounted for and the source's copy gone.
func (r *postCopyRunner) finish() *Report {
	t, m := r.t, r.m
	for !m.Done() {
		r.step()
	}
	rep, err := m.Run()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	r.check()
	if rep.Outcome != PhaseDone || m.Phase() != PhaseDone {
		t.Fatalf("outcome %v (%v), want done", rep.Outcome, m.Phase())
	}
	for i, reg := range m.dstRegs {
		if n := reg.AbsentPages(); n != 0 {
			t.Fatalf("region %d: %d pages absent at the end", i, n)
		}
	}
	if n := m.absentLeft(); n != 0 {
		t.Fatalf("%d pages absent at the end", n)
	}
	if m.VM() != m.in || m.in.Migrating() {
		t.Fatalf("destination VM %p (incoming %p), still claimed %v", m.VM(), m.in, m.in.Migrating())
	}
	r.w.Check(t, m.VM())
	pc := rep.PostCopy
	if pc == nil {
		t.Fatal("no post-copy report")
	}
	checkPostCopyAccount(t, pc)
	if got := pc.Pushed.Pages + pc.Faulted.Pages; got < pc.OwedPages {
		t.Fatalf("%d pages pushed and %d faulted in of %d owed", pc.Pushed.Pages, pc.Faulted.Pages, pc.OwedPages)
	}
	// Nothing moves the Sim on while the link is lost but the plan's own
	// wait before Recover.
	if pc.Paused != r.lostFor || pc.Window < pc.Paused {
		t.Fatalf("paused %v in a window of %v; the link was lost for %v", pc.Paused, pc.Window, r.lostFor)
	}
	if r.vm.State() != vgpu.VMDestroyed {
		t.Fatalf("source VM %v after the migration", r.vm.State())
	}
	if _, ok := r.src.VM(r.vm.ID()); ok {
		t.Fatal("the source still lists the VM")
	}
	return rep
}

// run runs the plan: to post-copy, then its ops, then to the end.
func (r *postCopyRunner) run() *Report {
	r.check()
	r.untilPostCopy()
	for _, o := range r.p.ops {
		r.do(o)
	}
	return r.finish()
}

// TestPostCopyProperty: for drawn fidelities, ways into post-copy, links,
// batch sizes and counter workloads, and drawn events once the VM runs at
// the destination — the link lost (dropped or stalled) and recovered a
// drawn time later, the owner pausing and resuming the VM, time passing,
// steps — at every step no two copies of the VM run, the source's never
// once post-copy began, and the destination's only while its link is up;
// at the end the migration is done with every page at the destination,
// the counter oracle holds there, the report's account adds up and the
// source's copy is gone.
func TestPostCopyProperty(t *testing.T) {
	var runs, checks, ops, inPost, lost, faulted int
	rapid.Check(t, func(rt *rapid.T) {
		p := drawPostCopyPlan(rt)
		r := newPostCopyRunner(rt, p)
		rep := r.run()
		runs++
		checks += r.checks
		ops += len(p.ops)
		inPost += r.inPost
		if rep.PostCopy.Paused > 0 {
			lost++
		}
		if rep.PostCopy.Faults > 0 {
			faulted++
		}
	})
	t.Logf("%d runs, %d ops (%d of them in post-copy), %d invariant checks; %d runs faulted pages in, %d recovered a lost link",
		runs, ops, inPost, checks, faulted, lost)
}

// TestPostCopyDeterminismProperty: a drawn plan run twice, each time in a
// world of its own, gives the same report, event for event.
func TestPostCopyDeterminismProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := drawPostCopyPlan(rt)
		a := newPostCopyRunner(rt, p).run()
		b := newPostCopyRunner(rt, p).run()
		ja, err := jsonMarshal(a)
		must(rt, err)
		jb, err := jsonMarshal(b)
		must(rt, err)
		if !bytes.Equal(ja, jb) {
			rt.Fatalf("the same plan gave two reports:\n%s", cmp.Diff(string(ja), string(jb)))
		}
		if d := cmp.Diff(a, b); d != "" {
			rt.Fatalf("the same plan gave two reports (-first +second):\n%s", d)
		}
	})
}
