// Command mlaas re-runs the MLaaS case study of "vMotion for NVIDIA GRID
// vGPU Virtual Machines: Case Study of vMotion Using MLaaS" (Hari
// Sivaraman, Dimitrios Skarlatos, Lan Vu, Uday Kurkure; NVIDIA GTC 2019): an
// inference service VM on a Tesla P40 vGPU, serving Inception V3 or
// MobileNet, live-migrated in the middle of a run over 10 GbE, once with
// vGPU memory copied during the stun (Legacy, as vSphere 6.7 U1) and once
// pre-copied (PreCopy); and the case study's Experiments 1 and 2 without
// migration.
//
// It prints, for each model, a timeline of the requests served and their
// mean and p99 latency with each migration's phase, beside the same service
// without a migration; a summary per migration (stun, requests delayed by
// it, recovery, worst latency, throughput lost); and Experiments 1 (every
// profile at capacity) and 2 (request rates on -profile), with a line that
// says whether their shape matches the talk's: MobileNet, with a ninth
// of the MACs, serves more requests per second at a lower latency.
//
// Every P40 runs the fixed-share scheduler, so a lone vGPU gets its
// profile's share of the GPU, as on a GPU full of tenants. The timeline
// steps are 100 ms of simulated time; -csv and -json keep every step, the
// printed timeline sums them over -print-step. -csv FILE writes the
// timeline to FILE and the summary and the experiments beside it
// (FILE_summary, FILE_experiments, before the extension); -json the same
// three files as JSON Lines, one object a row.
//
// Each model's runs and each experiment's point (both models) are
// simulations of their own, a grid of independent points (package
// sweep): -workers N runs N at once (default one per core), with the same
// output for any N. -shard i/n runs only shard i of n, a contiguous block
// of them in their order (the models' runs first), for a batch system to
// spread the sweep over machines: it prints that shard's parts without the
// verdict, which needs every experiment's point, and -csv and -json write
// its rows of each table, the CSV header in shard 0's files alone, so that
// each table's files of shards 0 to n-1, concatenated in order, are the
// whole run's, byte for byte. -svg and -figure draw the whole run and are
// refused with -shard.
//
// Usage:
//
//	go run ./examples/mlaas [-profile NAME] [-model NAME] [-rate R] [-link NAME] [-mode NAME]
//		[-duration D] [-migrate-at D] [-print-step D] [-ram GiB] [-ram-used GiB] [-exp-duration D] [-seed N]
//		[-csv FILE] [-json FILE] [-svg FILE] [-figure FILE] [-workers N] [-shard i/n]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// outputs are the files the flags ask for.
type outputs struct {
	csv, json, svg, figure string
}

// run is the command without the process around it: arguments in, exit
// status out.
func run(args []string, stdout, stderr io.Writer) int {
	p, out, code := parseFlags(args, stderr)
	if code >= 0 {
		return code
	}
	res, err := simulate(p)
	if err == nil {
		err = report(stdout, p, res)
	}
	if err == nil {
		err = writeOutputs(p, res, out)
	}
	if err != nil {
		fmt.Fprintln(stderr, "mlaas:", err)
		return 1
	}
	return 0
}

// parseFlags reads the flags into params; code is the exit status when the
// command should stop (help or a usage error), -1 to go on.
func parseFlags(args []string, stderr io.Writer) (params, outputs, int) {
	p := defaultParams()
	var out outputs
	fs := flag.NewFlagSet("mlaas", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profile := fs.String("profile", p.profile.Name, "the service VM's vGPU `profile` (Experiment 2 runs on it too)")
	model := fs.String("model", "both", "the model the migrated service runs, `NAME` one of "+modelNames()+" or both")
	fs.Float64Var(&p.rate, "rate", p.rate, "requests per second offered to the migrated service (Poisson arrivals)")
	linkName := fs.String("link", p.link.Name, "the migration network, `NAME` one of "+linkNames())
	mode := fs.String("mode", "both", "the migration `mode`: "+migrate.Legacy.String()+", "+migrate.PreCopy.String()+" or both")
	fs.DurationVar(&p.duration, "duration", p.duration, "simulated time of each migration run, a multiple of 100ms")
	fs.DurationVar(&p.migrateAt, "migrate-at", p.migrateAt, "simulated time at which the migration starts")
	fs.DurationVar(&p.printStep, "print-step", p.printStep, "the printed timeline's row length (-csv and -json keep every 100ms step)")
	ramGiB := fs.Int64("ram", p.ramBytes/vgpu.GiB, "the service VM's guest RAM in GiB")
	ramUsedGiB := fs.Int64("ram-used", p.ramFootprintBytes/vgpu.GiB, "GiB of its guest RAM holding data (guest OS and serving stack) at start")
	fs.DurationVar(&p.expDuration, "exp-duration", p.expDuration, "simulated time of each point of Experiments 1 and 2")
	fs.Uint64Var(&p.seed, "seed", p.seed, "seed for request arrivals and memory contents")
	fs.StringVar(&out.csv, "csv", "", "write the timeline as CSV to `FILE`, the summary and the experiments beside it\n(FILE's name with _summary and _experiments before the extension)")
	fs.StringVar(&out.json, "json", "", "write the timeline as JSON Lines to `FILE`, the summary and the experiments beside it, as -csv")
	fs.StringVar(&out.svg, "svg", "", "draw the figure as SVG to `FILE` (runs the examples/plot module with the go command)")
	fs.StringVar(&out.figure, "figure", "", "write the figure as JSON to `FILE`, for examples/plot")
	p.sweep.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: mlaas [flags]\n\n"+
			"Live-migrates an inference service VM (Inception V3, MobileNet) on a Tesla P40 vGPU in the\n"+
			"middle of a run, Legacy and PreCopy, and prints its requests served and latency every step,\n"+
			"the migrations' cost, and the MLaaS case study's Experiments 1 and 2 without migration.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return p, out, 0
		}
		return p, out, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mlaas: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return p, out, 2
	}
	var err error
	if p.profile, err = vgpu.ParseProfile(*profile); err == nil {
		if p.models, err = modelsByName(*model); err == nil {
			if p.link, err = migrate.LinkByName(*linkName); err == nil {
				p.modes, err = modesByName(*mode)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "mlaas:", err)
		return p, out, 2
	}
	p.ramBytes, p.ramFootprintBytes = *ramGiB*vgpu.GiB, *ramUsedGiB*vgpu.GiB
	if !p.sweep.Shard.Whole() && (out.svg != "" || out.figure != "") {
		err = errors.New("-svg and -figure draw the whole run, not one -shard of it")
	}
	if err == nil {
		err = p.validate()
	}
	if err != nil {
		fmt.Fprintln(stderr, "mlaas:", err)
		return p, out, 2
	}
	return p, out, -1
}

// linkNames lists the link presets -link accepts.
func linkNames() string {
	var names []string
	for _, l := range migrate.Links() {
		names = append(names, l.Name)
	}
	return strings.Join(names, ", ")
}
