package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/examples/figure"
)

// everyKind is a figure with a series of every kind, a reference series, a
// category axis, a logarithmic axis, horizontal lines and point labels:
// everything the renderer draws differently.
func everyKind() figure.Figure {
	profiles := []string{"P40-1Q", "P40-2Q", "P40-4Q"}
	return figure.Figure{
		Title: "Every kind & its legend",
		Panels: []figure.Panel{
			{
				Title: "Bars per category",
				X:     figure.Axis{Label: "vGPU profile", Categories: profiles},
				Y:     figure.Axis{Label: "GPU utilization", Unit: "%"},
				Series: []figure.Series{
					{Name: "best effort", Kind: figure.Bars, Points: []figure.Point{{X: 0, Y: 80, Label: "80 %"}, {X: 1, Y: 70}, {X: 2, Y: 60}}},
					{Name: "equal share", Kind: figure.Bars, Points: []figure.Point{{X: 0, Y: 50}, {X: 1, Y: 45}, {X: 2, Y: 40}}},
				},
				HLines: []figure.HLine{{Y: 90, Label: "ceiling"}},
			},
			{
				X: figure.Axis{Label: "vGPU profile", Categories: profiles},
				Y: figure.Axis{Label: "stun time", Unit: "s", Log: true},
				Series: []figure.Series{
					{Name: "legacy", Kind: figure.Line, Points: []figure.Point{{X: 0, Y: 9}, {X: 1, Y: 16}, {X: 2, Y: 30}}},
					{Name: "pre-copy", Kind: figure.Points, Points: []figure.Point{{X: 0, Y: 0.2}, {X: 1, Y: 0.3}, {X: 2, Y: 0.4}}},
					{Name: "published 6.7 U1", Kind: figure.Points, Reference: true, Points: []figure.Point{{X: 0, Y: 9}, {X: 2, Y: 31.4}}},
				},
				HLines: []figure.HLine{{Y: 1, Label: "1 s standard"}},
			},
			{
				X:      figure.Axis{Label: "simulated time", Unit: "s"},
				Y:      figure.Axis{Label: "requests served"},
				Series: []figure.Series{{Name: "served", Kind: figure.Line, Points: []figure.Point{{X: 0, Y: 1}, {X: 0.1, Y: 3}, {X: 0.2, Y: 2}}}},
			},
		},
	}
}

// texts returns the text of every <text> element, after checking that the
// whole document is well-formed XML with an <svg> root.
func texts(t *testing.T, svg []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var out []string
	var inText, sawRoot bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if !sawRoot && tok.Name.Local != "svg" {
				t.Fatalf("root element <%s>, want <svg>", tok.Name.Local)
			}
			sawRoot = true
			inText = tok.Name.Local == "text"
		case xml.CharData:
			if inText {
				out = append(out, strings.TrimSpace(string(tok)))
			}
		case xml.EndElement:
			inText = false
		}
	}
	if !sawRoot {
		t.Fatal("no <svg> element")
	}
	return out
}

func drawn(t *testing.T, fig figure.Figure, args ...string) []byte {
	t.Helper()
	var in bytes.Buffer
	if err := fig.WriteJSON(&in); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "fig.svg")
	var errs bytes.Buffer
	if code := run(append([]string{"-o", out}, args...), &in, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The SVG is well-formed and carries the title, every panel title, every
// axis label with its unit, every category, every legend entry, the
// horizontal lines' labels and the point labels, as text.
func TestEveryKindDrawn(t *testing.T) {
	svg := drawn(t, everyKind())
	got := map[string]bool{}
	for _, s := range texts(t, svg) {
		got[s] = true
	}
	want := []string{
		"Every kind & its legend", "Bars per category",
		"vGPU profile", "GPU utilization (%)", "stun time (s)", "simulated time (s)", "requests served",
		"P40-1Q", "P40-2Q", "P40-4Q",
		"best effort", "equal share", "legacy", "pre-copy", "published 6.7 U1", "served",
		"ceiling", "1 s standard", "80 %",
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no text %q in the SVG", w)
		}
	}
	if t.Failed() {
		t.Logf("texts: %q", texts(t, svg))
	}
	// No embedded fonts: a figure of three panels stays small.
	if len(svg) > 100<<10 || bytes.Contains(svg, []byte("@font-face")) {
		t.Errorf("SVG of %d bytes, fonts embedded: %v", len(svg), bytes.Contains(svg, []byte("@font-face")))
	}
}

// -width and -height set the SVG's size.
func TestSize(t *testing.T) {
	svg := drawn(t, everyKind(), "-width", "400pt", "-height", "300pt")
	if !bytes.Contains(svg, []byte(`width="400pt"`)) || !bytes.Contains(svg, []byte(`height="300pt"`)) {
		t.Errorf("size not applied: %.300s", svg)
	}
}

// A bad figure or bad flags fail with a message and no output.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.svg")
	cases := []struct {
		args  []string
		stdin string
		code  int
	}{
		{[]string{"-o", out}, `{"title":"t","panels":[]}`, 1},
		{[]string{"-o", out}, `not json`, 1},
		{[]string{"-o", out, "-in", filepath.Join(dir, "missing.json")}, ``, 1},
		{[]string{}, `{}`, 2},
		{[]string{"-o", out, "-width", "wide"}, `{}`, 2},
		{[]string{"-o", out, "extra"}, `{}`, 2},
	}
	for _, c := range cases {
		var errs bytes.Buffer
		if code := run(c.args, strings.NewReader(c.stdin), &errs); code != c.code || errs.Len() == 0 {
			t.Errorf("%q: exit %d, want %d; stderr %q", c.args, code, c.code, errs.String())
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%q wrote %s", c.args, out)
		}
	}
	var errs bytes.Buffer
	if code := run([]string{"-h"}, strings.NewReader(""), &errs); code != 0 || !strings.Contains(errs.String(), "-width") {
		t.Errorf("-h: exit %d: %s", code, errs.String())
	}
}

// -in reads the figure from a file, as written by an example's -figure.
func TestInFile(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "fig.json"), filepath.Join(dir, "fig.svg")
	var b bytes.Buffer
	if err := everyKind().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var errs bytes.Buffer
	if code := run([]string{"-in", in, "-o", out}, strings.NewReader(""), &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	texts(t, svg)
}
