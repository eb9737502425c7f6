package live

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
)

// livePostCopyPolicies are the ways BenchmarkLivePostCopy moves a VM:
// pre-copy alone, post-copy at once, and the hybrid, two rounds of
// pre-copy and then post-copy.
var livePostCopyPolicies = []struct {
	name string
	p    migrate.Policy
}{
	{"pre-copy", migrate.Policy{}},
	{"post-copy", migrate.Policy{Mode: migrate.PostCopy}},
	{"hybrid", migrate.Policy{StunTarget: time.Microsecond, MaxRounds: 2, OnNonConvergence: migrate.SwitchToPostCopy}},
}

// BenchmarkLivePostCopy migrates the counter oracle's VM (128 MiB of guest
// RAM, 32 MiB of it the guest OS, a P40-1Q; the counter rewrites 2,000
// pages of each region 200,000 times a second, at the source and then at
// the destination, which takes the workload on as the VM resumes) over
// loopback TCP with each policy, and reports the stun, the post-copy's
// window, its faults and their waits, and the bytes on the wire:
//
//	go test -run '^$' -bench LivePostCopy -benchtime 5x ./migrate/live
func BenchmarkLivePostCopy(b *testing.B) {
	for _, p := range livePostCopyPolicies {
		for _, conns := range []int{1, 2} {
			b.Run(fmt.Sprintf("policy=%s/conns=%d", p.name, conns), func(b *testing.B) {
				b.ReportAllocs()
				var stun, window, p50, p99 time.Duration
				var faults, wire, raw int64
				for b.Loop() {
					b.StopTimer()
					pw := newPostCopyWorld(b, &counterWorkload{PagesPerSec: 200000, Pages: 2000})
					sc, rc := pw.configs(p.p, nil)
					s, d := loopbackConns(b, conns)
					b.StartTimer()
					res := liveMigrate(context.Background(), pw.vm, pw.dst, rws(s), rws(d), sc, rc)
					b.StopTimer()
					if res.srcErr != nil || res.dstErr != nil {
						b.Fatalf("source: %v; destination: %v", res.srcErr, res.dstErr)
					}
					must(b, pw.dstRun.Stop())
					must(b, pw.srcRun.Stop())
					r := res.srcRep
					stun += r.Stun
					wire += r.WireBytes
					raw += r.RawBytes
					if pc := r.PostCopy; pc != nil {
						window += pc.Window
						faults += pc.Faults
						p50 += pc.FaultLatencyP50
						p99 += pc.FaultLatencyP99
					}
					b.StartTimer()
				}
				n := float64(b.N)
				b.SetBytes(raw / int64(b.N))
				b.ReportMetric(float64(stun.Microseconds())/1e3/n, "stun-ms")
				b.ReportMetric(float64(window.Microseconds())/1e3/n, "window-ms")
				b.ReportMetric(float64(faults)/n, "faults")
				b.ReportMetric(float64(p50.Microseconds())/n, "fault-p50-us")
				b.ReportMetric(float64(p99.Microseconds())/n, "fault-p99-us")
				b.ReportMetric(float64(wire)/float64(1<<20)/n, "wire-MiB")
			})
		}
	}
}
