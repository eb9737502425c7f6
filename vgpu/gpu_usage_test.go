package vgpu

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/sched"
)

// TestGPUUtilization: a GPU's utilization over whole buckets of its
// history is the GPU time its scheduler granted in them (View.Busy read at
// their ends) over their length, whatever the host's steps; within a
// bucket it is prorated; an interval outside the retained history, or in
// the future, is refused.
func TestGPUUtilization(t *testing.T) {
	h := newHost(t, HostConfig{Name: "h", GPUs: 1, Start: 1500 * time.Millisecond,
		UsageResolution: 500 * time.Millisecond, UsageRetention: 6 * time.Second, Sched: sched.Config{Policy: sched.BestEffort}})
	inf, err := NewInference(InferenceConfig{Model: InceptionV3(), RequestsPerSec: 300, Seed: 1})
	must(t, err)
	vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 4 * GiB, Profiles: []string{"P40-4Q"}, Workload: inf})
	must(t, vm.Start())
	g := h.GPUs()[0]
	// Steps that do not fall on the buckets' boundaries.
	for h.Now() < 9*time.Second {
		advance(t, h, 370*time.Millisecond)
	}
	sample := func(at time.Duration) time.Duration {
		// The busy time at a boundary, from a host run to it exactly.
		twin := newHost(t, HostConfig{Name: "h", GPUs: 1, Start: 1500 * time.Millisecond, Sched: sched.Config{Policy: sched.BestEffort}})
		inf, err := NewInference(InferenceConfig{Model: InceptionV3(), RequestsPerSec: 300, Seed: 1})
		must(t, err)
		must(t, mustVM(t, twin, VMSpec{ID: "vm", RAMBytes: 4 * GiB, Profiles: []string{"P40-4Q"}, Workload: inf}).Start())
		advance(t, twin, at-twin.Now())
		return twin.GPUs()[0].Scheduler().Busy()
	}
	for _, iv := range [][2]time.Duration{{4 * time.Second, 5 * time.Second}, {4500 * time.Millisecond, 8 * time.Second}, {5 * time.Second, h.Now()}} {
		got, err := g.Utilization(iv[0], iv[1])
		must(t, err)
		want := float64(sample(iv[1])-sample(iv[0])) / float64(iv[1]-iv[0])
		if math.Abs(got-want) > 1e-12 || got <= 0 || got > 1 {
			t.Errorf("utilization over %v: %v, want %v", iv, got, want)
		}
	}
	// Within one bucket, prorated: half a bucket has half its busy time.
	whole, err := g.Utilization(6*time.Second, 6500*time.Millisecond)
	must(t, err)
	half, err := g.Utilization(6*time.Second, 6250*time.Millisecond)
	must(t, err)
	if math.Abs(whole-half) > 1e-12 {
		t.Errorf("half a bucket: %v, the bucket %v", half, whole)
	}
	for _, iv := range [][2]time.Duration{
		{2 * time.Second, 3 * time.Second}, // dropped: 6 s are retained
		{8 * time.Second, h.Now() + time.Millisecond},
		{7 * time.Second, 7 * time.Second},
	} {
		if _, err := g.Utilization(iv[0], iv[1]); !errors.Is(err, ErrInvalidDuration) {
			t.Errorf("utilization over %v: %v, want ErrInvalidDuration", iv, err)
		}
	}
	if _, err := NewHost(HostConfig{UsageResolution: time.Microsecond}); !errors.Is(err, ErrConfig) {
		t.Errorf("a microsecond resolution: %v, want ErrConfig", err)
	}
	// The finest resolution keeps as much history as it can.
	if _, err := NewHost(HostConfig{UsageResolution: time.Millisecond}); err != nil {
		t.Errorf("a millisecond resolution: %v", err)
	}
}
