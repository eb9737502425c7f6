package main

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

// Experiment names, as the tables print them.
const (
	expProfiles = "1" // throughput and latency per profile, at capacity
	expRates    = "2" // throughput and latency per request rate, on one profile
)

// point is one run of Experiment 1 or 2: a model on a profile at an
// offered request rate, without migration.
type point struct {
	experiment string
	model      string
	profile    string
	offered    float64 // requests per second
	served     float64 // requests per second completed
	refused    float64 // fraction of offered requests refused by a full queue
	mean, p99  time.Duration
}

// capacityQueue is Experiment 1's bound on requests waiting at the vGPU:
// a client that keeps one request outstanding, so the service runs at its
// capacity and latency is the service's own, not a queue's.
const capacityQueue = 1

// The experiments' guest RAM: the service's 256 MiB working set and a
// little for the guest OS.
const (
	expRAMBytes          = vgpu.GiB
	expRAMFootprintBytes = 128 * vgpu.MiB
)

// expPoint is one point of Experiment 1 or 2: both models on a profile
// at an offered request rate, at most maxQueue requests waiting at the
// vGPU (0: the scheduler's default), without migration.
type expPoint struct {
	experiment string
	prof       vgpu.Profile
	rate       float64
	maxQueue   int
}

// experimentPoints lists Experiment 1's points (every profile of
// p.expProfiles at an offered load above any profile's capacity) and then
// Experiment 2's (every rate of p.expRates on p.profile), in the order
// their rows print.
func experimentPoints(p params) ([]expPoint, error) {
	var eps []expPoint
	for _, name := range p.expProfiles {
		prof, err := vgpu.ParseProfile(name)
		if err != nil {
			return nil, err
		}
		eps = append(eps, expPoint{expProfiles, prof, p.expRate, capacityQueue})
	}
	for _, rate := range p.expRates {
		eps = append(eps, expPoint{expRates, p.profile, rate, 0})
	}
	return eps, nil
}

// simulatePoint runs the point for both models, Inception V3 first, each
// on a host of its own.
func simulatePoint(p params, e expPoint) ([]point, error) {
	var pts []point
	for _, m := range models {
		pt, err := servePoint(p, e.prof, m.model, e.rate, e.maxQueue)
		if err != nil {
			if e.experiment == expProfiles {
				return nil, fmt.Errorf("experiment 1, %s %s: %w", e.prof.Name, m.model.Name, err)
			}
			return nil, fmt.Errorf("experiment 2, %v requests/s %s: %w", e.rate, m.model.Name, err)
		}
		pt.experiment = e.experiment
		pts = append(pts, pt)
	}
	return pts, nil
}

// servePoint runs the service alone for p.expDuration and measures it over
// the whole run; maxQueue bounds the requests waiting at the vGPU (0: the
// scheduler's default).
func servePoint(p params, prof vgpu.Profile, model vgpu.Model, rate float64, maxQueue int) (point, error) {
	// Nothing here migrates, so guest RAM only has to hold the service:
	// a small VM starts in a fraction of the time a 16 GiB one takes to
	// lay out its memory.
	p.ramBytes, p.ramFootprintBytes = expRAMBytes, expRAMFootprintBytes
	host, _, svc, err := newServiceVM(p, prof, model, rate, maxQueue)
	if err != nil {
		return point{}, err
	}
	if err := host.Advance(p.expDuration); err != nil {
		return point{}, err
	}
	m := svc.Metrics(0, p.expDuration)
	pt := point{model: model.Name, profile: prof.Name, offered: rate, served: m.ThroughputPerSec,
		mean: m.LatencyMean, p99: m.LatencyP99}
	if n := m.Completed + m.Dropped; n > 0 {
		pt.refused = float64(m.Dropped) / float64(n)
	}
	return pt, nil
}
