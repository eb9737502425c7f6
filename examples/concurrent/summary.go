package main

import (
	"fmt"
	"io"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
)

// group is one profile and mode: its VMs migrated concurrently and one by
// one, summed up.
type group struct {
	profile string
	mode    migrate.Mode
	vms     int

	// makespan is from the first migration's start to the last one's end.
	concurrentMakespan, oneByOneMakespan time.Duration
	// The longest total time of a VM in each schedule, and the ratio of
	// each VM's concurrent total time to its time alone.
	concurrentMaxTotal, aloneMaxTotal time.Duration
	minSlowdown, maxSlowdown          float64
	// The stun's percentiles in each schedule (migrate.Summarize), and
	// whether every stun of both met the 1 s standard.
	concurrentStun, oneByOneStun migrate.StunPercentiles
	allMeet                      bool
	// The workload's p99 latency, the worst over the VMs, before the
	// concurrent migrations, during them and after; its throughput,
	// summed over the VMs, before and during.
	beforeP99, duringP99, afterP99 time.Duration
	beforePerSec, duringPerSec     float64
}

// summarize groups rows by profile and mode, in the order they come.
func summarize(rows []row) []group {
	var gs []group
	index := map[string]int{}
	reports := map[string][]*migrate.Report{} // by profile, mode and schedule
	alone := map[string]time.Duration{}       // total time alone, by profile, mode and VM
	key := func(r row) string { return r.profile + "/" + r.mode.String() }
	for _, r := range rows {
		if r.schedule == oneByOne {
			alone[key(r)+"/"+r.vm] = r.total
		}
	}
	for _, r := range rows {
		i, ok := index[key(r)]
		if !ok {
			i = len(gs)
			index[key(r)] = i
			gs = append(gs, group{profile: r.profile, mode: r.mode, allMeet: true})
		}
		g := &gs[i]
		g.allMeet = g.allMeet && r.meets
		reports[key(r)+"/"+r.schedule] = append(reports[key(r)+"/"+r.schedule], r.report)
		if r.schedule == oneByOne {
			g.oneByOneMakespan = max(g.oneByOneMakespan, r.end)
			g.aloneMaxTotal = max(g.aloneMaxTotal, r.total)
			continue
		}
		g.vms++
		g.concurrentMakespan = max(g.concurrentMakespan, r.end)
		g.concurrentMaxTotal = max(g.concurrentMaxTotal, r.total)
		if a := alone[key(r)+"/"+r.vm]; a > 0 {
			s := r.total.Seconds() / a.Seconds()
			if g.vms == 1 || s < g.minSlowdown {
				g.minSlowdown = s
			}
			g.maxSlowdown = max(g.maxSlowdown, s)
		}
		g.beforeP99 = max(g.beforeP99, r.before.LatencyP99)
		g.duringP99 = max(g.duringP99, r.during.LatencyP99)
		g.afterP99 = max(g.afterP99, r.after.LatencyP99)
		g.beforePerSec += r.before.ThroughputPerSec
		g.duringPerSec += r.during.ThroughputPerSec
	}
	for i := range gs {
		g := &gs[i]
		k := g.profile + "/" + g.mode.String()
		g.concurrentStun = migrate.Summarize(reports[k+"/"+concurrent]).Stun
		g.oneByOneStun = migrate.Summarize(reports[k+"/"+oneByOne]).Stun
	}
	return gs
}

// writeSummary prints, under the table, each group in a few sentences: the
// comparison the seed's Figure 2 is about; then what the columns measure.
func writeSummary(w io.Writer, p params, gs []group) error {
	item := "frames"
	if p.workload == workloadInference {
		item = "requests"
	}
	for _, g := range gs {
		fmt.Fprintf(w, "%s %v: %d concurrent migrations all ended after %.1f s; one by one they took %.1f s in all.\n",
			g.profile, g.mode, g.vms, g.concurrentMakespan.Seconds(), g.oneByOneMakespan.Seconds())
		slowdown := fmt.Sprintf("%.2f to %.2f", g.minSlowdown, g.maxSlowdown)
		if lo := fmt.Sprintf("%.2f", g.minSlowdown); lo == fmt.Sprintf("%.2f", g.maxSlowdown) {
			slowdown = lo
		}
		fmt.Fprintf(w, "  Sharing the link, each VM took %s times as long as alone.\n", slowdown)
		meets := "every stun met vMotion's 1 s standard"
		if !g.allMeet {
			meets = "not every stun met vMotion's 1 s standard"
		}
		fmt.Fprintf(w, "  Stun median %.3f s, longest %.3f s concurrent; %.3f s, %.3f s one by one; %s.\n",
			g.concurrentStun.P50.Seconds(), g.concurrentStun.Max.Seconds(), g.oneByOneStun.P50.Seconds(), g.oneByOneStun.Max.Seconds(), meets)
		fmt.Fprintf(w, "  Concurrent: worst p99 latency %.1f ms before, %.1f ms during, %.1f ms after; %.1f %s/s before, %.1f during (all VMs).\n",
			float64(g.beforeP99)/1e6, float64(g.duringP99)/1e6, float64(g.afterP99)/1e6, g.beforePerSec, item, g.duringPerSec)
	}
	fmt.Fprintln(w, "before_*: over the second before a VM's migration started; during_*: from its start to its end; after_*: over the")
	fmt.Fprintln(w, "second after its end, when what the stun held up completes. Each item counts where it completes.")
	if p.workload == workloadCAD {
		// A frame's latency runs from its submission: only the frame on
		// the GPU at the stun waits it out; those due during it are
		// never rendered.
		fmt.Fprintln(w, "A frame's latency runs from its submission: the frame on the GPU when the VM is stunned completes after the resume,")
		fmt.Fprintln(w, "the stun added to it (after_p99_ms); the frames due during the stun are never rendered (during_per_s).")
	}
	_, err := fmt.Fprintln(w, "-csv and -json also hold each migration's end, rounds and bytes on the wire, throughput after, and mean and maximum latency.")
	return err
}
