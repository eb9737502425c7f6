package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/vgpusim/vgpusim/examples/tabular"
)

// results is everything one invocation computes.
type results struct {
	runs     []serviceRun // per model: without migration, then each mode
	outcomes []outcome
	points   []point // Experiments 1 and 2
}

func simulate(p params) (results, error) {
	var res results
	var err error
	if res.runs, err = simulateRuns(p); err != nil {
		return res, err
	}
	if res.outcomes, err = summarize(res.runs); err != nil {
		return res, err
	}
	res.points, err = simulateExperiments(p)
	return res, err
}

// report prints the timelines, the summary, the experiments and the
// verdict.
func report(w io.Writer, p params, res results) error {
	fmt.Fprintf(w, "MLaaS on a Tesla P40: a %s vGPU (fixed share), %.0f requests/s, migrated at %v over %v.\n",
		p.profile.Name, p.rate, p.migrateAt, p.link)
	fmt.Fprintf(w, "Guest RAM %d GiB (%d GiB in use), the whole usable framebuffer in use. Rows of %v; served is per row.\n",
		p.ramBytes>>30, p.ramFootprintBytes>>30, p.printStep)
	for i := 0; i < len(res.runs); i += 1 + len(p.modes) {
		fmt.Fprintf(w, "\nTimeline, %s:\n", res.runs[i].model)
		if err := printedTimeline(p, res.runs[i:i+1+len(p.modes)]).WriteText(w); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nMigrations (delayed: requests served from the stun's start until a step's slowest request is")
	fmt.Fprintln(w, "no slower than the slowest without migration; throughput lost: served during the migration against none):")
	if err := summaryTable(res.outcomes).WriteText(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nExperiment 1: each profile at capacity (%.0f requests/s offered, one waiting at the vGPU, the rest refused).\n", p.expRate)
	fmt.Fprintf(w, "Experiment 2: %s at each request rate. %v of simulated time each; _x is MobileNet's advantage.\n",
		p.profile.Name, p.expDuration)
	if err := printedExperiments(res.points).WriteText(w); err != nil {
		return err
	}
	line, _ := verdict(res.points)
	_, err := fmt.Fprintln(w, "\n"+line)
	return err
}

// tableNames name the tables in -json and in -csv's file names.
var tableNames = []string{"timeline", "summary", "experiments"}

func (res results) tables() []*tabular.Table {
	return []*tabular.Table{timelineTable(res.runs), summaryTable(res.outcomes), experimentsTable(res.points)}
}

// writeOutputs writes the files the flags asked for.
func writeOutputs(p params, res results, out outputs) error {
	tables := res.tables()
	if out.csv != "" {
		for i, t := range tables {
			if err := tabular.WriteFile(csvPath(out.csv, i), t.WriteCSV); err != nil {
				return err
			}
		}
	}
	if out.json != "" {
		if err := tabular.WriteFile(out.json, func(w io.Writer) error { return tabular.WriteJSONObject(w, tableNames, tables) }); err != nil {
			return err
		}
	}
	if out.svg == "" && out.figure == "" {
		return nil
	}
	return writeFigure(p, res, out.svg, out.figure)
}

// csvPath is the file of table i: the -csv FILE itself for the timeline,
// FILE with _summary or _experiments before its extension for the others.
func csvPath(path string, i int) string {
	if i == 0 {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "_" + tableNames[i] + ext
}
