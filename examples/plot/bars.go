package main

import (
	"image/color"

	"github.com/vgpusim/vgpusim/examples/figure"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// groupWidth is the part of one unit of X a group of bars fills, the rest
// being the gap between groups.
const groupWidth = 0.8

// barSeries draws one series of a group of bar series: at each X, the
// index-th of groups bars side by side, each rising from zero to Y. Unlike
// gonum's BarChart, whose width is in canvas units, its width is in X's
// units, so groups fit their category whatever the figure's size.
type barSeries struct {
	points        []figure.Point
	index, groups int
	color         color.Color
}

// span is the bar's left and right edges at x, in X's units.
func (b *barSeries) span(x float64) (lo, hi float64) {
	w := groupWidth / float64(b.groups)
	lo = x - groupWidth/2 + float64(b.index)*w
	return lo, lo + w
}

func (b *barSeries) center(pt figure.Point) float64 {
	lo, hi := b.span(pt.X)
	return (lo + hi) / 2
}

// Plot implements plot.Plotter.
func (b *barSeries) Plot(c draw.Canvas, pl *plot.Plot) {
	trX, trY := pl.Transforms(&c)
	for _, pt := range b.points {
		lo, hi := b.span(pt.X)
		x0, x1 := trX(lo), trX(hi)
		y0, y1 := trY(0), trY(pt.Y)
		rect := []vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}
		c.FillPolygon(b.color, c.ClipPolygonXY(rect))
		outline := append(rect, rect[0])
		c.StrokeLines(draw.LineStyle{Color: color.Black, Width: vg.Points(0.5)}, c.ClipLinesXY(outline)...)
	}
}

// DataRange implements plot.DataRanger: every bar, and zero.
func (b *barSeries) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = b.points[0].X-0.5, b.points[0].X+0.5
	for _, pt := range b.points {
		xmin, xmax = min(xmin, pt.X-0.5), max(xmax, pt.X+0.5)
		ymin, ymax = min(ymin, pt.Y), max(ymax, pt.Y)
	}
	return xmin, xmax, ymin, ymax
}

// Thumbnail implements plot.Thumbnailer: a filled square for the legend.
func (b *barSeries) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y},
		{X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y},
	}
	c.FillPolygon(b.color, pts)
	c.StrokeLines(draw.LineStyle{Color: color.Black, Width: vg.Points(0.5)}, append(pts, pts[0]))
}
