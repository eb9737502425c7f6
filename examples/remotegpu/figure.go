package main

import (
	"fmt"
	"strconv"

	"github.com/vgpusim/vgpusim/examples/figure"
)

// sourceFigure numbers the source's figure of each link.
var sourceFigure = map[string]int{nameVMXNET3: 2, nameRoCE: 3, namePVRDMA: 4}

// buildFigure draws the overhead table as the source's Figures 2 to 4: a
// panel per link, the batch sizes along it, a bar per model of its
// normalized performance against the local baseline's 1. A last panel
// has the sharing runs: the server GPU's utilization per number of
// clients.
func buildFigure(p params, res result) figure.Figure {
	var cats []string
	for _, b := range p.batches {
		cats = append(cats, strconv.Itoa(b))
	}
	var panels []figure.Panel
	for _, l := range p.links {
		title := "Over " + l.Name
		if n, ok := sourceFigure[l.Name]; ok {
			title += fmt.Sprintf(" (the source's Figure %d)", n)
		}
		panel := figure.Panel{
			Title:  title,
			X:      figure.Axis{Label: "batch size", Categories: cats},
			Y:      figure.Axis{Label: "normalized performance"},
			HLines: []figure.HLine{{Y: 1, Label: "local " + localProfile + ", no overhead"}},
		}
		for _, m := range p.models {
			s := figure.Series{Name: m.Name, Kind: figure.Bars}
			for _, r := range res.rows {
				if r.model == m.Name && r.link.Name == l.Name {
					for i, b := range p.batches {
						if b == r.batch {
							s.Points = append(s.Points, figure.Point{X: float64(i), Y: r.normalized()})
						}
					}
				}
			}
			panel.Series = append(panel.Series, s)
		}
		panels = append(panels, panel)
	}
	if runs := summarizeShare(p, res.share); len(runs) > 0 {
		var cats []string
		s := figure.Series{Name: "GPU utilization", Kind: figure.Bars}
		for i, r := range runs {
			vms := "clients"
			if r.clients == 1 {
				vms = "client"
			}
			cats = append(cats, fmt.Sprintf("%d %s", r.clients, vms))
			s.Points = append(s.Points, figure.Point{X: float64(i), Y: r.gpuUtilPct})
		}
		panels = append(panels, figure.Panel{
			Title:  "One remote P40 shared over " + p.shareLink.Name,
			X:      figure.Axis{Label: fmt.Sprintf("client VMs with a %s each", p.shareProfile), Categories: cats},
			Y:      figure.Axis{Label: "GPU utilization", Unit: "%"},
			Series: []figure.Series{s},
		})
	}
	return figure.Figure{
		Title:  "Training on a remote GPU, as with Bitfusion: Inception V3 and ResNet-50 on a Tesla P40",
		Panels: panels,
	}
}
