package main

import (
	"bytes"
	"math"
	"testing"

	"github.com/vgpusim/vgpusim/examples/figure"
	"github.com/vgpusim/vgpusim/vgpu"
)

// -figure writes a valid figure of the tables, one panel each. The sweep's:
// a logarithmic stun axis, a category per Q profile, a Legacy, a PreCopy
// and a PostCopy series, the 1 s line, no published points; PreCopy's stun
// is under Legacy's and under the line for every profile, and PostCopy's
// under PreCopy's. The published
// tables': stun by GiB in use, the published points as reference rings,
// each with the simulated stun of its size at the same place, within the
// tests' tolerances of it.
func TestFigure(t *testing.T) {
	fig, err := figure.ReadJSON(bytes.NewReader(defaultOutput(t).figure))
	if err != nil {
		t.Fatal(err)
	}
	if len(fig.Panels) != 3 {
		t.Fatalf("%d panels, want 3", len(fig.Panels))
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
	legacy, precopy, postcopy := byName["legacy, simulated"], byName["pre-copy, simulated"], byName["post-copy, simulated"]
	if len(p.Series) != 3 || legacy.Reference || precopy.Reference || postcopy.Reference {
		t.Fatalf("series %+v", p.Series)
	}
	// Legacy has no point for the P40-24Q, whose migration was refused.
	if len(legacy.Points) != len(qProfiles)-1 || len(precopy.Points) != len(qProfiles) || len(postcopy.Points) != len(qProfiles) {
		t.Fatalf("%d legacy, %d pre-copy, %d post-copy points", len(legacy.Points), len(precopy.Points), len(postcopy.Points))
	}
	for i, pt := range postcopy.Points {
		if pre := precopy.Points[i]; pt.X != pre.X || pt.Y >= pre.Y {
			t.Errorf("%s: post-copy stun %.3f s, pre-copy %.3f s", p.X.Categories[int(pt.X)], pt.Y, pre.Y)
		}
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

	v100X := func(size int) float64 {
		prof := vgpu.Profiles("V100D")
		for _, p := range prof {
			if p.Series == vgpu.SeriesQ && p.FramebufferBytes == int64(size)<<30 {
				return float64(p.UsableFramebufferBytes()) / (1 << 30)
			}
		}
		t.Fatalf("no V100D-%dQ", size)
		return 0
	}
	for _, c := range []struct {
		sim, pub string
		x        []float64
		// tol is how far simulated may be from published: a fraction, or
		// within abs seconds.
		tol, abs float64
	}{
		{seriesP40Simulated, seriesP40Published, []float64{1, 2, 4, 8, 10, 12}, publishedTolerance, 0},
		{seriesV100Simulated, seriesV100Published, []float64{v100X(1), v100X(2), v100X(4), v100X(8), v100X(16), v100X(32)}, 0.05, 0.5},
	} {
		var panel figure.Panel
		for _, p := range fig.Panels[1:] {
			if len(p.Series) == 2 && p.Series[0].Name == c.sim && p.Series[1].Name == c.pub {
				panel = p
			}
		}
		if panel.Series == nil {
			t.Errorf("no panel of %q and %q", c.sim, c.pub)
			continue
		}
		if panel.Y.Log || panel.X.Unit != "GiB" || len(panel.X.Categories) > 0 || panel.Title == "" {
			t.Errorf("%s: axes %+v %+v, want linear, by GiB in use", c.pub, panel.X, panel.Y)
		}
		sim, pub := panel.Series[0], panel.Series[1]
		if sim.Reference || !pub.Reference || len(sim.Points) != len(c.x) || len(pub.Points) != len(c.x) {
			t.Fatalf("%s: series %+v", c.pub, panel.Series)
		}
		for i, x := range c.x {
			s, p := sim.Points[i], pub.Points[i]
			if math.Abs(s.X-x) > 1e-9 || s.X != p.X {
				t.Errorf("%s: point %d at %v and %v GiB, want %v", c.pub, i+1, s.X, p.X, x)
			}
			if d := s.Y - p.Y; math.Abs(d) > c.tol*p.Y && math.Abs(d) > c.abs {
				t.Errorf("%s at %.3f GiB: published %v s, simulated %.3f s", c.pub, x, p.Y, s.Y)
			}
		}
	}
}
