package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/examples/tabular"
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latencyCells are a mean and a p99 latency in ms, empty when nothing
// was served.
func latencyCells(served bool, mean, p99 time.Duration) (string, string) {
	if !served {
		return "", ""
	}
	return millis(ms(mean)), millis(ms(p99))
}

// timelineTable is every step of every run, for -csv and -json.
func timelineTable(runs []serviceRun) *tabular.Table {
	t := newTable(text("model"), text("run"), number("t_s"), number("served"),
		number("dropped"), number("mean_ms"), number("p99_ms"), text("phase"),
		number("stunned_ms"), text("host"))
	for _, r := range runs {
		for _, k := range r.ticks {
			mean, p99 := latencyCells(k.served > 0, k.mean, k.p99)
			t.Rows = append(t.Rows, []string{k.model, k.run, seconds(k.at.Seconds()), count(k.served),
				count(k.dropped), mean, p99, k.phase, millis(ms(k.stunned)), k.host})
		}
	}
	return t
}

// printedTimeline is one model's runs side by side, a row every
// p.printStep: requests served and latency over the row, and each
// migration's phase at its end, marked with the stun it held.
func printedTimeline(p params, runs []serviceRun) *tabular.Table {
	t := newTable(number("t_s"))
	for _, r := range runs {
		t.Columns = append(t.Columns, number(r.name+"_served"), number(r.name+"_mean_ms"),
			number(r.name+"_p99_ms"))
		if r.report != nil {
			t.Columns = append(t.Columns, text(r.name+"_phase"))
		}
	}
	for to := p.printStep; to <= p.duration; to += p.printStep {
		from := to - p.printStep
		row := []string{seconds(to.Seconds())}
		for _, r := range runs {
			m := r.service.Metrics(from, to)
			mean, p99 := latencyCells(m.Completed > 0, m.LatencyMean, m.LatencyP99)
			row = append(row, count(m.Completed), mean, p99)
			if r.report != nil {
				row = append(row, phaseCell(r, from, to))
			}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// phaseCell is the migration's phase at to, with the stun the row held.
func phaseCell(r serviceRun, from, to time.Duration) string {
	var phase string
	var stunned time.Duration
	for _, k := range r.ticks {
		if k.at > from && k.at <= to {
			phase, stunned = k.phase, stunned+k.stunned
		}
	}
	if stunned > 0 {
		return fmt.Sprintf("%s (stun %.2f s)", phase, stunned.Seconds())
	}
	return phase
}

// summaryTable is the migrations' effect on the service.
func summaryTable(out []outcome) *tabular.Table {
	t := newTable(text("model"), text("mode"), number("stun_s"), number("migration_s"),
		number("delayed"), number("recovery_s"), number("worst_latency_s"),
		number("served_during"), number("served_during_no_migration"), number("throughput_lost_pct"),
		number("dropped"))
	for _, o := range out {
		t.Rows = append(t.Rows, []string{o.model, o.mode, seconds(o.stun.Seconds()), seconds(o.total.Seconds()),
			count(o.delayed), seconds(o.recovered.Seconds()), seconds(o.worst.Seconds()),
			count(o.servedDuring), count(o.baselineDuring), percent(o.lostPct), count(o.dropped)})
	}
	return t
}

// experimentsTable is Experiments 1 and 2, one row per model, profile and
// rate, for -csv and -json.
func experimentsTable(pts []point) *tabular.Table {
	t := newTable(text("experiment"), text("model"), text("profile"),
		number("offered_per_s"), number("served_per_s"), number("mean_ms"), number("p99_ms"),
		number("refused_pct"))
	for _, pt := range pts {
		mean, p99 := latencyCells(pt.served > 0, pt.mean, pt.p99)
		t.Rows = append(t.Rows, []string{pt.experiment, pt.model, pt.profile, perSec(pt.offered),
			perSec(pt.served), mean, p99, percent(100 * pt.refused)})
	}
	return t
}

// printedExperiments puts the two models side by side, with MobileNet's
// advantage in throughput and latency.
func printedExperiments(pts []point) *tabular.Table {
	t := newTable(text("experiment"), text("profile"), number("offered_per_s"))
	for _, m := range models {
		n := strings.ReplaceAll(m.name, "-", "")
		t.Columns = append(t.Columns, number(n+"_per_s"), number(n+"_mean_ms"))
	}
	t.Columns = append(t.Columns, number("throughput_x"), number("latency_x"))
	for _, pair := range pairs(pts) {
		a, b := pair[0], pair[1]
		row := []string{a.experiment, a.profile, perSec(a.offered)}
		for _, pt := range pair {
			mean, _ := latencyCells(pt.served > 0, pt.mean, pt.p99)
			row = append(row, perSec(pt.served), mean)
		}
		tx, lx := "", ""
		if a.served > 0 && b.mean > 0 {
			tx = fmt.Sprintf("%.2f", b.served/a.served)
			lx = fmt.Sprintf("%.2f", float64(a.mean)/float64(b.mean))
		}
		t.Rows = append(t.Rows, append(row, tx, lx))
	}
	return t
}

// pairs groups the points by experiment, profile and rate: Inception V3
// first, MobileNet second, as simulateExperiments runs them.
func pairs(pts []point) [][2]point {
	var out [][2]point
	for i := 0; i+1 < len(pts); i += len(models) {
		out = append(out, [2]point{pts[i], pts[i+1]})
	}
	return out
}

// verdict says whether Experiments 1 and 2 have the document's shape:
// MobileNet, with a ninth of Inception V3's MACs, serves more requests per
// second on every profile at capacity (Experiment 1) and at least as many
// (within 5 %, the arrivals' noise) at every rate (Experiment 2), at a
// lower mean latency everywhere.
func verdict(pts []point) (string, bool) {
	lo, hi := math.Inf(1), 0.0
	var bad []string
	for _, pair := range pairs(pts) {
		a, b := pair[0], pair[1]
		where := fmt.Sprintf("experiment %s, %s at %.0f/s", a.experiment, a.profile, a.offered)
		switch {
		case b.mean >= a.mean:
			bad = append(bad, where+": MobileNet is not faster")
		case a.experiment == expProfiles && b.served <= a.served:
			bad = append(bad, where+": MobileNet does not serve more")
		case b.served < 0.95*a.served:
			bad = append(bad, where+": MobileNet serves less")
		}
		if a.experiment == expProfiles {
			x := b.served / max(a.served, 1e-9)
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	if hi == 0 {
		bad = append(bad, "no profile at capacity to compare")
	}
	if len(bad) > 0 {
		return "Shape does NOT match the document: " + strings.Join(bad, "; ") + ".", false
	}
	return fmt.Sprintf("Shape matches the document: MobileNet (a ninth of Inception V3's MACs) serves %.1fx to %.1fx as many\n"+
		"requests per second at capacity, at least as many at every rate, at a lower mean latency everywhere.", lo, hi), true
}
