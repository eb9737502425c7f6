package migrate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/vgpu"
)

// postCopyFault is a way to hit a migration in post-copy: a fault, or
// Cancel.
type postCopyFault struct {
	name   string
	fault  Fault // zero for Cancel
	cancel bool
}

func (f postCopyFault) hit(m *Migration) error {
	if f.cancel {
		return m.Cancel()
	}
	return m.Inject(f.fault)
}

// postCopyFaults are every fault, FaultSourceGone included, and Cancel.
func postCopyFaults() []postCopyFault {
	var out []postCopyFault
	for _, f := range append(Faults(), FaultSourceGone) {
		out = append(out, postCopyFault{name: f.String(), fault: f})
	}
	return append(out, postCopyFault{name: "cancel", cancel: true})
}

// postCopyOwner is how the VM's owner has it when post-copy begins.
type postCopyOwner int

const (
	ownerRunning      postCopyOwner = iota // running throughout
	ownerPausedBefore                      // paused at the source before the migration: it resumes paused
	ownerPausedAfter                       // paused by its owner at the destination once it resumed there
)

var postCopyOwnerNames = [...]string{ownerRunning: "running", ownerPausedBefore: "paused-at-source", ownerPausedAfter: "paused-at-destination"}

func (o postCopyOwner) String() string { return postCopyOwnerNames[o] }

// postCopyPoint is when in post-copy the fault hits: right as the VM
// resumed at the destination, or once time has passed and pushed pages
// arrived.
type postCopyPoint struct {
	name  string
	after time.Duration
}

var postCopyPoints = []postCopyPoint{{"at-entry", 0}, {"after-30ms", 30 * time.Millisecond}}

// postCopyFaultConfig is every cell's migration: post-copy over the slow
// link, in pushes of 256 KiB (about 21 ms each), so that the post-copy
// of the oracle's 2 MiB in use lasts about 200 ms.
func postCopyFaultConfig(fid Fidelity) Config {
	return Config{Policy: Policy{Mode: PostCopy}, Fidelity: fid, Link: slowLink, BatchBytes: 64 << 10, Timeout: 2 * time.Second}
}

// TestPostCopyFaultTable hits a simulated migration in post-copy with
// every fault and with Cancel, in both fidelities, with the VM running or
// paused by its owner (before the migration, or at the destination once
// it resumed there), at the start of the post-copy and once pages have
// arrived. A lost link (dropped or stalled) pauses the VM at the
// destination, held, until Recover, after which the migration completes;
// a refusal or a cancel is too late and the migration completes; the
// destination or the source failing loses the VM, each end keeping what
// it has paused and held. At every event no two copies of the VM run
// and at least one lives.
func TestPostCopyFaultTable(t *testing.T) {
	var rows []string
	passed, total := 0, 0
	fids := []Fidelity{Bytes, Model}
	if raceEnabled {
		fids = fids[:1] // the same steps; under the race detector one fidelity is enough
	}
	for _, fid := range fids {
		for _, owner := range []postCopyOwner{ownerRunning, ownerPausedBefore, ownerPausedAfter} {
			for _, pt := range postCopyPoints {
				for _, f := range postCopyFaults() {
					name := fmt.Sprintf("%v/%v/%s/%s", fid, owner, pt.name, f.name)
					total++
					row := name + ": did not finish"
					if t.Run(name, func(t *testing.T) { row = name + ": " + postCopyFaultCell(t, fid, owner, pt, f) }) {
						passed++
					} else {
						row += " FAILED"
					}
					rows = append(rows, row)
				}
			}
		}
	}
	for _, r := range rows {
		t.Log(r)
	}
	t.Logf("post-copy fault table: %d of %d scenarios passed", passed, total)
}

// postCopyFaultCell runs one scenario and returns its summary.
func postCopyFaultCell(t *testing.T, fid Fidelity, owner postCopyOwner, pt postCopyPoint, f postCopyFault) string {
	fw := newFaultWorld(t, owner == ownerPausedBefore)
	hosts := fw.sim.Hosts()
	src := fw.vm
	m, err := fw.sim.Start(src, fw.dst, postCopyFaultConfig(fid))
	must(t, err)
	for m.Phase() != PhasePostCopy {
		if _, ok, err := m.Step(); err != nil || !ok {
			t.Fatalf("the migration ended in %v before post-copy: %v", m.Phase(), m.Err())
		}
		checkOneOwner(t, src.ID(), hosts...)
	}
	in := m.VM()
	if in == src || in.Host() != fw.dst {
		t.Fatal("in post-copy the migration's VM is not the destination's")
	}
	owed := m.absentLeft()
	if owed == 0 {
		t.Fatal("the VM resumed at the destination with no page absent")
	}
	if owner == ownerPausedAfter {
		must(t, in.Pause())
	}
	wantRun := owner == ownerRunning
	if (in.State() == vgpu.VMRunning) != wantRun || src.State() != vgpu.VMPaused {
		t.Fatalf("post-copy began with the destination's VM %v, the source's %v", in.State(), src.State())
	}
	// The source's copy is final from the stun on: whatever happens, it
	// stays as it was.
	stunned := imageOf(t, src)
	if pt.after > 0 {
		if _, err := fw.sim.Advance(pt.after); err != nil {
			t.Fatal(err)
		}
		checkOneOwner(t, src.ID(), hosts...)
		if m.Phase() != PhasePostCopy {
			t.Fatalf("%v after %v of post-copy", m.Phase(), pt.after)
		}
		if left := m.absentLeft(); left >= owed || left == 0 {
			t.Fatalf("%d of %d pages absent after %v of post-copy, want some arrived and some not", left, owed, pt.after)
		}
	}
	pushed := m.Report().PostCopy.Pushed.Pages
	left := m.absentLeft()
	err = f.hit(m)
	if f.fault != FaultSourceGone {
		// A source gone in post-copy leaves no copy at all (below).
		checkOneOwner(t, src.ID(), hosts...)
	}

	switch {
	case f.fault == FaultLinkDown || f.fault == FaultLinkStall:
		return postCopyLinkLostCell(t, fw, m, in, wantRun, err, stunned, owed, left, pushed)
	case f.cancel || f.fault == FaultRefused:
		if !errors.Is(err, ErrTooLate) {
			t.Fatalf("%s in post-copy: %v, want ErrTooLate", f.name, err)
		}
		if m.Done() || m.Phase() != PhasePostCopy || in.State() == vgpu.VMPaused && wantRun {
			t.Fatalf("after %s: %v, destination VM %v", f.name, m.Phase(), in.State())
		}
		return "ErrTooLate; " + postCopyCompletes(t, fw, m, in, wantRun, 0, owed, left, pushed)
	case f.fault == FaultDestinationGone:
		must(t, err)
		pe := postCopyVMLost(t, m, ErrDestination)
		if in.State() != vgpu.VMDestroyed {
			t.Fatalf("destination VM %v after its process ended", in.State())
		}
		checkNothingAt(t, fw.dst)
		// The source's copy stays paused and held, as it was at the
		// stun, until resolved.
		if src.State() != vgpu.VMPaused || !src.Migrating() {
			t.Fatalf("source VM %v, claimed %v", src.State(), src.Migrating())
		}
		if err := src.Resume(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("owner resumed the source's copy of a lost VM: %v", err)
		}
		if err := src.Destroy(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("owner destroyed the source's held copy: %v", err)
		}
		checkAsStunned(t, stunned, src)
		checkSettled(t, src.ID(), hosts...)
		postCopyEndedStays(t, fw, m)
		must(t, src.ResolveMigration(false))
		if src.Migrating() || src.State() != vgpu.VMPaused {
			t.Fatalf("resolved source VM %v, claimed %v", src.State(), src.Migrating())
		}
		must(t, src.Resume())
		if _, err := fw.sim.Advance(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		checkOneOwner(t, src.ID(), hosts...)
		return fmt.Sprintf("%v; destination VM destroyed, source's copy paused and held (stun image intact), resolved and resumed", pe.Phase)
	case f.fault == FaultSourceGone:
		must(t, err)
		pe := postCopyVMLost(t, m, ErrSource)
		if src.State() != vgpu.VMDestroyed {
			t.Fatalf("source VM %v after its process ended", src.State())
		}
		checkNothingAt(t, fw.src)
		// The destination's copy lacks pages nobody has any more: it is
		// destroyed, never resumed.
		if in.State() != vgpu.VMDestroyed || left == 0 {
			t.Fatalf("destination VM %v, %d pages absent before the source ended", in.State(), left)
		}
		if err := in.Resume(); err == nil {
			t.Fatal("the destination's copy of a lost VM was resumed")
		}
		checkNothingAt(t, fw.dst)
		postCopyEndedStays(t, fw, m)
		return fmt.Sprintf("%v; source VM destroyed, destination's copy with %d pages absent destroyed", pe.Phase, left)
	}
	t.Fatalf("no expectation for %s", f.name)
	return ""
}

// postCopyLinkLostCell checks a link lost in post-copy: the destination
// holds the VM paused, the migration waits for Recover however long, and
// then completes.
func postCopyLinkLostCell(t *testing.T, fw *faultWorld, m *Migration, in *vgpu.VM, wantRun bool, err error, stunned sourceImage, owed, left int, pushed int64) string {
	t.Helper()
	hosts := fw.sim.Hosts()
	must(t, err)
	if m.Done() || m.Phase() != PhasePostCopy || !m.core.DestinationPaused() {
		t.Fatalf("after the link was lost: %v, destination holds %v", m.Phase(), m.core.DestinationPaused())
	}
	if in.State() != vgpu.VMPaused {
		t.Fatalf("destination VM %v with its link lost", in.State())
	}
	for _, op := range []struct {
		name string
		do   func() error
	}{{"resume", in.Resume}, {"stop", in.Stop}, {"destroy", in.Destroy}, {"resume the source's copy of", fw.vm.Resume}} {
		if err := op.do(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("the owner could %s the VM with its link lost: %v", op.name, err)
		}
	}
	if err := m.Cancel(); !errors.Is(err, ErrTooLate) {
		t.Fatalf("cancel with the link lost: %v, want ErrTooLate", err)
	}
	if err := m.Inject(FaultRefused); !errors.Is(err, ErrTooLate) {
		t.Fatalf("refused with the link lost: %v, want ErrTooLate", err)
	}
	if _, err := m.Run(); !errors.Is(err, ErrConnection) {
		t.Fatalf("run with the link lost: %v, want ErrConnection", err)
	}
	if m.Done() || !m.core.DestinationPaused() {
		t.Fatal("Run ended a migration waiting for its link")
	}
	pos := fw.w.Pos
	if _, err := fw.sim.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	checkOneOwner(t, fw.vm.ID(), hosts...)
	if fw.w.Pos != pos || in.State() != vgpu.VMPaused || m.Done() {
		t.Fatalf("a second with the link lost: %d pages written, destination VM %v, done %v", fw.w.Pos-pos, in.State(), m.Done())
	}
	if m.absentLeft() != left {
		t.Fatalf("%d pages absent after a second with the link lost, %d before", m.absentLeft(), left)
	}
	checkAsStunned(t, stunned, fw.vm)
	must(t, m.Recover())
	checkOneOwner(t, fw.vm.ID(), hosts...)
	if (in.State() == vgpu.VMRunning) != wantRun || m.core.DestinationPaused() {
		t.Fatalf("after Recover the destination VM is %v, held %v", in.State(), m.core.DestinationPaused())
	}
	if err := m.Recover(); !errors.Is(err, ErrConfig) {
		t.Fatalf("a second Recover: %v, want ErrConfig", err)
	}
	return "held paused; Run: ErrConnection; Recover: " + postCopyCompletes(t, fw, m, in, wantRun, time.Second, owed, left, pushed)
}

// postCopyCompletes steps m to its end and checks that it completed: done,
// every page at the destination and the oracle holding there, the
// report's account consistent, paused at least paused; the VM runs on
// there after.
func postCopyCompletes(t *testing.T, fw *faultWorld, m *Migration, in *vgpu.VM, wantRun bool, paused time.Duration, owed, left int, pushed int64) string {
	t.Helper()
	hosts := fw.sim.Hosts()
	stepChecking(t, m, hosts...)
	rep, err := m.Run()
	if err != nil || rep.Outcome != PhaseDone || m.Phase() != PhaseDone {
		t.Fatalf("outcome %v, err %v", rep.Outcome, err)
	}
	if m.absentLeft() != 0 {
		t.Fatalf("%d pages absent at the end", m.absentLeft())
	}
	if m.VM() != in || in.Migrating() || (in.State() == vgpu.VMRunning) != wantRun {
		t.Fatalf("destination VM %v, claimed %v, want running %v", in.State(), in.Migrating(), wantRun)
	}
	fw.w.Check(t, in)
	pc := rep.PostCopy
	if pc == nil {
		t.Fatal("no post-copy report")
	}
	checkPostCopyAccount(t, pc)
	if pc.OwedPages != int64(owed) {
		t.Fatalf("%d pages owed, %d were absent when the VM resumed", pc.OwedPages, owed)
	}
	if got := pc.Pushed.Pages + pc.Faulted.Pages; got < pc.OwedPages {
		t.Fatalf("%d pages pushed and %d faulted in of %d owed", pc.Pushed.Pages, pc.Faulted.Pages, pc.OwedPages)
	}
	if paused > 0 && pc.Paused < paused || paused == 0 && pc.Paused != 0 {
		t.Fatalf("paused %v, want %v", pc.Paused, paused)
	}
	if pc.Window < pc.Paused {
		t.Fatalf("window %v shorter than the pause %v", pc.Window, pc.Paused)
	}
	if !wantRun && pc.Faults != 0 {
		t.Fatalf("a VM that never ran at the destination faulted %d pages", pc.Faults)
	}
	if fw.vm.State() != vgpu.VMDestroyed {
		t.Fatalf("source VM %v after the migration", fw.vm.State())
	}
	checkNothingAt(t, fw.src)
	if checkSettled(t, in.ID(), hosts...) != fw.dst {
		t.Fatal("the VM did not settle at the destination")
	}
	// The VM runs on at the destination, every counter right.
	if !wantRun {
		must(t, in.Resume())
	}
	if _, err := fw.sim.Advance(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	fw.w.Check(t, in)
	return fmt.Sprintf("done, oracle holds; %d owed (%d absent at the fault, %d pushed by then), %d pushed, %d faults in %d fetches, paused %v, window %v",
		pc.OwedPages, left, pushed, pc.Pushed.Pages, pc.Faults, pc.Fetches, pc.Paused, pc.Window)
}

// postCopyVMLost checks a migration that lost the VM in post-copy: failed
// there, its error wrapping ErrVMLost and cause.
func postCopyVMLost(t *testing.T, m *Migration, cause error) *PhaseError {
	t.Helper()
	var pe *PhaseError
	if err := m.Err(); !m.Done() || !errors.As(err, &pe) || pe.Phase != PhasePostCopy || !errors.Is(err, ErrVMLost) || !errors.Is(err, cause) {
		t.Fatalf("done %v, error %v; want a *PhaseError in post-copy wrapping ErrVMLost and %v", m.Done(), err, cause)
	}
	rep := m.Report()
	if rep.Outcome != PhaseFailed || rep.FailedIn != PhasePostCopy || rep.PostCopy == nil {
		t.Fatalf("report outcome %v in %v, post-copy %v", rep.Outcome, rep.FailedIn, rep.PostCopy)
	}
	checkPostCopyAccount(t, rep.PostCopy)
	if m.core.DestinationPaused() {
		t.Fatal("a failed migration holds its destination for a lost link")
	}
	return pe
}

// postCopyEndedStays checks that a failed post-copy migration stays as it
// ended: hitting it again does nothing, Recover is refused, and time
// passing changes nothing.
func postCopyEndedStays(t *testing.T, fw *faultWorld, m *Migration) {
	t.Helper()
	err0 := m.Err()
	must(t, m.Cancel())
	for _, f := range append(Faults(), FaultSourceGone) {
		must(t, m.Inject(f))
	}
	if err := m.Recover(); !errors.Is(err, ErrConfig) {
		t.Fatalf("Recover after the VM was lost: %v", err)
	}
	if _, err := m.Run(); !errors.Is(err, ErrVMLost) {
		t.Fatalf("Run after the VM was lost: %v", err)
	}
	pos := fw.w.Pos
	if _, err := fw.sim.Advance(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if fw.vm.State() != vgpu.VMDestroyed {
		// A source gone leaves no copy; otherwise the source holds one.
		checkOneOwner(t, fw.vm.ID(), fw.sim.Hosts()...)
	}
	if fw.w.Pos != pos {
		t.Fatalf("the lost VM wrote %d pages", fw.w.Pos-pos)
	}
	if m.Err() != err0 || !strings.Contains(m.Report().Error, ErrVMLost.Error()) {
		t.Fatalf("error changed to %v, report %q", m.Err(), m.Report().Error)
	}
}

// checkAsStunned checks that the source's copy is as the stun left it:
// its memory and device state, but for its GPU scheduler's accounting,
// which moves with the host's clock while the VM is paused.
func checkAsStunned(t *testing.T, stunned sourceImage, vm *vgpu.VM) {
	t.Helper()
	now := imageOf(t, vm)
	for i := range now.States {
		if i < len(stunned.States) {
			now.States[i].Sched = stunned.States[i].Sched
		}
	}
	if d := cmp.Diff(stunned, now, cmp.AllowUnexported(sourceImage{})); d != "" {
		t.Fatalf("the source's copy changed since the stun (-stun +now):\n%s", d)
	}
}

// startPostCopyFor starts the fault table's migration of a VM running or
// paused at the source and steps it into post-copy, and on by after.
func startPostCopyFor(t *testing.T, paused bool, after time.Duration) (*faultWorld, *Migration) {
	t.Helper()
	fw := newFaultWorld(t, paused)
	m, err := fw.sim.Start(fw.vm, fw.dst, postCopyFaultConfig(Bytes))
	must(t, err)
	runTo(t, m, PhasePostCopy)
	if _, err := fw.sim.Advance(after); err != nil {
		t.Fatal(err)
	}
	return fw, m
}

// TestPostCopyLostAccount: the post-copy account of a migration that lost
// the VM covers the post-copy up to the loss: its window, and the time the
// destination held the VM paused for a lost link, up to the end. While
// the link is lost, the report says how long so far.
func TestPostCopyLostAccount(t *testing.T) {
	fw, m := startPostCopyFor(t, false, 30*time.Millisecond)
	must(t, m.Inject(FaultLinkDown))
	if _, err := fw.sim.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	if pc := m.Report().PostCopy; pc.Paused < time.Second || pc.Window < time.Second {
		t.Errorf("after a second with the link lost the report says paused %v, window %v", pc.Paused, pc.Window)
	}
	must(t, m.Inject(FaultDestinationGone))
	if !errors.Is(m.Err(), ErrVMLost) {
		t.Fatalf("error %v", m.Err())
	}
	if pc := m.Report().PostCopy; pc.Paused < time.Second || pc.Window < time.Second {
		t.Errorf("a post-copy lost after a second paused for its link reports paused %v, window %v", pc.Paused, pc.Window)
	}
}

// TestPostCopyLostDestinationDestroyed: once the source is gone, the
// destination's copy lacks pages nobody has any more; it is destroyed,
// never resumed with them missing (ErrVMLost), and the Sim runs on.
func TestPostCopyLostDestinationDestroyed(t *testing.T) {
	fw, m := startPostCopyFor(t, false, 30*time.Millisecond)
	in := m.VM()
	if m.absentLeft() == 0 {
		t.Fatal("no page absent at the destination")
	}
	must(t, m.Inject(FaultSourceGone))
	if !errors.Is(m.Err(), ErrVMLost) || in.State() != vgpu.VMDestroyed {
		t.Fatalf("error %v, destination copy %v", m.Err(), in.State())
	}
	if err := in.Resume(); err == nil {
		t.Error("the destination's copy of a lost VM was resumed")
	}
	if _, err := fw.sim.Advance(100 * time.Millisecond); err != nil {
		t.Errorf("the Sim fails after the VM was lost: %v", err)
	}
}

// TestPostCopyLostSourceKeepsWorkload: a VM that never ran at the
// destination (paused by its owner before the migration) loses nothing
// when the destination's process ends in post-copy: the source's copy is
// the whole VM. Given back to its owner (ResolveMigration) and resumed,
// it runs its workload on, every counter right.
func TestPostCopyLostSourceKeepsWorkload(t *testing.T) {
	fw, m := startPostCopyFor(t, true, 30*time.Millisecond)
	must(t, m.Inject(FaultDestinationGone))
	if !errors.Is(m.Err(), ErrVMLost) {
		t.Fatalf("error %v", m.Err())
	}
	fw.w.Check(t, fw.vm)
	must(t, fw.vm.ResolveMigration(false))
	must(t, fw.vm.Resume())
	if fw.vm.Workload() == nil {
		t.Error("the source's copy was given back without its workload")
	}
	pos := fw.w.Pos
	if _, err := fw.sim.Advance(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if fw.w.Pos == pos {
		t.Error("the resumed VM's workload wrote nothing in 200 ms")
	}
	fw.w.Check(t, fw.vm)
}
