package live

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
)

// BenchmarkLivePaired runs, in every iteration, one live migration of
// BenchmarkLive's VM and the reference it is held to, in alternating
// order, and reports the median of the per-iteration ratios of their
// rates, as BenchmarkEngineVsFloor does for the engine: on a machine
// shared with other work the separate benchmarks run minutes apart under
// different loads, and vary more from run to run than the gaps they
// measure; this ratio does not drift with the load.
//
//   - ref=tcp: raw 1 MiB writes of as many bytes as the VM has guest RAM,
//     over as many loopback connections, against a migration with
//     compression off. live/tcp at 1 or more means guest RAM moves at
//     least as fast as the socket carries bytes.
//   - ref=engine: the copy engine alone, with the migration's workers and
//     codec, over the VM's guest RAM and framebuffer into a
//     checkpoint.Writer on io.Discard. live/engine is the share of the
//     engine's rate the whole live path keeps.
//
// Each iteration moves the guest RAM twice, so its MB/s counts it twice.
func BenchmarkLivePaired(b *testing.B) {
	for _, c := range []struct {
		ref   string
		codec migrate.Codec
	}{{"tcp", migrate.CodecNone}, {"engine", migrate.CodecZstd}} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("ref=%s/codec=%s/workers=%d/conns=1", c.ref, c.codec, workers), func(b *testing.B) {
				lb := newLiveBench(b, liveBenchRAMBytes)
				cfg := benchSendConfig(c.codec, workers)
				var ref func() time.Duration
				if c.ref == "tcp" {
					l := newTCPLink(b, 1)
					defer l.close(b)
					ref = func() time.Duration {
						start := time.Now()
						must(b, l.send(liveBenchRAMBytes))
						return time.Since(start)
					}
				} else {
					ref = engineReference(b, lb, cfg.Engine)
				}
				b.SetBytes(2 * liveBenchRAMBytes)
				b.ReportAllocs()
				ratios := make([]float64, 0, b.N)
				b.ResetTimer()
				for i := range b.N {
					var live, other time.Duration
					for j := range 2 {
						// Each side starts on a collected heap, so
						// that neither pays for the other's garbage:
						// the migration's destination then stores into
						// fresh memory, as BenchmarkLive's does.
						b.StopTimer()
						runtime.GC()
						b.StartTimer()
						if (i+j)%2 == 0 {
							_, live = lb.migrate(b, cfg, 1, nil)
						} else {
							other = ref()
						}
					}
					ratios = append(ratios, float64(other)/float64(live))
				}
				slices.Sort(ratios)
				b.ReportMetric(ratios[len(ratios)/2], "live/"+c.ref)
			})
		}
	}
}

// engineReference returns a run of the copy engine alone, configured as
// cfg, over the guest RAM and framebuffers of lb's VM, wherever the VM is
// when it runs, into a checkpoint.Writer on io.Discard; it returns how
// long the copy took.
func engineReference(b *testing.B, lb *liveBench, cfg migrate.EngineConfig) func() time.Duration {
	e, err := migrate.NewEngine(cfg)
	must(b, err)
	b.Cleanup(func() { e.Close() })
	return func() time.Duration {
		regions := append([]*memory.Region{lb.vm.RAM()}, lb.vm.Framebuffers()...)
		meta := checkpoint.Metadata{}
		for i, r := range regions {
			meta.Regions = append(meta.Regions, checkpoint.RegionInfoOf(uint32(i), r))
		}
		w, err := checkpoint.NewWriter(io.Discard, meta, checkpoint.WriterOptions{BatchBytes: e.Config().BatchBytes})
		must(b, err)
		sets := make([]*memory.PageSet, len(regions))
		for i, r := range regions {
			sets[i] = memory.NewPageSet(r.Pages())
			for p := range r.Pages() {
				sets[i].Add(p)
			}
		}
		start := time.Now()
		for i, r := range regions {
			_, err := e.Copy(context.Background(), w, r, uint32(i), sets[i])
			must(b, err)
		}
		return time.Since(start)
	}
}
