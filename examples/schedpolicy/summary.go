package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/vgpusim/vgpusim/sched"
)

// gpuResult condenses the trainers of one simulated GPU.
type gpuResult struct {
	vms               int
	utilPct           float64
	minS, meanS, maxS float64 // training time over the trainers
}

// summary is what the source's figures plot: per profile and policy, GPU
// utilization and training time; and per policy, how much a noisy
// neighbour slows a training VM down.
type summary struct {
	sharing  map[string]map[sched.Policy]gpuResult
	slowdown map[sched.Policy]float64 // victim's training time, noisy over quiet
}

func summarize(rows []row) summary {
	s := summary{sharing: map[string]map[sched.Policy]gpuResult{}, slowdown: map[sched.Policy]float64{}}
	victim := map[string]map[sched.Policy]float64{}
	for _, r := range rows {
		switch r.scenario {
		case scenarioSharing:
			m := s.sharing[r.profile]
			if m == nil {
				m = map[sched.Policy]gpuResult{}
				s.sharing[r.profile] = m
			}
			g := m[r.policy]
			if g.vms == 0 || r.trainingS < g.minS {
				g.minS = r.trainingS
			}
			g.maxS = max(g.maxS, r.trainingS)
			g.meanS = (g.meanS*float64(g.vms) + r.trainingS) / float64(g.vms+1)
			g.vms++
			g.utilPct = r.gpuUtilPct
			m[r.policy] = g
		default:
			if r.role == roleVictim {
				if victim[r.scenario] == nil {
					victim[r.scenario] = map[sched.Policy]float64{}
				}
				victim[r.scenario][r.policy] = r.trainingS
			}
		}
	}
	for _, p := range policies {
		if q := victim[scenarioQuiet][p]; q > 0 {
			s.slowdown[p] = victim[scenarioNoisy][p] / q
		}
	}
	return s
}

// writeSummary prints the summary below the table.
func writeSummary(w io.Writer, profiles []string, s summary) error {
	fmt.Fprintln(w, "Sharing: mean training time per VM and GPU utilization (Figures 4 and 5)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"profile", "VMs"}
	for _, p := range policies {
		head = append(head, p.String())
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, name := range profiles {
		cells := []string{name, fmt.Sprint(s.sharing[name][sched.BestEffort].vms)}
		for _, p := range policies {
			g := s.sharing[name][p]
			cells = append(cells, fmt.Sprintf("%.2f s, %.1f %%", g.meanS, g.utilPct))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprint(w, "\nNoisy neighbours: a training VM's time with busy neighbours over its time with idle ones:")
	for _, p := range policies {
		fmt.Fprintf(w, " %s x%.2f", p, s.slowdown[p])
	}
	_, err := fmt.Fprintln(w)
	return err
}
