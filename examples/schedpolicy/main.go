// Command schedpolicy compares the vGPU scheduler's three policies on
// machine-learning training, the experiment behind Figures 4 and 5 of
// "GPU Virtualization for Machine Learning Workloads, Part 2" (Uday
// Kurkure, Lan Vu, Hari Sivaraman; VMware blog, 2020).
//
// VMs of several P40 profiles train side by side with the library's
// training workload (vgpu.NewTraining), each step loading its batch on the
// host (TrainingConfig.DataLoad), the vGPU idle meanwhile, then running on
// the GPU. Best effort lends every idle moment of the GPU, so it shows
// higher utilization and shorter training; equal and fixed share reserve
// each VM's slot even when it is idle. The second scenario puts one
// training VM next to idle, then busy, neighbours (training with their
// input always ready): under best effort its training time depends on
// what the neighbours do; under equal and fixed share it does not.
//
// Usage:
//
//	go run ./examples/schedpolicy [-csv[=FILE]] [-json FILE] [-svg FILE] [-figure FILE] [-steps N] [-vms N] [-seed N]
//
// -csv alone prints the table as CSV instead of aligned columns, for a
// spreadsheet or a plotting script; -csv=FILE (or -csv FILE) prints the
// table as usual and also writes it as CSV to FILE. -json FILE writes the
// same table as JSON.
//
// -svg FILE draws the figure, the source's Figures 4 and 5 in two panels:
// GPU utilization and mean training time per profile, a bar per policy. It
// runs the go command on the examples/plot module, which draws with
// gonum.org/v1/plot; -figure FILE writes the same figure as JSON.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vgpusim/vgpusim/examples/tabular"
	"github.com/vgpusim/vgpusim/vgpu"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command without the process around it: arguments in, exit
// status out.
func run(args []string, stdout, stderr io.Writer) int {
	p := defaultParams()
	fs := flag.NewFlagSet("schedpolicy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var csvOut tabular.CSVFlag
	fs.Var(&csvOut, "csv", "print the table as CSV instead of aligned columns;\n-csv=FILE (or -csv FILE) prints it as usual and also writes it as CSV to FILE")
	jsonPath := fs.String("json", "", "also write the table as JSON to `FILE`")
	svgPath := fs.String("svg", "", "draw the figure (utilization and training time per policy and profile) as SVG to `FILE`, with the go command and examples/plot")
	figPath := fs.String("figure", "", "write the figure as JSON to `FILE`, for examples/plot or other tools")
	fs.IntVar(&p.steps, "steps", p.steps, "training steps per VM")
	fs.IntVar(&p.vms, "vms", p.vms, "VMs per GPU (fewer where a profile fits fewer)")
	fs.Uint64Var(&p.seed, "seed", p.seed, "seed for each VM's start time and batch-loading times")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: schedpolicy [flags]\n\n"+
			"Simulates ML training VMs sharing a Tesla P40 under the best effort, equal share\n"+
			"and fixed share vGPU schedulers, and prints GPU utilization and training time per VM.\n\n")
		fs.PrintDefaults()
	}
	if err := tabular.ParseFlags(fs, &csvOut, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "schedpolicy: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return 2
	}
	rows, err := simulate(p)
	if err != nil {
		fmt.Fprintln(stderr, "schedpolicy:", err)
		return 1
	}
	if err := output(stdout, p, rows, csvOut); err != nil {
		fmt.Fprintln(stderr, "schedpolicy:", err)
		return 1
	}
	if *jsonPath != "" {
		if err := tabular.WriteFile(*jsonPath, func(w io.Writer) error { return writeJSON(w, rows) }); err != nil {
			fmt.Fprintln(stderr, "schedpolicy:", err)
			return 1
		}
	}
	if err := buildFigure(p, summarize(rows)).WriteFiles(*figPath, *svgPath); err != nil {
		fmt.Fprintln(stderr, "schedpolicy:", err)
		return 1
	}
	return 0
}

// output prints the table, as CSV if -csv stood alone, else aligned with
// the summary under it and, with -csv FILE, also as CSV to FILE.
func output(stdout io.Writer, p params, rows []row, csvOut tabular.CSVFlag) error {
	if csvOut.ToStdout() {
		return writeCSV(stdout, rows)
	}
	w, err := p.training(0, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Training VMs on a Tesla P40 (%s, batch %d): %d steps of %v GPU work and %v ± %.0f %% of batch loading each.\n\n",
		p.model.Name, p.batch, p.steps, w.IterationWork(vgpu.P40()).Round(time.Microsecond), p.dataLoad, 100*p.dataJitter)
	if err := writeTable(stdout, rows); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if err := writeSummary(stdout, p.profiles, summarize(rows)); err != nil {
		return err
	}
	if csvOut.Given() {
		return tabular.WriteFile(csvOut.Path(), func(w io.Writer) error { return writeCSV(w, rows) })
	}
	return nil
}
