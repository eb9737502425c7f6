package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/vgpusim/vgpusim/vgpu"
)

// span is the least and the most of some overheads, in percent, and how
// many exceed the source's bound for their link (sourceBound).
type span struct {
	n        int
	min, max float64
	above    int
}

// sourceBound is the most overhead the source reports for a link, in
// percent: 20 over 10 GbE VMXNET3, 5 over RoCE in DirectPath I/O ("with
// 5% or less performance degradation", "with the performance overheads
// ranging from 4% to 20%"); for PVRDMA it gives none.
var sourceBound = map[string]float64{nameVMXNET3: 20, nameRoCE: 5}

func (s *span) add(v, bound float64) {
	if bound > 0 && v > bound {
		s.above++
	}
	if s.n == 0 || v < s.min {
		s.min = v
	}
	if s.n == 0 || v > s.max {
		s.max = v
	}
	s.n++
}

// summary is what the note under the table says, computed from the rows:
// the source's findings, one by one.
type summary struct {
	// overhead spans each link's overheads, by link name.
	overhead map[string]span
	// between counts the models and batches whose PVRDMA overhead lies
	// strictly between RoCE's and 10 GbE's, of pairs.
	between, pairs int
	// notFalling lists the models and links whose overhead does not fall
	// at every larger batch, as "model over link".
	notFalling []string
	// resnetAbove lists the batches at which ResNet-50's 10 GbE overhead
	// is not below Inception V3's; compared counts the batches with both.
	resnetAbove []int
	compared    int
}

// Link names, as the table prints them.
var (
	nameVMXNET3 = vgpu.RemoteVMXNET3().Name
	nameRoCE    = vgpu.RemoteRoCE().Name
	namePVRDMA  = vgpu.RemotePVRDMA().Name
)

func summarize(rows []row) summary {
	s := summary{overhead: map[string]span{}}
	type key struct {
		model string
		batch int
	}
	byKey := map[key]map[string]float64{}
	var keys []key
	for _, r := range rows {
		sp := s.overhead[r.link.Name]
		sp.add(r.overheadPct(), sourceBound[r.link.Name])
		s.overhead[r.link.Name] = sp
		k := key{r.model, r.batch}
		if byKey[k] == nil {
			byKey[k] = map[string]float64{}
			keys = append(keys, k)
		}
		byKey[k][r.link.Name] = r.overheadPct()
	}
	for _, k := range keys {
		o := byKey[k]
		vx, ok1 := o[nameVMXNET3]
		roce, ok2 := o[nameRoCE]
		pv, ok3 := o[namePVRDMA]
		if ok1 && ok2 && ok3 {
			s.pairs++
			if roce < pv && pv < vx {
				s.between++
			}
		}
	}
	// Whether overhead falls as the batch grows, each model and link on
	// its own, batches in ascending order.
	var models, links []string
	for _, r := range rows {
		if !slices.Contains(models, r.model) {
			models = append(models, r.model)
		}
		if !slices.Contains(links, r.link.Name) {
			links = append(links, r.link.Name)
		}
	}
	for _, m := range models {
		for _, l := range links {
			var batches []int
			for _, k := range keys {
				if k.model == m {
					batches = append(batches, k.batch)
				}
			}
			slices.Sort(batches)
			for i := 1; i < len(batches); i++ {
				if byKey[key{m, batches[i]}][l] >= byKey[key{m, batches[i-1]}][l] {
					s.notFalling = append(s.notFalling, m+" over "+l)
					break
				}
			}
		}
	}
	resnet, inception := vgpu.ResNet50().Name, vgpu.InceptionV3().Name
	for _, k := range keys {
		if k.model != resnet {
			continue
		}
		r, ok1 := byKey[k][nameVMXNET3]
		i, ok2 := byKey[key{inception, k.batch}][nameVMXNET3]
		if ok1 && ok2 {
			s.compared++
			if r >= i {
				s.resnetAbove = append(s.resnetAbove, k.batch)
			}
		}
	}
	return s
}

// yesOr says "yes", or "no: " and what is not so.
func yesOr(not []string) string {
	if len(not) == 0 {
		return "yes"
	}
	return "no: " + strings.Join(not, ", ")
}

// writeSummary prints the note under the overhead table: each finding of
// the source beside what the rows show.
func writeSummary(w io.Writer, s summary) error {
	fmt.Fprintln(w, "Against the source's findings:")
	if o, ok := s.overhead[nameVMXNET3]; ok {
		fmt.Fprintf(w, "  %s: overhead %.1f to %.1f %%, %d of %d runs above 20 %% (the source: 4 to 20 %%).\n", nameVMXNET3, o.min, o.max, o.above, o.n)
	}
	if o, ok := s.overhead[nameRoCE]; ok {
		fmt.Fprintf(w, "  %s: overhead %.1f to %.1f %%, %d of %d runs above 5 %% (the source: 5 %% or less).\n", nameRoCE, o.min, o.max, o.above, o.n)
	}
	if o, ok := s.overhead[namePVRDMA]; ok {
		fmt.Fprintf(w, "  %s: overhead %.1f to %.1f %%, between RoCE's and 10 GbE's for %d of %d models and batches (the source: between them).\n",
			namePVRDMA, o.min, o.max, s.between, s.pairs)
	}
	fmt.Fprintf(w, "  Overhead falls as the batch grows, for every model and link: %s.\n", yesOr(s.notFalling))
	var above []string
	for _, b := range s.resnetAbove {
		above = append(above, fmt.Sprint("batch ", b))
	}
	_, err := fmt.Fprintf(w, "  ResNet-50's overhead below Inception V3's over 10 GbE, at %d batches compared: %s.\n", s.compared, yesOr(above))
	return err
}

// shareRun condenses one sharing run.
type shareRun struct {
	clients    int
	gpuUtilPct float64
	imagesPerS float64 // all its clients together
}

func summarizeShare(p params, share []shareRow) []shareRun {
	var out []shareRun
	for _, s := range share {
		if len(out) == 0 || out[len(out)-1].clients != s.clients {
			out = append(out, shareRun{clients: s.clients, gpuUtilPct: 100 * s.gpuUtil})
		}
		r := &out[len(out)-1]
		r.imagesPerS += s.imagesPerSec(p.shareBatch)
	}
	return out
}

// writeShareSummary prints the note under the sharing table.
func writeShareSummary(w io.Writer, p params, share []shareRow) error {
	runs := summarizeShare(p, share)
	if len(runs) == 0 {
		return nil
	}
	local := float64(p.shareBatch) / share[0].local.Seconds()
	for _, r := range runs {
		fmt.Fprintf(w, "%-11s the GPU busy %5.1f %% of the time, %5.1f images/s in all, %.2f of a local %s's %.1f.\n",
			fmt.Sprintf("%d %s:", r.clients, plural(r.clients, "client")), r.gpuUtilPct, r.imagesPerS, r.imagesPerS/local, localProfile, local)
	}
	first, last := runs[0], runs[len(runs)-1]
	if len(runs) == 1 {
		_, err := fmt.Fprintf(w, "The GPU is idle %.1f %% of the time with %d %s.\n", 100-first.gpuUtilPct, first.clients, plural(first.clients, "client"))
		return err
	}
	if last.clients <= first.clients || last.gpuUtilPct <= first.gpuUtilPct {
		_, err := fmt.Fprintf(w, "The GPU is idle %.1f %% of the time with %d %s, %.1f %% with %d.\n",
			100-first.gpuUtilPct, first.clients, plural(first.clients, "client"), 100-last.gpuUtilPct, last.clients)
		return err
	}
	// More clients, less idle time: the finding the table is there for.
	_, err := fmt.Fprintf(w, "The GPU is idle %.1f %% of the time with %d %s, waiting on the network, and %.1f %% with %d, whose\n"+
		"calls and batches cross it while another client's work runs: they share the GPU's scheduler.\n",
		100-first.gpuUtilPct, first.clients, plural(first.clients, "client"), 100-last.gpuUtilPct, last.clients)
	return err
}

// plural is noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
