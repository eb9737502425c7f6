// Command vmotion live-migrates vGPU VMs serving Inception V3 and prints
// three tables of their stun times against vMotion's one-second standard
// and VMware's published figures.
//
// The first is a sweep: a VM with one Tesla P40 vGPU for every Q profile,
// its whole usable framebuffer in use, in Legacy mode (vGPU memory copied
// during the stun, as vSphere 6.7 U1 did), in PreCopy mode (vGPU memory
// pre-copied with guest RAM) and in PostCopy mode (no pre-copy: the VM
// resumes at the destination and its guest RAM and framebuffer follow,
// pushed in the background and fetched on demand when it touches a page
// not yet there), with each migration's stun time, total time, pre-copy
// rounds and bytes on the wire, and post-copy's degradation after the
// stun: the window from the resume until the last page arrived, the
// faults, their latency (median and 99th percentile) and the VM's stall
// on them in all, zero for a VM that resumed with every page. Legacy stun
// is 1.5 s plus about 7.5 s for every GiB in use, so no profile meets the
// standard and a P40-24Q, whose estimate is over 6.7 U1's 100 s stun
// timeout, is refused outright (6.7 U1 started such a migration and
// failed it at the timeout; refusing it up front is the model's choice);
// pre-copy keeps every profile's stun under a second, on fixed costs
// grounded in published downtimes of GPU live migration
// (migrate.PreCopyCosts). Post-copy runs on the same costs: its stun
// sends no page and is shorter still, and the notes under the table set
// what it buys against what the window, the faults and the stall cost.
//
// A profile's usable framebuffer is a little under its nominal size, and
// VMware published its 6.7 U1 stun times by GB in use, not by profile: the
// second table runs each published point at its size, a workload of
// exactly that footprint on the smallest P40 Q profile that holds it, with
// the vsphere-6.7u1 preset, and gives the error against the figure. The
// third runs vSphere 7.0's worst-case table on Tesla V100 PCIe 32GB hosts
// (a 4 GB VM, each V100D Q type's framebuffer all in use) with the
// vsphere-7.0 preset, and beside it the same VM with fb-precopy and the
// 7.0 expected table's figure.
//
// Usage:
//
//	go run ./examples/vmotion [-link NAME] [-csv FILE] [-json FILE] [-svg FILE] [-figure FILE] [-warmup D] [-seed N]
//		[-workers N] [-shard i/n]
//
// -link is the sweep's and the 6.7 U1 points' network; the 7.0 points run
// over their table's (10g). -csv and -json (JSON Lines, one object a line)
// write every migration, one a row, its table column naming the table it
// belongs to.
//
// Every migration runs between hosts of its own, so the migrations are a
// grid of independent points (package sweep): -workers N runs N at once
// (default one per core), with the same output for any N. -shard i/n runs
// only shard i of n, a contiguous block of the rows in their order, for a
// batch system to spread the sweep over machines: it prints that shard's
// rows without the notes under each table, which need every row, and -csv
// and -json write its rows, the CSV header in shard 0's file alone, so
// that the files of shards 0 to n-1, concatenated in order, are the whole
// run's, byte for byte. -svg and -figure draw the whole run and are
// refused with -shard.
//
// -svg FILE draws the figure: stun time per profile, Legacy, PreCopy and
// PostCopy side by side, and the 1 s line; and each published table's
// points by GiB in use with the simulated stun of each. It runs the go
// command on the examples/plot module, which draws with
// gonum.org/v1/plot; -figure FILE writes the same figure as JSON, for
// that module or other tools.
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
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command without the process around it: arguments in, exit
// status out.
func run(args []string, stdout, stderr io.Writer) int {
	p := defaultParams()
	fs := flag.NewFlagSet("vmotion", flag.ContinueOnError)
	fs.SetOutput(stderr)
	linkName := fs.String("link", p.link.Name, "the migration network of the P40 VMs, `NAME` one of "+linkNames()+" (the V100 VMs use their published table's)")
	csvPath := fs.String("csv", "", "also write every migration of the three tables as CSV to `FILE`")
	jsonPath := fs.String("json", "", "also write every migration of the three tables as JSON Lines, one object a row, to `FILE`")
	svgPath := fs.String("svg", "", "draw the figure (stun time per profile and mode, and at the published points) as SVG to `FILE`, with the go command and examples/plot")
	figPath := fs.String("figure", "", "write the figure as JSON to `FILE`, for examples/plot or other tools")
	fs.DurationVar(&p.warmup, "warmup", p.warmup, "simulated time the workload runs before each migration starts")
	fs.Uint64Var(&p.seed, "seed", p.seed, "seed for the VMs' memory contents and request arrivals")
	var cfg sweep.Config
	cfg.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: vmotion [flags]\n\n"+
			"Live-migrates a VM serving Inception V3 on each Tesla P40 Q profile, with vGPU memory\n"+
			"copied during the stun (Legacy, as vSphere 6.7 U1), pre-copied (PreCopy) and post-copied\n"+
			"(PostCopy), and prints stun time, total time, rounds, bytes on the wire and post-copy's\n"+
			"degradation (window, faults, fault latency, stall); then VMware's published 6.7 U1 points\n"+
			"at their GB in use, and vSphere 7.0's worst case on a Tesla V100 PCIe 32GB, against the\n"+
			"simulated stun of each.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vmotion: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return 2
	}
	link, err := migrate.LinkByName(*linkName)
	if err != nil {
		fmt.Fprintln(stderr, "vmotion:", err)
		return 2
	}
	p.link = link
	if !cfg.Shard.Whole() && (*svgPath != "" || *figPath != "") {
		fmt.Fprintln(stderr, "vmotion: -svg and -figure draw the whole run, not one -shard of it")
		return 2
	}
	rows, err := simulate(p, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "vmotion:", err)
		return 1
	}
	if err := report(stdout, p, cfg.Shard, rows); err != nil {
		fmt.Fprintln(stderr, "vmotion:", err)
		return 1
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{
		{*csvPath, func(w io.Writer) error { return writeCSV(w, rows, cfg.Shard) }},
		{*jsonPath, func(w io.Writer) error { return writeJSON(w, rows) }},
	} {
		if out.path == "" {
			continue
		}
		if err := tabular.WriteFile(out.path, out.write); err != nil {
			fmt.Fprintln(stderr, "vmotion:", err)
			return 1
		}
	}
	if err := buildFigure(p, rows).WriteFiles(*figPath, *svgPath); err != nil {
		fmt.Fprintln(stderr, "vmotion:", err)
		return 1
	}
	return 0
}

// linkNames lists the link presets -link accepts.
func linkNames() string {
	var names []string
	for _, l := range migrate.Links() {
		names = append(names, l.Name)
	}
	return strings.Join(names, ", ")
}

// report prints the heading, and each table with the notes under it. A
// shard's report has the tables of its rows, without the notes: they sum
// up every row of their table.
func report(w io.Writer, p params, shard sweep.Shard, rows []row) error {
	fmt.Fprintf(w, "vMotion of a vGPU VM serving Inception V3 (%.0f requests/s), after %v of workload.\n", p.requestsPerSec, p.warmup)
	if !shard.Whole() {
		fmt.Fprintf(w, "Shard %v, %d migrations: the notes under each table, which need every row, are left out.\n", shard, len(rows))
	}
	tb, err := stunTable(tableV100)
	if err != nil {
		return err
	}
	sections := []struct {
		table   string
		head    func()
		printed []string
		notes   func([]row) error
	}{{tableProfiles, func() {
		fmt.Fprintln(w, "Every Tesla P40 Q profile, its whole usable framebuffer in use, Legacy (6.7 U1), PreCopy and PostCopy,")
		fmt.Fprintf(w, "over %v; guest RAM %d GiB (%d GiB in use):\n", p.link, p.ramBytes>>30, p.ramFootprintBytes>>30)
	}, printedProfiles, func(rs []row) error { return writeProfileNotes(w, p, rs) }}, {tablePublished, func() {
		fmt.Fprintln(w, "The published points: each of VMware's vSphere 6.7 U1 figures at its GB in use, a workload of exactly that")
		fmt.Fprintf(w, "footprint on the smallest P40 Q profile that holds it, guest RAM as above, Legacy with the %s preset\n", presetLegacy67)
		fmt.Fprintf(w, "over %s:\n", p.link.Name)
	}, printedPublished, func(rs []row) error { return writePublishedNotes(w, p, rs) }}, {tableV100, func() {
		fmt.Fprintf(w, "vSphere 7.0 on the V100: a VM of %d GiB (%d GiB of it in use) on each %s Q type, its usable framebuffer all\n",
			tb.VMRAMGiB, p.v100RAMFootprintBytes>>30, tb.GPUModel)
		fmt.Fprintf(w, "in use, between Tesla V100 PCIe 32GB hosts over %s (the table's link), Legacy with the %s preset:\n", tb.Link, presetLegacy70)
	}, printedV100, func(rs []row) error { return writeV100Notes(w, rs) }}}
	for _, sec := range sections {
		rs := tableRows(rows, sec.table)
		if len(rs) == 0 && !shard.Whole() {
			continue
		}
		fmt.Fprintln(w)
		sec.head()
		if err := printedTable(rs, sec.table, sec.printed).WriteText(w); err != nil {
			return err
		}
		if shard.Whole() {
			fmt.Fprintln(w)
			if err := sec.notes(rs); err != nil {
				return err
			}
		}
	}
	return nil
}
