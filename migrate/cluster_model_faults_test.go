package migrate

import (
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
	"github.com/vgpusim/vgpusim/vgpu"
	"pgregory.net/rapid"
)

// The actions of TestClusterModel that interfere with migrations: Cancel,
// Migration.Inject, Sim.FailLink, two stalls of one migration's link, and
// the owner's Pause, Resume and writes, each checked at once against the
// phase it caught the migration in; check settles the model afterwards.

func (cm *clusterModel) cancel(t *rapid.T) {
	mg := cm.drawMig(t)
	p := mg.m.Phase()
	cm.hit(t, mg, p, mg.m.Cancel(), ErrCanceled, true)
}

// faultSentinels are the errors the faults that fail a migration at once
// fail it with.
var faultSentinels = map[Fault]error{FaultLinkDown: ErrConnection, FaultRefused: ErrRefused, FaultDestinationGone: ErrDestination}

func (cm *clusterModel) inject(t *rapid.T) {
	mg := cm.drawMig(t)
	// 0 and numFaults+2 are no faults: Inject must refuse them untouched.
	f := rapid.SampledFrom(append(Faults(), 0, numFaults+2)).Draw(t, "fault")
	p, before := mg.m.Phase(), mg.m.Err()
	err := mg.m.Inject(f)
	switch f {
	case 0, numFaults + 2:
		if !errors.Is(err, ErrConfig) || mg.m.Phase() != p || mg.m.Err() != before {
			t.Fatalf("unknown fault %v: %v, migration in %v", f, err, mg.m.Phase())
		}
	case FaultLinkStall:
		cm.hit(t, mg, p, err, nil, false)
	default:
		cm.hit(t, mg, p, err, faultSentinels[f], false)
	}
}

func (cm *clusterModel) failLink(t *rapid.T) {
	link := rapid.SampledFrom(clusterLinkNames()).Draw(t, "link")
	cm.failLinkWith(t, link, rapid.SampledFrom([]Fault{FaultLinkDown, FaultLinkStall, FaultRefused}).Draw(t, "fault"))
}

// stallTwice stalls a migration's link (unless it is stalled already),
// lets a drawn part of the wait pass and stalls it again, each time by
// Inject or FailLink, then sometimes waits the timeout out: the wait must
// not restart, so the migration fails when the first stall's timeout is up
// (settle checks the instant). Stalls drawn alone rarely come twice to one
// migration, time apart, before its timeout.
func (cm *clusterModel) stallTwice(t *rapid.T) {
	var migs []*clusterMig
	for _, mg := range cm.migs {
		if !mg.released {
			migs = append(migs, mg)
		}
	}
	if len(migs) == 0 {
		t.Skip("no migration before its acknowledgement")
	}
	mg := migs[rapid.IntRange(0, len(migs)-1).Draw(t, "stalled")]
	if !mg.stalled {
		cm.stallOnce(t, mg)
	}
	// Short of the timeout, the stalled migration stays where it is.
	cm.wait(t, (mg.stallUntil-cm.now)*time.Duration(rapid.IntRange(0, 9).Draw(t, "tenthsOfWaitLeft"))/10)
	cm.stallOnce(t, mg)
	if rapid.Bool().Draw(t, "waitOut") {
		cm.wait(t, mg.stallUntil-cm.now)
	}
}

// stallOnce stalls the migration's link by Inject or by FailLink.
func (cm *clusterModel) stallOnce(t *rapid.T, mg *clusterMig) {
	if rapid.Bool().Draw(t, "byFailLink") {
		cm.failLinkWith(t, mg.link, FaultLinkStall)
		return
	}
	p := mg.m.Phase()
	cm.hit(t, mg, p, mg.m.Inject(FaultLinkStall), nil, false)
}

// wait advances the Sim and the model by d.
func (cm *clusterModel) wait(t *rapid.T, d time.Duration) {
	_, err := cm.sim.Advance(d)
	must(t, err)
	cm.now += d
}

// failLinkWith fails the link named link with f and checks every migration
// it hit.
func (cm *clusterModel) failLinkWith(t *rapid.T, link string, f Fault) {
	// FailLink skips migrations past the acknowledgement: the VM has
	// moved, and only the source's release is left. Within stallTwice,
	// time passed since the last check: settle what moved on meanwhile.
	for _, mg := range slices.Clone(cm.migs) {
		cm.settle(t, mg)
	}
	var hit []*clusterMig
	var phases []Phase
	for _, mg := range cm.migs {
		if mg.link == link && !mg.released {
			hit = append(hit, mg)
			phases = append(phases, mg.m.Phase())
		}
	}
	n, err := cm.sim.FailLink(link, f)
	if f == FaultRefused {
		if !errors.Is(err, ErrConfig) || n != 0 {
			t.Fatalf("FailLink with %v: %d, %v", f, n, err)
		}
		return
	}
	if err != nil || n != len(hit) {
		t.Fatalf("FailLink(%s, %v) hit %d (%v), the model %d", link, f, n, err, len(hit))
	}
	for i, mg := range hit {
		if f == FaultLinkDown {
			cm.hit(t, mg, phases[i], nil, ErrConnection, false)
		} else {
			cm.hit(t, mg, phases[i], nil, nil, false)
		}
	}
}

// ownerPhases are the phases ownerMidway and ownerWrite step a migration
// into, most of them in the stun.
var ownerPhases = []Phase{PhaseSetup, PhasePreCopy, PhaseSwitchover, PhaseQuiesce, PhaseDeviceSave,
	PhaseFinalRAM, PhaseFinalFramebuffer, PhaseDeviceState, PhaseRestore, PhaseResume}

// ownerMidway steps a migration into a drawn phase, most often one of the
// stun, has its VM's owner pause or resume the VM there, mostly as its run
// state allows, sometimes pauses it again a drawn moment after a resume in
// the stun, and half the time runs the migration to its end: the stun
// lasts milliseconds, a draw of time rarely leaves the owner in it, and
// the other actions often end the migration before what the owner did
// shows. A VM its owner left running in the stun is not drawn: the first
// step would fail its migration, as advance and step do.
func (cm *clusterModel) ownerMidway(t *rapid.T) {
	vm := cm.drawVM(t, func(vm *clusterVM) bool { return vm.mig != nil && !vm.mig.released && vm.mig.resumedIn == 0 })
	mg := vm.mig
	cm.stepInto(t, mg, rapid.SampledFrom(ownerPhases).Draw(t, "phase"))
	if mg.m.Phase() >= PhaseRelease {
		return
	}
	resume := vm.runState() == vgpu.VMPaused
	if rapid.IntRange(0, 3).Draw(t, "refusedOp") == 0 {
		resume = !resume
	}
	cm.pauseOrResume(t, vm, resume)
	if mg.resumedIn != 0 && rapid.IntRange(0, 3).Draw(t, "pauseAgain") > 0 {
		// None, or long enough for the counter to write a page or a few,
		// often short of the migration's next event (the quiesce, restore
		// and resume take 100 ms or more).
		cm.wait(t, rapid.SampledFrom([]time.Duration{0, 20 * time.Millisecond, 50 * time.Millisecond, 80 * time.Millisecond}).Draw(t, "resumedFor"))
		cm.pauseOrResume(t, vm, false)
	}
	if rapid.Bool().Draw(t, "thenRun") {
		cm.runToEnd(t, mg)
	}
}

// pauseResume has the VM's owner pause or resume it, whether it migrates
// or not; the model predicts a refusal from the run state it says the VM
// is in. A pause during pre-copy is the owner's to make, and the VM
// arrives paused; in the stun the VM is paused, so a pause is refused, and
// a resume dooms the migration to fail with ErrSource at its next event,
// even if the owner pauses the VM again first; the VM then stays at the
// source as its owner left it (pauseOrResume).
func (cm *clusterModel) pauseResume(t *rapid.T) {
	cm.pauseOrResume(t, cm.drawVM(t, nil), rapid.Bool().Draw(t, "resume"))
}

// pauseOrResume has the VM's owner resume or pause it and checks the
// outcome: a refusal unless the model's run state allows it.
func (cm *clusterModel) pauseOrResume(t *rapid.T, vm *clusterVM, resume bool) {
	// Its migration may have ended within this action (when the failure
	// resumes a VM depends on its run state then), and its counter written
	// while it ran: check those before the run state changes.
	if vm.mig != nil {
		cm.settle(t, vm.mig)
	}
	cm.checkWorkload(t, vm)
	op, from, st := "pause", vgpu.VMRunning, vm.runState()
	var err error
	if resume {
		op, from = "resume", vgpu.VMPaused
		err = cm.owned(vm).Resume()
	} else {
		err = cm.owned(vm).Pause()
	}
	mg := vm.mig
	var p Phase // the phase of its migration under way, if any
	if mg != nil && !mg.released {
		p = mg.m.Phase()
	}
	if st != from {
		var te *vgpu.TransitionError
		if !errors.As(err, &te) || !errors.Is(err, vgpu.ErrIllegalTransition) ||
			*te != (vgpu.TransitionError{Op: op, VM: vm.id, Device: -1, From: st.String()}) {
			t.Fatalf("%s of %s, %v: %v, want a refusal", op, vm.id, st, err)
		}
		if p.Stunned() {
			cm.tally[op+" refused in the stun"]++
		}
		return
	}
	must(t, err)
	vm.paused = !resume
	switch {
	case p.Stunned() && resume:
		mg.changedIn = p
		mg.resumedIn, mg.writesAtResume = p, 0
		if vm.w != nil {
			mg.writesAtResume = vm.w.Pos
		}
		cm.tally["resumed by its owner in "+p.String()]++
	case p.Stunned():
		// Paused again before the migration's next event (settle saw it
		// still in the phase of the resume): the pause dooms the
		// migration as the resume did, by the VM's change count, whether
		// or not the counter wrote meanwhile.
		mg.changedIn = p
		wrote := vm.w != nil && vm.w.Pos > mg.writesAtResume
		how := "unwritten"
		if wrote {
			how = "written"
		}
		if wrote && p >= PhaseFinalRAM {
			mg.writtenIn = p
		}
		mg.resumedIn = 0
		cm.tally["resumed and paused again in "+p.String()+", "+how]++
	case p != 0:
		cm.tally[op+"d by its owner in "+p.String()]++
	}
}

// ownerWrite has a VM's owner write a word into its guest RAM or a
// framebuffer, after stepping its migration into a drawn phase, most
// often of the stun, and half the time runs the migration to its end. The
// word must reach wherever the VM ends up. Written inside the stun, it
// dooms the migration to fail with ErrSource at its next event; before,
// it is sent with the rest.
func (cm *clusterModel) ownerWrite(t *rapid.T) {
	vm := cm.drawVM(t, nil)
	stepped := vm.mig
	if stepped != nil && !stepped.released && stepped.resumedIn == 0 {
		cm.stepInto(t, stepped, rapid.SampledFrom(ownerPhases).Draw(t, "phase"))
	} else {
		stepped = nil
	}
	if vm.mig != nil {
		cm.settle(t, vm.mig)
	}
	// What the write is checked against later must hold now.
	cm.checkMemory(t, vm)
	v := cm.owned(vm)
	regions := append([]*memory.Region{v.RAM()}, v.Framebuffers()...)
	ri := rapid.IntRange(0, len(regions)-1).Draw(t, "region")
	r := regions[ri]
	// The counter writes the first word of its pages; the owner another.
	off := int64(rapid.IntRange(0, r.Pages()-1).Draw(t, "page"))*int64(r.PageSize()) +
		8*int64(rapid.IntRange(1, r.PageSize()/8-1).Draw(t, "word"))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rapid.Uint64().Draw(t, "value"))
	if _, err := r.WriteAt(b[:], off); err != nil {
		t.Fatalf("owner's write of %s's region %d at %d: %v", vm.id, ri, off, err)
	}
	if vm.written == nil {
		vm.written = map[clusterWord][8]byte{}
	}
	vm.written[clusterWord{ri, off}] = b
	if vm.w == nil {
		vm.digests = migtest.RegionDigests(t, v)
	}
	region := "framebuffer"
	if ri == 0 {
		region = "RAM"
	}
	switch mg := vm.mig; {
	case mg == nil || mg.released:
	case mg.m.Phase().Stunned():
		mg.writtenIn = mg.m.Phase()
		cm.tally["owner wrote "+region+" in "+mg.m.Phase().String()+", inside the stun"]++
	default:
		cm.tally["owner wrote "+region+" in "+mg.m.Phase().String()]++
	}
	if stepped != nil && rapid.Bool().Draw(t, "thenRun") {
		cm.runToEnd(t, stepped)
	}
}
