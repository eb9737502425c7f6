package live

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// liveBenchRAMBytes is the guest memory a live benchmark moves: all of it
// filled with the realistic mix. The VM's P40-1Q framebuffer, 1 GiB, is
// left as the vGPU's context leaves it.
const liveBenchRAMBytes = 2 << 30

// BenchmarkLive is the live path end to end, by codec, engine workers and
// connections: a paused VM's guest RAM and framebuffer read, encoded and
// sent by Send, received, checked and applied by Receive, over K TCP
// loopback connections, both ends in this process. Each iteration moves
// the VM to the other host. The hosts have sparse memory (a dense host
// reserves 24 GiB per P40, more than a small machine lets a process map),
// so the destination allocates each non-zero page it stores: that cost,
// and the page faults of fresh memory, are part of what is measured.
// Throughput counts guest RAM; stun-ms is the source's stun, wire/raw the
// stream against the raw pages. Compare it with BenchmarkBaseline/op=tcp
// and BenchmarkCopyEngine in the same run.
func BenchmarkLive(b *testing.B) {
	for _, codec := range []struct {
		name  string
		level checkpoint.Level
	}{{"none", checkpoint.LevelNone}, {"zstd", checkpoint.LevelFastest}} {
		for _, workers := range []int{1, 2} {
			for _, conns := range []int{1, 2} {
				b.Run(fmt.Sprintf("codec=%s/workers=%d/conns=%d", codec.name, workers, conns), func(b *testing.B) {
					benchmarkLive(b, SendConfig{Engine: migrate.EngineConfig{Workers: workers, Level: codec.level}}, conns)
				})
			}
		}
	}
}

func benchmarkLive(b *testing.B, cfg SendConfig, conns int) {
	hosts := [2]*vgpu.Host{}
	for i := range hosts {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: []string{"a", "b"}[i], Memory: memory.Sparse, Seed: uint64(i + 1)})
		must(b, err)
		hosts[i] = h
	}
	vm, err := hosts[0].CreateVM(vgpu.VMSpec{ID: "bench", RAMBytes: liveBenchRAMBytes, RAMFootprintBytes: liveBenchRAMBytes,
		Profiles: []string{"P40-1Q"}})
	must(b, err)
	must(b, vm.Start())
	must(b, vm.Pause())
	b.SetBytes(liveBenchRAMBytes)
	b.ReportAllocs()
	var wire, raw int64
	var stun time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		sc, dc := loopbackConns(b, conns)
		b.StartTimer()
		res := liveMigrate(context.Background(), vm, hosts[(i+1)%2], rws(sc), rws(dc), cfg, ReceiveConfig{})
		if res.srcErr != nil || res.dstErr != nil {
			b.Fatalf("source: %v; destination: %v", res.srcErr, res.dstErr)
		}
		b.StopTimer()
		vm = res.in
		wire, raw, stun = wire+res.srcRep.WireBytes, raw+res.srcRep.RawBytes, stun+res.srcRep.Stun
		for _, c := range append(sc, dc...) {
			c.Close()
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(wire)/float64(max(raw, 1)), "wire/raw")
	b.ReportMetric(float64(stun.Milliseconds())/float64(b.N), "stun-ms")
}

// tcpBaselineBytes is what BenchmarkBaseline/op=tcp moves per iteration,
// over all its connections.
const tcpBaselineBytes = 512 << 20

// benchmarkTCP is the live path's limit: raw 1 MiB writes over conns TCP
// loopback connections at once, each to a reader that discards them.
func benchmarkTCP(b *testing.B, conns int) {
	sc, dc := loopbackConns(b, conns)
	var readers errgroup.Group
	for _, c := range dc {
		readers.Go(func() error {
			_, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, make([]byte, 1<<20))
			return err
		})
	}
	buf := make([]byte, 1<<20)
	b.SetBytes(tcpBaselineBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var writers errgroup.Group
		for _, c := range sc {
			writers.Go(func() error {
				for n := 0; n < tcpBaselineBytes/conns; n += len(buf) {
					if _, err := c.Write(buf); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err := writers.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, c := range sc {
		c.(*net.TCPConn).CloseWrite()
	}
	if err := readers.Wait(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBaseline/op=tcp/conns=K is the loopback connections alone, the
// ceiling a live migration over them cannot pass (but for the zero pages,
// which it does not send).
func BenchmarkBaseline(b *testing.B) {
	for _, conns := range []int{1, 2} {
		b.Run(fmt.Sprintf("op=tcp/conns=%d", conns), func(b *testing.B) { benchmarkTCP(b, conns) })
	}
}
