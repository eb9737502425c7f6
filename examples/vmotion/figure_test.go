package main

import (
	"bytes"
	"testing"

	"github.com/vgpusim/vgpusim/examples/figure"
)

// -figure writes a valid figure of the table: one panel, a logarithmic
// stun axis, a category per Q profile, a Legacy and a PreCopy series and
// the published points, the 1 s line; PreCopy's stun is under Legacy's and
// under the line for every profile, and each published point sits within
// 10 % of the simulated Legacy stun of its profile.
func TestFigure(t *testing.T) {
	fig, err := figure.ReadJSON(bytes.NewReader(defaultOutput(t).figure))
	if err != nil {
		t.Fatal(err)
	}
	if len(fig.Panels) != 1 {
		t.Fatalf("%d panels, want 1", len(fig.Panels))
	}
	p := fig.Panels[0]
	if len(p.X.Categories) != len(qProfiles) || p.X.Categories[0] != "1Q" || p.X.Categories[len(qProfiles)-1] != "24Q" {
		t.Errorf("categories %q", p.X.Categories)
	}
	if !p.Y.Log || p.Y.Unit != "s" {
		t.Errorf("Y axis %+v, want stun time in s on a log scale", p.Y)
	}
	if len(p.HLines) != 1 || p.HLines[0].Y != 1 {
		t.Errorf("horizontal lines %+v, want the 1 s standard", p.HLines)
	}
	byName := map[string]figure.Series{}
	for _, s := range p.Series {
		byName[s.Name] = s
	}
	legacy, precopy, published := byName["legacy, simulated"], byName["pre-copy, simulated"], byName[seriesPublished]
	if len(p.Series) != 3 || !published.Reference || legacy.Reference || precopy.Reference {
		t.Fatalf("series %+v", p.Series)
	}
	// Legacy has no point for the P40-24Q, whose migration was refused.
	if len(legacy.Points) != len(qProfiles)-1 || len(precopy.Points) != len(qProfiles) || len(published.Points) != 5 {
		t.Fatalf("%d legacy, %d pre-copy, %d published points", len(legacy.Points), len(precopy.Points), len(published.Points))
	}
	stun := map[float64]float64{}
	for _, pt := range legacy.Points {
		stun[pt.X] = pt.Y
	}
	for _, pt := range precopy.Points {
		if pt.Y >= 1 || (stun[pt.X] != 0 && pt.Y >= stun[pt.X]) {
			t.Errorf("%s: pre-copy stun %.3f s, legacy %.3f s", p.X.Categories[int(pt.X)], pt.Y, stun[pt.X])
		}
	}
	for _, pt := range published.Points {
		if s := stun[pt.X]; s < 0.9*pt.Y || s > 1.1*pt.Y {
			t.Errorf("%s: published %.1f s, simulated legacy %.3f s", p.X.Categories[int(pt.X)], pt.Y, s)
		}
	}
}
