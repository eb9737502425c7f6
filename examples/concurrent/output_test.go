package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/examples/figure"
	"github.com/vgpusim/vgpusim/examples/internal/tablecheck"
	"github.com/vgpusim/vgpusim/sweep"
	"github.com/vgpusim/vgpusim/sweep/sweeptest"
)

// -json writes the CSV's table as JSON Lines: the same rows, one object a
// line, keys in column order, the same numbers.
func TestJSONIsTheCSVTable(t *testing.T) {
	o := smallOutput(t)
	tablecheck.JSONLines(t, columns, o.csv, o.json)
}

// -figure writes a figure the plotting module accepts: per profile, the
// stun in both schedules under the 1 s standard, each VM's time and the
// group's time in all, the latency before, during and after.
func TestFigure(t *testing.T) {
	f, err := figure.ReadJSON(bytes.NewReader(smallOutput(t).figure))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Panels) != 3 {
		t.Fatalf("%d panels, want 3", len(f.Panels))
	}
	for i, p := range f.Panels {
		if !slices.Equal(p.X.Categories, []string{"P40-1Q"}) || len(p.Series) != []int{2, 4, 3}[i] {
			t.Errorf("panel %q: categories %v, %d series", p.Title, p.X.Categories, len(p.Series))
		}
		for _, s := range p.Series {
			if s.Kind != figure.Bars || len(s.Points) != 1 || s.Points[0].Y <= 0 {
				t.Errorf("panel %q series %q: %s %v, want one bar", p.Title, s.Name, s.Kind, s.Points)
			}
		}
	}
	if h := f.Panels[0].HLines; len(h) != 1 || h[0].Y != 1 || f.Panels[0].Y.Unit != "s" {
		t.Errorf("stun panel: lines %v, unit %q", h, f.Panels[0].Y.Unit)
	}
	// Each concurrent over alone, all concurrent under all one by one.
	if y := func(i int) float64 { return f.Panels[1].Series[i].Points[0].Y }; !(y(0) > y(1) && y(2) < y(3)) {
		t.Errorf("time panel: %v", f.Panels[1].Series)
	}
}

// Same flags, same bytes: the table, the CSV, the JSON and the figure.
func TestSameOutputTwice(t *testing.T) {
	skipUnderRace(t)
	a, b := smallOutput(t), runWith(t, smallArgs()...)
	if !bytes.Equal(a.stdout, b.stdout) || !bytes.Equal(a.csv, b.csv) || !bytes.Equal(a.json, b.json) || !bytes.Equal(a.figure, b.figure) {
		t.Fatalf("two runs differ:\n%s\n%s", a.stdout, b.stdout)
	}
}

func TestFlags(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-h"}, &out, &errs); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	for _, f := range []string{"-profiles", "-mode", "-vms", "-workload", "-link", "-warmup", "-seed", "-csv", "-json", "-svg", "-figure",
		"-workers", "-shard"} {
		if !strings.Contains(errs.String(), f) {
			t.Errorf("-h does not mention %s:\n%s", f, errs.String())
		}
	}
	for _, args := range [][]string{{"-nosuchflag"}, {"-link", "56k"}, {"extra"}, {"-profiles", "P40-5Q"},
		{"-profiles", "T4-1Q"}, {"-mode", "fast"}, {"-workload", "games"}, {"-shard", "2/2"}, {"-shard", "a/b"},
		{"-workers", "-1"}, {"-shard", "0/2", "-svg", "x.svg"}, {"-shard", "1/2", "-figure", "x.json"}} {
		errs.Reset()
		if code := run(args, &out, &errs); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	for _, args := range [][]string{{"-warmup", "-1s"}, {"-vms", "0"}, {"-vms", "9"}} {
		if code := run(args, &out, &errs); code != 1 {
			t.Errorf("%q: exit %d, want 1", args, code)
		}
	}
}

// The sweep's scenarios run as four shards, each -csv and -json file
// concatenated in shard order, are the whole run's, byte for byte; so is
// the whole run on one worker and on four, which print the same report.
// Eight scenarios: two profiles, both modes, both schedules.
func TestShardsConcatenate(t *testing.T) {
	skipUnderRace(t)
	args := []string{"-profiles", "P40-1Q,P40-2Q", "-mode", "both", "-vms", "2", "-warmup", "1s"}
	files := func(o output) map[string][]byte { return map[string][]byte{"csv": o.csv, "json": o.json} }
	one := runWith(t, append(args, "-workers", "1")...)
	if n := len(tablecheck.Rows(t, one.csv, columnNames())); n != 16 {
		t.Fatalf("%d rows, want 16", n)
	}
	four := runWith(t, append(args, "-workers", "4")...)
	sweeptest.Equal(t, "4 workers", files(one), files(four))
	if !bytes.Equal(one.stdout, four.stdout) || !bytes.Equal(one.figure, four.figure) {
		t.Errorf("4 workers printed\n%s\nwant\n%s", four.stdout, one.stdout)
	}
	shards := sweeptest.Concat(t, 4, func(s sweep.Shard) map[string][]byte {
		o := runWith(t, append(args, "-shard", s.String(), "-workers", "2")...)
		if want := fmt.Sprintf("Shard %v, 4 migrations: ", s); !strings.Contains(string(o.stdout), want) ||
			strings.Contains(string(o.stdout), "concurrent migrations all ended") {
			t.Errorf("shard %v's report does not say %q or has the summary:\n%s", s, want, o.stdout)
		}
		return files(o)
	})
	sweeptest.Equal(t, "4 shards", files(one), shards)
}
