package main

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// noMigration names the run without a migration, the baseline the
// migrations' losses are measured against.
const noMigration = "none"

// tick is one step of a run's timeline: what the service did in
// [at-step, at).
type tick struct {
	model     string
	run       string        // noMigration or the migration's mode
	at        time.Duration // the step's end
	served    int64         // requests completed in the step
	dropped   int64         // requests refused by a full queue in the step
	mean, p99 time.Duration // latency of the requests completed in the step
	worst     time.Duration // the slowest of them
	phase     string        // the migration's phase at the step's end
	stunned   time.Duration // how much of the step the VM was stunned
	host      string        // where the VM runs at the step's end
}

// serviceRun is one simulated run of the service, with or without a migration.
type serviceRun struct {
	model    string
	name     string // noMigration or the migration's mode
	ticks    []tick
	service  *vgpu.Inference // its history answers for any interval of the run
	report   *migrate.Report // nil without a migration
	stunFrom time.Duration   // the stun, from quiesce to resume; zero without a migration
	stunTo   time.Duration
}

// newServiceVM builds a host with one P40 under the fixed-share scheduler
// and, on it, a started VM of profile prof serving model at rate requests
// per second, at most maxQueue requests waiting at the vGPU (0: the
// scheduler's default), with the whole usable framebuffer in use, as a serving stack
// that claims all GPU memory at start does.
func newServiceVM(p params, prof vgpu.Profile, model vgpu.Model, rate float64, maxQueue int) (*vgpu.Host, *vgpu.VM, *vgpu.Inference, error) {
	cfg := vgpu.HostConfig{Name: "source", Seed: p.seed}
	cfg.Sched.Policy, cfg.Sched.MaxQueue = policy, maxQueue
	host, err := vgpu.NewHost(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	svc, err := vgpu.NewInference(vgpu.InferenceConfig{
		Model:          model,
		RequestsPerSec: rate,
		FootprintBytes: prof.UsableFramebufferBytes(),
		Seed:           p.seed,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	vm, err := host.CreateVM(vgpu.VMSpec{
		ID:                "mlaas",
		RAMBytes:          p.ramBytes,
		RAMFootprintBytes: p.ramFootprintBytes,
		Profiles:          []string{prof.Name},
		Workload:          svc,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if err := vm.Start(); err != nil {
		return nil, nil, nil, err
	}
	return host, vm, svc, nil
}

// simulateModel runs the model's service without a migration and then
// with each of p.modes, each run on hosts of its own.
func simulateModel(p params, model vgpu.Model) ([]serviceRun, error) {
	var runs []serviceRun
	for _, mode := range append([]migrate.Mode{0}, p.modes...) {
		r, err := simulateRun(p, model, mode)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", model.Name, runName(mode), err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

func runName(mode migrate.Mode) string {
	if mode == 0 {
		return noMigration
	}
	return mode.String()
}

// simulateRun runs the service for p.duration in steps of one tick,
// migrating it at p.migrateAt in mode, or not at all when mode is zero.
func simulateRun(p params, model vgpu.Model, mode migrate.Mode) (serviceRun, error) {
	src, vm, svc, err := newServiceVM(p, p.profile, model, p.rate, 0)
	if err != nil {
		return serviceRun{}, err
	}
	dcfg := vgpu.HostConfig{Name: "destination", Seed: p.seed + 1}
	dcfg.Sched.Policy = policy
	dst, err := vgpu.NewHost(dcfg)
	if err != nil {
		return serviceRun{}, err
	}
	sim, err := migrate.NewSim(migrate.SimConfig{}, src, dst)
	if err != nil {
		return serviceRun{}, err
	}
	r := serviceRun{model: model.Name, name: runName(mode), service: svc}
	var mig *migrate.Migration
	for now := step; now <= p.duration; now += step {
		if mode != 0 && mig == nil && now-step == p.migrateAt {
			// Model fidelity sizes pages from one compressed sample per
			// content class instead of encoding every page; its wire
			// bytes agree with Bytes fidelity within 0.5 %, and the part
			// of the stun they set within 2 %.
			mig, err = sim.Start(vm, dst, migrate.Config{Policy: migrate.Policy{Mode: mode}, Fidelity: migrate.Model, Link: p.link})
			if err != nil {
				return serviceRun{}, err
			}
		}
		if _, err := sim.Advance(step); err != nil {
			return serviceRun{}, err
		}
		m := svc.Metrics(now-step, now)
		t := tick{model: r.model, run: r.name, at: now, served: m.Completed, dropped: m.Dropped,
			mean: m.LatencyMean, p99: m.LatencyP99, worst: m.LatencyMax, phase: "running", host: vm.Host().Name()}
		if mig != nil {
			// The VM object changes at the switchover: the destination's
			// takes over the workload.
			t.phase, t.host = mig.Phase().String(), mig.VM().Host().Name()
		}
		r.ticks = append(r.ticks, t)
	}
	if mig == nil {
		return r, nil
	}
	if !mig.Done() {
		return serviceRun{}, fmt.Errorf("migration still in %v at the end of the run: raise -duration", mig.Phase())
	}
	if err := mig.Err(); err != nil {
		return serviceRun{}, err
	}
	r.report = mig.Report()
	r.stunFrom, r.stunTo = stunInterval(r.report)
	for i := range r.ticks {
		t := &r.ticks[i]
		t.stunned = max(0, min(t.at, r.stunTo)-max(t.at-step, r.stunFrom))
	}
	return r, nil
}

// stunInterval finds the stun in the migration's events: from the first
// event in a stunned phase to the first after it that is not.
func stunInterval(rep *migrate.Report) (from, to time.Duration) {
	in := false
	for _, e := range rep.Events {
		switch {
		case !in && e.Phase.Stunned():
			from, in = e.At, true
		case in && !e.Phase.Stunned():
			return from, e.At
		}
	}
	return from, from + rep.Stun
}
