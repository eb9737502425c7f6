package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/vgpusim/vgpusim/examples/tabular"
	"github.com/vgpusim/vgpusim/sweep"
	"github.com/vgpusim/vgpusim/vgpu"
)

// results is everything one invocation computes.
type results struct {
	runs     []serviceRun // per model: without migration, then each mode
	outcomes []outcome
	points   []point // Experiments 1 and 2
}

// unit is one point of the sweep (package sweep), independent of every
// other: a model's runs, without migration and with each mode, and their
// summary; or one point of Experiment 1 or 2, both models.
type unit struct {
	runs  bool
	model vgpu.Model // for runs
	exp   expPoint   // otherwise
}

// simulate runs the units of p.sweep's shard (all of them for the zero
// shard), p.sweep.Workers at a time: each model's runs, then the
// experiments' points. Each table's rows come in unit order, so that the
// shards' rows concatenate into the whole run's.
func simulate(p params) (results, error) {
	var units []unit
	for _, m := range p.models {
		units = append(units, unit{runs: true, model: m})
	}
	eps, err := experimentPoints(p)
	if err != nil {
		return results{}, err
	}
	for _, e := range eps {
		units = append(units, unit{exp: e})
	}
	parts, err := sweep.Run(context.Background(), units, p.sweep, func(_ context.Context, _ int, u unit) (results, error) {
		var r results
		var err error
		if !u.runs {
			r.points, err = simulatePoint(p, u.exp)
			return r, err
		}
		if r.runs, err = simulateModel(p, u.model); err == nil {
			r.outcomes, err = summarize(r.runs)
		}
		return r, err
	})
	var res results
	for _, r := range parts {
		res.runs = append(res.runs, r.runs...)
		res.outcomes = append(res.outcomes, r.outcomes...)
		res.points = append(res.points, r.points...)
	}
	return res, err
}

// report prints the timelines, the summary, the experiments and the
// verdict. A shard's report has the parts its units make, without the
// verdict, which needs every experiment's point.
func report(w io.Writer, p params, res results) error {
	whole := p.sweep.Shard.Whole()
	fmt.Fprintf(w, "MLaaS on a Tesla P40: a %s vGPU (fixed share), %.0f requests/s, migrated at %v over %v.\n",
		p.profile.Name, p.rate, p.migrateAt, p.link)
	fmt.Fprintf(w, "Guest RAM %d GiB (%d GiB in use), the whole usable framebuffer in use. Rows of %v; served is per row.\n",
		p.ramBytes>>30, p.ramFootprintBytes>>30, p.printStep)
	if !whole {
		fmt.Fprintf(w, "Shard %v, the runs of %d models and %d experiment points: the verdict, which needs every point, is left out.\n",
			p.sweep.Shard, len(res.runs)/(1+len(p.modes)), len(pairs(res.points)))
	}
	for i := 0; i < len(res.runs); i += 1 + len(p.modes) {
		fmt.Fprintf(w, "\nTimeline, %s:\n", res.runs[i].model)
		if err := printedTimeline(p, res.runs[i:i+1+len(p.modes)]).WriteText(w); err != nil {
			return err
		}
	}
	if whole || len(res.outcomes) > 0 {
		fmt.Fprintln(w, "\nMigrations (delayed: requests served from the stun's start until a step's slowest request is")
		fmt.Fprintln(w, "no slower than the slowest without migration; throughput lost: served during the migration against none):")
		if err := summaryTable(res.outcomes).WriteText(w); err != nil {
			return err
		}
	}
	if whole || len(res.points) > 0 {
		fmt.Fprintf(w, "\nExperiment 1: each profile at capacity (%.0f requests/s offered, one waiting at the vGPU, the rest refused).\n", p.expRate)
		fmt.Fprintf(w, "Experiment 2: %s at each request rate. %v of simulated time each; _x is MobileNet's advantage.\n",
			p.profile.Name, p.expDuration)
		if err := printedExperiments(res.points).WriteText(w); err != nil {
			return err
		}
	}
	if !whole {
		return nil
	}
	line, _ := verdict(res.points)
	_, err := fmt.Fprintln(w, "\n"+line)
	return err
}

// tableNames name the tables in the file names of -csv and -json.
var tableNames = []string{"timeline", "summary", "experiments"}

func (res results) tables() []*tabular.Table {
	return []*tabular.Table{timelineTable(res.runs), summaryTable(res.outcomes), experimentsTable(res.points)}
}

// writeOutputs writes the files the flags asked for: as CSV and as JSON
// Lines, each table to a file of its own, the CSV's header only if the
// shard writes it, so that the shards' files concatenate.
func writeOutputs(p params, res results, out outputs) error {
	for i, t := range res.tables() {
		if out.csv != "" {
			if err := tabular.WriteFile(tablePath(out.csv, i), func(w io.Writer) error { return t.WriteShardCSV(w, p.sweep.Shard) }); err != nil {
				return err
			}
		}
		if out.json != "" {
			if err := tabular.WriteFile(tablePath(out.json, i), t.WriteJSONLines); err != nil {
				return err
			}
		}
	}
	if out.svg == "" && out.figure == "" {
		return nil
	}
	return writeFigure(p, res, out.svg, out.figure)
}

// tablePath is the file of table i: the -csv or -json FILE itself for the
// timeline, FILE with _summary or _experiments before its extension for
// the others.
func tablePath(path string, i int) string {
	if i == 0 {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "_" + tableNames[i] + ext
}
