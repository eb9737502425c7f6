package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/examples/figure"
	"github.com/vgpusim/vgpusim/migrate"
)

// buildFigure draws, for each model, the latency over time of every run
// with each migration's stun marked as a segment above the curves; then
// Experiment 1's throughput per profile and Experiment 2's throughput per
// offered rate, both models side by side.
func buildFigure(p params, res results) figure.Figure {
	f := figure.Figure{Title: fmt.Sprintf("MLaaS on a %s vGPU, %.0f requests/s, migrated over %s", p.profile.Name, p.rate, linkRate(p.link))}
	per := 1 + len(p.modes)
	for i := 0; i < len(res.runs); i += per {
		f.Panels = append(f.Panels, latencyPanel(p, res.runs[i:i+per]))
	}
	f.Panels = append(f.Panels, experimentPanels(p, res.points)...)
	return f
}

// latencyPanel is one model's runs: latency over each row of the printed
// timeline (-print-step; the 100 ms steps would make the SVG heavy
// without showing more) that
// served a request, on a logarithmic axis, and each stun as a segment at
// twice the worst latency drawn. The migrations' latencies are points, not
// lines, so that nothing is drawn across a stun, when nothing was served.
func latencyPanel(p params, runs []serviceRun) figure.Panel {
	pn := figure.Panel{
		Title: fmt.Sprintf("%s, migrated at %v", runs[0].model, p.migrateAt),
		X:     figure.Axis{Label: "simulated time", Unit: "s"},
		Y:     figure.Axis{Label: "latency", Unit: "ms", Log: true},
	}
	top := 0.0
	for _, r := range runs {
		name, kind := r.name, figure.Points
		if r.report == nil {
			name, kind = "no migration", figure.Line
		}
		mean := figure.Series{Name: name + " mean", Kind: kind}
		p99 := figure.Series{Name: name + " p99", Kind: kind}
		for to := p.printStep; to <= p.duration; to += p.printStep {
			m := r.service.Metrics(to-p.printStep, to)
			if m.Completed == 0 {
				continue
			}
			// At the row's middle, so that a stun's effect sits over it.
			mid := (to - p.printStep/2).Seconds()
			mean.Points = append(mean.Points, figure.Point{X: mid, Y: ms(m.LatencyMean)})
			p99.Points = append(p99.Points, figure.Point{X: mid, Y: ms(m.LatencyP99)})
			top = max(top, ms(m.LatencyP99))
		}
		if r.report == nil {
			// Without migration the p99 bounds the mean; one line is enough.
			pn.Series = append(pn.Series, p99)
			continue
		}
		pn.Series = append(pn.Series, mean, p99)
	}
	for _, r := range runs {
		if r.report == nil {
			continue
		}
		pn.Series = append(pn.Series, figure.Series{Name: fmt.Sprintf("%s stun, %.2f s", r.name, r.report.Stun.Seconds()),
			Kind: figure.Line, Points: []figure.Point{{X: r.stunFrom.Seconds(), Y: 2 * top}, {X: r.stunTo.Seconds(), Y: 2 * top}}})
	}
	return pn
}

// experimentPanels are Experiment 1 (throughput per profile as bars) and
// Experiment 2 (throughput against offered rate). Experiment 1's mean
// latencies, two orders of magnitude apart between the models, do not fit
// as labels on the bars: each model's range goes to its legend entry, and
// the table has every one.
func experimentPanels(p params, pts []point) []figure.Panel {
	// "8Q" for "P40-8Q": six full names do not fit side by side.
	var profiles []string
	for _, name := range p.expProfiles {
		profiles = append(profiles, strings.TrimPrefix(name, "P40-"))
	}
	one := figure.Panel{
		Title: "Experiment 1: throughput at capacity",
		X:     figure.Axis{Label: "P40 vGPU profile", Categories: profiles},
		Y:     figure.Axis{Label: "throughput", Unit: "requests/s"},
	}
	two := figure.Panel{
		Title: "Experiment 2: throughput on " + p.profile.Name,
		X:     figure.Axis{Label: "offered load", Unit: "requests/s", Log: true},
		Y:     figure.Axis{Label: "throughput", Unit: "requests/s", Log: true},
	}
	for _, m := range models {
		bars := figure.Series{Name: m.model.Name, Kind: figure.Bars}
		line := figure.Series{Name: m.model.Name, Kind: figure.Line}
		var fastest, slowest time.Duration
		for _, pt := range pts {
			switch {
			case pt.model != m.model.Name:
			case pt.experiment == expProfiles:
				bars.Points = append(bars.Points, figure.Point{X: float64(len(bars.Points)), Y: pt.served})
				if pt.mean > 0 && (fastest == 0 || pt.mean < fastest) {
					fastest = pt.mean
				}
				slowest = max(slowest, pt.mean)
			default:
				line.Points = append(line.Points, figure.Point{X: pt.offered, Y: pt.served})
			}
		}
		if fastest > 0 {
			bars.Name += fmt.Sprintf(", mean %.1f–%.1f ms", ms(fastest), ms(slowest))
		}
		one.Series = append(one.Series, bars)
		two.Series = append(two.Series, line)
	}
	return []figure.Panel{one, two}
}

// linkRate is the link's line rate, "10 Gb/s".
func linkRate(l migrate.Link) string {
	return fmt.Sprintf("%g Gb/s", float64(l.BandwidthBitsPerSec)/1e9)
}

// writeFigure writes the figure as JSON to fig and draws it to svg,
// either of them empty for none.
func writeFigure(p params, res results, svg, fig string) error {
	f := buildFigure(p, res)
	if err := f.Validate(); err != nil {
		return err
	}
	return f.WriteFiles(fig, svg)
}
