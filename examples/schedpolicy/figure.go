package main

import (
	"fmt"

	"github.com/vgpusim/vgpusim/examples/figure"
)

// buildFigure draws the sharing scenario as the source's Figures 4 and 5:
// per profile, the GPU's utilization and the trainers' mean training time,
// a bar per policy. Each category names its profile and how many VMs
// shared the GPU, fewer than -vms where the profile fits fewer.
func buildFigure(p params, s summary) figure.Figure {
	var cats []string
	for _, name := range p.profiles {
		n := s.sharing[name][policies[0]].vms
		vms := "VMs"
		if n == 1 {
			vms = "VM"
		}
		cats = append(cats, fmt.Sprintf("%s\n%d %s", name, n, vms))
	}
	util := figure.Panel{
		Title: "GPU utilization (the source's Figure 4)",
		X:     figure.Axis{Label: "vGPU profile, VMs training on one P40", Categories: cats},
		Y:     figure.Axis{Label: "GPU utilization", Unit: "%"},
	}
	training := figure.Panel{
		Title: "Training time (the source's Figure 5)",
		X:     util.X,
		Y:     figure.Axis{Label: "mean training time per VM", Unit: "s"},
	}
	for _, pol := range policies {
		u := figure.Series{Name: pol.String(), Kind: figure.Bars}
		t := u
		for i, name := range p.profiles {
			g := s.sharing[name][pol]
			u.Points = append(u.Points, figure.Point{X: float64(i), Y: g.utilPct})
			t.Points = append(t.Points, figure.Point{X: float64(i), Y: g.meanS})
		}
		util.Series = append(util.Series, u)
		training.Series = append(training.Series, t)
	}
	return figure.Figure{
		Title:  "vGPU scheduler policies: ML training VMs on a Tesla P40",
		Panels: []figure.Panel{util, training},
	}
}
