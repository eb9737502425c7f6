package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// placedText is one horizontal <text> of the SVG: its start, its baseline
// (from the top), its size and its text.
type placedText struct {
	x, y, size float64
	s          string
}

// placedTexts parses the SVG's size and its horizontal texts. gonum draws
// with y up (a flip around everything, and another around each text), so
// a text's y is its baseline's distance from the top minus the height;
// rotated texts (the Y axis's label) are
// left out.
func placedTexts(t *testing.T, svg []byte) (w, h float64, out []placedText) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var rotated int
	var cur *placedText
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return w, h, out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case tok.Name.Local == "svg":
				vb := strings.Fields(attr["viewBox"])
				w, _ = strconv.ParseFloat(vb[2], 64)
				h, _ = strconv.ParseFloat(vb[3], 64)
			case tok.Name.Local == "g" && strings.Contains(attr["transform"], "rotate"):
				rotated++
			case tok.Name.Local == "g" && rotated > 0:
				rotated++
			case tok.Name.Local == "text" && rotated == 0:
				x, _ := strconv.ParseFloat(attr["x"], 64)
				y, _ := strconv.ParseFloat(attr["y"], 64)
				_, size, _ := strings.Cut(attr["style"], "font-size:")
				sz, _ := strconv.ParseFloat(strings.TrimSuffix(size, "px"), 64)
				cur = &placedText{x: x, y: h + y, size: sz}
			}
		case xml.CharData:
			if cur != nil {
				cur.s += string(tok)
			}
		case xml.EndElement:
			switch {
			case tok.Name.Local == "text" && cur != nil:
				out = append(out, *cur)
				cur = nil
			case tok.Name.Local == "g" && rotated > 0:
				rotated--
			}
		}
	}
}

// A title longer than the figure is wide, and legend names long enough to
// take most of it, stay inside the canvas, with room for a substitute font
// viewerSlack wider than Liberation Sans: the title is made smaller or
// wrapped, the figure widened for its legends.
func TestLongTextsStayInside(t *testing.T) {
	fig := everyKind()
	fig.Title = "A figure title that goes on and on, much longer than sixteen centimetres of fourteen-point text can hold"
	long := "a legend entry with a very long name, 15.36 s"
	fig.Panels[0].Series[0].Name = long
	fig.Panels[1].Series[2].Name = "vSphere 6.7 U1, published, " + long
	svg := drawn(t, fig)
	w, h, texts := placedTexts(t, svg)
	if w == 0 || h == 0 || len(texts) == 0 {
		t.Fatalf("no size or no text: %gx%g, %d texts", w, h, len(texts))
	}
	seen := map[string]bool{}
	for _, tx := range texts {
		seen[tx.s] = true
		sty := text.Style{Font: font.From(sans, vg.Length(tx.size)), Handler: plot.DefaultTextHandler}
		width := float64(sty.Width(tx.s)) * viewerSlack
		if tx.x < 0 || tx.x+width > w || tx.y-tx.size < 0 || tx.y > h {
			t.Errorf("%q at (%.1f, %.1f), %.1f wide, leaves the %gx%g canvas", tx.s, tx.x, tx.y, width, w, h)
		}
	}
	for _, want := range []string{long, "vSphere 6.7 U1, published, " + long} {
		if !seen[want] {
			t.Errorf("legend entry %q missing or broken", want)
		}
	}
	var title []string
	for _, tx := range texts {
		if strings.HasPrefix(fig.Title, tx.s) || strings.HasSuffix(fig.Title, tx.s) {
			title = append(title, tx.s)
		}
	}
	if got := strings.Join(title, " "); got != fig.Title {
		t.Errorf("title drawn as %q, want it whole over its lines", title)
	}
}

// Legend rows are as tall as their largest marker: the rows of a legend
// with a reference series' large ring are spaced by the ring, not by the
// text.
func TestLegendRowsClearTheLargestMarker(t *testing.T) {
	_, leg, err := panelPlot(everyKind().Panels[1])
	if err != nil {
		t.Fatal(err)
	}
	var biggest vg.Length
	for _, e := range leg.entries {
		biggest = max(biggest, e.radius)
	}
	if biggest == 0 || leg.rowHeight() < 2*biggest+vg.Points(2) {
		t.Errorf("rows %v apart, the largest marker %v across", leg.rowHeight(), 2*biggest)
	}
}

// Linear ticks are labelled with the fewest decimals that tell them apart.
func TestLinearTickLabels(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 78, "0 20 40 60"},
		{0, 550, "0 100 200 300 400 500"},
		{0, 1, "0.0 0.2 0.4 0.6 0.8 1.0"},
		{-0.3, 0.3, "-0.3 -0.2 -0.1 0.0 0.1 0.2 0.3"},
		{1, 42, "10 20 30 40"},
	} {
		var got []string
		for _, tk := range (linearTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("[%g, %g]: labels %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}
