// Command remotegpu trains on a GPU in another host, as VMware vSphere
// Bitfusion lets a VM do, and measures what the network costs: the
// experiment behind Figures 2 to 4 of "Machine Learning Leveraging NVIDIA
// GPUs with Bitfusion on VMware vSphere (Part 2 of 2)" (VMware blog,
// 2019).
//
// A VM trains Inception V3 and ResNet-50 with the library's training
// workload (vgpu.NewTraining), one iteration at a time as
// tf_cnn_benchmarks does, at batch sizes 16 to 128: first on a local
// P40-24Q, the baseline, then on a P40-24Q session of a GPU server
// (vgpu.Host.OpenRemote) over each of the source's three networks, 10 Gb/s
// VMXNET3, 100 Gb/s RoCE in DirectPath I/O and PVRDMA over the same RoCE
// (vgpu.RemoteVMXNET3, RemoteRoCE, RemotePVRDMA). Each iteration's batch
// crosses the link to the server and every CUDA call that waits for an
// answer costs a round trip, so the overhead is highest on the slow link
// and the small batches. A second table has several client VMs, each on a
// host of its own, sharing one server GPU: where one client leaves the GPU
// idle while it waits on the network, several keep it busy.
//
// Usage:
//
//	go run ./examples/remotegpu [-csv[=FILE]] [-json FILE] [-svg FILE] [-figure FILE] [-iterations N] [-batches LIST] [-clients LIST]
//
// -csv alone prints the overhead table as CSV instead of aligned columns,
// for a spreadsheet or a plotting script; -csv=FILE (or -csv FILE) prints
// the tables as usual and also writes the overhead table as CSV to FILE.
// -json FILE writes both tables as one JSON object.
//
// -svg FILE draws the figure, the source's Figures 2 to 4 as a panel per
// link and the sharing runs' GPU utilization under them. It runs the go
// command on the examples/plot module, which draws with gonum.org/v1/plot;
// -figure FILE writes the same figure as JSON.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/vgpusim/vgpusim/examples/tabular"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command without the process around it: arguments in, exit
// status out.
func run(args []string, stdout, stderr io.Writer) int {
	p := defaultParams()
	fs := flag.NewFlagSet("remotegpu", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var csvOut tabular.CSVFlag
	fs.Var(&csvOut, "csv", "print the overhead table as CSV instead of aligned columns;\n-csv=FILE (or -csv FILE) prints the tables as usual and also writes the overhead table as CSV to FILE")
	jsonPath := fs.String("json", "", "also write both tables as one JSON object to `FILE`")
	svgPath := fs.String("svg", "", "draw the figure (normalized performance per link, model and batch; the shared GPU's utilization)\nas SVG to `FILE`, with the go command and examples/plot")
	figPath := fs.String("figure", "", "write the figure as JSON to `FILE`, for examples/plot or other tools")
	fs.IntVar(&p.iterations, "iterations", p.iterations, "training iterations measured per run, after the first (bounds the simulated time)")
	fs.Var(intList{&p.batches}, "batches", "the overhead table's batch sizes, a comma-separated `LIST`")
	fs.Var(intList{&p.clients}, "clients", "the numbers of client VMs sharing one server GPU, a comma-separated `LIST` (empty: no sharing table)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: remotegpu [flags]\n\n"+
			"Simulates ML training on a remote Tesla P40 over 10 GbE VMXNET3, 100 Gb RoCE and PVRDMA, as with\n"+
			"VMware vSphere Bitfusion, against a local P40-24Q, and several clients sharing one remote P40.\n\n")
		fs.PrintDefaults()
	}
	if err := tabular.ParseFlags(fs, &csvOut, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "remotegpu: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return 2
	}
	res, err := simulate(p)
	if err != nil {
		fmt.Fprintln(stderr, "remotegpu:", err)
		return 1
	}
	if err := output(stdout, p, res, csvOut); err != nil {
		fmt.Fprintln(stderr, "remotegpu:", err)
		return 1
	}
	if *jsonPath != "" {
		if err := tabular.WriteFile(*jsonPath, func(w io.Writer) error { return writeJSON(w, p, res) }); err != nil {
			fmt.Fprintln(stderr, "remotegpu:", err)
			return 1
		}
	}
	if err := buildFigure(p, res).WriteFiles(*figPath, *svgPath); err != nil {
		fmt.Fprintln(stderr, "remotegpu:", err)
		return 1
	}
	return 0
}

// output prints the overhead table as CSV if -csv stood alone; else both
// tables aligned, each with its note, and, with -csv FILE, the overhead
// table also as CSV to FILE.
func output(stdout io.Writer, p params, res result, csvOut tabular.CSVFlag) error {
	if csvOut.ToStdout() {
		return writeCSV(stdout, res)
	}
	fmt.Fprintf(stdout, "Training on a remote Tesla P40 (a %s session of a GPU server, the VM on another host)\n"+
		"against a local %s; one iteration on the GPU at a time, the mean of %d after the first.\n",
		localProfile, localProfile, p.iterations)
	for _, l := range p.links {
		fmt.Fprintf(stdout, "  %s: %v round trip, %.3f GB/s each way.\n", l.Name, l.RTT, float64(l.BytesPerSec)/1e9)
	}
	var calls []string
	for _, m := range p.models {
		calls = append(calls, fmt.Sprintf("%s %d", m.Name, m.RemoteCalls(2)))
	}
	fmt.Fprintf(stdout, "Remote calls waiting for an answer per iteration: %s; each image sent as 8-bit pixels.\n\n", strings.Join(calls, ", "))
	if err := overheadTable(res.rows).WriteText(stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if err := writeSummary(stdout, summarize(res.rows)); err != nil {
		return err
	}
	if len(res.share) > 0 {
		fmt.Fprintf(stdout, "\nClients sharing one remote P40, each a VM on a host of its own with a %s session over %s,\n"+
			"training %s at batch %d; GPU utilization over the window measured:\n", p.shareProfile, p.shareLink.Name, p.shareModel.Name, p.shareBatch)
		if err := shareTable(p, res.share).WriteText(stdout); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		if err := writeShareSummary(stdout, p, res.share); err != nil {
			return err
		}
	}
	if csvOut.Given() {
		return tabular.WriteFile(csvOut.Path(), func(w io.Writer) error { return writeCSV(w, res) })
	}
	return nil
}

// intList is a flag of comma-separated integers.
type intList struct{ v *[]int }

func (l intList) String() string {
	if l.v == nil {
		return ""
	}
	var s []string
	for _, n := range *l.v {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func (l intList) Set(s string) error {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("%q is not an integer", f)
		}
		out = append(out, n)
	}
	*l.v = out
	return nil
}
