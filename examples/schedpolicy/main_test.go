package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/sched"
)

func quickParams() params {
	p := defaultParams()
	p.steps = 150
	return p
}

// Figures 4 and 5 of the source: best effort gives higher GPU utilization
// and shorter training than equal share wherever VMs share the GPU; fixed
// share, which reserves 1/max-instances per VM, gives no more than equal
// share. A VM alone on the GPU trains the same under every policy.
func TestBestEffortHigherUtilizationShorterTraining(t *testing.T) {
	p := quickParams()
	rows, err := simulate(p)
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(rows)
	for _, name := range p.profiles {
		be, es, fs := s.sharing[name][sched.BestEffort], s.sharing[name][sched.EqualShare], s.sharing[name][sched.FixedShare]
		if be.vms == 0 || es.vms == 0 || fs.vms == 0 {
			t.Fatalf("%s: missing results %+v", name, s.sharing[name])
		}
		if be.vms == 1 {
			for _, g := range []gpuResult{es, fs} {
				if g.meanS < be.meanS*0.999 || g.meanS > be.meanS*1.001 {
					t.Errorf("%s, one VM: training %.3fs vs best effort %.3fs, want the same", name, g.meanS, be.meanS)
				}
			}
			continue
		}
		if be.utilPct < es.utilPct+5 {
			t.Errorf("%s: best effort utilization %.1f%%, equal share %.1f%%: want best effort clearly higher", name, be.utilPct, es.utilPct)
		}
		if be.maxS >= es.minS {
			t.Errorf("%s: slowest best-effort VM %.3fs, fastest equal-share VM %.3fs: want best effort shorter", name, be.maxS, es.minS)
		}
		if fs.utilPct > es.utilPct+0.5 || fs.meanS < es.meanS*0.99 {
			t.Errorf("%s: fixed share %.1f%% / %.3fs beats equal share %.1f%% / %.3fs", name, fs.utilPct, fs.meanS, es.utilPct, es.meanS)
		}
	}
	// A P40-1Q VM is guaranteed 1/24 of the GPU under fixed share: with
	// three VMs that is far below the third equal share gives each.
	if fs, es := s.sharing["P40-1Q"][sched.FixedShare], s.sharing["P40-1Q"][sched.EqualShare]; fs.meanS < 3*es.meanS {
		t.Errorf("P40-1Q fixed share %.3fs, equal share %.3fs: want fixed share far slower", fs.meanS, es.meanS)
	}
}

// Equal and fixed share protect a training VM from noisy neighbours: its
// training time barely moves when they get busy. Under best effort it
// moves a lot.
func TestShareProtectsFromNoisyNeighbour(t *testing.T) {
	s := summarize(must(simulate(quickParams())))
	if d := s.slowdown[sched.BestEffort]; d < 1.3 {
		t.Errorf("best effort: noisy neighbours slow the VM by x%.2f, want well above x1.3", d)
	}
	for _, p := range []sched.Policy{sched.EqualShare, sched.FixedShare} {
		if d := s.slowdown[p]; d < 0.95 || d > 1.05 {
			t.Errorf("%s: noisy neighbours change the VM's training time by x%.2f, want within 5%%", p, d)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// -csv writes the printed table's rows under column names that carry their
// units.
func TestCSVIsTheSameTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv")
	var out, errs bytes.Buffer
	if code := run([]string{"-csv", path, "-steps", "20"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(recs[0], ",") != strings.Join(columns, ",") {
		t.Fatalf("CSV header %v, want %v", recs[0], columns)
	}
	for _, c := range []string{"gpu_util_pct", "vm_gpu_time_pct", "training_time_s"} {
		if !strings.Contains(strings.Join(recs[0], ","), c) {
			t.Errorf("CSV lacks the unit-carrying column %s", c)
		}
	}
	p := defaultParams()
	p.steps = 20
	rows := must(simulate(p))
	if len(recs)-1 != len(rows) {
		t.Fatalf("CSV has %d rows, the table %d", len(recs)-1, len(rows))
	}
	for i, r := range rows {
		if strings.Join(recs[i+1], ",") != strings.Join(r.fields(), ",") {
			t.Fatalf("CSV row %d %v, table row %v", i+1, recs[i+1], r.fields())
		}
		if !strings.Contains(out.String(), r.profile) {
			t.Fatalf("printed table lacks %s", r.profile)
		}
	}
}

// Every spelling of -csv writes the same CSV: alone, to standard output
// instead of the aligned table; with a file, to the file beside the table.
func TestCSVFlagForms(t *testing.T) {
	dir := t.TempDir()
	csvOf := func(args ...string) (stdout, file string) {
		t.Helper()
		var out, errs bytes.Buffer
		if code := run(append(args, "-steps", "5"), &out, &errs); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs.String())
		}
		if p := filepath.Join(dir, "out.csv"); strings.Contains(strings.Join(args, " "), p) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(p)
			return out.String(), string(b)
		}
		return out.String(), ""
	}
	path := filepath.Join(dir, "out.csv")
	alone, _ := csvOf("-csv")
	if !strings.HasPrefix(alone, strings.Join(columns, ",")+"\n") {
		t.Fatalf("-csv alone printed %.80q..., want CSV", alone)
	}
	dash, _ := csvOf("-csv", "-")
	table, spaced := csvOf("-csv", path)
	_, joined := csvOf("-csv=" + path)
	if dash != alone || spaced != alone || joined != alone {
		t.Fatal("-csv, -csv -, -csv FILE and -csv=FILE wrote different CSV")
	}
	if strings.Contains(table, strings.Join(columns, ",")) || !strings.Contains(table, "training_time_s") {
		t.Fatalf("with -csv FILE the printed table is not the aligned one: %.80q...", table)
	}
}

func TestSameSeedSameOutput(t *testing.T) {
	var a, b, errs bytes.Buffer
	run([]string{"-steps", "20", "-seed", "7"}, &a, &errs)
	run([]string{"-steps", "20", "-seed", "7"}, &b, &errs)
	if a.String() != b.String() || a.Len() == 0 {
		t.Fatal("two runs with the same seed printed different output")
	}
}

func TestFlags(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-h"}, &out, &errs); code != 0 || !strings.Contains(errs.String(), "-csv") || !strings.Contains(errs.String(), "-json") || !strings.Contains(errs.String(), "-svg") || !strings.Contains(errs.String(), "-figure") {
		t.Errorf("-h: exit %d, usage %q", code, errs.String())
	}
	if code := run([]string{"-nosuchflag"}, &out, &errs); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
	if code := run([]string{"-vms", "1"}, &out, &errs); code != 1 {
		t.Errorf("-vms 1: exit %d, want 1", code)
	}
}
