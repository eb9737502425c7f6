package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/examples/figure"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/sweep"
	"github.com/vgpusim/vgpusim/sweep/sweeptest"
	"github.com/vgpusim/vgpusim/vgpu"
)

// smallParams is a run of a few simulated seconds: MobileNet on a P40-1Q,
// whose Legacy stun (about 8 s) is the shortest a Q profile has, in a VM
// with 4 GiB of guest RAM, and two profiles and two rates for the
// experiments.
func smallParams(t *testing.T) params {
	t.Helper()
	p := defaultParams()
	prof, err := vgpu.ParseProfile("P40-1Q")
	if err != nil {
		t.Fatal(err)
	}
	p.profile, p.models = prof, []vgpu.Model{vgpu.MobileNet()}
	p.duration, p.migrateAt = 14*time.Second, time.Second
	p.ramBytes, p.ramFootprintBytes = 4*vgpu.GiB, vgpu.GiB
	p.expProfiles, p.expRates, p.expDuration = []string{"P40-1Q", "P40-8Q"}, []float64{10, 80}, time.Second
	if raceEnabled {
		p.expDuration = 500 * time.Millisecond
	}
	return p
}

// smallFlags are smallParams as flags, for the tests that run the command.
var smallFlags = []string{"-profile", "P40-1Q", "-model", "mobilenet", "-duration", "14s", "-migrate-at", "1s",
	"-ram", "4", "-ram-used", "1", "-exp-duration", "300ms"}

// The migration and experiment tests read the same results, which take a
// few seconds.
var (
	smallOnce sync.Once
	smallRes  results
	smallErr  error
)

func sharedResults(t *testing.T) (params, results) {
	t.Helper()
	p := smallParams(t)
	smallOnce.Do(func() { smallRes, smallErr = simulate(p) })
	if smallErr != nil {
		t.Fatal(smallErr)
	}
	return p, smallRes
}

func sharedRuns(t *testing.T) (params, []serviceRun) {
	t.Helper()
	p, res := sharedResults(t)
	return p, res.runs
}

// MobileNet, with a ninth of Inception V3's MACs, serves more requests per
// second than Inception V3 at capacity on every profile, at least as many
// at every rate, always at a lower mean latency; the verdict says so.
func TestMobileNetOutServesInception(t *testing.T) {
	p, res := sharedResults(t)
	pts := res.points
	if want := len(models) * (len(p.expProfiles) + len(p.expRates)); len(pts) != want {
		t.Fatalf("%d points, want %d", len(pts), want)
	}
	for _, pair := range pairs(pts) {
		inc, mob := pair[0], pair[1]
		if inc.model != vgpu.InceptionV3().Name || mob.model != vgpu.MobileNet().Name || inc.profile != mob.profile || inc.offered != mob.offered {
			t.Fatalf("pair %+v %+v", inc, mob)
		}
		t.Logf("experiment %s %s %.0f/s: Inception V3 %.1f/s %v, MobileNet %.1f/s %v",
			inc.experiment, inc.profile, inc.offered, inc.served, inc.mean, mob.served, mob.mean)
		if mob.mean <= 0 || mob.mean >= inc.mean {
			t.Errorf("%s %s: MobileNet's mean latency %v, Inception V3's %v", inc.experiment, inc.profile, mob.mean, inc.mean)
		}
		if inc.experiment == expProfiles && mob.served <= 1.5*inc.served {
			t.Errorf("%s at capacity: MobileNet %.1f/s, Inception V3 %.1f/s", inc.profile, mob.served, inc.served)
		}
	}
	// A bigger profile is a bigger share of the GPU: more throughput.
	if one, eight := pts[0], pts[len(models)]; eight.served <= one.served {
		t.Errorf("P40-8Q serves %.1f/s, P40-1Q %.1f/s", eight.served, one.served)
	}
	if line, ok := verdict(pts); !ok || !strings.HasPrefix(line, "Shape matches the document") {
		t.Errorf("verdict: %s", line)
	}
}

// Pre-copy's stun is under vMotion's 1 s standard and legacy's over it, and
// pre-copy delays fewer requests, loses less throughput and has a better
// worst latency.
func TestPreCopyUnderLegacy(t *testing.T) {
	_, runs := sharedRuns(t)
	out, err := summarize(runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].mode != migrate.Legacy.String() || out[1].mode != migrate.PreCopy.String() {
		t.Fatalf("summary %+v", out)
	}
	leg, pre := out[0], out[1]
	t.Logf("legacy %+v", leg)
	t.Logf("pre-copy %+v", pre)
	if pre.stun >= time.Second || leg.stun <= time.Second {
		t.Errorf("stun: pre-copy %v, legacy %v", pre.stun, leg.stun)
	}
	if pre.delayed >= leg.delayed || leg.delayed == 0 {
		t.Errorf("delayed: pre-copy %d, legacy %d", pre.delayed, leg.delayed)
	}
	if pre.worst >= leg.worst || leg.worst < leg.stun/2 {
		t.Errorf("worst latency: pre-copy %v, legacy %v (stun %v)", pre.worst, leg.worst, leg.stun)
	}
	if pre.lostPct >= leg.lostPct || leg.lostPct <= 0 {
		t.Errorf("throughput lost: pre-copy %.1f %%, legacy %.1f %%", pre.lostPct, leg.lostPct)
	}
}

// Every run's timeline has a step every 100 ms from the first to the end
// of the run; a migration's runs from the source to the destination, its
// stunned steps add up to the reported stun, and the printed timeline has
// a row per -print-step.
func TestTimelineCoversRun(t *testing.T) {
	p, runs := sharedRuns(t)
	if len(runs) != 1+len(p.modes) {
		t.Fatalf("%d runs", len(runs))
	}
	for _, r := range runs {
		if len(r.ticks) != int(p.duration/step) {
			t.Fatalf("%s: %d steps, want %d", r.name, len(r.ticks), p.duration/step)
		}
		var stunned time.Duration
		var served int64
		for i, k := range r.ticks {
			if k.at != time.Duration(i+1)*step {
				t.Fatalf("%s: step %d ends at %v", r.name, i, k.at)
			}
			stunned += k.stunned
			served += k.served
		}
		if whole := r.service.Metrics(0, p.duration).Completed; served != whole {
			t.Errorf("%s: the steps served %d, the run %d", r.name, served, whole)
		}
		first, last := r.ticks[0], r.ticks[len(r.ticks)-1]
		if r.report == nil {
			if stunned != 0 || last.phase != "running" || last.host != "source" {
				t.Errorf("%s: stunned %v, ends %s on %s", r.name, stunned, last.phase, last.host)
			}
			continue
		}
		if first.phase != "running" || first.host != "source" || last.phase != migrate.PhaseDone.String() || last.host != "destination" {
			t.Errorf("%s: starts %s on %s, ends %s on %s", r.name, first.phase, first.host, last.phase, last.host)
		}
		if stunned != r.report.Stun {
			t.Errorf("%s: stunned steps add up to %v, the report's stun is %v", r.name, stunned, r.report.Stun)
		}
	}
	if got := printedTimeline(p, runs); len(got.Rows) != int(p.duration/p.printStep) {
		t.Errorf("printed timeline has %d rows, want %d", len(got.Rows), p.duration/p.printStep)
	}
}

// runCommand runs the command with args, writing every file (but the
// figure with -shard, which refuses it), and returns what it printed and
// the files' contents by name: out.csv, out_summary.csv, ..., out.jsonl,
// out_summary.jsonl, ..., figure.json.
func runCommand(t *testing.T, args ...string) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	args = append(args, "-csv", filepath.Join(dir, "out.csv"), "-json", filepath.Join(dir, "out.jsonl"))
	if !slices.Contains(args, "-shard") {
		args = append(args, "-figure", filepath.Join(dir, "figure.json"))
	}
	var out, errs bytes.Buffer
	if code := run(args, &out, &errs); code != 0 {
		t.Fatalf("%q: exit %d: %s", args, code, errs.String())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got[e.Name()] = b
	}
	return out.String(), got
}

// jsonLines reads JSON Lines, one object a line.
func jsonLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for i, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			break
		}
		var o map[string]any
		if err := json.Unmarshal([]byte(line), &o); err != nil || !strings.HasSuffix(line, "}\n") {
			t.Fatalf("line %d %q: %v", i+1, line, err)
		}
		objs = append(objs, o)
	}
	return objs
}

// -csv writes three tables and -json the same three, cell for cell; the
// printed report has every part; the figure is valid; same flags, same
// bytes.
func TestOutputs(t *testing.T) {
	stdout, files := runCommand(t, smallFlags...)
	for _, want := range []string{"Timeline, MobileNet:", "legacy_phase", "pre-copy_p99_ms", "Migrations", "Experiment 1:",
		"Experiment 2:", "Shape matches the document"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	tables := map[string][]map[string]any{}
	for i, name := range tableNames {
		tables[name] = jsonLines(t, files[tablePath("out.jsonl", i)])
		recs, err := csv.NewReader(bytes.NewReader(files[tablePath("out.csv", i)])).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) < 2 || len(tables[name]) != len(recs)-1 {
			t.Fatalf("%s: CSV has %d records, JSON %d rows", name, len(recs), len(tables[name]))
		}
		for j, rec := range recs[1:] {
			for k, col := range recs[0] {
				v, ok := tables[name][j][col]
				if !ok {
					t.Fatalf("%s row %d: JSON has no %s", name, j, col)
				}
				var same bool
				switch v := v.(type) {
				case nil:
					same = rec[k] == ""
				case string:
					same = rec[k] == v
				case float64:
					f, err := json.Number(rec[k]).Float64()
					same = err == nil && f == v
				}
				if !same {
					t.Errorf("%s row %d %s: CSV %q, JSON %v", name, j, col, rec[k], v)
				}
			}
		}
	}
	if n := len(tables["timeline"]); n != 3*140 {
		t.Errorf("timeline has %d rows, want 3 runs of 140 steps", n)
	}
	if len(files) != 7 {
		t.Errorf("files %v, want three CSV, three JSON Lines and the figure", slices.Sorted(maps.Keys(files)))
	}
	f, err := figure.ReadJSON(bytes.NewReader(files["figure.json"]))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Panels) != 3 {
		t.Errorf("figure has %d panels, want a latency panel and two experiment panels", len(f.Panels))
	}
	if raceEnabled {
		return // the run above is what the race detector needs to see
	}
	stdout2, files2 := runCommand(t, smallFlags...)
	if stdout2 != stdout {
		t.Error("two runs printed different reports")
	}
	for k := range files {
		if !bytes.Equal(files[k], files2[k]) {
			t.Errorf("two runs wrote different %s", k)
		}
	}
}

func TestFlags(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-h"}, &out, &errs); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	for _, f := range []string{"-profile", "-model", "-rate", "-link", "-mode", "-duration", "-migrate-at", "-seed",
		"-csv", "-json", "-svg", "-figure", "-workers", "-shard", "mobilenet", "100g"} {
		if !strings.Contains(errs.String(), f) {
			t.Errorf("-h does not mention %s", f)
		}
	}
	for _, args := range [][]string{{"-nosuchflag"}, {"extra"}, {"-link", "56k"}, {"-model", "resnet"},
		{"-mode", "post-copy"}, {"-profile", "P40-5Q"}, {"-rate", "0"}, {"-duration", "150ms"},
		{"-migrate-at", "40s"}, {"-print-step", "0s"}, {"-ram", "4", "-ram-used", "4"}, {"-shard", "3/3"}, {"-shard", "1/"},
		{"-workers", "-4"}, {"-shard", "1/2", "-svg", "x.svg"}, {"-shard", "0/2", "-figure", "x.json"}} {
		errs.Reset()
		if code := run(args, &out, &errs); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if !slices.Equal(tableNames, []string{"timeline", "summary", "experiments"}) {
		t.Errorf("table names %v", tableNames)
	}
}

// The sweep run as four shards, each table's -csv and -json files
// concatenated in shard order, is the whole run's, byte for byte; so is
// the whole run on one worker and on four, which print the same report.
// Both models' runs and eleven experiment points: thirteen units.
func TestShardsConcatenate(t *testing.T) {
	if raceEnabled {
		t.Skip("six runs under the race detector take minutes")
	}
	args := []string{"-profile", "P40-1Q", "-duration", "14s", "-migrate-at", "1s", "-ram", "4", "-ram-used", "1",
		"-exp-duration", "300ms"}
	noFigure := func(files map[string][]byte) map[string][]byte {
		delete(files, "figure.json")
		return files
	}
	oneOut, one := runCommand(t, append(args, "-workers", "1")...)
	fourOut, four := runCommand(t, append(args, "-workers", "4")...)
	sweeptest.Equal(t, "4 workers", one, four)
	if fourOut != oneOut {
		t.Errorf("4 workers printed\n%s\nwant\n%s", fourOut, oneOut)
	}
	shards := sweeptest.Concat(t, 4, func(s sweep.Shard) map[string][]byte {
		out, files := runCommand(t, append(args, "-shard", s.String(), "-workers", "2")...)
		if want := fmt.Sprintf("Shard %v, ", s); !strings.Contains(out, want) || strings.Contains(out, "Shape") {
			t.Errorf("shard %v's report does not say %q or has the verdict:\n%s", s, want, out)
		}
		return files
	})
	sweeptest.Equal(t, "4 shards", noFigure(one), shards)
}
