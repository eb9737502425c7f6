package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/examples/figure"
	"github.com/vgpusim/vgpusim/migrate"
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

// The migration tests read the same runs, which take a few seconds.
var (
	smallRunsOnce sync.Once
	smallRuns     []serviceRun
	smallRunsErr  error
)

func sharedRuns(t *testing.T) (params, []serviceRun) {
	t.Helper()
	p := smallParams(t)
	smallRunsOnce.Do(func() { smallRuns, smallRunsErr = simulateRuns(p) })
	if smallRunsErr != nil {
		t.Fatal(smallRunsErr)
	}
	return p, smallRuns
}

// MobileNet, with a ninth of Inception V3's MACs, serves more requests per
// second than Inception V3 at capacity on every profile, at least as many
// at every rate, always at a lower mean latency; the verdict says so.
func TestMobileNetOutServesInception(t *testing.T) {
	p := smallParams(t)
	pts, err := simulateExperiments(p)
	if err != nil {
		t.Fatal(err)
	}
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

// runCommand runs the command with args, writing every file, and returns
// what it printed and the files' contents by name.
func runCommand(t *testing.T, args ...string) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"csv": "out.csv", "summary": "out_summary.csv", "experiments": "out_experiments.csv",
		"json": "out.json", "figure": "figure.json"}
	args = append(args, "-csv", filepath.Join(dir, files["csv"]), "-json", filepath.Join(dir, files["json"]),
		"-figure", filepath.Join(dir, files["figure"]))
	var out, errs bytes.Buffer
	if code := run(args, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	got := map[string][]byte{}
	for k, name := range files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got[k] = b
	}
	return out.String(), got
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
	var tables map[string][]map[string]any
	if err := json.Unmarshal(files["json"], &tables); err != nil {
		t.Fatal(err)
	}
	for i, name := range tableNames {
		key := name
		if i == 0 {
			key = "csv"
		}
		recs, err := csv.NewReader(bytes.NewReader(files[key])).ReadAll()
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
	f, err := figure.ReadJSON(bytes.NewReader(files["figure"]))
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
		"-csv", "-json", "-svg", "-figure", "mobilenet", "100g"} {
		if !strings.Contains(errs.String(), f) {
			t.Errorf("-h does not mention %s", f)
		}
	}
	for _, args := range [][]string{{"-nosuchflag"}, {"extra"}, {"-link", "56k"}, {"-model", "resnet"},
		{"-mode", "post-copy"}, {"-profile", "P40-5Q"}, {"-rate", "0"}, {"-duration", "150ms"},
		{"-migrate-at", "40s"}, {"-print-step", "0s"}, {"-ram", "4", "-ram-used", "4"}} {
		errs.Reset()
		if code := run(args, &out, &errs); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if !slices.Equal(tableNames, []string{"timeline", "summary", "experiments"}) {
		t.Errorf("table names %v", tableNames)
	}
}
