package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The VMs of the rack. An inference VM serves Inception V3 at 20 requests
// a second from weights filling its P40-4Q's framebuffer; a training VM
// trains MobileNet on a P40-2Q, rewriting its weights and activations (the
// model's own sizes) every iteration.
const (
	inferenceProfile = "P40-4Q"
	trainingProfile  = "P40-2Q"
	requestsPerSec   = 20
	ramBytes         = 8 << 30
	ramInUseBytes    = 1 << 30
	maxPerHost       = 2 // migrations a host takes part in at once
)

// result is what a run measured.
type result struct {
	hosts  []string
	rounds []round
	migs   []migration
	left   []migrate.Left
	// util[h][k] is host h's GPU utilization, the mean of its GPUs', over
	// second k of the run.
	util       [][]float64
	start, end time.Duration
	summary    migrate.Summary
}

// round is one host's maintenance: its evacuation from start to empty,
// then down until back.
type round struct {
	host               string
	start, empty, back time.Duration
}

// migration is one VM's move, in the round of the host it left.
type migration struct {
	round int
	kind  string // "inference" or "training"
	m     *migrate.Migration
	rep   *migrate.Report // taken at the end of its round
}

// simulate builds the rack, runs its rolling maintenance and measures it.
func simulate(p params) (result, error) {
	hosts, kinds, err := buildRack(p)
	if err != nil {
		return result{}, err
	}
	sim, err := migrate.NewSim(migrate.SimConfig{MaxPerHost: maxPerHost}, hosts...)
	if err != nil {
		return result{}, err
	}
	res := result{start: sim.Now()}
	for _, h := range hosts {
		res.hosts = append(res.hosts, h.Name())
	}
	if _, err := sim.Advance(p.warmup); err != nil {
		return result{}, err
	}
	for i, h := range hosts {
		others := slices.Delete(slices.Clone(hosts), i, i+1)
		r := round{host: h.Name(), start: sim.Now()}
		ev, err := sim.Evacuate(h, others, migrate.EvacuateConfig{
			Migration: migrate.Config{Link: migrate.GbE10()}, Placement: vgpu.BreadthFirst})
		if err != nil {
			return result{}, err
		}
		// From event to event, the workloads' and the migrations', as a
		// discrete-event simulator drives the library.
		for !ev.Done() {
			at, ok := sim.NextEventAt()
			if !ok {
				return result{}, fmt.Errorf("evacuating %s: nothing left to happen", h.Name())
			}
			if _, err := sim.AdvanceTo(at); err != nil {
				return result{}, err
			}
		}
		r.empty = sim.Now()
		for _, m := range ev.Migrations() {
			if err := m.Err(); err != nil {
				return result{}, err
			}
			res.migs = append(res.migs, migration{round: i, kind: kinds[m.VM().ID()], m: m})
		}
		res.left = append(res.left, ev.Left()...)
		if _, err := sim.Advance(p.down); err != nil {
			return result{}, err
		}
		r.back = sim.Now()
		res.rounds = append(res.rounds, r)
		// The round's reports are taken now that the second after each
		// of its migrations, whose workload metrics they hold, has
		// passed, and before the next round may move its VMs again.
		for j := range res.migs {
			if res.migs[j].round == i {
				res.migs[j].rep = res.migs[j].m.Report()
			}
		}
	}
	if _, err := sim.Advance(p.warmup); err != nil {
		return result{}, err
	}
	res.end = sim.Now()
	var reps []*migrate.Report
	for _, m := range res.migs {
		reps = append(reps, m.rep)
	}
	res.summary = migrate.Summarize(reps)
	res.util, err = utilization(hosts, res.start, res.end)
	return res, err
}

// buildRack makes the hosts and places the VMs on them breadth-first,
// which spreads them evenly; each host puts a type's vGPUs on as few GPUs
// as it can (depth-first), so that a P40 is left for the other type.
func buildRack(p params) ([]*vgpu.Host, map[string]string, error) {
	var hosts []*vgpu.Host
	for i := range p.hosts {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: fmt.Sprintf("esx-%02d", i+1), GPUs: 2,
			Placement: vgpu.DepthFirst, Seed: p.seed<<8 + uint64(i)})
		if err != nil {
			return nil, nil, err
		}
		hosts = append(hosts, h)
	}
	kinds := map[string]string{}
	place := func(id, kind, profile string, w vgpu.Workload) error {
		vm, err := vgpu.PlaceVM(hosts, vgpu.VMSpec{ID: id, RAMBytes: ramBytes, RAMFootprintBytes: ramInUseBytes,
			Profiles: []string{profile}, Workload: w}, vgpu.BreadthFirst)
		if err != nil {
			return err
		}
		kinds[id] = kind
		return vm.Start()
	}
	inf, _ := vgpu.ParseProfile(inferenceProfile)
	for i := range p.hosts * p.inference {
		w, err := vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.InceptionV3(), RequestsPerSec: requestsPerSec,
			FootprintBytes: inf.UsableFramebufferBytes(), Seed: p.seed + uint64(i)})
		if err != nil {
			return nil, nil, err
		}
		if err := place(fmt.Sprintf("inf-%02d", i+1), "inference", inf.Name, w); err != nil {
			return nil, nil, err
		}
	}
	tr, _ := vgpu.ParseProfile(trainingProfile)
	for i := range p.hosts * p.training {
		w, err := vgpu.NewTraining(vgpu.TrainingConfig{Model: vgpu.MobileNet(), Seed: p.seed + 1000 + uint64(i)})
		if err != nil {
			return nil, nil, err
		}
		if err := place(fmt.Sprintf("train-%02d", i+1), "training", tr.Name, w); err != nil {
			return nil, nil, err
		}
	}
	return hosts, kinds, nil
}

// utilization reads each host's GPU utilization, second by second, from
// its GPUs' history.
func utilization(hosts []*vgpu.Host, start, end time.Duration) ([][]float64, error) {
	out := make([][]float64, len(hosts))
	for i, h := range hosts {
		for t := start; t+time.Second <= end; t += time.Second {
			var sum float64
			for _, g := range h.GPUs() {
				u, err := g.Utilization(t, t+time.Second)
				if err != nil {
					return nil, err
				}
				sum += u
			}
			out[i] = append(out[i], sum/float64(len(h.GPUs())))
		}
	}
	return out, nil
}
