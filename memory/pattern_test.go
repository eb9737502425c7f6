package memory

import (
	"errors"
	"slices"
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
		// The Synthetic region fills runs of any size a chunk of four
		// pages at a time; the Dense one, page by page.
		one.sp.bulkFillMin = 1
		one.sp.setMetaShift(2)
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

// TestPatternIsStable pins the pages each kind of pattern chooses: every
// workload of package vgpu dirties memory through a Pattern, so a change
// here changes every migration figure the project reports.
func TestPatternIsStable(t *testing.T) {
	for _, tc := range []struct {
		kind PatternKind
		want []int
	}{
		{Uniform, []int{487, 70, 138, 71, 94, 632, 995, 771, 998, 596, 74, 493}},
		{HotSet, []int{7, 7, 63, 77, 59, 49, 58, 22, 27, 93, 1, 152}},
		{Sweep, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
	} {
		r := mustNew(t, Config{SizeBytes: 1000 * 4096, Kind: Synthetic})
		p, err := NewPattern(r, PatternConfig{Kind: tc.kind, Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]int, len(tc.want))
		for i := range got {
			got[i] = p.nextPage()
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: pages %v, want %v", tc.kind, got, tc.want)
		}
	}
}

func TestPatternShapes(t *testing.T) {
	const pages = 1000
	count := func(kind PatternKind) (writes []int, p *Pattern) {
		r := mustNew(t, Config{SizeBytes: pages * 4096, Kind: Synthetic})
		p, err := NewPattern(r, PatternConfig{Kind: kind, RateBytesPerSec: 4096 * 1000, Seed: 3})
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
	t.Run("hot set takes nine writes in ten", func(t *testing.T) {
		w, _ := count(HotSet)
		hot := 0
		for _, n := range w[:100] {
			hot += n
		}
		if share := float64(hot) / 20000; share < 0.88 || share > 0.92 {
			t.Fatalf("hot 10%% of pages took %.3f of writes, want 0.9", share)
		}
	})
	t.Run("uniform touches pages evenly", func(t *testing.T) {
		w, _ := count(Uniform)
		for p, n := range w {
			if n < 5 || n > 40 { // mean 20; Poisson tails far beyond 5 sigma
				t.Fatalf("page %d written %d times", p, n)
			}
		}
	})
	t.Run("rewrite completes whole passes", func(t *testing.T) {
		w, p := count(Rewrite)
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

// TestPatternMoves checks that a pattern moved to another region mid-way
// goes on as if it had stayed: the pages it wrote before and after the
// move add up, page by page, to what an unmoved pattern wrote, and it
// keeps counting its writes.
func TestPatternMoves(t *testing.T) {
	for _, kind := range []PatternKind{Uniform, HotSet, Sweep} {
		cfg := PatternConfig{Kind: kind, RateBytesPerSec: 4096 * 333, FirstPage: 10, Pages: 500, Seed: 8}
		before := mustNew(t, Config{SizeBytes: 600 * 4096, Kind: Synthetic, Seed: 2})
		after := mustNew(t, Config{SizeBytes: 512 * 4096, Kind: Synthetic, Seed: 2})
		stayed := mustNew(t, Config{SizeBytes: 600 * 4096, Kind: Synthetic, Seed: 2})
		moved, err := NewPattern(before, cfg)
		if err != nil {
			t.Fatal(err)
		}
		still, _ := NewPattern(stayed, cfg)
		for _, d := range []time.Duration{1234567 * time.Microsecond, 7654321 * time.Microsecond} {
			if _, err := moved.Advance(d); err != nil {
				t.Fatal(err)
			}
			if _, err := still.Advance(d); err != nil {
				t.Fatal(err)
			}
			if err := moved.Move(after); err != nil {
				t.Fatal(err)
			}
		}
		if moved.Written() != still.Written() || moved.Iterations() != still.Iterations() {
			t.Fatalf("%v: moved wrote %d pages in %d passes, unmoved %d in %d",
				kind, moved.Written(), moved.Iterations(), still.Written(), still.Iterations())
		}
		for p := range 600 {
			b, _ := before.PageState(p)
			var a PageState
			if p < after.Pages() {
				a, _ = after.PageState(p)
			}
			s, _ := stayed.PageState(p)
			if b.Gen+a.Gen != s.Gen {
				t.Fatalf("%v: page %d written %d+%d times, unmoved %d", kind, p, b.Gen, a.Gen, s.Gen)
			}
		}
	}
	r := mustNew(t, Config{SizeBytes: 64 * 4096})
	p, _ := NewPattern(r, PatternConfig{Kind: Uniform, FirstPage: 8, Pages: 32})
	if err := p.Move(mustNew(t, Config{SizeBytes: 64 * 4096, PageSize: 8192})); !errors.Is(err, ErrPageSize) {
		t.Errorf("move to a region of another page size: %v", err)
	}
	if err := p.Move(mustNew(t, Config{SizeBytes: 39 * 4096})); !errors.Is(err, ErrConfig) {
		t.Errorf("move to a region short of the range: %v", err)
	}
	if err := p.Move(mustNew(t, Config{SizeBytes: 40 * 4096})); err != nil {
		t.Errorf("move to a region that just holds the range: %v", err)
	}
}

// TestPatternKeepsItsMix checks that changing the Mix a pattern was made
// with does not change what it writes.
func TestPatternKeepsItsMix(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 64 * 4096, Kind: Synthetic})
	m := MixText()
	p, err := NewPattern(r, PatternConfig{Kind: Sweep, RateBytesPerSec: 64 * 4096, Mix: m})
	if err != nil {
		t.Fatal(err)
	}
	m.Parts[0].Class = ClassRandom
	if _, err := p.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	for pg := range 64 {
		if st, _ := r.PageState(pg); st.Class != ClassText {
			t.Fatalf("page %d is %v, want text", pg, st.Class)
		}
	}
}

func TestPatternRejectsBadInput(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 16 * 4096})
	for name, cfg := range map[string]PatternConfig{
		"unknown kind":       {Kind: 9},
		"range past the end": {Kind: Uniform, FirstPage: 10, Pages: 7},
		"negative rate":      {Kind: Uniform, RateBytesPerSec: -1},
		"rate above the cap": {Kind: Uniform, RateBytesPerSec: MaxRateBytesPerSec + 1},
		"explicit mix":       {Kind: Uniform, Mix: Mix{Parts: []MixPart{{ClassExplicit, 1}}}},
	} {
		if _, err := NewPattern(r, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// The smallest page, where the page arithmetic overflows first.
	small := mustNew(t, Config{SizeBytes: 16 * MinPageSize, PageSize: MinPageSize})
	p, _ := NewPattern(small, PatternConfig{Kind: Uniform, RateBytesPerSec: MaxRateBytesPerSec})
	if _, err := p.Advance(-time.Second); !errors.Is(err, ErrRate) {
		t.Errorf("negative interval: %v", err)
	}
	if _, err := p.Advance(time.Duration(1 << 62)); !errors.Is(err, ErrRate) {
		t.Errorf("overflowing interval: %v", err)
	}
}
