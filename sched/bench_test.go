package sched

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSchedule runs busy tenants (every finished job is replaced at
// once) for one simulated hour per op, in one-second Advances, and reports
// slice decisions per second of real time. With one tenant the decisions
// are renewals the scheduler jumps over; with several each is a real
// decision.
func BenchmarkSchedule(b *testing.B) {
	for _, n := range []int{1, 8, 24} {
		for _, slice := range []time.Duration{ms, 2 * ms} {
			b.Run(fmt.Sprintf("tenants=%d/slice=%v", n, slice), func(b *testing.B) {
				benchSchedule(b, Config{Slice: slice}, n)
			})
		}
	}
	for _, p := range []Policy{EqualShare, FixedShare} {
		b.Run(fmt.Sprintf("policy=%s/tenants=24/slice=1ms", map[Policy]string{EqualShare: "equal", FixedShare: "fixed"}[p]), func(b *testing.B) {
			benchSchedule(b, Config{Policy: p, Slice: ms}, 24)
		})
	}
}

func benchSchedule(b *testing.B, cfg Config, n int) {
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	const work = 10 * time.Second
	for range n {
		id, _ := s.AddTenant(24)
		_ = s.PowerOn(id)
		_ = s.Submit(id, Job{Work: work})
		_ = s.Submit(id, Job{Work: work})
	}
	// The caller owns the report's buffers; sized for a second's worth of
	// completions, they never grow.
	rep := Report{Completions: make([]Completion, 0, 2*n), Tenants: make([]TenantInterval, 0, n)}
	// run simulates d in one-second steps and returns the decisions taken.
	run := func(d time.Duration) int64 {
		var decisions int64
		for range d / time.Second {
			if err := s.Advance(time.Second, &rep); err != nil {
				b.Fatal(err)
			}
			if rep.Busy != time.Second && cfg.Policy == BestEffort {
				b.Fatalf("busy tenants left the GPU idle: busy %v", rep.Busy)
			}
			for _, c := range rep.Completions {
				if err := s.Submit(c.Tenant, Job{Work: work}); err != nil {
					b.Fatal(err)
				}
			}
			decisions += rep.Decisions
		}
		return decisions
	}
	run(10 * time.Minute) // reach the steady state: every queue has turned over
	b.ReportAllocs()
	var decisions int64
	for b.Loop() {
		decisions += run(time.Hour)
	}
	b.ReportMetric(float64(decisions)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(decisions)/float64(b.N), "decisions/op")
}
