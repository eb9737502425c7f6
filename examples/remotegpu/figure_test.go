package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vgpusim/vgpusim/examples/figure"
	"github.com/vgpusim/vgpusim/examples/internal/tablecheck"
)

// -figure writes the source's Figures 2 to 4 as a valid figure: a panel
// per link, a category per batch, a bar series per model whose points are
// the rows' normalized performance, under the local baseline's line at 1;
// and a last panel of the shared GPU's utilization per number of clients.
func TestFigure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "figure.json")
	var out, errs bytes.Buffer
	if code := run([]string{"-batches", "16,64", "-iterations", "2", "-clients", "1,2", "-figure", path}, &out, &errs); code != 0 {
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
	res := quickResult(t)
	if len(fig.Panels) != len(p.links)+1 {
		t.Fatalf("%d panels, want one per link and one for sharing", len(fig.Panels))
	}
	for k, l := range p.links {
		panel := fig.Panels[k]
		if len(panel.X.Categories) != len(p.batches) || len(panel.Series) != len(p.models) ||
			len(panel.HLines) != 1 || panel.HLines[0].Y != 1 {
			t.Fatalf("panel %d: %d categories, %d series, lines %+v", k+1, len(panel.X.Categories), len(panel.Series), panel.HLines)
		}
		for i, b := range p.batches {
			if panel.X.Categories[i] != strconv.Itoa(b) {
				t.Errorf("panel %d category %d is %q, want %d", k+1, i, panel.X.Categories[i], b)
			}
		}
		for j, m := range p.models {
			ser := panel.Series[j]
			if ser.Name != m.Name || ser.Kind != figure.Bars || len(ser.Points) != len(p.batches) {
				t.Fatalf("panel %d series %d: %s %s, %d points", k+1, j, ser.Name, ser.Kind, len(ser.Points))
			}
			for _, r := range res.rows {
				if r.model != m.Name || r.link.Name != l.Name {
					continue
				}
				for i, b := range p.batches {
					if b == r.batch && (ser.Points[i].X != float64(i) || ser.Points[i].Y != r.normalized()) {
						t.Errorf("%s %s batch %d: point %+v, want y %v", l.Name, m.Name, b, ser.Points[i], r.normalized())
					}
				}
			}
		}
	}
	share := fig.Panels[len(p.links)]
	runs := summarizeShare(p, res.share)
	if share.Y.Unit != "%" || len(share.Series) != 1 || len(share.Series[0].Points) != len(runs) {
		t.Fatalf("sharing panel %+v", share)
	}
	for i, r := range runs {
		if pt := share.Series[0].Points[i]; pt.X != float64(i) || pt.Y != r.gpuUtilPct {
			t.Errorf("sharing point %d: %+v, want y %v", i, pt, r.gpuUtilPct)
		}
	}
}

// -json writes both tables: the CSV's overhead table and the sharing
// table, the same cells, numbers as numbers.
func TestJSONIsTheTables(t *testing.T) {
	dir := t.TempDir()
	csvPath, jsonPath := filepath.Join(dir, "out.csv"), filepath.Join(dir, "out.json")
	var out, errs bytes.Buffer
	if code := run([]string{"-batches", "16,64", "-iterations", "2", "-clients", "1,2", "-csv", csvPath, "-json", jsonPath}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	p := quickParams()
	res := quickResult(t)
	var want bytes.Buffer
	if err := writeJSON(&want, p, res); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("-json differs from the tables' JSON")
	}
	var tables map[string][]map[string]any
	if err := json.Unmarshal(got, &tables); err != nil {
		t.Fatal(err)
	}
	csvBytes, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, names []string, cells [][]string) {
		t.Helper()
		objs := tables[name]
		if len(objs) != len(cells) {
			t.Fatalf("%s: %d objects, want %d", name, len(objs), len(cells))
		}
		for i, obj := range objs {
			if len(obj) != len(names) {
				t.Errorf("%s row %d: %d keys, want %d", name, i+1, len(obj), len(names))
			}
			for j, c := range names {
				v, ok := obj[c]
				if !ok {
					t.Fatalf("%s row %d lacks %s", name, i+1, c)
				}
				if numeric[c] {
					f, isNum := v.(float64)
					if !isNum || f != tablecheck.Number(t, cells[i][j]) {
						t.Errorf("%s row %d %s: JSON %v, table %q", name, i+1, c, v, cells[i][j])
					}
				} else if v != cells[i][j] {
					t.Errorf("%s row %d %s: JSON %v, table %q", name, i+1, c, v, cells[i][j])
				}
			}
		}
	}
	var overhead [][]string
	for _, r := range tablecheck.Rows(t, csvBytes, columns) {
		var cells []string
		for _, c := range columns {
			cells = append(cells, r[c])
		}
		overhead = append(overhead, cells)
	}
	check("overhead", columns, overhead)
	var sharing [][]string
	for _, s := range res.share {
		sharing = append(sharing, s.fields(p.shareBatch))
	}
	check("sharing", shareColumns, sharing)
}
