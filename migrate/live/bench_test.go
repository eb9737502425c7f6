package live

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
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
	for _, codec := range benchCodecs {
		for _, workers := range migtest.BenchWorkers() {
			for _, conns := range benchConns() {
				b.Run(fmt.Sprintf("codec=%s/workers=%d/conns=%d", codec, workers, conns), func(b *testing.B) {
					benchmarkLive(b, benchSendConfig(codec, workers), conns, liveBenchRAMBytes, nil)
				})
			}
		}
	}
}

// benchCodecs are the codecs the live benchmarks compare.
var benchCodecs = []migrate.Codec{migrate.CodecNone, migrate.CodecS2, migrate.CodecZstd, migrate.CodecAuto}

// benchSendConfig is the source's configuration for codec on workers.
func benchSendConfig(codec migrate.Codec, workers int) SendConfig {
	return SendConfig{Engine: migrate.EngineConfig{Workers: workers, Level: codec.Level()}, AdaptiveCodec: codec == migrate.CodecAuto}
}

// benchConns are the connections the benchmarks try: 1, 2 and, with 8
// cores or more, 4.
func benchConns() []int {
	if runtime.GOMAXPROCS(0) >= 8 {
		return []int{1, 2, 4}
	}
	return []int{1, 2}
}

// rateBenchRAMBytes is the guest memory BenchmarkLiveRate moves: a quarter
// of BenchmarkLive's, so that 1 Gbit/s takes seconds, not tens.
const rateBenchRAMBytes = 512 << 20

// BenchmarkLiveRate is the adaptive codec against each static one, over
// a link limited to 1, 10 and 40 Gbit/s, and unlimited: two connections
// sharing the limit, two engine workers, a paused VM of 512 MiB of guest
// RAM in the realistic mix. The adaptive codec should be within 5 % of the
// best static codec at every rate.
func BenchmarkLiveRate(b *testing.B) {
	for _, rate := range []struct {
		name string
		bps  float64
	}{{"1G", 1e9}, {"10G", 10e9}, {"40G", 40e9}, {"unlimited", 0}} {
		for _, codec := range benchCodecs {
			b.Run(fmt.Sprintf("rate=%s/codec=%s", rate.name, codec), func(b *testing.B) {
				var lim *linkLimiter
				if rate.bps > 0 {
					lim = &linkLimiter{bytesPerSec: rate.bps / 8}
				}
				benchmarkLive(b, benchSendConfig(codec, 2), 2, rateBenchRAMBytes, lim)
			})
		}
	}
}

// linkLimiter holds the writes of a link's connections to its rate, all
// together: each write waits its turn, as long as its bytes take at the
// rate. Sleeps are no finer than the timer's resolution, so that at high
// rates the link runs a little slower than it says.
type linkLimiter struct {
	bytesPerSec float64
	mu          sync.Mutex
	next        time.Time
}

func (l *linkLimiter) wait(n int) {
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	l.next = l.next.Add(time.Duration(float64(n) / l.bytesPerSec * float64(time.Second)))
	until := l.next
	l.mu.Unlock()
	time.Sleep(time.Until(until))
}

// limitedConn is a connection whose writes a linkLimiter holds.
type limitedConn struct {
	net.Conn
	lim *linkLimiter
}

func (c limitedConn) Write(p []byte) (int, error) {
	c.lim.wait(len(p))
	return c.Conn.Write(p)
}

func benchmarkLive(b *testing.B, cfg SendConfig, conns int, ramBytes int64, lim *linkLimiter) {
	lb := newLiveBench(b, ramBytes)
	b.SetBytes(ramBytes)
	b.ReportAllocs()
	var wire, raw int64
	var stun time.Duration
	b.ResetTimer()
	for range b.N {
		res, _ := lb.migrate(b, cfg, conns, lim)
		wire, raw, stun = wire+res.srcRep.WireBytes, raw+res.srcRep.RawBytes, stun+res.srcRep.Stun
	}
	b.ReportMetric(float64(wire)/float64(max(raw, 1)), "wire/raw")
	b.ReportMetric(float64(stun.Milliseconds())/float64(b.N), "stun-ms")
}

// liveBench is a paused VM, filled with the realistic mix, that the live
// benchmarks move from host to host.
type liveBench struct {
	hosts [2]*vgpu.Host
	vm    *vgpu.VM
	moves int
}

// newLiveBench makes two hosts with sparse memory (a dense host reserves
// 24 GiB per P40, more than a small machine lets a process map) and a
// paused P40-1Q VM of ramBytes of guest RAM, all of it in use.
func newLiveBench(b *testing.B, ramBytes int64) *liveBench {
	b.Helper()
	lb := &liveBench{}
	for i := range lb.hosts {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: []string{"a", "b"}[i], Memory: memory.Sparse, Seed: uint64(i + 1)})
		must(b, err)
		lb.hosts[i] = h
	}
	vm, err := lb.hosts[0].CreateVM(vgpu.VMSpec{ID: "bench", RAMBytes: ramBytes, RAMFootprintBytes: ramBytes,
		Profiles: []string{"P40-1Q"}})
	must(b, err)
	must(b, vm.Start())
	must(b, vm.Pause())
	lb.vm = vm
	return lb
}

// migrate moves the VM to the other host over conns fresh loopback
// connections, their writes held to lim if it is not nil, and returns
// what both ends returned and how long the migration took. The benchmark
// timer runs for the migration alone.
func (lb *liveBench) migrate(b *testing.B, cfg SendConfig, conns int, lim *linkLimiter) (liveResult, time.Duration) {
	b.StopTimer()
	sc, dc := loopbackConns(b, conns)
	src := rws(sc)
	if lim != nil {
		for j, c := range sc {
			src[j] = limitedConn{Conn: c, lim: lim}
		}
	}
	b.StartTimer()
	start := time.Now()
	res := liveMigrate(context.Background(), lb.vm, lb.hosts[(lb.moves+1)%2], src, rws(dc), cfg, ReceiveConfig{})
	took := time.Since(start)
	b.StopTimer()
	if res.srcErr != nil || res.dstErr != nil {
		b.Fatalf("source: %v; destination: %v", res.srcErr, res.dstErr)
	}
	lb.vm = res.in
	lb.moves++
	for _, c := range append(sc, dc...) {
		c.Close()
	}
	b.StartTimer()
	return res, took
}

// tcpBaselineBytes is what BenchmarkBaseline/op=tcp moves per iteration,
// over all its connections.
const tcpBaselineBytes = 512 << 20

// benchmarkTCP is the live path's limit: raw 1 MiB writes over conns TCP
// loopback connections at once, each to a reader that discards them.
func benchmarkTCP(b *testing.B, conns int) {
	l := newTCPLink(b, conns)
	b.SetBytes(tcpBaselineBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		must(b, l.send(tcpBaselineBytes))
	}
	b.StopTimer()
	l.close(b)
}

// tcpLink is conns TCP loopback connections, each read by a goroutine that
// discards what it reads.
type tcpLink struct {
	sc, dc  []net.Conn
	readers errgroup.Group
	buf     []byte
}

func newTCPLink(b *testing.B, conns int) *tcpLink {
	l := &tcpLink{buf: make([]byte, 1<<20)}
	l.sc, l.dc = loopbackConns(b, conns)
	for _, c := range l.dc {
		l.readers.Go(func() error {
			_, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, make([]byte, 1<<20))
			return err
		})
	}
	return l
}

// send writes n bytes, in 1 MiB writes, spread evenly over the
// connections, all at once.
func (l *tcpLink) send(n int64) error {
	var writers errgroup.Group
	for _, c := range l.sc {
		writers.Go(func() error {
			for sent := int64(0); sent < n/int64(len(l.sc)); sent += int64(len(l.buf)) {
				if _, err := c.Write(l.buf); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return writers.Wait()
}

// close ends the connections and waits for the readers.
func (l *tcpLink) close(b *testing.B) {
	for _, c := range l.sc {
		c.(*net.TCPConn).CloseWrite()
	}
	must(b, l.readers.Wait())
}

// BenchmarkBaseline/op=tcp/conns=K is the loopback connections alone, the
// ceiling a live migration over them cannot pass (but for the zero pages,
// which it does not send).
func BenchmarkBaseline(b *testing.B) {
	for _, conns := range benchConns() {
		b.Run(fmt.Sprintf("op=tcp/conns=%d", conns), func(b *testing.B) { benchmarkTCP(b, conns) })
	}
}
