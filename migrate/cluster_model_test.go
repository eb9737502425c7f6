package migrate

// TestClusterModel is a model-based test of a small cluster: rapid draws a
// sequence of actions — create, give a workload, migrate, cancel, fail a
// link, inject a fault, stall a link twice, advance or step time, pause,
// resume or write a VM as its owner (midway through a migration too),
// destroy — and after every one the hosts are compared with a plain model
// of who owns what, in which run state, and what each page holds. A
// failure prints the seed and writes a fail file; replay it with
//
//	go test -run 'TestClusterModel$' ./migrate -rapid.seed=SEED
//
// or -rapid.failfile=PATH as printed (add -rapid.v to see the actions).
//
// A run that passes logs its base seed too (rapid would draw one at random
// and not say): -rapid.seed=SEED repeats the same runs and the same tally,
// for -rapid.checks runs (100 by default, a fifth with -short).

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
	"github.com/vgpusim/vgpusim/vgpu"
	"pgregory.net/rapid"
)

func TestClusterModel(t *testing.T) {
	seed := rapidSeed(t)
	t.Logf("rapid base seed %d: repeat these runs with -rapid.seed=%d", seed, seed)
	runs, actions, tally := 0, 0, map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		cm := newClusterModel(rt, tally)
		// The first check runs before any action.
		defer func() { runs, actions = runs+1, actions+cm.checks-1 }()
		rt.Repeat(map[string]func(*rapid.T){
			"create": cm.create, "workload": cm.giveWorkload, "migrate": cm.start,
			"cancel": cm.cancel, "failLink": cm.failLink, "inject": cm.inject,
			"advance": cm.advance, "step": cm.step, "stepTo": cm.stepTo, "run": cm.run,
			"pauseResume": cm.pauseResume, "ownerMidway": cm.ownerMidway, "ownerWrite": cm.ownerWrite, "stallTwice": cm.stallTwice,
			"destroy": cm.destroy, "": cm.check,
		})
	})
	t.Logf("%d runs, %d actions, each followed by a check of the whole cluster", runs, actions)
	failed := 0
	for k, n := range tally {
		if strings.HasPrefix(k, "migration failed:") {
			failed += n
		}
	}
	t.Logf("%d migrations started, %d done, %d failed (the rest still under way when their run ended)",
		tally["start"], tally["migration done"], failed)
	for _, k := range slices.Sorted(maps.Keys(tally)) {
		t.Logf("%6d %s", tally[k], k)
	}
}

// rapidSeed returns the base seed rapid.Check will run from: the one
// -rapid.seed (or RAPID_SEED) sets or, if none, one drawn here and set as
// -rapid.seed for the rest of the test, so that the test can log it. The
// flag is restored when the test ends.
func rapidSeed(t *testing.T) uint64 {
	t.Helper()
	f := flag.Lookup("rapid.seed")
	if f == nil {
		t.Fatal("rapid registers no -rapid.seed flag")
	}
	seed, err := strconv.ParseUint(f.Value.String(), 10, 64)
	if err != nil {
		t.Fatalf("-rapid.seed=%s: %v", f.Value, err)
	}
	if seed != 0 {
		return seed
	}
	for seed == 0 {
		seed = rand.Uint64()
	}
	old := f.Value.String()
	must(t, f.Value.Set(strconv.FormatUint(seed, 10)))
	t.Cleanup(func() { _ = f.Value.Set(old) })
	return seed
}

// clusterModel is the model: the VMs by id (order keeps draws
// deterministic), the migrations under way and a few that ended.
type clusterModel struct {
	sim   *Sim
	hosts []*vgpu.Host
	now   time.Duration
	vms   map[string]*clusterVM
	order []string
	migs  []*clusterMig
	ended []*clusterMig
	next  int

	started int            // migrations started, to label them
	checks  int            // checks run, for the log
	tally   map[string]int // outcomes, for the log: what the runs reached
}

func newClusterModel(t *rapid.T, tally map[string]int) *clusterModel {
	cm := &clusterModel{vms: map[string]*clusterVM{}, tally: tally}
	for i := range clusterHostCount {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: fmt.Sprintf("host%d", i), GPUs: 2, Memory: memory.Sparse,
			FramebufferPageSize: clusterFramebufferPage, RAMBytes: clusterHostRAM, Seed: rapid.Uint64().Draw(t, "hostSeed"),
			Start: time.Hour})
		must(t, err)
		cm.hosts = append(cm.hosts, h)
	}
	var err error
	cm.sim, err = NewSim(SimConfig{MaxPerHost: clusterMaxPerHost}, cm.hosts...)
	must(t, err)
	cm.now = cm.sim.Now()
	return cm
}

// drawVM draws one of the model's VMs; with none, the action is skipped.
func (cm *clusterModel) drawVM(t *rapid.T, ok func(*clusterVM) bool) *clusterVM {
	var ids []string
	for _, id := range cm.order {
		if ok == nil || ok(cm.vms[id]) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		t.Skip("no such VM")
	}
	return cm.vms[rapid.SampledFrom(ids).Draw(t, "vm")]
}

// drawMig draws a migration under way or, less often, one that ended.
func (cm *clusterModel) drawMig(t *rapid.T) *clusterMig {
	all := append(append([]*clusterMig(nil), cm.migs...), cm.ended...)
	if len(all) == 0 {
		t.Skip("no migration")
	}
	labels := make([]string, len(all))
	for i, mg := range all {
		labels[i] = mg.label
	}
	return all[slices.Index(labels, rapid.SampledFrom(labels).Draw(t, "migration"))]
}

func (cm *clusterModel) owned(vm *clusterVM) *vgpu.VM {
	v, _ := cm.hosts[vm.host].VM(vm.id)
	return v
}

func (cm *clusterModel) create(t *rapid.T) {
	host := rapid.IntRange(0, clusterHostCount-1).Draw(t, "host")
	p := clusterProfile(rapid.SampledFrom(clusterProfileNames()).Draw(t, "profile"))
	ram := rapid.SampledFrom([]int64{32 * MiB, 64 * MiB, 128 * MiB}).Draw(t, "ram")
	gpu, gpuOK, ramOK := cm.place(host, p, ram)
	id := fmt.Sprintf("vm%d", cm.next)
	v, err := cm.hosts[host].CreateVM(vgpu.VMSpec{ID: id, RAMBytes: ram, RAMFootprintBytes: 4 * MiB,
		Profiles: []string{p.Name}, Seed: rapid.Uint64Range(1, 1<<62).Draw(t, "vmSeed")})
	if !gpuOK || !ramOK {
		checkPlacementRefusal(t, err, gpuOK)
		cm.tally["create refused"]++
		return
	}
	must(t, err)
	must(t, v.Start())
	cm.tally["create"]++
	if got := v.VGPUs()[0].GPU().Index(); got != gpu {
		t.Fatalf("%s placed on GPU %d, the model says %d", id, got, gpu)
	}
	cm.next++
	vm := &clusterVM{id: id, host: host, gpu: gpu, profile: p, ramBytes: ram, digests: migtest.RegionDigests(t, v)}
	cm.vms[id] = vm
	cm.order = append(cm.order, id)
	// Most VMs write from the start: a migration is only as hard as the
	// writes it races.
	if rapid.IntRange(0, 3).Draw(t, "idle") > 0 {
		cm.setCounter(t, vm)
	}
}

func (cm *clusterModel) giveWorkload(t *rapid.T) {
	cm.setCounter(t, cm.drawVM(t, func(vm *clusterVM) bool { return vm.w == nil }))
}

// setCounter gives vm a counter oracle, at a rate that dirties pages in
// most pre-copy rounds.
func (cm *clusterModel) setCounter(t *rapid.T, vm *clusterVM) {
	w := &counterWorkload{PagesPerSec: rapid.Int64Range(10, 200).Draw(t, "pagesPerSec"), Pages: rapid.IntRange(16, 256).Draw(t, "pages")}
	must(t, cm.owned(vm).SetWorkload(w))
	vm.w, vm.wSince, vm.digests = w, cm.now, nil
	vm.lastPos, vm.lastPaused = 0, false
}

func (cm *clusterModel) start(t *rapid.T) {
	// A VM whose source awaits its release (an instant of simulated time
	// a Step can stop in) is left alone: a second migration then races
	// the first one's release.
	vm := cm.drawVM(t, func(vm *clusterVM) bool { return vm.mig == nil || !vm.mig.released })
	// A few draws ask for the VM's own host, to be refused.
	dst := vm.host
	if k := rapid.IntRange(0, 7).Draw(t, "otherHost"); k > 0 {
		dst = (vm.host + 1 + k%(clusterHostCount-1)) % clusterHostCount
	}
	link := clusterLink(rapid.SampledFrom(clusterLinkNames()).Draw(t, "link"))
	cfg := Config{Policy: Policy{Mode: rapid.SampledFrom([]Mode{PreCopy, Legacy}).Draw(t, "mode"), OnNonConvergence: rapid.SampledFrom([]NonConvergence{Throttle, SwitchAnyway, Abort}).Draw(t, "policy"), MaxRounds: rapid.IntRange(1, 6).Draw(t, "maxRounds")}, Fidelity: Bytes, Link: link, Timeout: rapid.SampledFrom([]time.Duration{0, 500 * time.Millisecond, 2 * time.Second}).Draw(t, "timeout")}
	if rapid.IntRange(0, 3).Draw(t, "fidelity") == 0 {
		cfg.Fidelity = Model
	}
	busy := func(h int) int {
		n := 0
		for _, mg := range cm.migs {
			if mg.src == h || mg.dst == h {
				n++
			}
		}
		return n
	}
	gpu, gpuOK, ramOK := cm.place(dst, vm.profile, vm.ramBytes)
	m, err := cm.sim.Start(cm.owned(vm), cm.hosts[dst], cfg)
	var pe *PhaseError
	refused := errors.As(err, &pe) && pe.Phase == PhaseSetup && pe.VM == vm.id
	switch {
	case dst == vm.host:
		if !refused || !errors.Is(err, ErrConfig) {
			t.Fatalf("migration to its own host: %v", err)
		}
		cm.tally["start refused: same host"]++
	case vm.mig != nil:
		if !refused || !errors.Is(err, ErrMigrating) || !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("migration of a migrating VM: %v", err)
		}
		cm.tally["start refused: migrating"]++
	case busy(vm.host) >= clusterMaxPerHost || busy(dst) >= clusterMaxPerHost:
		if !refused || !errors.Is(err, ErrBusy) {
			t.Fatalf("migration between busy hosts: %v", err)
		}
		cm.tally["start refused: busy"]++
	case !gpuOK || !ramOK:
		if !refused || !errors.Is(err, ErrIncompatible) {
			t.Fatalf("migration to a host without room: %v", err)
		}
		checkPlacementRefusal(t, err, gpuOK)
		cm.tally["start refused: no room"]++
	default:
		must(t, err)
		if got := m.in.VGPUs()[0].GPU().Index(); got != gpu {
			t.Fatalf("%s's incoming vGPU on GPU %d, the model says %d", vm.id, got, gpu)
		}
		timeout := cfg.Timeout
		if timeout == 0 {
			timeout = DefaultTimeout
		}
		vm.mig = &clusterMig{m: m, vm: vm, id: vm.id, profile: vm.profile, ramBytes: vm.ramBytes, src: vm.host,
			dst: dst, srcGPU: vm.gpu, dstGPU: gpu, link: link.Name, timeout: timeout,
			policy: cfg.OnNonConvergence, label: fmt.Sprintf("#%d %s host%d->host%d", cm.started, vm.id, vm.host, dst)}
		if vm.w != nil {
			vm.mig.writesAtStart = vm.w.Pos
		}
		cm.migs = append(cm.migs, vm.mig)
		cm.started++
		cm.tally["start"]++
	}
}

func (cm *clusterModel) advance(t *rapid.T) {
	scale := rapid.SampledFrom([]time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond}).Draw(t, "scale")
	d := time.Duration(rapid.IntRange(0, 50).Draw(t, "ticks")) * scale
	cm.wait(t, d)
}

func (cm *clusterModel) step(t *rapid.T) {
	for range rapid.IntRange(1, 4).Draw(t, "events") {
		if _, ok, err := cm.sim.Step(); err != nil || !ok {
			must(t, err)
			break
		}
	}
	cm.now = cm.sim.Now()
}

func (cm *clusterModel) run(t *rapid.T) { cm.runToEnd(t, cm.drawMig(t)) }

// runToEnd runs the migration until it ends.
func (cm *clusterModel) runToEnd(t *rapid.T, mg *clusterMig) {
	_, err := mg.m.Run()
	if !mg.m.Done() || err != mg.m.Err() {
		t.Fatalf("Run returned %v in %v; Err %v", err, mg.m.Phase(), mg.m.Err())
	}
	cm.now = cm.sim.Now()
}

// stepTo steps a migration until it enters a drawn phase or ends, so that
// the next action can catch it there: the stunned phases last milliseconds,
// and a draw of time rarely stops in one.
func (cm *clusterModel) stepTo(t *rapid.T) {
	mg := cm.drawMig(t)
	var names []string
	for p := PhasePreCopy; p <= PhaseRelease; p++ {
		names = append(names, p.String())
	}
	cm.stepInto(t, mg, PhasePreCopy+Phase(slices.Index(names, rapid.SampledFrom(names).Draw(t, "phase"))))
}

// stepInto steps the migration until it reaches phase target or ends.
func (cm *clusterModel) stepInto(t *rapid.T, mg *clusterMig, target Phase) {
	for mg.m.Phase() < target && !mg.m.Done() {
		if _, ok, err := mg.m.Step(); err != nil || !ok {
			must(t, err)
			break
		}
	}
	cm.now = cm.sim.Now()
}

func (cm *clusterModel) destroy(t *rapid.T) {
	vm := cm.drawVM(t, nil)
	must(t, cm.owned(vm).Destroy())
	if vm.mig != nil {
		vm.mig.vm, vm.mig.destroyed = nil, !vm.mig.released
	}
	delete(cm.vms, vm.id)
	cm.order = deleteString(cm.order, vm.id)
}
