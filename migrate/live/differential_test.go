package live

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate/internal/migtest"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// netClock is the clock of a simulated network: it moves only when bytes
// cross the link.
type netClock struct {
	mu  sync.Mutex
	now time.Duration
}

func (c *netClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Unix(0, 0).Add(c.now)
}

func (c *netClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}

// pacedConn is the source's end of a simulated link: every write takes
// its bytes' time at the link's rate on the clock, and the source host —
// its VMs' workloads — runs for that time, as a Sim advances a host while
// its pages are on the wire.
type pacedConn struct {
	net.Conn
	clock       *netClock
	host        *vgpu.Host
	bytesPerSec int64
}

func (c *pacedConn) Write(p []byte) (int, error) {
	d := time.Duration(int64(len(p)) * int64(time.Second) / c.bytesPerSec)
	c.clock.advance(d)
	if err := c.host.Advance(d); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// TestDifferentialSimLive migrates the same VM, with the same workload,
// over the same link, once with the simulator and once with the live
// driver over a simulated network whose time moves with the bytes sent.
// Both execute the same Core, so they take the same decisions round by
// round: the same number of rounds, the same throttle steps, the same
// switchover reason.
func TestDifferentialSimLive(t *testing.T) {
	link := migrate.Link{Name: "diff", BandwidthBitsPerSec: 40e6, Efficiency: 1}
	costs := migrate.StunCosts{Quiesce: time.Nanosecond} // next to nothing, as the live mode measures on this clock
	for _, tc := range []struct {
		name   string
		policy migrate.Policy
	}{
		{"throttle", migrate.Policy{Throttle: migrate.ThrottleSteps{Start: 0.5, Step: 0.25, Max: 0.9}, MaxRounds: 12}},
		{"switch anyway", migrate.Policy{OnNonConvergence: migrate.SwitchAnyway, MaxRounds: 12}},
		{"abort", migrate.Policy{OnNonConvergence: migrate.Abort, MaxRounds: 12}},
		{"converges", migrate.Policy{StunTarget: 2500 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The simulated pair reads one clock, as a Sim requires; the
			// live pair's clocks are an hour apart, as real hosts' are.
			start := func(pair func(testing.TB, memory.Kind, int) (*vgpu.Host, *vgpu.Host)) (*vgpu.VM, *vgpu.Host) {
				src, dst := pair(t, memory.Sparse, 1)
				vm := inferenceVM(t, src, "vm-d", "P40-1Q", 64*MiB, 16*MiB, tinyModel, 3)
				must(t, src.Advance(time.Second))
				return vm, dst
			}
			vmA, dstA := start(migtest.HostPair)
			migtest.SameClock(t, vmA.Host(), dstA)
			simRep, simErr := migrate.Migrate(vmA, dstA, migrate.Config{Policy: tc.policy, Link: link, Costs: costs, Codec: migrate.CodecNone, Fidelity: migrate.Bytes})

			vmB, dstB := start(hostPair)
			clock := &netClock{}
			sc, dc := pipeConns(t, 1)
			wire := &pacedConn{Conn: sc[0], clock: clock, host: vmB.Host(), bytesPerSec: link.GoodputBytesPerSec()}
			res := liveMigrate(context.Background(), vmB, dstB, []io.ReadWriter{wire}, rws(dc),
				SendConfig{Policy: tc.policy, Engine: migrate.EngineConfig{Level: checkpoint.LevelNone}, Clock: clock}, ReceiveConfig{})
			liveRep := res.srcRep
			if (simErr == nil) != (res.srcErr == nil) || simRep.FailedIn != liveRep.FailedIn {
				t.Fatalf("simulated: %v; live: %v", simErr, res.srcErr)
			}

			t.Logf("simulated: %d rounds, %v; live: %d rounds, %v", len(simRep.Rounds), simRep.Switchover, len(liveRep.Rounds), liveRep.Switchover)
			differ := len(simRep.Rounds) != len(liveRep.Rounds) || simRep.Switchover != liveRep.Switchover || simRep.MaxThrottle != liveRep.MaxThrottle
			if differ || testing.Verbose() {
				for i := range max(len(simRep.Rounds), len(liveRep.Rounds)) {
					var s, l migrate.Round
					if i < len(simRep.Rounds) {
						s = simRep.Rounds[i]
					}
					if i < len(liveRep.Rounds) {
						l = liveRep.Rounds[i]
					}
					t.Logf("round %d: sim %d B in %v, dirty %d, expected %v, throttle %v | live %d B in %v, dirty %d, expected %v, throttle %v",
						i, s.WireBytes, s.Duration, s.DirtyBytes, s.ExpectedStun, s.Throttle, l.WireBytes, l.Duration, l.DirtyBytes, l.ExpectedStun, l.Throttle)
				}
			}
			if differ {
				t.Fatalf("the modes decided differently")
			}
			for i := range simRep.Rounds {
				if simRep.Rounds[i].Throttle != liveRep.Rounds[i].Throttle {
					t.Errorf("round %d: throttle %v simulated, %v live", i, simRep.Rounds[i].Throttle, liveRep.Rounds[i].Throttle)
				}
			}
		})
	}
}
