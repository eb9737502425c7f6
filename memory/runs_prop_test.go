package memory

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// runsPageSize is the page size of the runs tests: small, so that
// generating and comparing pages costs little.
const runsPageSize = 64

// runsMixes are the mixes the runs tests fill with: several of many
// parts, so that chunks hold more than one, and one of a single part,
// which a fill and a run treat as its class.
func runsMixes() []Mix {
	return []Mix{
		MixRealistic(),
		{Name: "halves", Parts: []MixPart{{ClassWeights, 1}, {ClassText, 1}}},
		{Name: "thin", Parts: []MixPart{{ClassZero, 3}, {ClassRandom, 1}}},
		MixText(),
	}
}

// runsRegion returns a region of pages pages: a root, or, if off or tail
// is not zero, a window at off of a root with tail pages after it, of
// seed seed, with metadata chunks of 1<<shift pages and fills of any
// size made in bulk.
func runsRegion(t *rapid.T, kind Kind, pages, off, tail int, shift uint, seed uint64) *Region {
	root, err := New(Config{SizeBytes: int64(runsPageSize * (off + pages + tail)), PageSize: runsPageSize, Kind: kind, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	root.sp.setMetaShift(shift)
	root.sp.bulkFillMin = 1
	if off == 0 && tail == 0 {
		return root
	}
	w, err := root.Map(off, pages, seed)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var runsShifts = []uint{0, 1, 2, 3, metaChunkShift}

// drawRuns draws valid runs of a region of pages pages, with gaps.
func drawRuns(t *rapid.T, pages int) []Run {
	var runs []Run
	gens := []uint32{0, 1, 2, 300, 1 << 31, ^uint32(0)}
	for p := rapid.IntRange(0, 3).Draw(t, "gap"); p < pages; p += rapid.IntRange(0, 3).Draw(t, "gap") {
		run := Run{First: p, Pages: rapid.IntRange(1, min(12, pages-p)).Draw(t, "runPages")}
		switch rapid.IntRange(0, 3).Draw(t, "runKind") {
		case 0:
			run.Class = rapid.SampledFrom([]Class{ClassZero, ClassWeights, ClassText, ClassRandom}).Draw(t, "runClass")
			run.Gen = rapid.SampledFrom(gens).Draw(t, "runGen")
		case 1:
			run.Class = ClassExplicit
		default:
			run.Mix = rapid.SampledFrom(runsMixes()).Draw(t, "runMix")
			run.MixSeed = rapid.Uint64Range(1, 3).Draw(t, "runSeed")
			run.MixKey = rapid.SampledFrom([]uint64{0, 5, 1000, ^uint64(0) - 3}).Draw(t, "runKey")
			run.Gen = rapid.SampledFrom(gens).Draw(t, "runGen")
		}
		runs = append(runs, run)
		p += run.Pages
	}
	return runs
}

// runClassOf returns the class run gives its i-th page.
func runClassOf(run Run, i int) Class {
	if len(run.Mix.Parts) > 0 {
		return run.Mix.ClassOf(run.MixSeed, run.MixKey+uint64(i))
	}
	return run.Class
}

// storeRunsNaively stores runs in r page by page with StoreGenerated: what
// StoreRuns must do, observably.
func storeRunsNaively(t *rapid.T, r *Region, runs []Run) {
	for _, run := range runs {
		if run.explicit() {
			continue
		}
		for i := range run.Pages {
			if err := r.StoreGenerated(run.First+i, runClassOf(run, i), run.Gen); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// mergeable reports whether b could be part of a, which it follows: what
// AppendRuns must never leave apart.
func mergeable(a, b Run) bool {
	switch {
	case a.First+a.Pages != b.First:
		return false
	case a.explicit() || b.explicit():
		return a.explicit() && b.explicit()
	case a.Gen != b.Gen || (len(a.Mix.Parts) > 0) != (len(b.Mix.Parts) > 0):
		return false
	case len(a.Mix.Parts) == 0:
		return a.Class == b.Class
	}
	return a.MixSeed == b.MixSeed && a.MixKey+uint64(a.Pages) == b.MixKey && slices.Equal(a.Mix.Parts, b.Mix.Parts)
}

// checkRuns checks runs as AppendRuns(nil, first, pages) of r against r's
// pages one by one: they cover the range in order, each page has its
// run's class and generation, every run is in its canonical form and no
// two adjacent ones could be one.
func checkRunsOf(t *rapid.T, r *Region, runs []Run, first, pages int) {
	next := first
	for j, run := range runs {
		if run.First != next || run.Pages <= 0 {
			t.Fatalf("run %d %+v: want a run from page %d", j, run, next)
		}
		next += run.Pages
		switch {
		case len(run.Mix.Parts) > 0 && (len(run.Mix.Parts) < 2 || run.Class != ClassZero || run.Mix.Name != ""):
			t.Fatalf("run %d %+v: a mix run of one part, or with a class or a name", j, run)
		case len(run.Mix.Parts) == 0 && (run.Mix.Parts != nil || run.MixSeed != 0 || run.MixKey != 0):
			t.Fatalf("run %d %+v: a class run with mix fields", j, run)
		case run.explicit() && run.Gen != 0:
			t.Fatalf("run %d %+v: explicit with a generation", j, run)
		case j > 0 && mergeable(runs[j-1], run):
			t.Fatalf("runs %d and %d (%+v, %+v) could be one", j-1, j, runs[j-1], run)
		}
		for i := range run.Pages {
			st, err := r.PageState(run.First + i)
			if err != nil {
				t.Fatal(err)
			}
			if run.explicit() {
				if st.Class != ClassExplicit {
					t.Fatalf("page %d is %v, its run %+v says explicit", run.First+i, st, run)
				}
			} else if want := (PageState{Class: runClassOf(run, i), Gen: run.Gen}); st != want {
				t.Fatalf("page %d is %v, its run %+v says %v", run.First+i, st, run, want)
			}
		}
	}
	if next != first+pages {
		t.Fatalf("runs end at page %d, want %d", next, first+pages)
	}
}

// clipRuns returns the parts of runs in [a, b), as AppendRuns of that
// range gives them.
func clipRuns(runs []Run, a, b int) []Run {
	var out []Run
	for _, run := range runs {
		lo, hi := max(a, run.First), min(b, run.First+run.Pages)
		if lo >= hi {
			continue
		}
		if len(run.Mix.Parts) > 0 {
			run.MixKey += uint64(lo - run.First)
		}
		run.First, run.Pages = lo, hi-lo
		out = append(out, run)
	}
	return out
}

// restoreRuns stores runs of src into dst and copies the pages of its
// explicit runs, as a suspended VM is resumed.
func restoreRuns(t *rapid.T, src, dst *Region, runs []Run) {
	if err := dst.StoreRuns(runs); err != nil {
		t.Fatalf("StoreRuns: %v", err)
	}
	buf := make([]byte, runsPageSize)
	for _, run := range runs {
		if !run.explicit() {
			continue
		}
		for q := run.First; q < run.First+run.Pages; q++ {
			st, err := src.ReadPage(q, buf)
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.StorePage(q, buf, st.Gen); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// samePages fails unless a and b hold the same states and bytes.
func samePages(t *rapid.T, a, b *Region, what string) {
	for p := range a.Pages() {
		sa, _ := a.PageState(p)
		sb, _ := b.PageState(p)
		if sa != sb {
			t.Fatalf("%s: page %d is %v, want %v", what, p, sb, sa)
		}
	}
	if d, err := FirstDiff(a, b); err != nil || d != -1 {
		t.Fatalf("%s: first difference at page %d (%v)", what, d, err)
	}
}

// TestRunsMatchPagesAndRoundTrip fills a region at random — fills of
// classes and mixes, patterns, stores, writes, runs — on every backing,
// as a root or a window, with chunks of several sizes. StoreRuns must do
// what StoreGenerated page by page does to a twin; AppendRuns must agree
// page by page with PageState and be canonical, of the whole region and
// of any range; and the runs restored into fresh regions (roots, windows
// at other offsets, chunks of other sizes, another backing) must give the
// same pages and the same runs.
func TestRunsMatchPagesAndRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		kind := rapid.SampledFrom(allKinds).Draw(t, "kind")
		pages := rapid.IntRange(1, 48).Draw(t, "pages")
		seed := rapid.Uint64Range(1, 4).Draw(t, "seed")
		shift := rapid.SampledFrom(runsShifts).Draw(t, "shift")
		off, tail := 0, 0
		if rapid.Bool().Draw(t, "window") {
			off, tail = rapid.IntRange(0, 12).Draw(t, "off"), rapid.IntRange(0, 4).Draw(t, "tail")
		}
		src := runsRegion(t, kind, pages, off, tail, shift, seed)
		twin := runsRegion(t, kind, pages, off, tail, shift, seed)
		both := []*Region{src, twin}
		if _, err := src.Digest(); err != nil { // so that stores must mark its cache
			t.Fatal(err)
		}
		for range rapid.IntRange(0, 14).Draw(t, "ops") {
			first := rapid.IntRange(0, pages-1).Draw(t, "first")
			n := rapid.IntRange(1, pages-first).Draw(t, "n")
			switch op := rapid.IntRange(0, 7).Draw(t, "op"); op {
			case 0:
				c := rapid.SampledFrom([]Class{ClassZero, ClassWeights, ClassActivations, ClassText, ClassRandom, ClassTrainingWeights}).Draw(t, "class")
				for _, r := range both {
					must(0, r.Fill(first, n, c))
				}
			case 1:
				m := rapid.SampledFrom(runsMixes()).Draw(t, "mix")
				for _, r := range both {
					must(0, r.FillMix(first, n, m))
				}
			case 2:
				cfg := PatternConfig{
					Kind:            rapid.SampledFrom([]PatternKind{Uniform, HotSet, Sweep, Rewrite}).Draw(t, "pattern"),
					RateBytesPerSec: int64(runsPageSize * rapid.IntRange(1, 3*pages).Draw(t, "patternPages")),
					FirstPage:       first, Pages: n,
					Mix:  rapid.SampledFrom(runsMixes()).Draw(t, "patternMix"),
					Seed: rapid.Uint64().Draw(t, "patternSeed"),
				}
				for _, r := range both {
					must(must(NewPattern(r, cfg)).Advance(time.Second))
				}
			case 3:
				c := rapid.SampledFrom([]Class{ClassZero, ClassWeights, ClassText}).Draw(t, "class")
				gen := rapid.Uint32Range(0, 400).Draw(t, "gen")
				for _, r := range both {
					must(0, r.StoreGenerated(first, c, gen))
				}
			case 4:
				data := rapid.SliceOfN(rapid.ByteRange(1, 255), 1, 2*runsPageSize).Draw(t, "data")
				at := int64(first*runsPageSize) + int64(rapid.IntRange(0, runsPageSize-1).Draw(t, "at"))
				data = data[:min(int64(len(data)), src.Size()-at)]
				for _, r := range both {
					must(r.WriteAt(data, at))
				}
			case 5:
				// Generated content, which a Synthetic region keeps as
				// its class, or bytes of its own.
				gen := rapid.Uint32Range(0, 3).Draw(t, "gen")
				data := rapid.SliceOfN(rapid.ByteRange(1, 255), runsPageSize, runsPageSize).Draw(t, "page")
				if rapid.Bool().Draw(t, "generated") {
					Generate(data, rapid.SampledFrom([]Class{ClassWeights, ClassText}).Draw(t, "class"), seed, uint64(first), gen)
				}
				for _, r := range both {
					must(0, r.StorePage(first, data, gen))
				}
			case 6:
				runs := drawRuns(t, pages)
				must(0, src.StoreRuns(runs))
				storeRunsNaively(t, twin, runs)
			default:
				for _, r := range both {
					must(0, r.Scrub())
				}
			}
		}
		samePages(t, twin, src, "StoreRuns against StoreGenerated")
		var srcDirty, twinDirty PageSet
		src.CollectDirty(&srcDirty)
		twin.CollectDirty(&twinDirty)
		if a, b := srcDirty.AppendTo(nil), twinDirty.AppendTo(nil); !slices.Equal(a, b) {
			t.Fatalf("dirty pages %v, StoreGenerated's %v", a, b)
		}
		if d := must(src.Digest()); d != naiveDigest(t, src) {
			t.Fatalf("digest %x, the formula gives %x", d, naiveDigest(t, src))
		}

		runs := must(src.AppendRuns(nil, 0, pages))
		checkRunsOf(t, src, runs, 0, pages)
		a := rapid.IntRange(0, pages-1).Draw(t, "rangeFirst")
		b := rapid.IntRange(a+1, pages).Draw(t, "rangeEnd")
		prefix := []Run{{Class: ClassWeights, Pages: a}} // a run the call must append after, not extend
		sub := must(src.AppendRuns(prefix[:1:1], a, b-a))
		if diff := cmp.Diff(clipRuns(runs, a, b), sub[1:]); diff != "" || sub[0].Class != ClassWeights || sub[0].Pages != a {
			t.Fatalf("runs of [%d, %d) are not those of the region there (-want +got):\n%s", a, b, diff)
		}

		dsts := map[string]*Region{
			"root":   runsRegion(t, kind, pages, 0, 0, shift, src.Seed()),
			"window": runsRegion(t, kind, pages, rapid.IntRange(1, 12).Draw(t, "dstOff"), rapid.IntRange(0, 3).Draw(t, "dstTail"), rapid.SampledFrom(runsShifts).Draw(t, "dstShift"), src.Seed()),
			"shift":  runsRegion(t, kind, pages, 0, 0, rapid.SampledFrom(runsShifts).Draw(t, "rootShift"), src.Seed()),
		}
		if kind == Synthetic {
			// Its explicit pages are none a Synthetic region recognizes,
			// so a Dense region holds them as they are too.
			dsts["dense"] = runsRegion(t, Dense, pages, 0, 0, shift, src.Seed())
		}
		for name, dst := range dsts {
			if rapid.Bool().Draw(t, name+"Used") { // what StoreRuns must overwrite
				must(0, dst.FillMix(0, pages, MixRealistic()))
				must(dst.WriteAt([]byte{9}, int64(pages-1)*runsPageSize))
			}
			restoreRuns(t, src, dst, runs)
			samePages(t, src, dst, name)
			if diff := cmp.Diff(runs, must(dst.AppendRuns(nil, 0, pages))); diff != "" {
				t.Fatalf("%s: runs after a restore differ (-want +got):\n%s", name, diff)
			}
		}
	})
}
