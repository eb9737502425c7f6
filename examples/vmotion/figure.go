package main

import (
	"fmt"
	"strings"

	"github.com/vgpusim/vgpusim/examples/figure"
	"github.com/vgpusim/vgpusim/migrate"
)

// Series names in the figure's legend.
const (
	seriesPublished = "vSphere 6.7 U1, published"
	hlineStandard   = "vMotion's 1 s standard"
)

// buildFigure draws the table as a figure: stun time per profile, Legacy
// beside PreCopy, VMware's published 6.7 U1 points and the 1 s line. The
// Y axis is logarithmic: Legacy stuns last tens of seconds and PreCopy's
// well under one, and on a linear axis PreCopy would lie flat on zero. A
// refused migration has no stun, so no point.
func buildFigure(p params, rows []row) figure.Figure {
	var profiles []string
	index := map[string]int{}
	for _, r := range rows {
		if _, ok := index[r.profile]; !ok {
			index[r.profile] = len(profiles)
			// "8Q" for "P40-8Q": eight full names do not fit side by side.
			profiles = append(profiles, strings.TrimPrefix(r.profile, "P40-"))
		}
	}
	var series []figure.Series
	for _, m := range modes {
		s := figure.Series{Name: m.String() + ", simulated", Kind: figure.Line}
		for _, r := range rows {
			if r.mode == m && r.outcome == outcomeMoved {
				s.Points = append(s.Points, figure.Point{X: float64(index[r.profile]), Y: r.stun.Seconds()})
			}
		}
		if len(s.Points) > 0 {
			series = append(series, s)
		}
	}
	published := figure.Series{Name: seriesPublished, Kind: figure.Points, Reference: true}
	for _, r := range rows {
		if r.mode == migrate.Legacy && r.published > 0 {
			published.Points = append(published.Points, figure.Point{X: float64(index[r.profile]), Y: r.published.Seconds()})
		}
	}
	if len(published.Points) > 0 {
		series = append(series, published)
	}
	return figure.Figure{
		Title: fmt.Sprintf("vMotion stun time of a Tesla P40 vGPU VM over %g Gb/s", float64(p.link.BandwidthBitsPerSec)/1e9),
		Panels: []figure.Panel{{
			X:      figure.Axis{Label: "P40 vGPU profile, its whole framebuffer in use", Categories: profiles},
			Y:      figure.Axis{Label: "stun time", Unit: "s", Log: true},
			Series: series,
			HLines: []figure.HLine{{Y: migrate.DefaultStunTarget.Seconds(), Label: hlineStandard}},
		}},
	}
}
