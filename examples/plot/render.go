package main

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"

	"github.com/vgpusim/vgpusim/examples/figure"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// sans is the figures' font: sans serif reads better at small sizes.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// newSVG is the canvas figures are drawn on. Fonts are not embedded (a
// viewer substitutes its own sans serif), which keeps a figure to tens of
// kilobytes.
func newSVG(w, h vg.Length) svgCanvas {
	return svgCanvas{vgsvg.NewWith(vgsvg.UseWH(w, h), vgsvg.EmbedFonts(false))}
}

// svgCanvas writes gonum's SVG with metric-compatible fallbacks after the
// font's name: gonum names only "Liberation Sans", and a viewer without it
// would otherwise pick its default font, often a serif.
type svgCanvas struct{ *vgsvg.Canvas }

func (c svgCanvas) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	if _, err := c.Canvas.WriteTo(&b); err != nil {
		return 0, err
	}
	out := bytes.ReplaceAll(b.Bytes(), []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arimo,Arial,Helvetica,sans-serif;"))
	n, err := w.Write(out)
	return int64(n), err
}

// minWidth is the narrowest figure whose legends take at most 40% of its
// width, so that the panels keep room for their data.
func minWidth(fig figure.Figure) vg.Length {
	var legendW vg.Length
	for _, p := range fig.Panels {
		if _, leg, err := panelPlot(p); err == nil {
			legendW = max(legendW, leg.width()+legendGap)
		}
	}
	return legendW/0.4 + 2*margin
}

// render draws fig on c: its title on top, then its panels stacked with
// their data areas aligned, each panel's legend to its right.
func render(fig figure.Figure, c vg.CanvasSizer) error {
	plot.DefaultFont, plotter.DefaultFont = sans, sans
	dc := draw.New(c)
	// A white background: an SVG is transparent, and unreadable on a dark
	// page without one.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	dc = draw.Crop(dc, margin, -margin, margin, -margin)
	dc.Max.Y = drawTitle(dc, fig.Title)

	// Each panel's legend goes to its right, outside the data, in a column
	// as wide as the widest legend, so that the data areas stay aligned.
	var rows [][]*plot.Plot
	var legends []legend
	var legendW vg.Length
	for i, p := range fig.Panels {
		pl, leg, err := panelPlot(p)
		if err != nil {
			return fmt.Errorf("panel %d: %w", i+1, err)
		}
		rows = append(rows, []*plot.Plot{pl})
		legends = append(legends, leg)
		legendW = max(legendW, leg.width())
	}
	if legendW > 0 {
		legendW += legendGap
	}
	plots := draw.Crop(dc, 0, -legendW, 0, 0)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadY: vg.Points(6), PadX: vg.Points(4), PadTop: vg.Points(2)}
	canvases := plot.Align(rows, tiles, plots)
	for i, row := range rows {
		row[0].Draw(canvases[i][0])
		data := row[0].DataCanvas(canvases[i][0])
		strip := dc
		strip.Min.X, strip.Max.Y = plots.Max.X+legendGap, data.Max.Y
		strip.Min.Y = strip.Max.Y - legends[i].height()
		legends[i].draw(strip)
	}
	return nil
}

const (
	margin    = vg.Length(4) // around the figure, in points
	legendGap = vg.Length(8) // between a panel and its legend
)

// panelPlot builds one panel's plot: axes, series, reference lines, legend.
func panelPlot(p figure.Panel) (*plot.Plot, legend, error) {
	pl := plot.New()
	leg := newLegend()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.X.Title()
	pl.Y.Label.Text = p.Y.Title()
	pl.Add(plotter.NewGrid())
	for _, a := range []struct {
		axis *plot.Axis
		desc figure.Axis
	}{{&pl.X, p.X}, {&pl.Y, p.Y}} {
		if a.desc.Log {
			a.axis.Scale = plot.LogScale{}
			a.axis.Tick.Marker = decadeTicks{}
		} else {
			a.axis.Tick.Marker = linearTicks{}
		}
	}

	var bars []figure.Series
	for _, s := range p.Series {
		if s.Kind == figure.Bars {
			bars = append(bars, s)
		}
	}
	barIndex := 0
	for i, s := range p.Series {
		clr := plotutil.Color(i)
		switch {
		case s.Kind == figure.Bars:
			b := &barSeries{points: s.Points, index: barIndex, groups: len(bars), color: clr}
			barIndex++
			pl.Add(b)
			leg.add(s.Name, 0, b)
			if err := addPointLabels(pl, s.Points, b.center); err != nil {
				return nil, leg, err
			}
			continue
		case s.Reference:
			// Published points: large hollow markers with no line, so that
			// they stand apart from the simulated series they sit beside.
			sc, err := plotter.NewScatter(xys(s.Points))
			if err != nil {
				return nil, leg, err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(5), Shape: draw.RingGlyph{}}
			pl.Add(sc)
			leg.add(s.Name, sc.GlyphStyle.Radius, sc)
		case s.Kind == figure.Line:
			l, pts, err := plotter.NewLinePoints(xys(s.Points))
			if err != nil {
				return nil, leg, err
			}
			l.Color = clr
			l.Width = vg.Points(1.5)
			pts.GlyphStyle = draw.GlyphStyle{Color: clr, Radius: vg.Points(2.5), Shape: plotutil.Shape(i)}
			pl.Add(l, pts)
			leg.add(s.Name, pts.GlyphStyle.Radius, l, pts)
		default:
			sc, err := plotter.NewScatter(xys(s.Points))
			if err != nil {
				return nil, leg, err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: clr, Radius: vg.Points(3), Shape: plotutil.Shape(i)}
			pl.Add(sc)
			leg.add(s.Name, sc.GlyphStyle.Radius, sc)
		}
		if err := addPointLabels(pl, s.Points, func(pt figure.Point) float64 { return pt.X }); err != nil {
			return nil, leg, err
		}
	}

	if n := len(p.X.Categories); n > 0 {
		var ticks []plot.Tick
		for i, c := range p.X.Categories {
			ticks = append(ticks, plot.Tick{Value: float64(i), Label: c})
		}
		pl.X.Tick.Marker = plot.ConstantTicks(ticks)
		pl.X.Min, pl.X.Max = -0.5, float64(n)-0.5
	}
	if len(bars) > 0 {
		pl.Y.Min = min(pl.Y.Min, 0)
	}
	if err := addHLines(pl, &leg, p.HLines); err != nil {
		return nil, leg, err
	}
	if p.Y.Log {
		// Whole decades, so that the axis has a labelled tick at each end:
		// gonum labels only powers of ten.
		pl.Y.Min = math.Pow(10, math.Floor(math.Log10(pl.Y.Min)))
		pl.Y.Max = math.Pow(10, math.Ceil(math.Log10(pl.Y.Max)))
	}
	return pl, leg, nil
}

// addHLines draws each line dashed across the panel, its label at the
// right end above it, and lists it in the legend.
func addHLines(pl *plot.Plot, leg *legend, lines []figure.HLine) error {
	for _, h := range lines {
		pl.Y.Min, pl.Y.Max = min(pl.Y.Min, h.Y), max(pl.Y.Max, h.Y)
	}
	gray := color.Gray{Y: 0x60}
	for _, h := range lines {
		f := plotter.NewFunction(func(float64) float64 { return h.Y })
		f.Color = gray
		f.Width = vg.Points(1)
		f.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		pl.Add(f)
		leg.add(h.Label, 0, f)
		l, err := plotter.NewLabels(plotter.XYLabels{
			XYs: plotter.XYs{{X: pl.X.Max, Y: h.Y}}, Labels: []string{h.Label},
		})
		if err != nil {
			return err
		}
		l.TextStyle[0].XAlign, l.TextStyle[0].YAlign = draw.XRight, draw.YBottom
		l.TextStyle[0].Color = gray
		l.Offset = vg.Point{X: -vg.Points(3), Y: vg.Points(2)}
		pl.Add(l)
	}
	return nil
}

// addPointLabels writes each labelled point's label above it, at the x
// that x gives (a bar's centre for bars).
func addPointLabels(pl *plot.Plot, pts []figure.Point, x func(figure.Point) float64) error {
	var lab plotter.XYLabels
	for _, pt := range pts {
		if pt.Label != "" {
			lab.XYs = append(lab.XYs, plotter.XY{X: x(pt), Y: pt.Y})
			lab.Labels = append(lab.Labels, pt.Label)
		}
	}
	if len(lab.Labels) == 0 {
		return nil
	}
	l, err := plotter.NewLabels(lab)
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XCenter, draw.YBottom
		l.TextStyle[i].Font.Size = vg.Points(8)
	}
	l.Offset = vg.Point{Y: vg.Points(4)}
	pl.Add(l)
	return nil
}

// xys converts points to gonum's.
func xys(pts []figure.Point) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	for i, p := range pts {
		out[i] = plotter.XY{X: p.X, Y: p.Y}
	}
	return out
}
