package migrate

import (
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

// BenchmarkRemoteClientMigration migrates a training VM whose GPU is a
// session of another host over 10 GbE, at Model fidelity, for each of
// the session's links, and the same VM with a local P40-12Q (link=local)
// for comparison, and reports the stun, the session's hand-over and
// the bytes on the wire (stun_ms, handover_us, wire_MiB; simulated), and
// the training's iterations in the second after (iters_after). Its bytes
// are the guest RAM: the framebuffer stays on the server.
func BenchmarkRemoteClientMigration(b *testing.B) {
	vx, pv, roce := vgpu.RemoteVMXNET3(), vgpu.RemotePVRDMA(), vgpu.RemoteRoCE()
	for _, l := range []*vgpu.RemoteLink{nil, &vx, &pv, &roce} {
		name := "local"
		if l != nil {
			name = l.Name
		}
		b.Run("link="+name, func(b *testing.B) {
			b.ReportAllocs()
			var rep *Report
			var after int64
			for b.Loop() {
				c := newTrainingClient(b, l, SimConfig{})
				b.SetBytes(c.vm.RAM().Size())
				m, err := c.sim.Start(c.vm, c.b, Config{Link: GbE10(), Fidelity: Model})
				must(b, err)
				rep, err = m.Run()
				must(b, err)
				end := c.sim.Now()
				_, err = c.sim.Advance(time.Second)
				must(b, err)
				after = c.iterations(end, end+time.Second)
			}
			b.ReportMetric(float64(rep.Stun)/float64(time.Millisecond), "stun_ms")
			if rep.Remote != nil {
				b.ReportMetric(float64(rep.Remote.Handover)/float64(time.Microsecond), "handover_us")
			}
			b.ReportMetric(float64(rep.WireBytes)/float64(1<<20), "wire_MiB")
			b.ReportMetric(float64(after), "iters_after")
		})
	}
}
