package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/vgpu"
)

// params describes the experiment. A training VM alternates a GPU phase
// (one job of gpuWork, in kernels of kernel) with a CPU phase of cpuWork
// ± cpuJitter (loading the next batch), steps times. The jitter keeps VMs
// from falling into lockstep, as real batch loading does.
type params struct {
	steps     int
	vms       int           // training VMs per GPU, at most the profile's maximum
	gpuWork   time.Duration // per step, at the full GPU
	cpuWork   time.Duration // per step, on the host
	cpuJitter time.Duration // the CPU phase varies uniformly by up to this much
	kernel    time.Duration // the GPU can preempt a step only between kernels
	profiles  []string      // for the sharing scenario
	noisy     string        // profile of the noisy-neighbour scenario
	seed      uint64        // seeds each VM's start time and CPU phases
}

func defaultParams() params {
	return params{
		steps:     300,
		vms:       3,
		gpuWork:   6 * time.Millisecond,
		cpuWork:   10 * time.Millisecond,
		cpuJitter: 2 * time.Millisecond,
		kernel:    500 * time.Microsecond,
		profiles:  []string{"P40-1Q", "P40-2Q", "P40-4Q", "P40-8Q", "P40-12Q", "P40-24Q"},
		noisy:     "P40-4Q",
		seed:      1,
	}
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
	trainingS  float64 // from its first step to its last
}

// simulate runs every scenario under every policy.
//
// sharing: for each profile, min(vms, max instances) VMs train side by
// side: the shape of the source's Figures 4 and 5.
// quiet-/noisy-neighbours: one VM trains next to vms-1 neighbours that are
// powered on but idle, or that keep the GPU busy with long jobs.
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
	id         sched.TenantID
	rng        *rand.Rand // the VM's own stream: the same under every policy
	role       string
	started    time.Duration
	nextSubmit time.Duration // end of the CPU phase; -1 while a step is on the GPU
	stepsLeft  int
	finished   time.Duration
	granted    time.Duration
}

// runGPU simulates one GPU with trainers training and neighbours idle or,
// in the noisy scenario, always busy, until every trainer is done. It
// advances the scheduler to each CPU phase's end exactly, so steps are
// submitted when the VM is ready, not on a coarser tick.
func runGPU(p params, pol sched.Policy, prof vgpu.Profile, trainers, neighbours int, scenario string) ([]row, error) {
	s, err := sched.New(sched.Config{Policy: pol})
	if err != nil {
		return nil, err
	}
	var vms []*vmState
	for i := range trainers + neighbours {
		id, err := s.AddTenant(prof.MaxInstances)
		if err != nil {
			return nil, err
		}
		if err := s.PowerOn(id); err != nil {
			return nil, err
		}
		v := &vmState{id: id, role: roleTrainer, stepsLeft: p.steps, rng: rand.New(rand.NewPCG(p.seed, uint64(i)))}
		switch {
		case scenario != scenarioSharing && i == 0:
			v.role = roleVictim
		case i >= trainers:
			v.role, v.stepsLeft, v.nextSubmit = roleNeighbour, 0, -1
			if scenario == scenarioNoisy {
				// A noisy neighbour: one long job after another.
				if err := s.Submit(id, sched.Job{Work: time.Second, Chunk: p.kernel}); err != nil {
					return nil, err
				}
			}
		}
		if v.role != roleNeighbour {
			// Stagger the trainers so they do not run in lockstep.
			v.started = time.Duration(v.rng.Int64N(int64(p.gpuWork + p.cpuWork)))
			v.nextSubmit = v.started
		}
		vms = append(vms, v)
	}
	byID := map[sched.TenantID]*vmState{}
	for _, v := range vms {
		byID[v.id] = v
	}

	const tick = time.Millisecond // how far to advance while steps are on the GPU
	limit := time.Duration(p.steps) * (p.cpuWork + time.Duration(sched.MaxInstancesLimit)*p.gpuWork) * 2
	var rep sched.Report
	var busy time.Duration
	running := trainers
	for running > 0 {
		now := s.Now()
		if now > limit {
			return nil, fmt.Errorf("%s %s %s: training did not finish in %v", scenario, pol, prof.Name, limit)
		}
		next := now + tick
		for _, v := range vms {
			if v.stepsLeft == 0 || v.nextSubmit < 0 {
				continue
			}
			if v.nextSubmit <= now {
				if err := s.Submit(v.id, sched.Job{Work: p.gpuWork, Chunk: p.kernel, Tag: uint64(v.stepsLeft)}); err != nil {
					return nil, err
				}
				v.nextSubmit = -1
			} else {
				next = min(next, v.nextSubmit)
			}
		}
		if err := s.Advance(next-now, &rep); err != nil {
			return nil, err
		}
		busy += rep.Busy
		for _, ti := range rep.Tenants {
			byID[ti.ID].granted += ti.Granted
		}
		for _, c := range rep.Completions {
			v := byID[c.Tenant]
			if v.role == roleNeighbour {
				if err := s.Submit(v.id, sched.Job{Work: time.Second, Chunk: p.kernel}); err != nil {
					return nil, err
				}
				continue
			}
			v.stepsLeft--
			if v.stepsLeft == 0 {
				v.finished = c.Finished
				running--
			} else {
				v.nextSubmit = c.Finished + p.cpuWork - p.cpuJitter + time.Duration(v.rng.Int64N(int64(2*p.cpuJitter)+1))
			}
		}
	}

	end := s.Now()
	var rows []row
	for i, v := range vms {
		r := row{
			scenario: scenario, policy: pol, profile: prof.Name, vms: len(vms), vm: i + 1, role: v.role,
			gpuUtilPct: 100 * float64(busy) / float64(end),
			vmGPUPct:   100 * float64(v.granted) / float64(end),
		}
		if v.role != roleNeighbour {
			r.trainingS = (v.finished - v.started).Seconds()
		}
		rows = append(rows, r)
	}
	return rows, nil
}
