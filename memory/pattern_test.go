package memory

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPatternStepsAddUp checks that a pattern advanced in many small steps
// writes exactly what one large step writes: the same page count, the same
// pages with the same generations and bytes.
func TestPatternStepsAddUp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		kind := rapid.SampledFrom([]PatternKind{Uniform, HotSet, Sweep, Rewrite}).Draw(t, "kind")
		cfg := PatternConfig{
			Kind:            kind,
			RateBytesPerSec: rapid.Int64Range(0, 50<<20).Draw(t, "rate"),
			Seed:            rapid.Uint64().Draw(t, "seed"),
			Mix:             rapid.SampledFrom(Mixes()).Draw(t, "mix"),
		}
		steps := rapid.SliceOfN(rapid.Int64Range(0, int64(20*time.Millisecond)), 1, 40).Draw(t, "steps")
		one := mustNew(t, Config{SizeBytes: 64 * 4096, Kind: Synthetic, Seed: 5})
		many := mustNew(t, Config{SizeBytes: 64 * 4096, Kind: Dense, Seed: 5})
		po, err := NewPattern(one, cfg)
		if err != nil {
			t.Fatal(err)
		}
		pm, _ := NewPattern(many, cfg)
		var total time.Duration
		var sum int64
		for _, s := range steps {
			n, err := pm.Advance(time.Duration(s))
			if err != nil {
				t.Fatal(err)
			}
			sum += n
			total += time.Duration(s)
		}
		n, err := po.Advance(total)
		if err != nil {
			t.Fatal(err)
		}
		want := cfg.RateBytesPerSec * int64(total) / (4096 * int64(time.Second))
		if n != sum || n != want {
			t.Fatalf("one step wrote %d pages, steps %d, rate×d gives %d", n, sum, want)
		}
		if d, _ := FirstDiff(one, many); d != -1 {
			t.Fatalf("regions differ at page %d", d)
		}
		if po.Iterations() != pm.Iterations() {
			t.Fatalf("iterations %d vs %d", po.Iterations(), pm.Iterations())
		}
	})
}

func TestPatternShapes(t *testing.T) {
	const pages = 1000
	count := func(kind PatternKind, hotShare float64) (writes []int, p *Pattern) {
		r := mustNew(t, Config{SizeBytes: pages * 4096, Kind: Synthetic})
		p, err := NewPattern(r, PatternConfig{Kind: kind, RateBytesPerSec: 4096 * 1000, HotShare: hotShare, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Advance(20 * time.Second); err != nil { // 20 000 writes
			t.Fatal(err)
		}
		writes = make([]int, pages)
		for i := range writes {
			st, _ := r.PageState(i)
			writes[i] = int(st.Gen)
		}
		return writes, p
	}
	t.Run("hot set takes its share of the writes", func(t *testing.T) {
		w, _ := count(HotSet, 0.9)
		hot := 0
		for _, n := range w[:100] {
			hot += n
		}
		if share := float64(hot) / 20000; share < 0.88 || share > 0.92 {
			t.Fatalf("hot 10%% of pages took %.3f of writes, want 0.9", share)
		}
	})
	t.Run("uniform touches pages evenly", func(t *testing.T) {
		w, _ := count(Uniform, 0)
		for p, n := range w {
			if n < 5 || n > 40 { // mean 20; Poisson tails far beyond 5 sigma
				t.Fatalf("page %d written %d times", p, n)
			}
		}
	})
	t.Run("rewrite completes whole passes", func(t *testing.T) {
		w, p := count(Rewrite, 0)
		if p.Iterations() != 20 {
			t.Fatalf("%d passes, want 20", p.Iterations())
		}
		for pg, n := range w {
			if n != 20 {
				t.Fatalf("page %d written %d times", pg, n)
			}
		}
	})
}

func TestPatternRejectsBadInput(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 16 * 4096})
	for name, cfg := range map[string]PatternConfig{
		"unknown kind":       {Kind: 9},
		"range past the end": {Kind: Uniform, FirstPage: 10, Pages: 7},
		"hot share above 1":  {Kind: HotSet, HotShare: 1.5},
		"negative rate":      {Kind: Uniform, RateBytesPerSec: -1},
		"explicit mix":       {Kind: Uniform, Mix: Mix{Parts: []MixPart{{ClassExplicit, 1}}}},
	} {
		if _, err := NewPattern(r, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	p, _ := NewPattern(r, PatternConfig{Kind: Uniform, RateBytesPerSec: MaxRateBytesPerSec})
	if _, err := p.Advance(-time.Second); !errors.Is(err, ErrRate) {
		t.Errorf("negative interval: %v", err)
	}
	if _, err := p.Advance(time.Duration(1 << 62)); !errors.Is(err, ErrRate) {
		t.Errorf("overflowing interval: %v", err)
	}
}
