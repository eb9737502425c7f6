package figure

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// valid is a small figure every Validate case starts from.
func valid() Figure {
	return Figure{
		Title: "Stun time per profile",
		Panels: []Panel{{
			X: Axis{Label: "vGPU profile", Categories: []string{"P40-1Q", "P40-2Q"}},
			Y: Axis{Label: "stun time", Unit: "s", Log: true},
			Series: []Series{
				{Name: "legacy", Kind: Line, Points: []Point{{X: 0, Y: 9}, {X: 1, Y: 16}}},
				{Name: "published", Kind: Points, Reference: true, Points: []Point{{X: 0, Y: 9, Label: "9.0 s"}}},
			},
			HLines: []HLine{{Y: 1, Label: "1 s standard"}},
		}},
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Figure)
		want   string // in the error; "" for valid
	}{
		{"valid", func(*Figure) {}, ""},
		{"no title", func(f *Figure) { f.Title = "" }, "no title"},
		{"no panels", func(f *Figure) { f.Panels = nil }, "0 panels"},
		{"too many panels", func(f *Figure) {
			for range MaxPanels {
				f.Panels = append(f.Panels, f.Panels[0])
			}
		}, "panels"},
		{"no x label", func(f *Figure) { f.Panels[0].X.Label = "" }, "no label"},
		{"no y label", func(f *Figure) { f.Panels[0].Y.Label = "" }, "no label"},
		{"y categories", func(f *Figure) { f.Panels[0].Y.Categories = []string{"a"} }, "Y axis has categories"},
		{"log category x", func(f *Figure) { f.Panels[0].X.Log = true }, "logarithmic and a category"},
		{"no series", func(f *Figure) { f.Panels[0].Series = nil }, "0 series"},
		{"unnamed series", func(f *Figure) { f.Panels[0].Series[0].Name = "" }, "no name"},
		{"unknown kind", func(f *Figure) { f.Panels[0].Series[0].Kind = "pie" }, `kind "pie"`},
		{"no points", func(f *Figure) { f.Panels[0].Series[0].Points = nil }, "0 points"},
		{"NaN", func(f *Figure) { f.Panels[0].Series[0].Points[1].Y = math.NaN() }, "not finite"},
		{"Inf", func(f *Figure) { f.Panels[0].Series[0].Points[1].Y = math.Inf(1) }, "not finite"},
		{"zero on log", func(f *Figure) { f.Panels[0].Series[0].Points[1].Y = 0 }, "not positive"},
		{"category out of range", func(f *Figure) { f.Panels[0].Series[0].Points[1].X = 2 }, "not a category index"},
		{"negative category", func(f *Figure) { f.Panels[0].Series[0].Points[1].X = -1 }, "not a category index"},
		{"fractional category", func(f *Figure) { f.Panels[0].Series[0].Points[1].X = 0.5 }, "not a category index"},
		{"bars on log", func(f *Figure) { f.Panels[0].Series[0].Kind = Bars }, "bars on a logarithmic"},
		{"bars on linear", func(f *Figure) { f.Panels[0].Series[0].Kind = Bars; f.Panels[0].Y.Log = false }, ""},
		{"hline unlabelled", func(f *Figure) { f.Panels[0].HLines[0].Label = "" }, "no label"},
		{"hline zero on log", func(f *Figure) { f.Panels[0].HLines[0].Y = 0 }, "not positive"},
		{"numeric x", func(f *Figure) { f.Panels[0].X.Categories = nil; f.Panels[0].Series[0].Points[1].X = 0.5 }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := valid()
			c.change(&f)
			err := f.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

func TestJSONRoundTrip(t *testing.T) {
	f := valid()
	var b bytes.Buffer
	if err := f.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"title"`, `"panels"`, `"x"`, `"y"`, `"series"`, `"hlines"`, `"reference": true`, `"categories"`, `"log": true`, `"unit"`, `"label"`} {
		if !strings.Contains(b.String(), key) {
			t.Errorf("JSON lacks %s:\n%s", key, b.String())
		}
	}
	g, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, g) {
		t.Errorf("round trip changed the figure:\n%+v\n%+v", f, g)
	}
}

func TestReadJSONRefuses(t *testing.T) {
	var b bytes.Buffer
	if err := valid().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	good := b.String()
	for name, in := range map[string]string{
		"unknown field": strings.Replace(good, `"title"`, `"titel": "x", "title"`, 1),
		"trailing data": good + "{}",
		"invalid":       `{"title": "t", "panels": []}`,
		"not JSON":      `<svg/>`,
		"empty":         ``,
	} {
		if _, err := ReadJSON(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := (Figure{}).WriteJSON(&b); err == nil {
		t.Error("WriteJSON wrote an invalid figure")
	}
}

func TestAxisTitle(t *testing.T) {
	if got := (Axis{Label: "stun time", Unit: "s"}).Title(); got != "stun time (s)" {
		t.Errorf("got %q", got)
	}
	if got := (Axis{Label: "vGPU profile"}).Title(); got != "vGPU profile" {
		t.Errorf("got %q", got)
	}
}

// TestWriteFiles writes the JSON only when asked, and it reads back equal.
func TestWriteFiles(t *testing.T) {
	if err := valid().WriteFiles("", ""); err != nil {
		t.Fatalf("nothing asked: %v", err)
	}
	path := filepath.Join(t.TempDir(), "f.json")
	if err := valid().WriteFiles(path, ""); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(valid(), got); diff != "" {
		t.Fatalf("read back (-want +got):\n%s", diff)
	}
}
