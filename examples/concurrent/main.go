// Command concurrent live-migrates six VMs with Tesla P40 vGPUs at once
// over one 10 GbE link, the experiment of Figure 2 of "GPU Virtualization
// for Machine Learning Workloads, Part 2" (Uday Kurkure, Lan Vu, Hari
// Sivaraman; VMware blog, 2020), for two profiles, and migrates the same
// six one by one, each alone on the link, to compare.
//
// It prints, for every VM, its stun and total time in each schedule and
// its workload's throughput and latency over the second before its
// migration, during it and over the second after; then, per profile, how
// long the six took in all either way and their stuns' median and longest
// (migrate.Summarize). The workload is by default the
// blog post's SPECapc, an interactive CAD application rendering frames
// (-workload inference serves Inception V3 instead), filling the
// profile's whole usable framebuffer.
//
// Sharing the link, each VM takes several times as long as alone, its
// stun up to half again as long, yet the six end sooner than one after
// another: setup, stun and resume overlap. The frames' latency does not
// move while the VMs migrate, as the seed reports, but for the one frame
// each stun holds up.
//
// Usage:
//
//	go run ./examples/concurrent [-profiles LIST] [-mode MODE] [-vms N] [-workload NAME]
//	    [-link NAME] [-warmup D] [-seed N] [-csv FILE] [-json FILE] [-svg FILE] [-figure FILE]
//	    [-workers N] [-shard i/n]
//
// -csv and -json (JSON Lines, one object a line) write every row of the
// table.
//
// The migrations of one group share a link, so a group is one
// simulation; the sweep's independent points are its scenarios, each
// profile in each mode and schedule, each on hosts of its own (package
// sweep). -workers N runs N scenarios at once (default one per core),
// with the same output for any N. -shard i/n runs only shard i of n, a
// contiguous block of the scenarios in their order, for a batch system to
// spread the sweep over machines: it prints that shard's rows without the
// summary of each profile, which needs both its schedules, and -csv and
// -json write its rows, the CSV header in shard 0's file alone, so that
// the files of shards 0 to n-1, concatenated in order, are the whole
// run's, byte for byte. -svg and -figure draw the whole run and are
// refused with -shard.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vgpusim/vgpusim/examples/tabular"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/sweep"
	"github.com/vgpusim/vgpusim/vgpu"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command without the process around it: arguments in, exit
// status out.
func run(args []string, stdout, stderr io.Writer) int {
	p := defaultParams()
	fs := flag.NewFlagSet("concurrent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profiles := fs.String("profiles", strings.Join(p.profiles, ","), "comma-separated P40 `PROFILES`, each a group of VMs")
	mode := fs.String("mode", "pre-copy", "how vGPU memory moves, `MODE` pre-copy, legacy or both")
	fs.IntVar(&p.vms, "vms", p.vms, "VMs per profile migrated together, 1 to 8 (a host's limit)")
	fs.StringVar(&p.workload, "workload", p.workload, "what each VM runs, `NAME` cad (SPECapc frames) or inference (Inception V3 requests)")
	linkName := fs.String("link", p.link.Name, "the migration network, `NAME` one of "+linkNames())
	fs.DurationVar(&p.warmup, "warmup", p.warmup, "simulated time the workloads run before the first migration starts")
	fs.Uint64Var(&p.seed, "seed", p.seed, "seed for the VMs' memory contents and workloads")
	csvPath := fs.String("csv", "", "also write the table as CSV to `FILE`")
	jsonPath := fs.String("json", "", "also write the table as JSON Lines, one object a row, to `FILE`")
	svgPath := fs.String("svg", "", "draw the figure as SVG to `FILE` (runs the examples/plot module)")
	figurePath := fs.String("figure", "", "write the figure as JSON to `FILE`, for examples/plot")
	var cfg sweep.Config
	cfg.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: concurrent [flags]\n\n"+
			"Live-migrates six vGPU VMs of each profile at once over one link, then the same six one\n"+
			"by one, and prints each VM's stun and total time and its workload's latency during them.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "concurrent: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return 2
	}
	if err := parseFlags(&p, *profiles, *mode, *linkName); err != nil {
		fmt.Fprintln(stderr, "concurrent:", err)
		return 2
	}
	if !cfg.Shard.Whole() && (*svgPath != "" || *figurePath != "") {
		fmt.Fprintln(stderr, "concurrent: -svg and -figure draw the whole run, not one -shard of it")
		return 2
	}
	rows, err := simulate(p, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "concurrent:", err)
		return 1
	}
	if err := report(stdout, p, cfg.Shard, rows); err != nil {
		fmt.Fprintln(stderr, "concurrent:", err)
		return 1
	}
	if err := writeOutputs(p, rows, cfg.Shard, *csvPath, *jsonPath, *svgPath, *figurePath); err != nil {
		fmt.Fprintln(stderr, "concurrent:", err)
		return 1
	}
	return 0
}

// parseFlags checks the flags that name things and sets them in p.
func parseFlags(p *params, profiles, mode, linkName string) error {
	p.profiles = nil
	for _, name := range strings.Split(profiles, ",") {
		prof, err := vgpu.ParseProfile(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		if prof.GPUModel != "P40" {
			return fmt.Errorf("-profiles: %s is not a P40 profile", prof.Name)
		}
		p.profiles = append(p.profiles, prof.Name)
	}
	// "both" and "precopy", and any case, are the flag's own spellings,
	// kept for the command lines written with them: package migrate
	// parses only the names the modes print.
	switch m := strings.ToLower(mode); m {
	case "both":
		p.modes = []migrate.Mode{migrate.Legacy, migrate.PreCopy}
	default:
		if m == "precopy" {
			m = migrate.PreCopy.String()
		}
		one, err := migrate.ParseMode(m)
		if err != nil {
			return fmt.Errorf("-mode %q: want pre-copy, legacy or both", mode)
		}
		p.modes = []migrate.Mode{one}
	}
	if p.workload != workloadCAD && p.workload != workloadInference {
		return fmt.Errorf("-workload %q: want %s or %s", p.workload, workloadCAD, workloadInference)
	}
	link, err := migrate.LinkByName(linkName)
	if err != nil {
		return err
	}
	p.link = link
	return nil
}

// linkNames lists the link presets -link accepts.
func linkNames() string {
	var names []string
	for _, l := range migrate.Links() {
		names = append(names, l.Name)
	}
	return strings.Join(names, ", ")
}

// report prints the heading, the table and the summary under it; a
// shard's report, the shard's rows without the summary of each group.
func report(w io.Writer, p params, shard sweep.Shard, rows []row) error {
	what := "SPECapc-like CAD rendering (frames)"
	if p.workload == workloadInference {
		what = "Inception V3 inference (requests)"
	}
	fmt.Fprintf(w, "%d vGPU VMs per profile migrated concurrently over one %v, then one by one.\n", p.vms, p.link)
	fmt.Fprintf(w, "Each VM: guest RAM %d GiB (%d GiB in use), the whole usable framebuffer in use, %s;\n",
		p.ramBytes>>30, p.ramFootprintBytes>>30, what)
	fmt.Fprintf(w, "%v of workload before the first migration.\n", p.warmup)
	var gs []group
	if shard.Whole() {
		gs = summarize(rows)
	} else {
		fmt.Fprintf(w, "Shard %v, %d migrations: the summary of each profile, which needs both its schedules, is left out.\n", shard, len(rows))
	}
	fmt.Fprintln(w)
	if err := writeTable(w, rows); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return writeSummary(w, p, gs)
}

// writeOutputs writes the files the flags ask for: the CSV's header only
// if the shard writes it.
func writeOutputs(p params, rows []row, shard sweep.Shard, csvPath, jsonPath, svgPath, figurePath string) error {
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{
		{csvPath, func(w io.Writer) error { return writeCSV(w, rows, shard) }},
		{jsonPath, func(w io.Writer) error { return writeJSON(w, rows) }},
	} {
		if out.path == "" {
			continue
		}
		if err := tabular.WriteFile(out.path, out.write); err != nil {
			return err
		}
	}
	if svgPath == "" && figurePath == "" {
		return nil
	}
	return buildFigure(p, rows).WriteFiles(figurePath, svgPath)
}
