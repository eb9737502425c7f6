package migrate_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
	"github.com/vgpusim/vgpusim/vgpu"
)

// clusterSimEnv overrides the simulated time of BenchmarkCluster's runs, a
// Go duration ("10m"), for shorter runs than the minute and the hour they
// simulate by default.
const clusterSimEnv = "VGPUSIM_CLUSTER_SIM"

// BenchmarkCluster simulates a data centre: hosts with two P40s each and
// eight VMs a host — on one P40 two P40-6Q VMs, one serving Inception V3
// from its whole framebuffer and one training MobileNet with its whole
// framebuffer as weights; on the other six P40-2Q VMs, two rendering CAD
// frames and four desktops — for simulated time sim, with a rolling
// maintenance that evacuates every host in turn (Sim.Evacuate), driven
// from event to event by NextEventAt and AdvanceTo as a discrete-event
// simulator drives it. It reports sim-s/wall-s, simulated seconds per
// second of wall time, and peak-heap-MiB.
func BenchmarkCluster(b *testing.B) {
	for _, c := range []struct {
		hosts int
		sim   time.Duration
	}{{10, time.Minute}, {100, time.Hour}} {
		sim := c.sim
		if d, err := time.ParseDuration(os.Getenv(clusterSimEnv)); err == nil && d > 0 {
			sim = d
		}
		b.Run(fmt.Sprintf("hosts=%d/vms=%d", c.hosts, 8*c.hosts), func(b *testing.B) {
			b.ReportAllocs()
			var wall time.Duration
			var peak float64
			for range b.N {
				b.StopTimer()
				// Hosts one after another: driven event by event, the
				// hosts have too little to do between two events for
				// HostWorkers to pay.
				sim0, hosts := clusterWorld(b, c.hosts, migrate.SimConfig{})
				runtime.GC()
				heap := migtest.StartPeakHeap(10 * time.Millisecond)
				start := time.Now()
				b.StartTimer()
				rollingMaintenance(b, sim0, hosts, sim)
				b.StopTimer()
				wall += time.Since(start)
				peak = max(peak, heap.Stop())
				b.StartTimer()
			}
			b.ReportMetric(sim.Seconds()*float64(b.N)/wall.Seconds(), "sim-s/wall-s")
			b.ReportMetric(peak, "peak-heap-MiB")
		})
	}
}

// clusterWorld builds the hosts and their VMs, all running, in one Sim of
// cfg.
func clusterWorld(b testing.TB, n int, cfg migrate.SimConfig) (*migrate.Sim, []*vgpu.Host) {
	var hosts []*vgpu.Host
	for i := range n {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: fmt.Sprintf("h%03d", i), GPUs: 2, Placement: vgpu.DepthFirst, Seed: uint64(i + 1)})
		if err != nil {
			b.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	p6, _ := vgpu.ParseProfile("P40-6Q")
	for i, h := range hosts {
		seed := uint64(i) * 16
		inf, err := vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.InceptionV3(), RequestsPerSec: 20, FootprintBytes: p6.UsableFramebufferBytes(), Seed: seed + 1})
		migtest.Must(b, err)
		tr, err := vgpu.NewTraining(vgpu.TrainingConfig{Model: vgpu.MobileNet(), FootprintBytes: p6.UsableFramebufferBytes(), Seed: seed + 2})
		migtest.Must(b, err)
		ws := []vgpu.Workload{inf, tr}
		for k := range 2 {
			cad, err := vgpu.NewCAD(vgpu.CADConfig{TargetFPS: 30, SceneBytes: 1 << 30, Seed: seed + 3 + uint64(k)})
			migtest.Must(b, err)
			ws = append(ws, cad)
		}
		for k := range 4 {
			d, err := vgpu.NewDesktop(vgpu.DesktopConfig{Seed: seed + 5 + uint64(k)})
			migtest.Must(b, err)
			ws = append(ws, d)
		}
		for k, w := range ws {
			prof, ram := "P40-2Q", int64(8<<30)
			if k < 2 {
				prof = p6.Name
			}
			if k == 1 {
				ram = 24 << 30 // the optimizer state, twice the weights
			}
			vm, err := h.CreateVM(vgpu.VMSpec{ID: fmt.Sprintf("%s-vm%d", h.Name(), k), RAMBytes: ram, RAMFootprintBytes: 1 << 30,
				Profiles: []string{prof}, Workload: w})
			migtest.Must(b, err)
			migtest.Must(b, vm.Start())
		}
	}
	s, err := migrate.NewSim(cfg, hosts...)
	migtest.Must(b, err)
	return s, hosts
}

// hostNIC is the 10 GbE NIC of the host named name: each migration of the
// benchmark crosses its source's and its destination's.
func hostNIC(name string) migrate.Link {
	l := migrate.GbE10()
	l.Name = "nic-" + name
	return l
}

// rollingMaintenance evacuates host i at i/len(hosts) of the way through
// sim, to every other host, each migration crossing the two hosts' NICs,
// driving the Sim from event to event. It returns the events.
func rollingMaintenance(b testing.TB, s *migrate.Sim, hosts []*vgpu.Host, sim time.Duration) []migrate.Event {
	var events []migrate.Event
	start, next := s.Now(), 0
	end := start + sim
	every := sim / time.Duration(len(hosts))
	for {
		for next < len(hosts) && s.Now() >= start+time.Duration(next)*every {
			others := slices.Delete(slices.Clone(hosts), next, next+1)
			from := hosts[next].Name()
			path := func(dst *vgpu.Host) []migrate.Link { return []migrate.Link{hostNIC(from), hostNIC(dst.Name())} }
			if _, err := s.Evacuate(hosts[next], others, migrate.EvacuateConfig{Placement: vgpu.BreadthFirst, Path: path}); err != nil {
				b.Fatal(err)
			}
			next++
		}
		at, ok := s.NextEventAt()
		if next < len(hosts) {
			if due := start + time.Duration(next)*every; !ok || due < at {
				at, ok = due, true
			}
		}
		if !ok || at > end {
			break
		}
		evs, err := s.AdvanceTo(at)
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, evs...)
	}
	evs, err := s.AdvanceTo(end)
	if err != nil {
		b.Fatal(err)
	}
	return append(events, evs...)
}

// BenchmarkSimSteps moves the cluster of BenchmarkCluster, ten hosts, by
// steps of a tenth of a second with no migration, advancing its hosts one
// after another or several at once (SimConfig.HostWorkers). It reports
// sim-s/wall-s.
func BenchmarkSimSteps(b *testing.B) {
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("hosts=10/workers=%d", workers), func(b *testing.B) {
			const steps, step = 50, 100 * time.Millisecond
			var wall time.Duration
			for range b.N {
				b.StopTimer()
				s, _ := clusterWorld(b, 10, migrate.SimConfig{HostWorkers: workers})
				start := time.Now()
				b.StartTimer()
				for range steps {
					if _, err := s.Advance(step); err != nil {
						b.Fatal(err)
					}
				}
				wall += time.Since(start)
			}
			b.ReportMetric((steps*step).Seconds()*float64(b.N)/wall.Seconds(), "sim-s/wall-s")
		})
	}
}
