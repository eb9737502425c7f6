package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/sweep"
	"github.com/vgpusim/vgpusim/vgpu"
)

// step is the timeline's resolution in simulated time.
const step = 100 * time.Millisecond

// params describes the whole run: the migration experiment and
// Experiments 1 and 2.
type params struct {
	profile   vgpu.Profile
	models    []vgpu.Model // the services migrated, each in runs of its own
	rate      float64      // requests per second offered to the service
	link      migrate.Link
	modes     []migrate.Mode // the migrations, each in a run of its own
	duration  time.Duration  // simulated time of each migration run
	migrateAt time.Duration  // when the migration starts
	printStep time.Duration  // the printed timeline's row length; CSV and JSON keep every step
	seed      uint64

	// Guest RAM, as in examples/vmotion: 16 GiB, 4 GiB of it holding
	// the guest OS and the serving stack.
	ramBytes, ramFootprintBytes int64

	// Experiments 1 and 2, without migration.
	expProfiles []string  // Experiment 1: throughput and latency per profile, at expRate
	expRate     float64   // Experiment 1's request rate
	expRates    []float64 // Experiment 2: the request rates, on the -profile
	expDuration time.Duration

	// sweep spreads the runs and the experiments' points over goroutines
	// and picks the shard to run (-workers, -shard).
	sweep sweep.Config
}

func defaultParams() params {
	prof, err := vgpu.ParseProfile("P40-2Q")
	if err != nil {
		panic(err)
	}
	return params{
		profile:           prof,
		models:            []vgpu.Model{vgpu.InceptionV3(), vgpu.MobileNet()},
		rate:              10,
		link:              migrate.GbE10(),
		modes:             []migrate.Mode{migrate.Legacy, migrate.PreCopy},
		duration:          40 * time.Second,
		migrateAt:         5 * time.Second,
		printStep:         2 * time.Second,
		seed:              1,
		ramBytes:          16 * vgpu.GiB,
		ramFootprintBytes: 4 * vgpu.GiB,
		expProfiles:       []string{"P40-1Q", "P40-2Q", "P40-4Q", "P40-8Q", "P40-12Q", "P40-24Q"},
		expRate:           400,
		expRates:          []float64{10, 20, 40, 80, 160},
		expDuration:       4 * time.Second,
	}
}

// policy is the scheduler every P40 runs: fixed share, so that a lone vGPU
// gets its profile's slice of the GPU (a P40-4Q one sixth) as it would on a
// GPU filled with tenants, which is how an MLaaS provider packs it.
const policy = sched.FixedShare

// models are the GTC 2019 talk's two models, by the names -model takes.
var models = []struct {
	name  string
	model vgpu.Model
}{{"inception-v3", vgpu.InceptionV3()}, {"mobilenet", vgpu.MobileNet()}}

// modelsByName parses -model: a preset's name or "both".
func modelsByName(name string) ([]vgpu.Model, error) {
	var all []vgpu.Model
	for _, m := range models {
		if m.name == name {
			return []vgpu.Model{m.model}, nil
		}
		all = append(all, m.model)
	}
	if name == "both" {
		return all, nil
	}
	return nil, fmt.Errorf("unknown model %q, want %s or both", name, modelNames())
}

func modelNames() string {
	var names []string
	for _, m := range models {
		names = append(names, m.name)
	}
	return strings.Join(names, ", ")
}

// modesByName parses -mode: "legacy", "pre-copy" or "both".
func modesByName(name string) ([]migrate.Mode, error) {
	switch name {
	case "both":
		return []migrate.Mode{migrate.Legacy, migrate.PreCopy}, nil
	case migrate.Legacy.String():
		return []migrate.Mode{migrate.Legacy}, nil
	case migrate.PreCopy.String():
		return []migrate.Mode{migrate.PreCopy}, nil
	}
	return nil, fmt.Errorf("unknown mode %q, want %s, %s or both", name, migrate.Legacy, migrate.PreCopy)
}

// validate checks what the flags cannot: times that fit together.
func (p params) validate() error {
	switch {
	case p.rate <= 0:
		return fmt.Errorf("-rate %v: want a positive request rate", p.rate)
	case p.duration < step || p.duration%step != 0:
		return fmt.Errorf("-duration %v: want a positive multiple of %v", p.duration, step)
	case p.migrateAt < 0 || p.migrateAt >= p.duration || p.migrateAt%step != 0:
		return fmt.Errorf("-migrate-at %v: want a multiple of %v in [0, -duration)", p.migrateAt, step)
	case p.printStep < step || p.printStep%step != 0:
		return fmt.Errorf("-print-step %v: want a positive multiple of %v", p.printStep, step)
	case p.ramFootprintBytes <= 0 || p.ramBytes <= p.ramFootprintBytes || p.ramBytes > 1024*vgpu.GiB:
		return fmt.Errorf("-ram %d GiB, -ram-used %d GiB: want 0 < used < RAM <= 1024 GiB", p.ramBytes/vgpu.GiB, p.ramFootprintBytes/vgpu.GiB)
	case p.expDuration < step:
		return fmt.Errorf("-exp-duration %v: want at least %v", p.expDuration, step)
	}
	return nil
}
