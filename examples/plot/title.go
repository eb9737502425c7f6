package main

import (
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// drawTitle draws the figure's title at the top of c, and returns the y
// of its bottom. A title too wide for the figure, even with the room a
// substitute font needs, is drawn smaller, then over two or more lines.
func drawTitle(c draw.Canvas, title string) vg.Length {
	if title == "" {
		return c.Max.Y
	}
	sty := text.Style{Color: color.Black, XAlign: draw.XLeft, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
	avail := c.Max.X - c.Min.X
	var lines []string
	for _, size := range []vg.Length{14, 13, 12} {
		sty.Font = font.From(sans, size)
		if lines = wrap(sty, title, avail); len(lines) == 1 {
			break
		}
	}
	y := c.Max.Y
	for _, l := range lines {
		// Centred for a font between the measured one and a substitute
		// up to viewerSlack wider, so that either stays inside.
		w := sty.Width(l)
		x := (c.Min.X+c.Max.X)/2 - w*(1+viewerSlack)/4
		c.FillText(sty, vg.Point{X: max(x, c.Min.X), Y: y}, l)
		y -= sty.Height(l)
	}
	return y - vg.Points(6)
}

// wrap breaks s at spaces into lines that fit avail when drawn up to
// viewerSlack wider than sty measures them. A word wider than avail is a
// line of its own.
func wrap(sty text.Style, s string, avail vg.Length) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		next := w
		if line != "" {
			next = line + " " + w
		}
		if line != "" && sty.Width(next)*viewerSlack > avail {
			lines = append(lines, line)
			next = w
		}
		line = next
	}
	return append(lines, line)
}
