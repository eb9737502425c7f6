package main

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/vgpu"
)

// params describes the experiment. A training VM runs the library's
// training workload (vgpu.NewTraining) for steps iterations: each loads
// its batch on the host for dataLoad, give or take dataJitter of it, then
// runs the batch's forward and backward passes on the vGPU. The jitter
// keeps VMs from falling into lockstep, as real batch loading does.
//
// The source gives no figures for the model, the batch or the loading
// time: MobileNet at batch 8 (5.8 ms of GPU work a step on a P40) and
// 10 ms ± 20 % of loading are assumptions, a small job whose GPU is idle
// for more than half of each step when it runs alone.
type params struct {
	steps      int
	vms        int // training VMs per GPU, at most the profile's maximum
	model      vgpu.Model
	batch      int
	dataLoad   time.Duration // per step, on the host
	dataJitter float64       // the loading time varies uniformly by up to this fraction
	profiles   []string      // for the sharing scenario
	noisy      string        // profile of the noisy-neighbour scenario
	seed       uint64        // seeds each VM's start time and loading times
}

func defaultParams() params {
	return params{
		steps:      300,
		vms:        3,
		model:      vgpu.MobileNet(),
		batch:      8,
		dataLoad:   10 * time.Millisecond,
		dataJitter: 0.2,
		profiles:   []string{"P40-1Q", "P40-2Q", "P40-4Q", "P40-8Q", "P40-12Q", "P40-24Q"},
		noisy:      "P40-4Q",
		seed:       1,
	}
}

// training returns a trainer's workload, its loading times drawn from
// seed; a noisy neighbour's, loadless, has its input always ready and
// keeps the GPU busy.
func (p params) training(seed uint64, loadless bool) (*vgpu.Training, error) {
	c := vgpu.TrainingConfig{Model: p.model, BatchSize: p.batch, DataLoad: p.dataLoad, DataLoadJitter: p.dataJitter,
		FootprintBytes: 64 * vgpu.MiB, Seed: seed}
	if loadless {
		c.DataLoad, c.DataLoadJitter = 0, 0
	}
	return vgpu.NewTraining(c)
}

// Scenarios and roles, as printed.
const (
	scenarioSharing = "sharing"
	scenarioQuiet   = "quiet-neighbours"
	scenarioNoisy   = "noisy-neighbours"
	roleTrainer     = "trainer"
	roleVictim      = "victim"
	roleNeighbour   = "neighbour"
)

var policies = []sched.Policy{sched.BestEffort, sched.EqualShare, sched.FixedShare}

// row is one VM's result. trainingS is zero for a neighbour, which never
// finishes.
type row struct {
	scenario   string
	policy     sched.Policy
	profile    string
	vms        int
	vm         int
	role       string
	gpuUtilPct float64 // the whole GPU's, over the run
	vmGPUPct   float64 // this VM's GPU time, over the run
	trainingS  float64 // from its start to its last step's end
}

// simulate runs every scenario under every policy.
//
// sharing: for each profile, min(vms, max instances) VMs train side by
// side: the shape of the source's Figures 4 and 5.
// quiet-/noisy-neighbours: one VM trains next to vms-1 neighbours that are
// powered on but idle, or that train with their input always ready and so
// keep the GPU busy.
func simulate(p params) ([]row, error) {
	if p.steps < 1 || p.vms < 2 || p.vms > sched.MaxTenantsLimit {
		return nil, fmt.Errorf("need at least 1 step and 2 to %d VMs", sched.MaxTenantsLimit)
	}
	var rows []row
	for _, name := range p.profiles {
		// The vGPU type table says how many of a profile share one GPU.
		prof, err := vgpu.ParseProfile(name)
		if err != nil {
			return nil, err
		}
		for _, pol := range policies {
			r, err := runGPU(p, pol, prof, min(p.vms, prof.MaxInstances), 0, scenarioSharing)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r...)
		}
	}
	prof, err := vgpu.ParseProfile(p.noisy)
	if err != nil {
		return nil, err
	}
	n := min(p.vms, prof.MaxInstances)
	for _, scenario := range []string{scenarioQuiet, scenarioNoisy} {
		for _, pol := range policies {
			r, err := runGPU(p, pol, prof, 1, n-1, scenario)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r...)
		}
	}
	return rows, nil
}

type vmState struct {
	vm       *vgpu.VM
	training *vgpu.Training // nil for an idle neighbour
	role     string
	start    time.Duration
	done     bool
}

// tick is how far the host moves between looks at the trainers: less than
// the shortest loading time, so a trainer that has done its steps is
// paused before it submits another.
const tick = time.Millisecond

// runGPU simulates one host with one P40, trainers training and
// neighbours idle or, in the noisy scenario, busy, until every trainer has
// done its steps. A trainer that has is paused: it stays powered on, as
// the scheduler's equal share counts it, but gives the GPU no more work.
func runGPU(p params, pol sched.Policy, prof vgpu.Profile, trainers, neighbours int, scenario string) ([]row, error) {
	h, err := vgpu.NewHost(vgpu.HostConfig{Name: "p40", Sched: sched.Config{Policy: pol}, Seed: p.seed})
	if err != nil {
		return nil, err
	}
	var vms []*vmState
	for i := range trainers + neighbours {
		rng := rand.New(rand.NewPCG(p.seed, uint64(i))) // the VM's own stream: the same under every policy
		v := &vmState{role: roleTrainer}
		var w vgpu.Workload
		switch {
		case i >= trainers:
			v.role = roleNeighbour
			if scenario == scenarioNoisy {
				if v.training, err = p.training(rng.Uint64(), true); err != nil {
					return nil, err
				}
				w = v.training
			}
		default:
			if scenario != scenarioSharing {
				v.role = roleVictim
			}
			if v.training, err = p.training(rng.Uint64(), false); err != nil {
				return nil, err
			}
			w = v.training
			// Stagger the trainers so they do not start in lockstep.
			v.start = time.Duration(rng.Int64N(int64(v.training.IterationWork(vgpu.P40()) + p.dataLoad)))
		}
		if v.vm, err = h.CreateVM(vgpu.VMSpec{ID: fmt.Sprint("vm", i+1), RAMBytes: vgpu.GiB, Profiles: []string{prof.Name}, Workload: w}); err != nil {
			return nil, err
		}
		vms = append(vms, v)
	}
	if err := startAll(h, vms); err != nil {
		return nil, err
	}

	gpu := h.GPU(0)
	limit := time.Duration(p.steps) * (p.dataLoad*2 + time.Duration(sched.MaxInstancesLimit)*vms[0].training.IterationWork(vgpu.P40())) * 2
	for running := trainers; running > 0; {
		if h.Now() > limit {
			return nil, fmt.Errorf("%s %s %s: training did not finish in %v", scenario, pol, prof.Name, limit)
		}
		if err := h.Advance(tick); err != nil {
			return nil, err
		}
		for _, v := range vms[:trainers] {
			if v.done {
				continue
			}
			// One job a step on the VM's one vGPU.
			info, err := gpu.Scheduler().Tenant(v.vm.VGPUs()[0].Tenant())
			if err != nil {
				return nil, err
			}
			if info.Completed >= uint64(p.steps) {
				if err := v.vm.Pause(); err != nil {
					return nil, err
				}
				v.done = true
				running--
			}
		}
	}

	end := h.Now()
	util, err := gpu.Utilization(0, end)
	if err != nil {
		return nil, err
	}
	var rows []row
	for i, v := range vms {
		info, err := gpu.Scheduler().Tenant(v.vm.VGPUs()[0].Tenant())
		if err != nil {
			return nil, err
		}
		r := row{
			scenario: scenario, policy: pol, profile: prof.Name, vms: len(vms), vm: i + 1, role: v.role,
			gpuUtilPct: 100 * util,
			vmGPUPct:   100 * float64(info.Granted) / float64(end),
		}
		if v.role != roleNeighbour {
			// A training's busy time is the time its iterations took,
			// from its start to its last iteration's end.
			r.trainingS = v.training.Metrics(0, end).BusyTime.Seconds()
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// startAll powers every VM on: neighbours at once, trainers each at its
// start time.
func startAll(h *vgpu.Host, vms []*vmState) error {
	var trainers []*vmState
	for _, v := range vms {
		if v.role != roleNeighbour {
			trainers = append(trainers, v)
		} else if err := v.vm.Start(); err != nil {
			return err
		}
	}
	slices.SortStableFunc(trainers, func(a, b *vmState) int { return cmp.Compare(a.start, b.start) })
	for _, v := range trainers {
		if d := v.start - h.Now(); d > 0 {
			if err := h.Advance(d); err != nil {
				return err
			}
		}
		if err := v.vm.Start(); err != nil {
			return err
		}
	}
	return nil
}
