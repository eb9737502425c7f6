package main

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/examples/figure"
)

// buildFigure draws the summary as the seed's Figure 2 invites comparing
// it, grouped per profile (and mode, when there are two): the stun of the
// concurrent migrations beside the stun alone; each VM's time and the
// group's time in all, concurrent and one by one; the workload's p99
// latency before, during and after the concurrent migrations. Each bar is the
// worst VM of its group: the VMs of a group are alike, and the table has
// every one.
func buildFigure(p params, rows []row) figure.Figure {
	gs := summarize(rows)
	var cats []string
	for _, g := range gs {
		c := g.profile
		if len(p.modes) > 1 {
			c += " " + g.mode.String()
		}
		cats = append(cats, c)
	}
	bars := func(name string, value func(group) time.Duration, unit time.Duration) figure.Series {
		s := figure.Series{Name: name, Kind: figure.Bars}
		for i, g := range gs {
			s.Points = append(s.Points, figure.Point{X: float64(i), Y: float64(value(g)) / float64(unit)})
		}
		return s
	}
	n := fmt.Sprint(p.vms)
	profiles := figure.Axis{Label: "vGPU profile", Categories: cats}
	item := "frame"
	if p.workload == workloadInference {
		item = "request"
	}
	return figure.Figure{
		Title: fmt.Sprintf("%s vGPU VMs migrated at once and one by one over %g Gb/s", n, float64(p.link.BandwidthBitsPerSec)/1e9),
		Panels: []figure.Panel{{
			Title: "Stun time (longest of the " + n + ")",
			X:     profiles,
			Y:     figure.Axis{Label: "stun time", Unit: "s"},
			Series: []figure.Series{
				bars(n+" concurrent", func(g group) time.Duration { return g.concurrentStun.Max }, time.Second),
				bars("one by one", func(g group) time.Duration { return g.oneByOneStun.Max }, time.Second),
			},
			HLines: []figure.HLine{{Y: 1, Label: "1 s standard"}},
		}, {
			Title: "Migration time: each VM (longest), and all " + n,
			X:     profiles,
			Y:     figure.Axis{Label: "time", Unit: "s"},
			Series: []figure.Series{
				bars("each, "+n+" concurrent", func(g group) time.Duration { return g.concurrentMaxTotal }, time.Second),
				bars("each, alone", func(g group) time.Duration { return g.aloneMaxTotal }, time.Second),
				bars("all, "+n+" concurrent", func(g group) time.Duration { return g.concurrentMakespan }, time.Second),
				bars("all, one by one", func(g group) time.Duration { return g.oneByOneMakespan }, time.Second),
			},
		}, {
			Title: "Workload latency (worst VM), " + n + " concurrent",
			X:     profiles,
			Y:     figure.Axis{Label: "p99 " + item + " latency", Unit: "ms"},
			Series: []figure.Series{
				bars("before", func(g group) time.Duration { return g.beforeP99 }, time.Millisecond),
				bars("during", func(g group) time.Duration { return g.duringP99 }, time.Millisecond),
				bars("the second after", func(g group) time.Duration { return g.afterP99 }, time.Millisecond),
			},
		}},
	}
}
