// Command plot draws an example's figure, described as JSON by package
// github.com/vgpusim/vgpusim/examples/figure, as an SVG file with
// gonum.org/v1/plot.
//
// It is a module of its own, so that the library does not depend on gonum:
// the examples' -svg flag runs it with the go command (figure.WriteSVG),
// and it can be run by hand on a figure an example wrote with -figure FILE.
//
// Usage, in this directory:
//
//	go run . [-in FILE] -o FILE [-width LENGTH] [-height LENGTH]
//
// The figure is read from standard input unless -in names a file. The
// output is SVG, or PNG if its name ends in .png. Lengths
// are gonum's: "16cm", "6in", "450pt". A figure whose legends would take
// more than 40% of -width is drawn wider. The default height is 7 cm per
// panel, plus room for the title.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vgpusim/vgpusim/examples/figure"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stderr))
}

// run is the command without the process around it: arguments in, exit
// status out.
func run(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "read the figure's JSON from `FILE` instead of standard input")
	out := fs.String("o", "", "write the SVG to `FILE` (required)")
	width := fs.String("width", "16cm", "the figure's width, a `LENGTH` such as 16cm, 6in or 450pt")
	height := fs.String("height", "", "the figure's height, a `LENGTH`; default 7cm per panel plus the title")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: plot [flags]\n\n"+
			"Draws a figure described as JSON (package examples/figure) as SVG with gonum.org/v1/plot.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *out == "" {
		fmt.Fprintln(stderr, "plot: want -o FILE and no arguments")
		fs.Usage()
		return 2
	}
	w, err := vg.ParseLength(*width)
	if err != nil || w <= 0 {
		fmt.Fprintf(stderr, "plot: -width %q is not a positive length\n", *width)
		return 2
	}
	var h vg.Length
	if *height != "" {
		if h, err = vg.ParseLength(*height); err != nil || h <= 0 {
			fmt.Fprintf(stderr, "plot: -height %q is not a positive length\n", *height)
			return 2
		}
	}
	if err := drawFile(*in, *out, stdin, w, h); err != nil {
		fmt.Fprintln(stderr, "plot:", err)
		return 1
	}
	return 0
}

// drawFile reads the figure from path (stdin if "") and writes its SVG to out.
func drawFile(path, out string, stdin io.Reader, w, h vg.Length) error {
	r := stdin
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	fig, err := figure.ReadJSON(r)
	if err != nil {
		return err
	}
	// Long legend names widen the figure rather than squeeze its data.
	w = max(w, minWidth(fig))
	if h == 0 {
		h = defaultHeight(len(fig.Panels))
	}
	var c vg.CanvasWriterTo = newSVG(w, h)
	if strings.HasSuffix(out, ".png") {
		// For a quick look where no SVG viewer is at hand.
		c = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	}
	if err := render(fig, c); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// defaultHeight is 7 cm a panel and 1 cm for the title.
func defaultHeight(panels int) vg.Length {
	return vg.Length(panels)*7*vg.Centimeter + vg.Centimeter
}
