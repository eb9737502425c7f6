// Command maintenance puts a rack of vGPU hosts through rolling
// maintenance: each host in turn is evacuated, as vSphere's maintenance
// mode empties a host, stays down for a while, and comes back before the
// next one goes, while the VMs keep serving Inception V3 inference and
// training MobileNet. Every migration is a pre-copy live migration over
// the rack's 10 GbE, at most two at a time per host.
//
// It prints every migration — which VM, from and to where, its stun and
// total time, and what its inference requests saw: the p99 latency over
// the second before and after it, and the longest wait, the request the
// stun held up — then the stun distribution, and each host's GPU
// utilization over time as the VMs leave it and arrive on the others.
// The utilization comes from the GPUs' own history (vgpu.GPU.Utilization),
// the migrations from migrate.Sim.Evacuate, the stun distribution from
// migrate.Summarize.
//
// Usage:
//
//	go run ./examples/maintenance [-hosts N] [-inference N] [-training N] [-down D]
//	    [-warmup D] [-seed N] [-csv FILE] [-json FILE] [-svg FILE] [-figure FILE]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vgpusim/vgpusim/examples/tabular"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// params are the rack and its maintenance.
type params struct {
	hosts     int           // hosts in the rack, two P40s each
	inference int           // inference VMs per host, P40-4Q each
	training  int           // training VMs per host, P40-2Q each
	warmup    time.Duration // before the first host goes, and after the last comes back
	down      time.Duration // how long each host stays down once empty
	seed      uint64
}

func defaultParams() params {
	return params{hosts: 4, inference: 3, training: 1, warmup: 5 * time.Second, down: 10 * time.Second, seed: 1}
}

// run is the command without the process around it: arguments in, exit
// status out.
func run(args []string, stdout, stderr io.Writer) int {
	p := defaultParams()
	fs := flag.NewFlagSet("maintenance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&p.hosts, "hosts", p.hosts, "hosts in the rack, 2 to 16, two P40s each")
	fs.IntVar(&p.inference, "inference", p.inference, "inference VMs per host (P40-4Q, Inception V3), 0 to 6")
	fs.IntVar(&p.training, "training", p.training, "training VMs per host (P40-2Q, MobileNet), 0 to 6")
	fs.DurationVar(&p.down, "down", p.down, "simulated time each host stays down once empty")
	fs.DurationVar(&p.warmup, "warmup", p.warmup, "simulated time before the first host goes and after the last is back")
	fs.Uint64Var(&p.seed, "seed", p.seed, "seed for the VMs' memory contents and workloads")
	csvPath := fs.String("csv", "", "also write the migrations as CSV to `FILE`")
	jsonPath := fs.String("json", "", "also write the migrations and the utilization as JSON to `FILE`")
	svgPath := fs.String("svg", "", "draw the figure as SVG to `FILE` (runs the examples/plot module)")
	figurePath := fs.String("figure", "", "write the figure as JSON to `FILE`, for examples/plot")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: maintenance [flags]\n\n"+
			"Evacuates each host of a rack in turn while its VMs keep serving, and prints every\n"+
			"migration, the stun distribution and each host's GPU utilization over time.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := p.check(); err != nil || fs.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected arguments %q", fs.Args())
		}
		fmt.Fprintln(stderr, "maintenance:", err)
		return 2
	}
	res, err := simulate(p)
	if err != nil {
		fmt.Fprintln(stderr, "maintenance:", err)
		return 1
	}
	if err := report(stdout, p, res); err != nil {
		fmt.Fprintln(stderr, "maintenance:", err)
		return 1
	}
	if err := writeOutputs(p, res, *csvPath, *jsonPath, *svgPath, *figurePath); err != nil {
		fmt.Fprintln(stderr, "maintenance:", err)
		return 1
	}
	return 0
}

func (p params) check() error {
	switch {
	case p.hosts < 2 || p.hosts > 16:
		return fmt.Errorf("-hosts %d: want 2 to 16", p.hosts)
	case p.inference < 0 || p.inference > 6 || p.training < 0 || p.training > 6 || p.inference+p.training == 0:
		return fmt.Errorf("-inference %d, -training %d: want 0 to 6 of each, and some VMs", p.inference, p.training)
	case p.down < 0 || p.warmup <= 0:
		return fmt.Errorf("-down %v, -warmup %v: want a non-negative down time and a positive warm-up", p.down, p.warmup)
	}
	return nil
}

// writeOutputs writes the files the flags ask for.
func writeOutputs(p params, res result, csvPath, jsonPath, svgPath, figurePath string) error {
	migrations, utilization := migrationTable(res), utilizationTable(res)
	if csvPath != "" {
		if err := tabular.WriteFile(csvPath, migrations.WriteCSV); err != nil {
			return err
		}
	}
	if jsonPath != "" {
		if err := tabular.WriteFile(jsonPath, func(w io.Writer) error {
			return tabular.WriteJSONObject(w, []string{"migrations", "utilization"}, []*tabular.Table{migrations, utilization})
		}); err != nil {
			return err
		}
	}
	return buildFigure(p, res).WriteFiles(figurePath, svgPath)
}
