package migrate

import (
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// postCopyBenchPolicies are the ways BenchmarkPostCopy moves a VM: pre-copy
// alone (throttling when it does not converge), post-copy at once, and
// the hybrid, two rounds of pre-copy and then post-copy.
var postCopyBenchPolicies = []struct {
	name string
	p    Policy
}{
	{"pre-copy", Policy{}},
	{"post-copy", Policy{Mode: PostCopy}},
	{"hybrid", Policy{OnNonConvergence: SwitchToPostCopy, MaxRounds: 2}},
}

// BenchmarkPostCopy migrates, over 10 GbE at Model fidelity, an inference
// VM (P40-8Q, 6 GiB of framebuffer in use, Inception V3 at 100
// requests a second) and the training VM of BenchmarkPrecopyTraining
// (256 MiB of weights rewritten every iteration, a 150 ms stun target)
// with each policy, and reports the stun, the post-copy's degradation
// window, its faults and their p99 latency, the VM's stall, the bytes on
// the wire, and the workload's p99 latency (for training, its iteration
// time) over the second after the migration against the second before:
//
//	go test -run '^$' -bench PostCopy -benchtime 1x ./migrate
func BenchmarkPostCopy(b *testing.B) {
	vms := []struct {
		name   string
		target time.Duration
		make   func(testing.TB, *vgpu.Host) *vgpu.VM
	}{
		{"inference", 0, func(t testing.TB, h *vgpu.Host) *vgpu.VM {
			vm := inferenceVM(t, h, "infer", "P40-8Q", 8*GiB, 6*GiB, vgpu.InceptionV3(), 3)
			must(t, h.Advance(2*time.Second))
			return vm
		}},
		{"training", trainingStunTarget, func(t testing.TB, h *vgpu.Host) *vgpu.VM {
			return trainingWeightsVM(t, h, trainingWeightsBytes, trainingMACs)
		}},
	}
	for _, v := range vms {
		for _, p := range postCopyBenchPolicies {
			b.Run("vm="+v.name+"/policy="+p.name, func(b *testing.B) {
				b.ReportAllocs()
				var rep *Report
				for b.Loop() {
					src, dst := hostPair(b, memory.Synthetic, 1)
					vm := v.make(b, src)
					sameClock(b, src, dst)
					cfg := Config{Policy: p.p, Fidelity: Model, Link: GbE10(), MetricsWindow: time.Second}
					if v.target > 0 {
						cfg.StunTarget = v.target
					}
					s, err := NewSim(SimConfig{}, src, dst)
					must(b, err)
					m, err := s.Start(vm, dst, cfg)
					must(b, err)
					if _, err = m.Run(); err != nil {
						b.Fatal(err)
					}
					_, err = s.Advance(time.Second)
					must(b, err)
					rep = m.Report()
				}
				b.ReportMetric(float64(rep.Stun)/1e6, "stun-ms")
				b.ReportMetric(float64(rep.WireBytes)/float64(MiB), "wire-MiB")
				b.ReportMetric(float64(len(rep.Rounds)), "rounds")
				b.ReportMetric(float64(rep.Before.LatencyP99)/1e6, "p99-before-ms")
				b.ReportMetric(float64(rep.After.LatencyP99)/1e6, "p99-after-ms")
				if pc := rep.PostCopy; pc != nil {
					b.ReportMetric(float64(pc.Window)/1e6, "window-ms")
					b.ReportMetric(float64(pc.Faults), "faults")
					b.ReportMetric(float64(pc.FaultLatencyP99)/1e3, "fault-p99-us")
					b.ReportMetric(float64(pc.Stall)/1e6, "stall-ms")
				}
			})
		}
	}
}
