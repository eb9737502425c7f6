package migrate

import (
	"errors"
	"slices"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
	"github.com/vgpusim/vgpusim/vgpu"
	"pgregory.net/rapid"
)

// clusterEndedKept is how many ended migrations the model keeps for
// cancels and faults to be tried on (a cancel of a done one is too late, a
// fault on an ended one does nothing): one, so that the migrations under
// way are drawn more often.
const clusterEndedKept = 1

// check runs before the first action and after every one: it settles the
// migrations that moved on, then compares every host and every VM's memory
// with the model.
func (cm *clusterModel) check(t *rapid.T) {
	if cm.now != cm.sim.Now() {
		t.Fatalf("the Sim is at %v, the model at %v", cm.sim.Now(), cm.now)
	}
	cm.checks++
	for _, mg := range slices.Clone(cm.migs) {
		cm.settle(t, mg)
	}
	cm.checkCluster(t)
	for _, id := range cm.order {
		cm.checkWorkload(t, cm.vms[id])
	}
}

// checkMemory checks the VM's memory against the model: the counter
// oracle once its workload runs, else every region as it was created.
func (cm *clusterModel) checkMemory(t *rapid.T, vm *clusterVM) {
	t.Helper()
	v, ok := cm.hosts[vm.host].VM(vm.id)
	if !ok {
		t.Fatalf("VM %s is not on host %d", vm.id, vm.host)
	}
	switch {
	case vm.w != nil && vm.w.Running():
		vm.w.Check(t, v)
	case vm.w == nil:
		if d := cmp.Diff(vm.digests, migtest.RegionDigests(t, v)); d != "" {
			t.Fatalf("VM %s on host %d: memory changed (-created +now):\n%s", vm.id, vm.host, d)
		}
	}
	regions := append([]*memory.Region{v.RAM()}, v.Framebuffers()...)
	for at, want := range vm.written {
		var got [8]byte
		_, err := regions[at.region].ReadAt(got[:], at.off)
		must(t, err)
		if got != want {
			t.Fatalf("VM %s on host %d: region %d holds %x at %d, its owner wrote %x", vm.id, vm.host, at.region, got, at.off, want)
		}
	}
}

// checkWorkload bounds the counter's writes by its rate and the time since
// it was given, and keeps them still across a pause.
func (cm *clusterModel) checkWorkload(t *rapid.T, vm *clusterVM) {
	t.Helper()
	if vm.w == nil {
		return
	}
	v, _ := cm.hosts[vm.host].VM(vm.id)
	paused := v.State() == vgpu.VMPaused
	if bound := vm.w.PagesPerSec*int64(cm.now-vm.wSince)/int64(time.Second) + 1; vm.w.Pos > bound {
		t.Fatalf("VM %s: %d writes in %v at %d a second", vm.id, vm.w.Pos, cm.now-vm.wSince, vm.w.PagesPerSec)
	}
	if paused && vm.lastPaused && vm.w.Pos != vm.lastPos {
		t.Fatalf("VM %s wrote %d pages while paused", vm.id, vm.w.Pos-vm.lastPos)
	}
	vm.lastPos, vm.lastPaused = vm.w.Pos, paused
	cm.checkMemory(t, vm)
}

// settle brings the model up to date with a migration's phase: at the
// acknowledgement the VM becomes the destination's; a failed migration
// leaves it where it was, and must have failed with what doomed it.
func (cm *clusterModel) settle(t *rapid.T, mg *clusterMig) {
	t.Helper()
	p := mg.m.Phase()
	if mg.stalled && p != PhaseFailed && cm.sim.Now() >= mg.stallUntil {
		t.Fatalf("migration of %s stalled in %v still in %v at %v, past its timeout at %v",
			mg.id, mg.stallPhase, p, cm.sim.Now(), mg.stallUntil)
	}
	if d := mg.doomedIn(); d != 0 && !mg.stalled && p != d && p != PhaseFailed {
		t.Fatalf("migration of %s moved on from %v to %v, though its owner changed its VM there: want ErrSource", mg.id, d, p)
	}
	switch p {
	case PhaseRelease, PhaseDone:
		if !mg.released {
			if w := mg.want(); w != nil {
				t.Fatalf("migration of %s reached %v, yet it was doomed to fail with %v", mg.id, p, w)
			}
			mg.released = true
			if vm := mg.vm; vm != nil {
				vm.host, vm.gpu = mg.dst, mg.dstGPU
				cm.checkArrival(t, mg)
			}
		}
		if p == PhaseDone {
			if err := mg.m.Err(); err != nil {
				t.Fatalf("migration of %s done with an error: %v", mg.id, err)
			}
			cm.tally["migration done"]++
			if vm := mg.vm; vm != nil && vm.w != nil && vm.w.Pos > mg.writesAtStart {
				cm.tally["migration done, its VM writing"]++
			}
			cm.end(mg)
		}
	case PhaseFailed:
		if mg.released {
			t.Fatalf("migration of %s failed after the acknowledgement: %v", mg.id, mg.m.Err())
		}
		pe := clusterPhaseError(t, mg)
		switch want := mg.want(); {
		case mg.stalled && (!errors.Is(pe, want) || pe.Phase != mg.stallPhase):
			t.Fatalf("migration of %s stalled in %v failed with %v", mg.id, mg.stallPhase, pe)
		case mg.stalled && clusterFailedAt(mg) != mg.stallUntil:
			// A later stall must not have restarted the wait.
			t.Fatalf("migration of %s stalled in %v failed at %v, its first stall's timeout at %v",
				mg.id, mg.stallPhase, clusterFailedAt(mg), mg.stallUntil)
		case !mg.stalled && mg.doomedIn() != 0 && (!errors.Is(pe, ErrSource) || pe.Phase != mg.doomedIn()):
			// The migration's next event, still in the phase of the
			// resume or the write, finds the VM running or written.
			t.Fatalf("migration of %s, its VM changed by its owner in %v: %v, want ErrSource there", mg.id, mg.doomedIn(), pe)
		case want != nil && !errors.Is(pe, want):
			t.Fatalf("migration of %s failed with %v, want %v", mg.id, pe, want)
		case want == nil && mg.failedWith != nil && !errors.Is(pe, mg.failedWith):
			t.Fatalf("migration of %s failed with %v, want %v", mg.id, pe, mg.failedWith)
		case want == nil && mg.failedWith == nil && (mg.policy != Abort || !errors.Is(pe, ErrNotConverged)):
			// Nothing the model did failed it: only pre-copy that did
			// not converge under the Abort policy may.
			t.Fatalf("migration of %s (policy %v) failed on its own: %v", mg.id, mg.policy, pe)
		}
		cm.tally[clusterFailure(mg, pe)]++
		cm.end(mg)
	}
}

// hit checks a cancel or a fault on a migration that was in phase p: it
// returned err; want is the sentinel it must have failed with at once, nil
// for a stall, which only starts the timeout. A cancel of a done migration
// is too late; a fault on one does nothing.
func (cm *clusterModel) hit(t *rapid.T, mg *clusterMig, p Phase, err error, want error, isCancel bool) {
	t.Helper()
	switch {
	case p == PhaseFailed || p == PhaseDone && !isCancel:
		if err != nil || mg.m.Phase() != p {
			t.Fatalf("on a migration in %v: %v, now in %v", p, err, mg.m.Phase())
		}
	case p == PhaseRelease || p == PhaseDone:
		if !errors.Is(err, ErrTooLate) || mg.m.Phase() != p {
			t.Fatalf("after the acknowledgement: %v, now in %v", err, mg.m.Phase())
		}
		cm.tally["too late after the acknowledgement"]++
	case err != nil:
		t.Fatalf("in %v: %v", p, err)
	case want == nil:
		if mg.m.Phase() != p || mg.m.Err() != nil {
			t.Fatalf("a stall in %v ended the migration at once: %v", p, mg.m.Err())
		}
		// A second stall does not restart the wait.
		switch {
		case !mg.stalled:
			cm.tally["stalled in "+p.String()]++
			mg.stalled, mg.stallPhase, mg.stallUntil = true, p, cm.sim.Now()+mg.timeout
		case cm.sim.Now() > mg.stallUntil-mg.timeout:
			cm.tally["stalled again, later"]++
			mg.stalledLater = true
		default:
			cm.tally["stalled again at once"]++
		}
	default:
		if mg.m.Phase() != PhaseFailed || !errors.Is(mg.m.Err(), want) || clusterPhaseError(t, mg).Phase != p {
			t.Fatalf("in %v: migration %v with %v, want %v in %v", p, mg.m.Phase(), mg.m.Err(), want, p)
		}
		cm.tally["failed at once in "+p.String()]++
		// What failed it is want, whatever doomed it before.
		mg.stalled, mg.changedIn, mg.resumedIn, mg.writtenIn, mg.destroyed, mg.failedWith = false, 0, 0, 0, false, want
	}
}

// checkArrival checks the VM that just moved to the destination: it is
// resumed there as the stun found it, paused if and only if its owner had
// paused it before the stun. (A pause or resume by its owner in the stun
// fails the migration, and the VM stays at the source as its owner left
// it: settle catches a migration that moved on.)
func (cm *clusterModel) checkArrival(t *rapid.T, mg *clusterMig) {
	t.Helper()
	want := vgpu.VMRunning
	if mg.vm.paused {
		want = vgpu.VMPaused
		cm.tally["migration released its VM paused, as its owner left it"]++
	}
	if got := mg.m.VM().State(); got != want || mg.m.VM().Host() != cm.hosts[mg.dst] {
		t.Fatalf("migration of %s released its VM %v on %s, want %v on host %d", mg.id, got, mg.m.VM().Host().Name(), want, mg.dst)
	}
}

// clusterFailedAt is when the migration failed: its last event's time.
func clusterFailedAt(mg *clusterMig) time.Duration {
	ev := mg.m.Events()
	return ev[len(ev)-1].At
}

// end moves a migration that ended from those under way to the few ended
// ones kept.
func (cm *clusterModel) end(mg *clusterMig) {
	if mg.vm != nil && mg.vm.mig == mg {
		mg.vm.mig = nil
	}
	cm.migs = slices.DeleteFunc(cm.migs, func(x *clusterMig) bool { return x == mg })
	cm.ended = append(cm.ended, mg)
	if len(cm.ended) > clusterEndedKept {
		cm.ended = cm.ended[1:]
	}
}

// clusterFailure names what failed a migration, for the tally.
func clusterFailure(mg *clusterMig, pe *PhaseError) string {
	switch {
	case mg.stalled && mg.stalledLater:
		return "migration failed: stall timed out, a later second stall ignored"
	case mg.stalled:
		return "migration failed: stall timed out in " + pe.Phase.String()
	case mg.resumedIn != 0:
		return "migration failed: its VM resumed by its owner in " + pe.Phase.String()
	case mg.changedIn != 0:
		return "migration failed: its VM resumed and paused again by its owner in " + pe.Phase.String()
	case mg.writtenIn != 0:
		return "migration failed: its VM written after its final pages, in " + pe.Phase.String()
	}
	for _, s := range []error{ErrCanceled, ErrConnection, ErrRefused, ErrDestination, ErrSource, ErrNotConverged} {
		if errors.Is(pe, s) {
			return "migration failed: " + s.Error()
		}
	}
	return "migration failed: " + pe.Err.Error()
}

// deleteString returns s without its elements equal to x, in order.
func deleteString(s []string, x string) []string {
	return slices.DeleteFunc(s, func(e string) bool { return e == x })
}

// clusterPhaseError returns the migration's *PhaseError, failing if it has
// none or it names another VM.
func clusterPhaseError(t *rapid.T, mg *clusterMig) *PhaseError {
	t.Helper()
	var pe *PhaseError
	if !errors.As(mg.m.Err(), &pe) || pe.VM != mg.id {
		t.Fatalf("migration of %s failed with %v, not a *PhaseError naming it", mg.id, mg.m.Err())
	}
	return pe
}
