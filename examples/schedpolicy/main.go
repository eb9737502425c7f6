// Command schedpolicy compares the vGPU scheduler's three policies on
// machine-learning training, the experiment behind Figures 4 and 5 of
// "GPU Virtualization for Machine Learning Workloads, Part 2"
// (seed 001_322282e416af8153.txt).
//
// VMs of several P40 profiles train side by side, each step a burst of GPU
// work followed by host-side batch loading. Best effort lends every idle
// moment of the GPU, so it shows higher utilization and shorter training;
// equal and fixed share reserve each VM's slot even when it is idle. The
// second scenario puts one training VM next to idle, then busy, neighbours:
// under best effort its training time depends on what the neighbours do;
// under equal and fixed share it does not.
//
// Usage:
//
//	go run ./examples/schedpolicy [-csv FILE] [-steps N] [-vms N] [-seed N]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
	csvPath := fs.String("csv", "", "also write the table as CSV to `FILE`")
	fs.IntVar(&p.steps, "steps", p.steps, "training steps per VM")
	fs.IntVar(&p.vms, "vms", p.vms, "VMs per GPU (fewer where a profile fits fewer)")
	fs.Uint64Var(&p.seed, "seed", p.seed, "seed for each VM's start time and batch-loading times")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: schedpolicy [flags]\n\n"+
			"Simulates ML training VMs sharing a Tesla P40 under the best effort, equal share\n"+
			"and fixed share vGPU schedulers, and prints GPU utilization and training time per VM.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
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
	fmt.Fprintf(stdout, "Training VMs on a Tesla P40: %d steps of %v GPU work (kernels of %v) and %v of batch loading each.\n\n",
		p.steps, p.gpuWork, p.kernel, p.cpuWork)
	if err := writeTable(stdout, rows); err != nil {
		fmt.Fprintln(stderr, "schedpolicy:", err)
		return 1
	}
	fmt.Fprintln(stdout)
	if err := writeSummary(stdout, p.profiles, summarize(rows)); err != nil {
		fmt.Fprintln(stderr, "schedpolicy:", err)
		return 1
	}
	if *csvPath != "" {
		if err := writeCSVFile(*csvPath, rows); err != nil {
			fmt.Fprintln(stderr, "schedpolicy:", err)
			return 1
		}
	}
	return 0
}
