package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/examples/figure"
	"github.com/vgpusim/vgpusim/sched"
)

// -figure writes the source's Figures 4 and 5 as a valid figure: two
// panels, utilization in % and training time in s, a category per profile
// and a bar series per policy, whose points are the summary's; best effort's
// utilization is the highest and its training time the shortest of each
// profile shared by several VMs.
func TestFigure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "figure.json")
	var out, errs bytes.Buffer
	if code := run([]string{"-steps", "150", "-figure", path}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fig, err := figure.ReadJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	p := quickParams()
	s := summarize(must(simulate(p)))
	if len(fig.Panels) != 2 || fig.Panels[0].Y.Unit != "%" || fig.Panels[1].Y.Unit != "s" {
		t.Fatalf("panels %+v", fig.Panels)
	}
	for k, panel := range fig.Panels {
		if len(panel.X.Categories) != len(p.profiles) || len(panel.Series) != len(policies) {
			t.Fatalf("panel %d: %d categories, %d series", k+1, len(panel.X.Categories), len(panel.Series))
		}
		for i, name := range p.profiles {
			if !strings.HasPrefix(panel.X.Categories[i], name+"\n") {
				t.Errorf("category %d is %q, want %s first", i, panel.X.Categories[i], name)
			}
		}
		for j, pol := range policies {
			ser := panel.Series[j]
			if ser.Name != pol.String() || ser.Kind != figure.Bars || len(ser.Points) != len(p.profiles) {
				t.Fatalf("panel %d series %d: %s %s, %d points", k+1, j, ser.Name, ser.Kind, len(ser.Points))
			}
			for i, name := range p.profiles {
				want := s.sharing[name][pol].utilPct
				if k == 1 {
					want = s.sharing[name][pol].meanS
				}
				if pt := ser.Points[i]; pt.X != float64(i) || pt.Y != want {
					t.Errorf("panel %d %s %s: point %+v, want y %v", k+1, pol, name, pt, want)
				}
			}
		}
	}
	for i, name := range p.profiles {
		if s.sharing[name][sched.BestEffort].vms < 2 {
			continue
		}
		util, train := fig.Panels[0].Series, fig.Panels[1].Series
		for j := 1; j < len(policies); j++ {
			if util[0].Points[i].Y <= util[j].Points[i].Y || train[0].Points[i].Y >= train[j].Points[i].Y {
				t.Errorf("%s: best effort %.1f %% / %.2f s against %s %.1f %% / %.2f s", name,
					util[0].Points[i].Y, train[0].Points[i].Y, policies[j], util[j].Points[i].Y, train[j].Points[i].Y)
			}
		}
	}
}

// -json writes the CSV's table: the same rows and cells, numbers as
// numbers, a neighbour's missing training time as null.
func TestJSONIsTheCSVTable(t *testing.T) {
	dir := t.TempDir()
	csvPath, jsonPath := filepath.Join(dir, "out.csv"), filepath.Join(dir, "out.json")
	var out, errs bytes.Buffer
	if code := run([]string{"-steps", "20", "-csv", csvPath, "-json", jsonPath}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	p := defaultParams()
	p.steps = 20
	rows := must(simulate(p))
	var want bytes.Buffer
	if err := writeJSON(&want, rows); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("-json differs from the table's JSON")
	}
	for _, s := range []string{`"training_time_s": null`, `"gpu_util_pct": `, `"policy": "Best Effort"`} {
		if !bytes.Contains(got, []byte(s)) {
			t.Errorf("JSON lacks %s", s)
		}
	}
	if bytes.Contains(got, []byte(`"vm": "`)) {
		t.Error("a numeric column is written as a string")
	}
}
