package live

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// livePoint is a point of failure of a live migration, and the phase the
// source names when it fails there.
type livePoint struct {
	name   string
	phase  migrate.Phase
	rounds int // the rounds ended before it, where it lies in the source's writes
}

// livePoints mirror the simulated table's points. The last two split its
// "restored, not acknowledged": the destination has restored and its
// "ready" is lost (the source has not committed: a clean failure), or the
// source has committed and the "resumed" is lost (the outcome is in
// doubt, which the library promises to resolve to at most one running
// copy: the source keeps its copy paused).
var livePoints = []livePoint{
	{"before-first-byte", migrate.PhaseSetup, 0},
	{"round-0-at-37%", migrate.PhasePreCopy, 0},
	{"later-round", migrate.PhasePreCopy, 1},
	{"final-round", migrate.PhaseFinalFramebuffer, liveRounds},
	{"device-state-record", migrate.PhaseDeviceState, liveRounds},
	{"restored-not-ready", migrate.PhaseRestore, liveRounds},
	{"committed-not-acknowledged", migrate.PhaseResume, liveRounds},
}

// liveKinds are the kinds of failure, named as in the simulated table.
var liveKinds = []string{"link-dropped", "link-stalled", "destination-refuses", "destination-gone", "source-cancels"}

// liveRounds is the number of pre-copy rounds every migration of the table
// makes: with a stun target no round can meet, the round limit ends
// pre-copy, so the points have the same rounds to fall in on every run.
const liveRounds = 3

// livePlan is how a cell makes its failure happen, and what each side
// must then say.
type livePlan struct {
	onDst     bool // the destination's end acts; otherwise the source's
	cut       func([]wireUnit) (int64, bool)
	act       tapAction
	handshake bool  // the destination's configuration refuses the VM
	srcErr    error // the source's sentinel
	dstErr    error // the destination's; nil: it has the VM
	// orStream: the source's end closes while a record is under way, and
	// the destination sees either the connection end (ErrConnection) or
	// the stream cut short (ErrStream), depending on where in the record.
	orStream bool
	dstPhase migrate.Phase // the destination's phase; 0: it may be either of two
	inDoubt  bool
	probe    bool          // the cut only watches the wire
	srcPhase migrate.Phase // the source's phase, where it is not the point's
}

// planFor resolves a cell. "The destination refuses" is what the protocol
// offers at each point: in the handshake, a refusal from Receive itself
// (batches over its limit); while the stream flows, the destination
// rejects a record (a byte flipped in it fails its check) and closes, so
// the source, which is not awaiting an answer, sees its connection fail;
// in place of "ready", a refusal message, which the source reads wherever
// it awaits an answer; and after the commit, the destination rejects the
// commit itself. The destination names the phase by the last record it
// applied, so a failure inside the final pages or the device-state record
// is PhasePreCopy to it.
func planFor(p livePoint, kind string, round0 int64) livePlan {
	pl := livePlan{dstPhase: migrate.PhasePreCopy}
	switch p.name {
	case "before-first-byte":
		pl.cut, pl.dstPhase = cutAtStart, migrate.PhaseSetup
	case "round-0-at-37%":
		pl.cut = cutAfterMetadata(round0, 0.37)
	case "later-round":
		pl.cut = cutMidFirst(func(b []wireUnit, u wireUnit) bool { return u.kind == unitRecord && roundsEnded(b) == 1 })
	case "final-round":
		pl.cut = cutMidFirst(func(b []wireUnit, u wireUnit) bool {
			return u.typ == recPageBatch && u.first >= 1 && roundsEnded(b) == liveRounds
		})
	case "device-state-record":
		pl.cut = cutMidFirst(func(_ []wireUnit, u wireUnit) bool { return u.kind == unitRecord && u.typ == recDeviceState })
	case "restored-not-ready":
		pl.onDst, pl.cut, pl.dstPhase = true, cutAtMessage(2), migrate.PhaseRestore // after challenge and accept
	case "committed-not-acknowledged":
		pl.onDst, pl.cut, pl.dstPhase, pl.inDoubt = true, cutAtMessage(3), migrate.PhaseResume, true
	}
	switch kind {
	case "link-dropped":
		pl.act, pl.srcErr, pl.dstErr = actDrop, migrate.ErrConnection, migrate.ErrConnection
	case "link-stalled":
		pl.act, pl.srcErr, pl.dstErr = actStall, migrate.ErrConnection, migrate.ErrConnection
	case "destination-refuses":
		pl.act, pl.srcErr, pl.dstErr = actCorrupt, migrate.ErrConnection, migrate.ErrStream
		switch p.name {
		case "before-first-byte":
			pl.act, pl.handshake, pl.srcErr, pl.dstErr = actPass, true, migrate.ErrRefused, migrate.ErrConfig
		case "restored-not-ready":
			// A refusal in place of ready, written by the tap: not the
			// destination's, so the source, which cannot authenticate
			// it, refuses it and rolls back.
			pl.act, pl.srcErr, pl.dstErr, pl.dstPhase = actRefuse, migrate.ErrAuthentication, migrate.ErrConnection, migrate.PhaseResume
		case "committed-not-acknowledged":
			pl.onDst, pl.cut = false, cutAtMessage(0)
		case "final-round":
			// The destination can reject the record only once its check
			// value has arrived, and the source has written the final
			// pages, and its device state, by then.
			pl.srcPhase = migrate.PhaseDeviceState
		}
	case "destination-gone":
		// The source cannot tell a dead destination from a dropped link:
		// ErrConnection (the simulated FaultDestinationGone says
		// ErrDestination); Receive, its context canceled, ErrCanceled.
		pl.act, pl.srcErr, pl.dstErr = actKillPeer, migrate.ErrConnection, migrate.ErrCanceled
		if pl.inDoubt { // the commit is lost with the destination's process
			pl.act, pl.onDst, pl.cut = actSwallow, false, cutAtMessage(0)
		}
	case "source-cancels":
		pl.act, pl.srcErr, pl.dstErr = actCancel, migrate.ErrCanceled, migrate.ErrConnection
		if p.name == "restored-not-ready" {
			pl.dstPhase = 0 // its "ready" may reach the closed end, or not
		}
	}
	if pl.dstErr == migrate.ErrConnection && pl.dstPhase == migrate.PhasePreCopy {
		pl.orStream = true
	}
	if pl.inDoubt && pl.act != actCorrupt && pl.act != actSwallow {
		pl.dstErr = nil // the destination resumed before its "resumed" was lost
	}
	return pl
}

// TestLiveFaultTable fails a live migration over loopback TCP at every
// point in every way, its VM running the counter oracle under a Runner.
// Each time the source ends as it was at the failure — running, or paused
// if it was, or, in doubt, paused — its memory, device state and throttle
// unchanged and its dirty logging off; the destination holds nothing (no
// VM, no vGPU, no window, no resident byte), or, in doubt, the VM it
// resumed; each error is a *PhaseError wrapping the kind's sentinel, the
// source's naming the point's phase; never two copies run. Then a second
// migration, to the same destination or the third host, succeeds and
// passes the oracle, pages dirtied during the failed attempt included.
func TestLiveFaultTable(t *testing.T) {
	variants := []liveVariant{{}, {paused: true}, {filtered: true}}
	short := raceEnabled || testing.Short()
	if short {
		variants = variants[:1]
	}
	cells, passed := 0, 0
	for vi, v := range variants {
		for i, p := range livePoints {
			for j, k := range liveKinds {
				// Under the race detector or -short, and for a paused VM
				// or page filters (the same steps), one kind a point,
				// each in turn; a paused VM sends no final pages.
				turn := (i + vi) % len(liveKinds)
				if (short || vi > 0) && j != turn || v.paused && p.name == "final-round" {
					continue
				}
				name := p.name + "/" + k + v.String()
				elsewhere := cells%2 == 1
				cells++
				if t.Run(name, func(t *testing.T) { liveFaultCell(t, p, k, v, elsewhere) }) {
					passed++
				}
			}
		}
	}
	t.Logf("live fault table: %d scenarios of %d, each ending with nothing lost and a retry that passed the oracle", passed, cells)
}

func liveFaultCell(t *testing.T, p livePoint, kind string, v liveVariant, elsewhere bool) {
	paused := v.paused
	lw := newLiveWorld(t, v)
	pl := planFor(p, kind, cleanRound0(t, v))
	timeout := 20 * time.Second
	if kind == "link-stalled" {
		timeout = liveStallTimeout()
	}
	att := lw.attempt(t, lw.dst, pl, timeout)
	res, src := att.res, lw.vm
	// The cut fell where the point says: after its rounds, and 37 % into
	// round 0 inside a page batch (a length taken from a clean run).
	if !pl.onDst && (att.rounds != p.rounds || p.rounds == 0 && p.phase == migrate.PhasePreCopy && att.cutIn != recPageBatch) {
		t.Fatalf("the cut fell after %d rounds in a record of type %#x", att.rounds, att.cutIn)
	}
	phase := p.phase
	if pl.srcPhase != 0 {
		phase = pl.srcPhase
	}
	var pe *migrate.PhaseError
	if !errors.As(res.srcErr, &pe) || pe.Phase != phase || !errors.Is(res.srcErr, pl.srcErr) ||
		errors.Is(res.srcErr, migrate.ErrInDoubt) != pl.inDoubt {
		t.Fatalf("source error %v, want a *PhaseError in %v wrapping %v (in doubt: %v)", res.srcErr, phase, pl.srcErr, pl.inDoubt)
	}
	if res.srcRep.Outcome != migrate.PhaseFailed || res.srcRep.FailedIn != phase {
		t.Fatalf("source report: outcome %v, failed in %v", res.srcRep.Outcome, res.srcRep.FailedIn)
	}
	if pl.dstErr == nil {
		if res.dstErr != nil || res.in == nil || res.in.State() != att.want {
			t.Fatalf("destination: %v; want the VM %v there", res.dstErr, att.want)
		}
	} else {
		typed := errors.Is(res.dstErr, pl.dstErr) || pl.orStream && errors.Is(res.dstErr, migrate.ErrStream)
		if !errors.As(res.dstErr, &pe) || !typed || pl.dstPhase != 0 && pe.Phase != pl.dstPhase || res.in != nil {
			t.Fatalf("destination error %v, want a *PhaseError in %v wrapping %v", res.dstErr, pl.dstPhase, pl.dstErr)
		}
		checkNothingAt(t, lw.dst)
	}
	want := att.want
	if pl.inDoubt {
		want = vgpu.VMPaused
	}
	checkSourceFrozen(t, lw, att.before, want)
	checkOneOwner(t, src.ID(), lw.src, lw.dst)
	if p.phase > migrate.PhasePreCopy && !paused && att.dirtied < int64(lw.w.Pages) {
		t.Fatalf("the failed attempt rewrote %d pages, fewer than the oracle's %d", att.dirtied, lw.w.Pages)
	}

	if pl.dstErr == nil {
		// In doubt with the destination running the VM: the source's
		// copy is held, and whoever manages the hosts, having asked the
		// destination, destroys it.
		if err := src.Resume(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("the source's copy in doubt resumed by its owner: %v; want vgpu.ErrMigrating", err)
		}
		must(t, src.ResolveMigration(true))
		lw.w.Check(t, res.in)
		checkNothingAt(t, lw.src)
		return
	}
	// The VM runs on at the source, then moves for good.
	to := lw.dst
	if elsewhere {
		to = lw.third
	}
	lw.run.Start()
	lw.run.Lock()
	var err error
	if pl.inDoubt {
		// In doubt with the destination holding nothing: given back to
		// its owner, paused.
		err = src.ResolveMigration(false)
	}
	if err == nil && src.State() == vgpu.VMPaused {
		err = src.Resume()
	}
	if err == nil {
		err = lw.src.Advance(200 * time.Millisecond)
	}
	lw.run.Unlock()
	must(t, err)
	again := lw.attempt(t, to, livePlan{}, 20*time.Second)
	if again.res.srcErr != nil || again.res.dstErr != nil || again.res.in.State() != vgpu.VMRunning {
		t.Fatalf("second migration: source %v, destination %v", again.res.srcErr, again.res.dstErr)
	}
	must(t, lw.run.Stop())
	lw.w.Check(t, again.res.in)
	if checkSettled(t, src.ID(), lw.src, lw.dst, lw.third) != to {
		t.Fatal("the VM is not where it moved")
	}
	checkNothingAt(t, lw.src)
}

// checkSourceFrozen checks the source after a failure: the VM on its host
// in state want, every region and device state as at the failure, its
// throttle back to none (unthrottled: see below), dirty logging off, and
// the oracle's counts.
func checkSourceFrozen(t *testing.T, lw *liveWorld, before sourceImage, want vgpu.VMState) {
	t.Helper()
	vm := lw.vm
	if vm.State() != want || vm.Host() != lw.src || vm.Throttle() != 0 {
		t.Fatalf("source VM %v on %s, throttle %v; want %v on %s, unthrottled", vm.State(), vm.Host().Name(), vm.Throttle(), want, lw.src.Name())
	}
	after, err := snapshotOf(vm)
	must(t, err)
	before.VMState = want
	if d := cmp.Diff(before, after, cmp.AllowUnexported(sourceImage{})); d != "" {
		t.Fatalf("source changed by the failure (-before +after):\n%s", d)
	}
	for _, r := range append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...) {
		if r.DirtyLogging() {
			t.Fatal("dirty logging still on at the source")
		}
	}
	lw.w.Check(t, vm)
}

// TestLiveFaultChain moves a VM A -> B -> C, each hop failing once first,
// and checks the oracle at B and at C, its workload carried along.
func TestLiveFaultChain(t *testing.T) {
	lw := newLiveWorld(t, liveVariant{})
	failures := []livePlan{
		planFor(livePoints[3], "link-dropped", 0),     // final round
		planFor(livePoints[4], "destination-gone", 0), // device-state record
	}
	hosts := []*vgpu.Host{lw.src, lw.dst, lw.third}
	for i, to := range hosts[1:] {
		att := lw.attempt(t, to, failures[i], 20*time.Second)
		if !errors.Is(att.res.srcErr, failures[i].srcErr) || att.res.in != nil {
			t.Fatalf("hop %d: failed attempt: %v", i, att.res.srcErr)
		}
		checkNothingAt(t, to)
		lw.w.Check(t, lw.vm)
		lw.run.Start()
		ok := lw.attempt(t, to, livePlan{}, 20*time.Second)
		if ok.res.srcErr != nil || ok.res.dstErr != nil {
			t.Fatalf("hop %d: %v / %v", i, ok.res.srcErr, ok.res.dstErr)
		}
		must(t, lw.run.Stop())
		lw.w.Check(t, ok.res.in)
		checkNothingAt(t, lw.src)
		// The workload goes on at the new host, under its own Runner.
		must(t, ok.res.in.SetWorkload(lw.w))
		lw.src, lw.vm, lw.run = to, ok.res.in, NewRunner(to, 0)
		lw.run.Start()
		lw.run.Lock()
		must(t, to.Advance(300*time.Millisecond))
		lw.run.Unlock()
	}
	must(t, lw.run.Stop())
	if checkSettled(t, lw.vm.ID(), hosts...) != lw.third {
		t.Fatal("the VM did not end at C")
	}
	lw.w.Check(t, lw.vm)
	checkNothingAt(t, hosts[0])
	checkNothingAt(t, hosts[1])
}
