package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/vgpusim/vgpusim/examples/figure"
	"github.com/vgpusim/vgpusim/examples/tabular"
)

func number(name string) tabular.Column { return tabular.Column{Name: name, Kind: tabular.Number} }

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
func millis(d time.Duration) string  { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }

// migrationTable has a row per migration, in the order they started: the
// host whose maintenance moved it, the move, and what the VM's workload
// saw over the second before it and the second after (requests for
// inference, iterations for training; the longest wait after is the item
// the stun held up).
func migrationTable(res result) *tabular.Table {
	t := &tabular.Table{Blank: "-", NoNull: true, Columns: []tabular.Column{
		{Name: "maintenance"}, {Name: "vm"}, {Name: "workload"}, {Name: "to"},
		number("start_s"), number("total_s"), number("stun_s"), {Name: "meets_1s", Kind: tabular.Bool},
		number("before_p99_ms"), number("after_p99_ms"), number("after_max_ms"),
	}}
	for i, m := range res.migs {
		if i > 0 && m.round != res.migs[i-1].round {
			t.Break()
		}
		r := m.rep
		yes := "no"
		if r.MeetsStandard() {
			yes = "yes"
		}
		t.Add(res.rounds[m.round].host, r.VM, m.kind, r.Destination, seconds(r.Start-res.start), seconds(r.Total),
			seconds(r.Stun), yes, millis(r.Before.LatencyP99), millis(r.After.LatencyP99), millis(r.After.LatencyMax))
	}
	return t
}

// utilizationTable has a row per step of the run (every second in the
// files, every every seconds printed) and a column per host: the mean GPU
// utilization of its P40s over that second, in percent.
func utilizationTable(res result) *tabular.Table { return utilizationEvery(res, 1) }

func utilizationEvery(res result, every int) *tabular.Table {
	t := &tabular.Table{Columns: []tabular.Column{number("second")}}
	for _, h := range res.hosts {
		t.Columns = append(t.Columns, number(h))
	}
	for k := 0; k < len(res.util[0]); k += every {
		row := []string{strconv.Itoa(k)}
		for h := range res.hosts {
			row = append(row, strconv.FormatFloat(100*res.util[h][k], 'f', 1, 64))
		}
		t.Add(row...)
	}
	return t
}

// report prints the heading, the migrations, the stun distribution, each
// host's evacuation and the utilization every five seconds.
func report(w io.Writer, p params, res result) error {
	fmt.Fprintf(w, "Rolling maintenance of %d hosts with two P40s each, %d VMs on each: %d serving Inception V3\n",
		p.hosts, p.inference+p.training, p.inference)
	fmt.Fprintf(w, "(%s, %d requests/s) and %d training MobileNet (%s); each host evacuated in turn over 10 GbE,\n",
		inferenceProfile, requestsPerSec, p.training, trainingProfile)
	fmt.Fprintf(w, "%d migrations at a time per host, then down for %v.\n\n", maxPerHost, p.down)
	if err := migrationTable(res).WriteText(w); err != nil {
		return err
	}
	s := res.summary.Stun
	fmt.Fprintf(w, "\n%d migrations, %d VMs left where they were; stun p50 %s s, p90 %s s, p99 %s s, max %s s.\n",
		len(res.migs), len(res.left), seconds(s.P50), seconds(s.P90), seconds(s.P99), seconds(s.Max))
	for _, r := range res.rounds {
		fmt.Fprintf(w, "%s: empty %s s after its evacuation began, back at %s s.\n", r.host, seconds(r.empty-r.start), seconds(r.back-res.start))
	}
	fmt.Fprintln(w, "\nGPU utilization per host (%, the mean of its P40s), every 5 s:")
	return utilizationEvery(res, 5).WriteText(w)
}

// buildFigure draws each migration's stun against the 1 s standard, and
// each host's GPU utilization over time.
func buildFigure(p params, res result) figure.Figure {
	stun := figure.Series{Name: "stun", Kind: figure.Points}
	for _, m := range res.migs {
		stun.Points = append(stun.Points, figure.Point{X: (m.rep.Start - res.start).Seconds(), Y: m.rep.Stun.Seconds()})
	}
	util := figure.Panel{Title: "GPU utilization per host (mean of its P40s)", X: figure.Axis{Label: "time", Unit: "s"},
		Y: figure.Axis{Label: "utilization", Unit: "%"}}
	for h, name := range res.hosts {
		s := figure.Series{Name: name, Kind: figure.Line}
		for k, u := range res.util[h] {
			s.Points = append(s.Points, figure.Point{X: float64(k) + 0.5, Y: 100 * u})
		}
		util.Series = append(util.Series, s)
	}
	return figure.Figure{
		Title: fmt.Sprintf("Rolling maintenance of %d vGPU hosts", p.hosts),
		Panels: []figure.Panel{{
			Title:  "Stun of each migration, by the time it started",
			X:      figure.Axis{Label: "time", Unit: "s"},
			Y:      figure.Axis{Label: "stun", Unit: "s"},
			Series: []figure.Series{stun},
			HLines: []figure.HLine{{Y: 1, Label: "1 s standard"}},
		}, util},
	}
}
