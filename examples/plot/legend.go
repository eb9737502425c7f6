package main

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// viewerSlack is how much wider than measured text may be drawn. The SVG
// does not embed its fonts, and a viewer without Liberation Sans (or a
// metric-compatible Arial) substitutes its own sans serif: DejaVu Sans,
// the usual one on Linux, is up to 14% wider. Layout reserves room for it.
const viewerSlack = 1.15

// legend is a panel's legend: one row per entry, a thumbnail then the
// name. Unlike gonum's, its rows are as tall as the largest marker in it,
// so that a large hollow reference marker does not overlap its neighbours,
// and its width allows for a wider substitute font.
type legend struct {
	style   text.Style
	entries []legendEntry
}

type legendEntry struct {
	name   string
	radius vg.Length // the marker's radius in the thumbnail, 0 for none
	thumbs []plot.Thumbnailer
}

const (
	thumbWidth = vg.Length(20) // a thumbnail's width, in points
	thumbGap   = vg.Length(4)  // between a thumbnail and its name
	rowGap     = vg.Length(1)  // between two rows
)

func newLegend() legend {
	return legend{style: text.Style{
		Color: color.Black, Font: font.From(sans, 10),
		XAlign: draw.XLeft, YAlign: draw.YCenter, Handler: plot.DefaultTextHandler,
	}}
}

func (l *legend) add(name string, radius vg.Length, thumbs ...plot.Thumbnailer) {
	l.entries = append(l.entries, legendEntry{name: name, radius: radius, thumbs: thumbs})
}

// rowHeight is the height of every row: the text's or the largest marker's,
// with its stroke.
func (l *legend) rowHeight() vg.Length {
	e := l.style.FontExtents()
	h := e.Ascent + e.Descent
	for _, en := range l.entries {
		h = max(h, 2*en.radius+vg.Points(2))
	}
	return h + rowGap
}

// width is the legend's width, its names as wide as a substitute font
// may draw them.
func (l *legend) width() vg.Length {
	var w vg.Length
	for _, e := range l.entries {
		w = max(w, l.style.Width(e.name))
	}
	if w == 0 {
		return 0
	}
	return thumbWidth + thumbGap + w*viewerSlack
}

func (l *legend) height() vg.Length {
	return vg.Length(len(l.entries)) * l.rowHeight()
}

// draw draws the legend with its top left corner at the top left of c.
func (l *legend) draw(c draw.Canvas) {
	rh := l.rowHeight()
	top := c.Max.Y
	for _, e := range l.entries {
		icon := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: c.Min.X, Y: top - rh + rowGap},
			Max: vg.Point{X: c.Min.X + thumbWidth, Y: top},
		}}
		for _, t := range e.thumbs {
			t.Thumbnail(&icon)
		}
		c.FillText(l.style, vg.Point{X: c.Min.X + thumbWidth + thumbGap, Y: top - (rh-rowGap)/2}, e.name)
		top -= rh
	}
}
