package live

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// liveBenchRAMBytes is the guest memory a live benchmark moves: all of it
// filled with the realistic mix, the vGPU's framebuffer left untouched.
const liveBenchRAMBytes = 512 << 20

// BenchmarkLiveLoopback is the live path end to end: a VM's guest RAM,
// read, encoded and sent by Send with two workers, received, checked and
// applied by Receive, over one TCP loopback connection, both ends in this
// process. Each iteration moves the VM to the other host. The hosts have
// sparse memory (a dense host reserves 24 GiB per P40, more than a small
// machine lets a process map), so the destination allocates each non-zero
// page it stores: that cost, and the page faults of fresh memory, are part
// of what is measured. Compare it with BenchmarkBaseline/op=tcp and
// BenchmarkCopyEngine in the same run.
func BenchmarkLiveLoopback(b *testing.B) {
	for _, c := range []struct {
		name  string
		level checkpoint.Level
	}{{"none", checkpoint.LevelNone}, {"zstd", checkpoint.LevelFastest}} {
		b.Run("mix=realistic/compress="+c.name, func(b *testing.B) {
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
			cfg := SendConfig{Engine: migrate.EngineConfig{Workers: 2, Level: c.level}}
			b.SetBytes(liveBenchRAMBytes)
			b.ReportAllocs()
			var wire, raw int64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				sc, dc := loopbackConns(b, 1)
				b.StartTimer()
				res := liveMigrate(context.Background(), vm, hosts[(i+1)%2], rws(sc), rws(dc), cfg, ReceiveConfig{})
				if res.srcErr != nil || res.dstErr != nil {
					b.Fatalf("source: %v; destination: %v", res.srcErr, res.dstErr)
				}
				b.StopTimer()
				vm = res.in
				wire, raw = res.srcRep.WireBytes, res.srcRep.RawBytes
				for _, c := range append(sc, dc...) {
					c.Close()
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(wire)/float64(max(raw, 1)), "wire/raw")
		})
	}
}

// tcpBaselineBytes is what BenchmarkBaseline/op=tcp moves per iteration.
const tcpBaselineBytes = 512 << 20

// benchmarkTCP is the live path's limit: raw 1 MiB writes over one TCP
// loopback connection to a reader that discards them.
func benchmarkTCP(b *testing.B) {
	sc, dc := loopbackConns(b, 1)
	buf := make([]byte, 1<<20)
	done := make(chan error, 1)
	go func() {
		rbuf := make([]byte, 1<<20)
		_, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{dc[0]}, rbuf)
		done <- err
	}()
	b.SetBytes(tcpBaselineBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for n := 0; n < tcpBaselineBytes; n += len(buf) {
			if _, err := sc[0].Write(buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	sc[0].(*net.TCPConn).CloseWrite()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBaseline/op=tcp is the loopback connection alone, the ceiling a
// live migration over it cannot pass.
func BenchmarkBaseline(b *testing.B) { b.Run("op=tcp", benchmarkTCP) }
