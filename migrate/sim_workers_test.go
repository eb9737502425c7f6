package migrate_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
)

// TestHostWorkersSameRun runs the cluster benchmark's world, a rolling
// maintenance of two hosts, with the hosts advanced one after another and
// four at once: the events, where every VM is, what its workload did, its
// GPU time and every page of its memory (as runs of class and generation)
// must be the same.
func TestHostWorkersSameRun(t *testing.T) {
	// Under the race detector, long enough for the hosts' workloads to
	// run side by side; else to a migration's switchover too.
	sim := 8 * time.Second
	if raceDetector {
		sim = time.Second
	}
	run := func(workers int) []string {
		s, hosts := clusterWorld(t, 2, migrate.SimConfig{HostWorkers: workers})
		var out []string
		for _, e := range rollingMaintenance(t, s, hosts, sim) {
			out = append(out, e.String())
		}
		for _, h := range hosts {
			for _, vm := range h.VMs() {
				line := fmt.Sprintf("%s on %s: %v, GPU time %v", vm.ID(), h.Name(), vm.State(), vm.GPUTime())
				if w := vm.Workload(); w != nil { // none on a migration's destination yet
					line += ", " + w.Metrics(0, s.Now()).String()
				}
				out = append(out, line)
				for _, r := range append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...) {
					runs, err := r.AppendRuns(nil, 0, r.Pages())
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, fmt.Sprint(runs))
				}
			}
		}
		return out
	}
	one, four := run(1), run(4)
	if !slices.Equal(one, four) {
		for i := range min(len(one), len(four)) {
			if one[i] != four[i] {
				t.Fatalf("line %d differs:\n one at a time %.300s\n four at once  %.300s", i, one[i], four[i])
			}
		}
		t.Fatalf("%d lines one at a time, %d four at once", len(one), len(four))
	}
	if !raceDetector && !slices.ContainsFunc(one, func(l string) bool { return strings.Contains(l, "switchover") }) {
		t.Fatalf("no migration reached its switchover: %.2000s", strings.Join(one, "\n"))
	}
	if _, err := migrate.NewSim(migrate.SimConfig{HostWorkers: -1}); err == nil {
		t.Error("negative host workers accepted")
	}
}
