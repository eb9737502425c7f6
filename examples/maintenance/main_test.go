package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/examples/figure"
)

// smallArgs are a rack of two hosts with two inference VMs and one
// training VM each, a short warm-up and down time.
var smallArgs = []string{"-hosts", "2", "-inference", "2", "-training", "1", "-warmup", "2s", "-down", "2s"}

// runFiles runs the program with args and every file but the SVG, and
// returns what it printed and wrote.
func runFiles(t *testing.T, args ...string) (stdout string, csvRows [][]string, js map[string][]map[string]any, fig figure.Figure) {
	t.Helper()
	dir := t.TempDir()
	paths := map[string]string{}
	for _, f := range []string{"csv", "json", "figure"} {
		paths[f] = filepath.Join(dir, "out."+f)
		args = append(args, "-"+f, paths[f])
	}
	var out, errs bytes.Buffer
	if code := run(args, &out, &errs); code != 0 {
		t.Fatalf("%q: exit %d: %s", args, code, errs.String())
	}
	read := func(f string) []byte {
		b, err := os.ReadFile(paths[f])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rows, err := csv.NewReader(bytes.NewReader(read("csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(read("json"), &js); err != nil {
		t.Fatal(err)
	}
	fig, err = figure.ReadJSON(bytes.NewReader(read("figure")))
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), rows, js, fig
}

// Every VM leaves each host in its turn: the first host's three VMs, then
// the second's three and the first's three that went there; the inference
// stuns meet the 1 s standard; the files hold the printed migrations and
// the utilization of every second; and a host reads 0 % while it is down.
func TestRollingMaintenance(t *testing.T) {
	stdout, rows, js, fig := runFiles(t, smallArgs...)
	if len(rows) != 1+9 || rows[0][0] != "maintenance" {
		t.Fatalf("CSV has %d rows, want a header and 9 migrations:\n%q", len(rows), rows)
	}
	for _, r := range rows[1:] {
		if !strings.Contains(stdout, r[1]) {
			t.Errorf("the printed table lacks %s", r[1])
		}
		if r[2] == "inference" && r[7] != "yes" {
			t.Errorf("%s: an inference VM's stun %s s misses 1 s", r[1], r[6])
		}
	}
	if len(js["migrations"]) != 9 || len(js["utilization"]) < 20 {
		t.Fatalf("JSON: %d migrations, %d seconds of utilization", len(js["migrations"]), len(js["utilization"]))
	}
	if js["migrations"][0]["vm"] != rows[1][1] {
		t.Errorf("JSON's first migration %v, CSV's %s", js["migrations"][0]["vm"], rows[1][1])
	}
	down := false
	for _, u := range js["utilization"] {
		if u["esx-01"].(float64) == 0 {
			down = true
		}
	}
	if !down {
		t.Error("the first host's GPUs were never idle while it was down")
	}
	if len(fig.Panels) != 2 || len(fig.Panels[0].Series[0].Points) != 9 || len(fig.Panels[1].Series) != 2 {
		t.Errorf("figure: %d panels", len(fig.Panels))
	}
}

// The same flags give the same output, byte for byte.
func TestSameOutputTwice(t *testing.T) {
	a, _, _, _ := runFiles(t, smallArgs...)
	b, _, _, _ := runFiles(t, smallArgs...)
	if a != b {
		t.Fatal("two runs printed different output")
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"-hosts", "1"}, {"-inference", "0", "-training", "0"}, {"-warmup", "0s"}, {"extra"}, {"-nope"}} {
		var out, errs bytes.Buffer
		if code := run(args, &out, &errs); code != 2 || errs.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs.String())
		}
	}
}
