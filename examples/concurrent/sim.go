package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/sweep"
	"github.com/vgpusim/vgpusim/vgpu"
)

// params describes the experiment.
type params struct {
	profiles []string
	modes    []migrate.Mode
	vms      int // VMs per profile, migrated together
	workload string
	link     migrate.Link
	warmup   time.Duration // the workloads run this long before the first migration starts
	seed     uint64

	// Every VM has the same guest RAM, so that profiles differ only in
	// their framebuffer: 16 GiB, 4 GiB of it in use, as examples/vmotion.
	ramBytes, ramFootprintBytes int64
}

func defaultParams() params {
	return params{
		// The blog post's Figure 2 names no profiles; these are the two ends
		// its text scales between (24 VMs of P40-1Q on a P40, 2 of
		// P40-12Q).
		profiles:          []string{"P40-1Q", "P40-12Q"},
		modes:             []migrate.Mode{migrate.PreCopy},
		vms:               6,
		workload:          workloadCAD,
		link:              migrate.GbE10(),
		warmup:            5 * time.Second,
		seed:              1,
		ramBytes:          16 * vgpu.GiB,
		ramFootprintBytes: 4 * vgpu.GiB,
	}
}

// The workloads -workload chooses between.
const (
	workloadCAD       = "cad"       // SPECapc for 3ds Max, what the blog post's Figure 2 ran: frames
	workloadInference = "inference" // Inception V3 serving: requests
)

// metricsWindow is how long before and after a migration its workload is
// measured: migrate.Config's default.
const metricsWindow = time.Second

// The two schedules each group of VMs is migrated in.
const (
	concurrent = "concurrent" // all at once, sharing the link
	oneByOne   = "one-by-one" // each after the previous ended, alone on the link
)

var schedules = []string{concurrent, oneByOne}

// row is one VM's migration in one schedule.
type row struct {
	profile  string
	mode     migrate.Mode
	schedule string
	vm       string

	// start and end are from the moment the first migration of the group
	// started.
	start, end  time.Duration
	stun, total time.Duration
	rounds      int
	wireBytes   int64
	meets       bool

	// The VM's workload over the second before its migration, during it,
	// and over the second after it. Items count where they complete, so
	// requests held up by the stun show after the migration's end, when
	// the resumed VM serves them.
	before, during, after vgpu.Metrics

	// report is the migration's whole report, which summarize sums up
	// with migrate.Summarize.
	report *migrate.Report
}

// scenario is one point of the sweep: a group of VMs of one profile,
// migrated in one mode and one schedule. A scenario builds hosts of its
// own, from the same seed as every other, so that both schedules move the
// same VMs in the same state and no scenario depends on another.
type scenario struct {
	prof  vgpu.Profile
	mode  migrate.Mode
	sched string
}

// simulate migrates, for each profile and mode, a group of VMs both ways:
// concurrently, and one by one; the scenarios of cfg's shard (all of them
// for the zero shard), cfg.Workers at a time, their rows in scenario
// order.
func simulate(p params, cfg sweep.Config) ([]row, error) {
	if p.warmup < 0 {
		return nil, fmt.Errorf("-warmup %v is negative", p.warmup)
	}
	if p.vms < 1 || p.vms > migrate.DefaultMaxPerHost {
		return nil, fmt.Errorf("-vms %d: want 1 to %d, the migrations a host takes part in at once",
			p.vms, migrate.DefaultMaxPerHost)
	}
	var scenarios []scenario
	for _, name := range p.profiles {
		prof, err := vgpu.ParseProfile(name)
		if err != nil {
			return nil, err
		}
		for _, mode := range p.modes {
			for _, sched := range schedules {
				scenarios = append(scenarios, scenario{prof, mode, sched})
			}
		}
	}
	groups, err := sweep.Run(context.Background(), scenarios, cfg, func(_ context.Context, _ int, s scenario) ([]row, error) {
		rs, err := migrateGroup(p, s.prof, s.mode, s.sched)
		if err != nil {
			return nil, fmt.Errorf("%s %v %s: %w", s.prof.Name, s.mode, s.sched, err)
		}
		return rs, nil
	})
	return slices.Concat(groups...), err
}

// migrateGroup builds a source host with p.vms VMs of profile prof and an
// empty destination, lets the workloads warm up, and migrates every VM in
// schedule sched.
func migrateGroup(p params, prof vgpu.Profile, mode migrate.Mode, sched string) ([]row, error) {
	src, dst, vms, err := buildHosts(p, prof)
	if err != nil {
		return nil, err
	}
	s, err := migrate.NewSim(migrate.SimConfig{}, src, dst)
	if err != nil {
		return nil, err
	}
	// Model fidelity sizes pages from one compressed sample per content
	// class instead of encoding every page: it keeps six 12 GiB
	// framebuffers, twice, to seconds of wall time.
	cfg := migrate.Config{Policy: migrate.Policy{Mode: mode}, Fidelity: migrate.Model, Link: p.link, MetricsWindow: metricsWindow}
	var ms []*migrate.Migration
	if sched == concurrent {
		for _, vm := range vms {
			m, err := s.Start(vm, dst, cfg)
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
		if _, err := s.Run(); err != nil {
			return nil, err
		}
	} else {
		for _, vm := range vms {
			m, err := s.Start(vm, dst, cfg)
			if err != nil {
				return nil, err
			}
			if _, err := m.Run(); err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
	}
	// Run on for the metrics window, so that the last migration's After
	// covers a full second, as the others' do.
	if _, err := s.Advance(metricsWindow); err != nil {
		return nil, err
	}
	var rows []row
	first := ms[0].Report().Start
	for _, m := range ms {
		rep := m.Report()
		if m.Phase() != migrate.PhaseDone {
			return nil, fmt.Errorf("%s ended in %v: %v", rep.VM, m.Phase(), m.Err())
		}
		rows = append(rows, row{
			profile: prof.Name, mode: mode, schedule: sched, vm: rep.VM,
			start: rep.Start - first, end: rep.End - first,
			stun: rep.Stun, total: rep.Total, rounds: len(rep.Rounds), wireBytes: rep.WireBytes,
			meets: rep.MeetsStandard(), before: rep.Before, during: rep.During, after: rep.After,
			report: rep,
		})
	}
	return rows, nil
}

// buildHosts returns a source host with p.vms running VMs of profile prof,
// warmed up, and a destination with room for them: as many P40s each as
// the VMs need.
func buildHosts(p params, prof vgpu.Profile) (src, dst *vgpu.Host, vms []*vgpu.VM, err error) {
	gpus := (p.vms + prof.MaxInstances - 1) / prof.MaxInstances
	src, err = vgpu.NewHost(vgpu.HostConfig{Name: "source", GPUs: gpus, Seed: p.seed})
	if err != nil {
		return nil, nil, nil, err
	}
	dst, err = vgpu.NewHost(vgpu.HostConfig{Name: "destination", GPUs: gpus, Seed: p.seed + 1})
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range p.vms {
		w, err := newWorkload(p, prof, p.seed+uint64(i))
		if err != nil {
			return nil, nil, nil, err
		}
		vm, err := src.CreateVM(vgpu.VMSpec{
			ID:                fmt.Sprintf("vm%d", i+1),
			RAMBytes:          p.ramBytes,
			RAMFootprintBytes: p.ramFootprintBytes,
			Profiles:          []string{prof.Name},
			Workload:          w,
		})
		if err != nil {
			return nil, nil, nil, err
		}
		if err := vm.Start(); err != nil {
			return nil, nil, nil, err
		}
		vms = append(vms, vm)
	}
	if err := src.Advance(p.warmup); err != nil {
		return nil, nil, nil, err
	}
	// The destination's clock must read the source's: a Sim moves both on
	// together from there.
	if err := dst.Advance(p.warmup); err != nil {
		return nil, nil, nil, err
	}
	return src, dst, vms, nil
}

// newWorkload returns the VM's workload, filling the profile's whole usable
// framebuffer, as examples/vmotion does: the used framebuffer is what
// stun time grows with.
func newWorkload(p params, prof vgpu.Profile, seed uint64) (vgpu.Workload, error) {
	used := prof.UsableFramebufferBytes()
	switch p.workload {
	case workloadCAD:
		return vgpu.NewCAD(vgpu.CADConfig{FootprintBytes: used, Seed: seed})
	case workloadInference:
		return vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.InceptionV3(), FootprintBytes: used, Seed: seed})
	}
	return nil, fmt.Errorf("unknown workload %q", p.workload)
}
