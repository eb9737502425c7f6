package vgpu

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRemoteTraining simulates training on a remote GPU, four
// iterations after a first, and reports the overhead over the same
// training on a local vGPU (overhead_%, seed 002's figure), the remote
// iteration time (iter_ms, simulated) and how fast the simulation runs
// (sim_s/s). Its bytes are the inputs the iterations send over the link.
func BenchmarkRemoteTraining(b *testing.B) {
	for _, m := range []Model{InceptionV3(), ResNet50()} {
		for _, batch := range []int{16, 64} {
			local := iterationTime(b, m, batch, nil)
			for _, l := range []RemoteLink{RemoteVMXNET3(), RemotePVRDMA(), RemoteRoCE()} {
				name := fmt.Sprintf("model=%s/batch=%d/link=%s", m.Name, batch, l.Name)
				b.Run(name, func(b *testing.B) {
					b.SetBytes(4 * int64(batch) * m.WireInputBytes())
					b.ReportAllocs()
					var remote time.Duration
					for b.Loop() {
						remote = iterationTime(b, m, batch, &l)
					}
					b.ReportMetric(100*(float64(remote)/float64(local)-1), "overhead_%")
					b.ReportMetric(float64(remote)/float64(time.Millisecond), "iter_ms")
					b.ReportMetric(6*float64(remote)*float64(b.N)/float64(b.Elapsed()), "sim_s/s")
				})
			}
		}
	}
}
