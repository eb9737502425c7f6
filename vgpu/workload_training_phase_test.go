package vgpu

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// trainingRunDigest hashes everything a run of training VMs without a host
// phase leaves behind: three VMs sharing a P40-4Q GPU under each policy,
// throttled, paused and resumed, stopped and started, then their metrics
// over windows, saved states, GPU time, the GPU's utilization and every
// page of their memory.
func trainingRunDigest(t *testing.T) string {
	t.Helper()
	sum := sha256.New()
	for _, pol := range []sched.Policy{sched.BestEffort, sched.EqualShare, sched.FixedShare} {
		h := newHost(t, HostConfig{Name: "digest", Sched: sched.Config{Policy: pol}, Seed: 7})
		var vms []*VM
		for i := range 3 {
			w, err := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 8, FootprintBytes: 256 * MiB,
				RAMDirtyBytesPerSec: 2 * MiB, HistoryLimit: 500, Seed: uint64(i + 1)})
			must(t, err)
			vms = append(vms, mustVM(t, h, VMSpec{ID: fmt.Sprint("vm", i), RAMBytes: 256 * MiB, Profiles: []string{"P40-4Q"}, Workload: w}))
			must(t, vms[i].Start())
			advance(t, h, 3*time.Millisecond+time.Duration(i)*777*time.Microsecond)
		}
		advance(t, h, 400*time.Millisecond)
		must(t, vms[0].SetThrottle(0.4))
		advance(t, h, 300*time.Millisecond+11)
		must(t, vms[1].Pause())
		advance(t, h, 50*time.Millisecond)
		must(t, vms[1].Resume())
		must(t, vms[2].Stop())
		advance(t, h, 100*time.Millisecond)
		must(t, vms[2].Start())
		must(t, vms[0].SetThrottle(0))
		advance(t, h, 500*time.Millisecond+333)
		now := h.Now()
		u, err := h.GPU(0).Utilization(0, now)
		must(t, err)
		fmt.Fprintf(sum, "%v %v %v\n", pol, now, u)
		for _, vm := range vms {
			w := vm.Workload()
			for _, win := range [][2]time.Duration{{0, now}, {now / 3, now}, {now - 100*time.Millisecond, now}} {
				fmt.Fprintf(sum, "%+v\n", w.Metrics(win[0], win[1]))
			}
			fmt.Fprintf(sum, "%v %x\n", vm.GPUTime(), appendState(t, w))
			hashPages(t, sum, vm.RAM())
			for _, fb := range vm.Framebuffers() {
				hashPages(t, sum, fb)
			}
		}
	}
	return fmt.Sprintf("%x", sum.Sum(nil))
}

func hashPages(t *testing.T, sum hash.Hash, r *memory.Region) {
	t.Helper()
	for p := range r.Pages() {
		st, err := r.PageState(p)
		must(t, err)
		fmt.Fprintf(sum, "%d %v %d;", p, st.Class, st.Gen)
	}
}

// TestTrainingZeroDataLoadUnchanged checks that a training without a host
// phase runs exactly as it did before the phase existed: the digest was
// taken of the same run then, and retaken when the weights' class became
// memory.ClassTrainingWeights (only the class names it hashes changed).
func TestTrainingZeroDataLoadUnchanged(t *testing.T) {
	const want = "499c32bcf2e5fe0d9c99361d221e9cd492ce1ece3552546707e5348f862034ef"
	if got := trainingRunDigest(t); got != want {
		t.Errorf("digest %s, want %s", got, want)
	}
}

// phaseTraining is a training of MobileNet at batch 8 (5.8 ms of GPU work
// an iteration on a P40) whose every iteration first loads its batch for
// load, give or take a fifth.
func phaseTraining(t *testing.T, load time.Duration, seed uint64) *Training {
	t.Helper()
	cfg := TrainingConfig{Model: MobileNet(), BatchSize: 8, FootprintBytes: 256 * MiB, DataLoad: load, Seed: seed}
	if load > 0 {
		cfg.DataLoadJitter = 0.2
	}
	w, err := NewTraining(cfg)
	must(t, err)
	return w
}

// policyResult is what seed 001's Figures 4 and 5 plot for one policy:
// the GPU's utilization and the training time, here per iteration.
type policyResult struct {
	util    float64
	iterMin time.Duration // the fastest VM's mean iteration time
	iterMax time.Duration // the slowest VM's
}

// trainOnP40_4Q runs three training VMs of P40-4Q on one P40 under pol,
// their starts a few milliseconds apart, and measures the seconds after
// the first.
func trainOnP40_4Q(t *testing.T, pol sched.Policy, load time.Duration) policyResult {
	t.Helper()
	h := newHost(t, HostConfig{Name: "p40", Sched: sched.Config{Policy: pol}, Seed: 1})
	var ws []*Training
	for i := range 3 {
		w := phaseTraining(t, load, uint64(i+1))
		vm := mustVM(t, h, VMSpec{ID: fmt.Sprint("vm", i), RAMBytes: 256 * MiB, Profiles: []string{"P40-4Q"}, Workload: w})
		must(t, vm.Start())
		ws = append(ws, w)
		advance(t, h, 3*time.Millisecond)
	}
	advance(t, h, 4*time.Second)
	from := time.Second
	u, err := h.GPU(0).Utilization(from, h.Now())
	must(t, err)
	r := policyResult{util: u, iterMin: time.Duration(math.MaxInt64)}
	for _, w := range ws {
		m := w.Metrics(from, h.Now())
		r.iterMin, r.iterMax = min(r.iterMin, m.LatencyMean), max(r.iterMax, m.LatencyMean)
	}
	return r
}

// TestTrainingDataLoadPolicies is seed 001's Figures 4 and 5 with the
// library's own workload: three training VMs on a P40-4Q, each iteration
// loading its batch for 10 ms. Best effort lends one VM's loading time to
// the others: higher GPU utilization and shorter training than equal
// share, which keeps each VM's slices for it; fixed share, which reserves
// a P40-4Q a sixth of the GPU, gives no more than equal share. Without
// the host phase the GPU never idles, and best effort and equal share
// give the same: the phase is what makes the difference.
func TestTrainingDataLoadPolicies(t *testing.T) {
	for _, pol := range []sched.Policy{sched.BestEffort, sched.EqualShare} {
		if r := trainOnP40_4Q(t, pol, 0); r.util < 0.999 {
			t.Errorf("%v without a host phase: utilization %.3f, want the GPU always busy", pol, r.util)
		}
	}
	if a, b := trainOnP40_4Q(t, sched.BestEffort, 0), trainOnP40_4Q(t, sched.EqualShare, 0); a != b {
		t.Errorf("without a host phase best effort %+v and equal share %+v differ", a, b)
	}
	be := trainOnP40_4Q(t, sched.BestEffort, 10*time.Millisecond)
	es := trainOnP40_4Q(t, sched.EqualShare, 10*time.Millisecond)
	fs := trainOnP40_4Q(t, sched.FixedShare, 10*time.Millisecond)
	t.Logf("best effort %+v, equal share %+v, fixed share %+v", be, es, fs)
	if be.util < es.util+0.1 {
		t.Errorf("utilization: best effort %.3f, equal share %.3f: want best effort clearly higher", be.util, es.util)
	}
	if be.iterMax >= es.iterMin {
		t.Errorf("iteration time: slowest best-effort VM %v, fastest equal-share VM %v: want best effort shorter", be.iterMax, es.iterMin)
	}
	if fs.util > es.util || fs.iterMin < es.iterMax {
		t.Errorf("fixed share %+v beats equal share %+v", fs, es)
	}
}

// TestTrainingDataLoadAlone checks the phase on a VM alone: an iteration
// takes the phase, then the GPU work (a launch-thread poll in between at
// most), for the first iteration too; the GPU idles for the phase; the
// ratio form gives the duration form's run.
func TestTrainingDataLoadAlone(t *testing.T) {
	const load = 9 * time.Millisecond
	byDuration, err := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 8, DataLoad: load, Seed: 3})
	must(t, err)
	work := byDuration.IterationWork(P40())
	h, _ := run(t, HostConfig{}, "P40-24Q", byDuration, 2*time.Second)
	m := byDuration.Metrics(0, h.Now())
	poll := byDuration.Config().PollInterval
	if m.LatencyMax > load+work+poll || m.LatencyMean < load+work || m.Completed < int64(2*time.Second/(load+work+poll)) {
		t.Errorf("iterations %+v, phase %v and work %v", m, load, work)
	}
	u, err := h.GPU(0).Utilization(0, h.Now())
	must(t, err)
	if want := float64(work) / float64(m.LatencyMean); math.Abs(u-want) > 0.01 {
		t.Errorf("utilization %.3f, want %.3f", u, want)
	}
	if byDuration.DataLoad(P40()) != load {
		t.Errorf("DataLoad %v", byDuration.DataLoad(P40()))
	}
	// The ratio that gives the same phase on a P40 gives the same run.
	ratio := float64(load) / float64(work)
	byRatio, err := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 8, DataLoadRatio: ratio, Seed: 3})
	must(t, err)
	if d := byRatio.DataLoad(P40()); d < load-1 || d > load {
		t.Fatalf("ratio %v gives a phase of %v, want %v", ratio, d, load)
	}
	h2, _ := run(t, HostConfig{}, "P40-24Q", byRatio, 2*time.Second)
	if m2 := byRatio.Metrics(0, h2.Now()); m2.Completed != m.Completed {
		t.Errorf("ratio form: %+v, duration form %+v", m2, m)
	}
}

// TestTrainingDataLoadConfig checks the host phase's limits.
func TestTrainingDataLoadConfig(t *testing.T) {
	for _, c := range []TrainingConfig{
		{DataLoad: -1},
		{DataLoad: 2 * time.Hour},
		{DataLoadRatio: -0.5},
		{DataLoadRatio: math.NaN()},
		{DataLoadRatio: math.Inf(1)},
		{DataLoadRatio: 1001},
		{DataLoad: time.Millisecond, DataLoadRatio: 1},
		{DataLoad: time.Millisecond, DataLoadJitter: 1.5},
		{DataLoad: time.Millisecond, DataLoadJitter: -0.1},
		{DataLoadJitter: 0.1},
	} {
		if _, err := NewTraining(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	w, err := NewTraining(TrainingConfig{DataLoadRatio: math.Copysign(0, -1), DataLoadJitter: math.Copysign(0, -1)})
	must(t, err)
	if c := w.Config(); math.Signbit(c.DataLoadRatio) || math.Signbit(c.DataLoadJitter) || c.hasDataLoad() {
		t.Errorf("negative zeros kept: %+v", c)
	}
	// A ratio whose phase would pass an hour is refused where the VM is
	// made: Inception V3 at batch 4096 is 26 s of GPU work on a P40.
	big, err := NewTraining(TrainingConfig{BatchSize: 4096, DataLoadRatio: 1000, FootprintBytes: GiB})
	must(t, err)
	h := newHost(t, HostConfig{})
	if _, err := h.CreateVM(VMSpec{ID: "big", RAMBytes: 16 * GiB, Profiles: []string{"P40-24Q"}, Workload: big}); !errors.Is(err, ErrConfig) {
		t.Errorf("a host phase above an hour: %v", err)
	}
}

// TestTrainingDataLoadPauseFreezes checks that a pause freezes a host
// phase: a stunned VM's CPUs load nothing, and the rest of the phase runs
// once it resumes.
func TestTrainingDataLoadPauseFreezes(t *testing.T) {
	w := phaseTraining(t, 10*time.Millisecond, 1)
	h, vm := run(t, HostConfig{}, "P40-4Q", w, 100*time.Millisecond)
	for w.inFlight > 0 || w.readyAt <= h.Now()+time.Millisecond {
		advance(t, h, 100*time.Microsecond)
	}
	left := w.readyAt - h.Now()
	must(t, vm.Pause())
	if w.loadLeft != left {
		t.Fatalf("paused with %v of the phase left, kept %v", left, w.loadLeft)
	}
	advance(t, h, time.Second)
	done := w.Metrics(0, h.Now()).Completed
	must(t, vm.Resume())
	if w.readyAt != h.Now()+left || w.loadLeft != 0 {
		t.Errorf("resumed at %v: batch ready at %v, want %v", h.Now(), w.readyAt, h.Now()+left)
	}
	advance(t, h, left-time.Microsecond)
	if w.inFlight != 0 {
		t.Error("the iteration went out before its batch was loaded")
	}
	advance(t, h, 20*time.Millisecond)
	if w.Metrics(0, h.Now()).Completed != done+1 {
		t.Errorf("%d iterations after the resume", w.Metrics(0, h.Now()).Completed-done)
	}
}

// TestTrainingSuspendMidDataLoad suspends a VM paused in the middle of a
// host phase and resumes it, still paused, on a host whose clock is 3 s
// ahead; half a second later it and its twin, paused in place as long,
// resume. It must train on exactly as its twin does, the rest of the phase
// first.
func TestTrainingSuspendMidDataLoad(t *testing.T) {
	c := stateCases()[4]
	src, vm := busyStateVM(t, c, "source")
	th, twin := busyStateVM(t, c, "twin")
	if left := vm.Workload().(*Training).loadLeft; left <= 0 {
		t.Fatalf("paused with %v of the phase left", left)
	}
	dst, resumed := suspendResumeLater(t, src, vm)
	// Both stay paused a while: what is left of the phase then runs.
	advance(t, th, 500*time.Millisecond)
	advance(t, dst, 500*time.Millisecond)
	from := th.Now()
	must(t, twin.Resume())
	must(t, resumed.Resume())
	advance(t, th, time.Second)
	advance(t, dst, time.Second)
	a := twin.Workload().Metrics(from, th.Now())
	b := resumed.Workload().Metrics(from+resumeLaterGap, dst.Now())
	a.From, a.To, b.From, b.To = 0, 0, 0, 0
	if a.Completed == 0 || a != b {
		t.Errorf("the next second:\n twin    %+v\n resumed %+v", a, b)
	}
	if twin.GPUTime() != resumed.GPUTime() {
		t.Errorf("GPU time %v, resumed %v", twin.GPUTime(), resumed.GPUTime())
	}
}

// TestTrainingDataLoadStateHostile checks the refusals of a training
// state with a host phase: the phase's configuration, the phase left at a
// pause, and the versions.
func TestTrainingDataLoadStateHostile(t *testing.T) {
	_, vm := busyStateVM(t, stateCases()[4], "h")
	tr := vm.Workload().(*Training)
	valid := appendState(t, tr)
	if valid[0] != trainingDataLoadVersion {
		t.Fatalf("version %d", valid[0])
	}
	_, desk := busyStateVM(t, stateCases()[3], "d")
	// The configuration's host-phase fields follow the rest of it.
	e := stateEncoder{}
	e.header(kindCodeTraining)
	plain := tr.cfg
	plain.DataLoad, plain.DataLoadRatio, plain.DataLoadJitter = 0, 0, 0
	e.trainingConfig(plain)
	zeroed := slices.Clone(valid)
	clear(zeroed[len(e.b) : len(e.b)+24])
	set := func(b []byte, i int, v byte) []byte { b = slices.Clone(b); b[i] = v; return b }
	for _, tc := range []struct {
		name  string
		state []byte
		vm    *VM
		want  error
	}{
		{"version 3", set(valid, 0, 3), vm, ErrStateVersion},
		{"version 1", set(valid, 0, 1), vm, ErrCorruptState},
		{"a desktop of version 2", set(appendState(t, desk.Workload()), 0, 2), desk, ErrStateVersion},
		{"version 2 without a host phase", zeroed, vm, ErrCorruptState},
		{"data load above an hour", mutated(t, vm, func(w Workload) { w.(*Training).cfg.DataLoad = 2 * time.Hour }), vm, ErrConfig},
		{"data load and ratio", mutated(t, vm, func(w Workload) { w.(*Training).cfg.DataLoadRatio = 1 }), vm, ErrConfig},
		{"jitter NaN", mutated(t, vm, func(w Workload) { w.(*Training).cfg.DataLoadJitter = math.NaN() }), vm, ErrConfig},
		{"negative phase left", mutated(t, vm, func(w Workload) { w.(*Training).loadLeft = -1 }), vm, ErrCorruptState},
		{"phase left beyond the wait", mutated(t, vm, func(w Workload) {
			x := w.(*Training)
			x.loadLeft = x.readyAt - x.lastDone + 1
		}), vm, ErrCorruptState},
		{"phase left and not paused", mutated(t, vm, func(w Workload) { w.(*Training).paused = false }), vm, ErrCorruptState},
		{"phase left and an iteration in flight", mutated(t, vm, func(w Workload) {
			x := w.(*Training)
			x.remaining[x.nextIter-1] = 1
			x.inFlight = 1
		}), vm, ErrCorruptState},
		{"two iterations in flight", mutated(t, vm, func(w Workload) {
			x := w.(*Training)
			x.loadLeft = 0
			x.remaining[x.nextIter-1], x.remaining[x.nextIter-2] = 1, 1
			x.inFlight = 2
		}), vm, ErrCorruptState},
		{"random state unreadable", loaderUnreadable(t, tr, valid), vm, ErrCorruptState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind := tc.vm.Workload().(StatefulWorkload).StateKind()
			_, err := WorkloadDecoders()[kind](&tc.vm.env, tc.state)
			var se *WorkloadStateError
			if !errors.As(err, &se) || !errors.Is(err, tc.want) || !errors.Is(err, ErrWorkload) {
				t.Fatalf("got %v, want a *WorkloadStateError wrapping %v", err, tc.want)
			}
		})
	}
}

// loaderUnreadable returns state, w's, with its jitter's random state
// unreadable.
func loaderUnreadable(t *testing.T, w *Training, state []byte) []byte {
	t.Helper()
	m, err := w.loader.MarshalBinary()
	must(t, err)
	at := bytes.Index(state, m)
	if at < 0 || bytes.Count(state, m) != 1 {
		t.Fatal("data-load random state not found once")
	}
	b := slices.Clone(state)
	b[at] = 'x'
	return b
}
