// Command memcensus prints what a raw memory image holds, by the content
// classes of package memory, and what each codec of package checkpoint
// would make of it:
//
//	go run ./cmd/memcensus [-page 4096] [-sample N] [-json] IMAGE
//
// IMAGE is a raw dump of guest RAM or of a framebuffer (QEMU's
// dump-guest-memory in raw form, a hypervisor's snapshot of memory). The
// census reads it once, a few megabytes at a time, and classifies every
// page with memory.ClassifyPage: zero, weights (float32 of small
// magnitude), activations (such floats, many of them zero), text, random
// (high byte entropy) or other. For each class it prints the pages, bytes
// and share of the image, and the wire/raw ratio that checkpoint's batch
// encoder gives at each codec level — none, s2 and zstd at its fastest —
// on a sample of the class's pages: up to -sample pages of each class
// (1024 by default), drawn uniformly from the whole image and encoded in
// image order, in batches of checkpoint.DefaultBatchBytes, so that a huge
// image costs a read and the encoding of a few megabytes. The whole
// image's ratios are the classes' weighted by their bytes. An image whose
// size is not a multiple of the page size has its last page padded with
// zeros, and says so.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the command with its arguments and outputs; it returns the exit
// status: 0, 1 for a failure, 2 for a bad command line.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("memcensus", flag.ContinueOnError)
	fs.SetOutput(stderr)
	page := fs.Int("page", 4096, "page size in bytes, a power of two")
	sample := fs.Int("sample", DefaultSample, "most pages of each class encoded to measure the codecs")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: memcensus [-page 4096] [-sample N] [-json] IMAGE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || *sample <= 0 {
		fs.Usage()
		return 2
	}
	path := fs.Arg(0)
	rep, err := censusFile(path, Options{PageSize: *page, Sample: *sample})
	if err != nil {
		fmt.Fprintf(stderr, "memcensus: %s: %v\n", path, err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = writeText(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "memcensus: %v\n", err)
		return 1
	}
	return 0
}

// censusFile takes the census of the file at path.
func censusFile(path string, opts Options) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	rep, err := Census(f, st.Size(), opts)
	if err != nil {
		return nil, err
	}
	rep.Image = path
	return rep, nil
}

// writeText prints rep as a table.
func writeText(w io.Writer, rep *Report) error {
	fmt.Fprintf(w, "image %s: %s, %d pages of %d bytes", rep.Image, mib(rep.Bytes), rep.Pages, rep.PageSize)
	if rep.PaddedBytes > 0 {
		fmt.Fprintf(w, " (last page padded with %d zero bytes)", rep.PaddedBytes)
	}
	fmt.Fprintf(w, "\nwire/raw: checkpoint.BatchEncoder on up to %d pages of each class, drawn from the whole image,\n"+
		"encoded in image order in batches of %s; whole image: the classes' ratios weighted by their bytes\n\n",
		rep.Sample, mib(int64(rep.BatchBytes)))
	const row = "%-12s %9s %11s %7s %8s %7s %7s %7s\n"
	fmt.Fprintf(w, row, "class", "pages", "bytes", "share", "sampled", "none", "s2", "zstd")
	ratio := func(r *Ratios, i int) string {
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f", *r.at(i))
	}
	for _, c := range rep.Classes {
		fmt.Fprintf(w, row, c.Class, fmt.Sprint(c.Pages), mib(c.Bytes), fmt.Sprintf("%.1f %%", 100*c.Share),
			fmt.Sprint(c.Sampled), ratio(c.WireRaw, 0), ratio(c.WireRaw, 1), ratio(c.WireRaw, 2))
	}
	_, err := fmt.Fprintf(w, row, "whole image", fmt.Sprint(rep.Pages), mib(rep.Pages*int64(rep.PageSize)), "100.0 %", "",
		ratio(&rep.Whole, 0), ratio(&rep.Whole, 1), ratio(&rep.Whole, 2))
	return err
}

// mib formats n bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
