package memory

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPatternWritesAgreeAcrossKinds checks the batch paths of pattern
// writes (fillEach, rewriteLocked: a Synthetic region's chunks, a page's
// class taken from its chunk's rule) against a Dense region, which stores
// every page on its own: after any mix of fills, single pages, explicit
// bytes and patterns, every page has the same class, generation and bytes.
func TestPatternWritesAgreeAcrossKinds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const pages = 1500
		seed := rapid.Uint64().Draw(t, "seed")
		fast := mustNew(t, Config{SizeBytes: pages * 4096, Kind: Synthetic, Seed: seed})
		ref := mustNew(t, Config{SizeBytes: pages * 4096, Kind: Dense, Seed: seed})
		if rapid.Bool().Draw(t, "smallChunks") {
			fast.sp.setMetaShift(uint(rapid.IntRange(1, 4).Draw(t, "shift")))
		}
		both := []*Region{fast, ref}
		mixes := []Mix{MixRealistic(), MixText(), MixWeights(), {Parts: []MixPart{{ClassRandom, 1}, {ClassText, 2}}}}
		for range rapid.IntRange(1, 12).Draw(t, "ops") {
			first := rapid.IntRange(0, pages-1).Draw(t, "first")
			n := rapid.IntRange(1, pages-first).Draw(t, "n")
			var apply func(r *Region) error
			switch op := rapid.IntRange(0, 3).Draw(t, "op"); op {
			case 0:
				m := rapid.SampledFrom(mixes).Draw(t, "mix")
				apply = func(r *Region) error { return r.FillMix(first, n, m) }
			case 1:
				gen := rapid.Uint32Range(0, 9).Draw(t, "gen")
				apply = func(r *Region) error { return r.StoreGenerated(first, ClassText, gen) }
			case 2:
				apply = func(r *Region) error { _, err := r.WriteAt([]byte("bytes"), int64(first)*4096+7); return err }
			default:
				cfg := PatternConfig{
					Kind:            rapid.SampledFrom([]PatternKind{Uniform, HotSet}).Draw(t, "kind"),
					RateBytesPerSec: 4096 * int64(rapid.IntRange(1, 3*n).Draw(t, "rate")),
					FirstPage:       first, Pages: n, Mix: rapid.SampledFrom(mixes).Draw(t, "patternMix"),
					Seed: rapid.Uint64().Draw(t, "patternSeed")}
				apply = func(r *Region) error {
					p, err := NewPattern(r, cfg)
					if err == nil {
						_, err = p.Advance(time.Second)
					}
					return err
				}
			}
			for _, r := range both {
				if err := apply(r); err != nil {
					t.Fatal(err)
				}
			}
		}
		a, b := make([]byte, 4096), make([]byte, 4096)
		for p := range pages {
			sa, _ := fast.ReadPage(p, a)
			sb, _ := ref.ReadPage(p, b)
			if sa != sb || string(a) != string(b) {
				t.Fatalf("page %d: %+v, page by page %+v (bytes equal %v)", p, sa, sb, string(a) == string(b))
			}
		}
	})
}
