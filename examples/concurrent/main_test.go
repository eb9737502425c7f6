package main

import (
	"bytes"
	"fmt"
	"github.com/vgpusim/vgpusim/examples/internal/tablecheck"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// output is what one run printed and wrote.
type output struct {
	stdout, csv, json, figure []byte
}

// smallArgs are the flags of the runs the tests check: one small profile,
// a short warm-up; six VMs, as the blog post's Figure 2 has, or two under the
// race detector.
func smallArgs() []string {
	vms := "6"
	if raceEnabled {
		vms = "2"
	}
	return []string{"-profiles", "P40-1Q", "-vms", vms, "-warmup", "1s"}
}

// runWith runs the program with args, asking for every file but the SVG,
// which needs the plotting module and has its own tests there, and but the
// figure with -shard, which refuses it.
func runWith(t *testing.T, args ...string) output {
	t.Helper()
	dir := t.TempDir()
	paths := map[string]string{}
	for _, f := range []string{"csv", "json", "figure"} {
		if f == "figure" && slices.Contains(args, "-shard") {
			continue
		}
		paths[f] = filepath.Join(dir, "out."+f)
		args = append(args, "-"+f, paths[f])
	}
	var out, errs bytes.Buffer
	if code := run(args, &out, &errs); code != 0 {
		t.Fatalf("%q: exit %d: %s", args, code, errs.String())
	}
	read := func(f string) []byte {
		if paths[f] == "" {
			return nil
		}
		b, err := os.ReadFile(paths[f])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return output{out.Bytes(), read("csv"), read("json"), read("figure")}
}

// The tests that only read the small run's output share one.
var (
	sharedOnce sync.Once
	shared     output
	sharedOK   bool
)

func smallOutput(t *testing.T) output {
	t.Helper()
	sharedOnce.Do(func() {
		shared = runWith(t, smallArgs()...)
		sharedOK = true
	})
	if !sharedOK {
		t.Fatal("the small run failed")
	}
	return shared
}

// skipUnderRace skips a test that repeats a run: the race detector has
// nothing to find in a program that starts no goroutine, and one run
// under it takes a minute.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("a second run under the race detector takes a minute")
	}
}

// vmCount is the -vms the small run used.
func vmCount(t *testing.T) int {
	args := smallArgs()
	n, err := strconv.Atoi(args[slices.Index(args, "-vms")+1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The table covers every VM in both schedules, concurrent first, and the
// printed table shows each row.
func TestEveryVMBothSchedules(t *testing.T) {
	o := smallOutput(t)
	rows := tablecheck.Rows(t, o.csv, columnNames())
	n := vmCount(t)
	if len(rows) != 2*n {
		t.Fatalf("%d rows, want %d", len(rows), 2*n)
	}
	printed := map[string]bool{} // the printed rows' first four cells
	for line := range strings.Lines(string(o.stdout)) {
		if f := strings.Fields(line); len(f) > 4 {
			printed[strings.Join(f[:4], " ")] = true
		}
	}
	for i, r := range rows {
		sched, vm := schedules[i/n], fmt.Sprintf("vm%d", i%n+1)
		if r["profile"] != "P40-1Q" || r["mode"] != "pre-copy" || r["schedule"] != sched || r["vm"] != vm {
			t.Errorf("row %d is %s %s %s %s, want P40-1Q pre-copy %s %s", i+1,
				r["profile"], r["mode"], r["schedule"], r["vm"], sched, vm)
		}
		if key := strings.Join([]string{r["profile"], r["mode"], r["schedule"], r["vm"]}, " "); !printed[key] {
			t.Errorf("printed table lacks %s", key)
		}
	}
}

// The shape of the seed's experiment: sharing the link, every VM takes
// longer than it does alone, yet the group ends sooner than one VM after
// another; every pre-copy stun stays under the 1 s standard.
func TestConcurrentSlowerEachFasterInAll(t *testing.T) {
	rows := tablecheck.Rows(t, smallOutput(t).csv, columnNames())
	alone := map[string]float64{}
	var together, inARow, prevEnd float64
	for _, r := range rows {
		if r["schedule"] != oneByOne {
			continue
		}
		start, end := tablecheck.Number(t, r["start_s"]), tablecheck.Number(t, r["end_s"])
		if start != prevEnd {
			t.Errorf("%s one by one starts at %v s, the previous ended at %v s", r["vm"], start, prevEnd)
		}
		prevEnd = end
		alone[r["vm"]] = tablecheck.Number(t, r["total_s"])
		inARow = max(inARow, end)
	}
	for _, r := range rows {
		if r["meets_1s"] != "yes" || tablecheck.Number(t, r["stun_s"]) >= 1 {
			t.Errorf("%s %s: stun %s s", r["vm"], r["schedule"], r["stun_s"])
		}
		if r["schedule"] != concurrent {
			continue
		}
		total := tablecheck.Number(t, r["total_s"])
		if tablecheck.Number(t, r["start_s"]) != 0 || total <= alone[r["vm"]] {
			t.Errorf("%s concurrent: start %s s, total %v s, alone %v s", r["vm"], r["start_s"], total, alone[r["vm"]])
		}
		together = max(together, tablecheck.Number(t, r["end_s"]))
	}
	t.Logf("all %d: %v s concurrent, %v s one by one", len(alone), together, inARow)
	if together >= inARow {
		t.Errorf("concurrent migrations took %v s in all, one by one %v s", together, inARow)
	}
}

// With Legacy mode beside it, Legacy's stun (the framebuffer copied while
// the VM is stopped) is far over pre-copy's, concurrent or not.
func TestLegacyStunOverPreCopy(t *testing.T) {
	skipUnderRace(t)
	rows := tablecheck.Rows(t, runWith(t, "-profiles", "P40-1Q", "-vms", "2", "-warmup", "1s", "-mode", "both").csv, columnNames())
	stun := map[string]float64{}
	for _, r := range rows {
		stun[r["mode"]+"/"+r["schedule"]+"/"+r["vm"]] = tablecheck.Number(t, r["stun_s"])
	}
	if len(rows) != 8 || len(stun) != 8 {
		t.Fatalf("%d rows, %d distinct; want 8", len(rows), len(stun))
	}
	for k, legacy := range stun {
		rest, ok := strings.CutPrefix(k, "legacy/")
		if !ok {
			continue
		}
		if pre := stun["pre-copy/"+rest]; !(pre > 0 && pre < 1 && legacy > 1) {
			t.Errorf("%s: legacy stun %v s, pre-copy %v s", rest, legacy, pre)
		}
	}
}

// The stun holds requests up: with the inference service, some request
// completes in the second after each migration having waited at least
// half the stun, while the latency before stays an inference's.
func TestStunDelaysRequests(t *testing.T) {
	skipUnderRace(t)
	rows := tablecheck.Rows(t, runWith(t, "-profiles", "P40-1Q", "-vms", "2", "-warmup", "1s", "-workload", "inference").csv, columnNames())
	for _, r := range rows {
		stunMS := 1000 * tablecheck.Number(t, r["stun_s"])
		if after, before := tablecheck.Number(t, r["after_max_ms"]), tablecheck.Number(t, r["before_p99_ms"]); after < stunMS/2 || before >= stunMS/2 {
			t.Errorf("%s %s: stun %.0f ms, slowest request after %.0f ms, p99 before %.0f ms", r["vm"], r["schedule"], stunMS, after, before)
		}
	}
}
