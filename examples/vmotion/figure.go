package main

import (
	"fmt"
	"strings"

	"github.com/vgpusim/vgpusim/examples/figure"
	"github.com/vgpusim/vgpusim/migrate"
)

// Series names in the figure's legends.
const (
	seriesP40Simulated  = "vsphere-6.7u1 preset, simulated"
	seriesP40Published  = "vSphere 6.7 U1, published"
	seriesV100Simulated = "vsphere-7.0 preset, simulated"
	seriesV100Published = "vSphere 7.0, published worst case"
	hlineStandard       = "vMotion's 1 s standard"
)

// buildFigure draws the tables as a figure of three panels, one a table.
// The first is the sweep: stun time per P40 profile, Legacy, PreCopy and
// PostCopy side by side, and the 1 s line, on a logarithmic axis (Legacy
// stuns last tens of seconds, PreCopy's and PostCopy's well under one: on
// a linear axis they would lie flat on zero); a refused migration has no
// stun, so no point. The other two are the published tables, the 6.7 U1
// points on the P40 and the 7.0 worst-case points on the V100, by
// framebuffer in use on linear axes, where stun is a straight line: each
// published point a reference ring, the simulated stun of the same size
// inside it. A panel each keeps the two tables' rings apart.
func buildFigure(p params, rows []row) figure.Figure {
	v100Link := p.link
	if tb, err := stunTable(tableV100); err == nil {
		if l, err := migrate.LinkByName(tb.Link); err == nil {
			v100Link = l
		}
	}
	return figure.Figure{
		Title: "vMotion stun time of a vGPU VM serving Inception V3",
		Panels: []figure.Panel{
			profilePanel(p, rows),
			publishedPanel(rows, tablePublished, seriesP40Simulated, seriesP40Published,
				fmt.Sprintf("P40 over %s: vSphere 6.7 U1's published points", linkRate(p.link))),
			publishedPanel(rows, tableV100, seriesV100Simulated, seriesV100Published,
				fmt.Sprintf("V100 32GB over %s: vSphere 7.0's worst case", linkRate(v100Link))),
		},
	}
}

// profilePanel is the sweep's panel.
func profilePanel(p params, rows []row) figure.Panel {
	sweep := tableRows(rows, tableProfiles)
	var profiles []string
	index := map[string]int{}
	for _, r := range sweep {
		if _, ok := index[r.profile]; !ok {
			index[r.profile] = len(profiles)
			// "8Q" for "P40-8Q": eight full names do not fit side by side.
			profiles = append(profiles, strings.TrimPrefix(r.profile, "P40-"))
		}
	}
	var series []figure.Series
	for _, m := range modes {
		s := figure.Series{Name: m.String() + ", simulated", Kind: figure.Line}
		for _, r := range sweep {
			if r.mode == m && r.outcome == outcomeMoved {
				s.Points = append(s.Points, figure.Point{X: float64(index[r.profile]), Y: r.stun.Seconds()})
			}
		}
		if len(s.Points) > 0 {
			series = append(series, s)
		}
	}
	return figure.Panel{
		Title:  fmt.Sprintf("P40 over %s, each Q profile's framebuffer all in use", linkRate(p.link)),
		X:      figure.Axis{Label: "P40 vGPU profile", Categories: profiles},
		Y:      figure.Axis{Label: "stun time", Unit: "s", Log: true},
		Series: series,
		HLines: []figure.HLine{{Y: migrate.DefaultStunTarget.Seconds(), Label: hlineStandard}},
	}
}

// publishedPanel is the panel of one published table: its Legacy rows'
// simulated stun and the published figure, at the GiB in use.
func publishedPanel(rows []row, table, simulated, published, title string) figure.Panel {
	sim := figure.Series{Name: simulated, Kind: figure.Line}
	pub := figure.Series{Name: published, Kind: figure.Points, Reference: true}
	for _, r := range tableRows(rows, table) {
		if r.mode != migrate.Legacy || r.published == 0 {
			continue
		}
		x := float64(r.usedBytes) / (1 << 30)
		pub.Points = append(pub.Points, figure.Point{X: x, Y: r.published.Seconds()})
		if r.outcome == outcomeMoved {
			sim.Points = append(sim.Points, figure.Point{X: x, Y: r.stun.Seconds()})
		}
	}
	var series []figure.Series
	for _, s := range []figure.Series{sim, pub} {
		if len(s.Points) > 0 {
			series = append(series, s)
		}
	}
	return figure.Panel{
		Title:  title,
		X:      figure.Axis{Label: "framebuffer in use", Unit: "GiB"},
		Y:      figure.Axis{Label: "stun time", Unit: "s"},
		Series: series,
	}
}

// linkRate is a link's bandwidth as the figure names it: "10 Gb/s".
func linkRate(l migrate.Link) string {
	return fmt.Sprintf("%g Gb/s", float64(l.BandwidthBitsPerSec)/1e9)
}
