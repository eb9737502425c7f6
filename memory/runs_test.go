package memory

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStoreRunsRefuses: every kind of bad run, after good ones, is refused
// with its sentinel, and the region is left as it was: the same pages and
// runs, no page dirty.
func TestStoreRunsRefuses(t *testing.T) {
	const pages = 64
	many := make([]MixPart, MaxRunMixParts+1)
	for i := range many {
		many[i] = MixPart{ClassWeights, 1}
	}
	good := []Run{{First: 0, Pages: 4, Class: ClassText, Gen: 2}, {First: 4, Pages: 2, Class: ClassExplicit}}
	for _, tc := range []struct {
		name string
		bad  Run
		want error
	}{
		{"overlap", Run{First: 5, Pages: 3, Class: ClassWeights}, ErrConfig},
		{"out of order", Run{First: 1, Pages: 1, Class: ClassWeights}, ErrConfig},
		{"past the end", Run{First: 60, Pages: 5, Class: ClassWeights}, ErrOutOfRange},
		{"huge", Run{First: 10, Pages: math.MaxInt, Class: ClassWeights}, ErrOutOfRange},
		{"negative first", Run{First: -1, Pages: 2, Class: ClassWeights}, ErrOutOfRange},
		{"negative pages", Run{First: 10, Pages: -3, Class: ClassWeights}, ErrOutOfRange},
		{"zero pages", Run{First: 10, Pages: 0, Class: ClassWeights}, ErrOutOfRange},
		{"unknown class", Run{First: 10, Pages: 1, Class: numClasses + 3}, ErrClass},
		{"explicit with a generation", Run{First: 10, Pages: 1, Class: ClassExplicit, Gen: 1}, ErrConfig},
		{"class with a mix seed", Run{First: 10, Pages: 1, Class: ClassText, MixSeed: 1}, ErrConfig},
		{"class with a mix key", Run{First: 10, Pages: 1, Class: ClassText, MixKey: 1}, ErrConfig},
		{"mix with a class", Run{First: 10, Pages: 1, Class: ClassText, Mix: MixRealistic()}, ErrClass},
		{"mix of no weight", Run{First: 10, Pages: 1, Mix: Mix{Parts: []MixPart{{ClassText, 0}, {ClassZero, 0}}}}, ErrConfig},
		{"mix of explicit", Run{First: 10, Pages: 1, Mix: Mix{Parts: []MixPart{{ClassExplicit, 1}, {ClassZero, 1}}}}, ErrClass},
		{"mix of an unknown class", Run{First: 10, Pages: 1, Mix: Mix{Parts: []MixPart{{numClasses + 1, 1}}}}, ErrClass},
		{"mix of too many parts", Run{First: 10, Pages: 1, Mix: Mix{Parts: many}}, ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustNew(t, Config{SizeBytes: pages * 64, PageSize: 64, Kind: Synthetic, Seed: 5})
			twin := mustNew(t, Config{SizeBytes: pages * 64, PageSize: 64, Kind: Synthetic, Seed: 5})
			for _, x := range []*Region{r, twin} {
				if err := x.FillMix(0, pages, MixRealistic()); err != nil {
					t.Fatal(err)
				}
				x.CollectDirty(new(PageSet))
			}
			before := must(r.AppendRuns(nil, 0, pages))
			err := r.StoreRuns(append(good[:len(good):len(good)], tc.bad))
			if !errors.Is(err, tc.want) {
				t.Fatalf("StoreRuns: %v, want %v", err, tc.want)
			}
			if d, _ := FirstDiff(r, twin); d != -1 {
				t.Fatalf("page %d changed", d)
			}
			if diff := cmp.Diff(before, must(r.AppendRuns(nil, 0, pages))); diff != "" {
				t.Fatalf("runs changed (-before +after):\n%s", diff)
			}
			if n := r.CollectDirty(new(PageSet)); n != 0 {
				t.Fatalf("%d pages dirty", n)
			}
		})
	}
	t.Run("unmapped", func(t *testing.T) {
		root := mustNew(t, Config{SizeBytes: pages * 64, PageSize: 64, Kind: Synthetic})
		w := must(root.Map(8, 8, 1))
		if err := w.Unmap(); err != nil {
			t.Fatal(err)
		}
		if err := w.StoreRuns(good); !errors.Is(err, ErrUnmapped) {
			t.Fatalf("StoreRuns: %v", err)
		}
		if _, err := w.AppendRuns(nil, 0, 8); !errors.Is(err, ErrUnmapped) {
			t.Fatalf("AppendRuns: %v", err)
		}
	})
	t.Run("append out of range", func(t *testing.T) {
		r := mustNew(t, Config{SizeBytes: pages * 64, PageSize: 64, Kind: Synthetic})
		for _, rg := range [][2]int{{-1, 2}, {0, pages + 1}, {pages, 1}, {3, -1}} {
			if got, err := r.AppendRuns(nil, rg[0], rg[1]); !errors.Is(err, ErrOutOfRange) || got != nil {
				t.Errorf("AppendRuns(%d, %d) = %v, %v", rg[0], rg[1], got, err)
			}
		}
	})
}

// TestStoreRunsOfManyMixesInAChunk stores into one chunk more mixes than
// a chunk can name: every page still has the class its run gives it, and
// runs still cover the region, the extra mixes' pages as classes.
func TestStoreRunsOfManyMixesInAChunk(t *testing.T) {
	const pages = 1 << metaChunkShift
	r := mustNew(t, Config{SizeBytes: pages * 64, PageSize: 64, Kind: Synthetic})
	realistic := Mix{Parts: MixRealistic().Parts} // unnamed, as runs read back are
	var runs []Run
	for p := 0; p < pages; p += 2 {
		runs = append(runs, Run{First: p, Pages: 2, Mix: realistic, MixSeed: uint64(p), MixKey: 7, Gen: 1})
	}
	if err := r.StoreRuns(runs); err != nil {
		t.Fatal(err)
	}
	for _, run := range runs {
		for i := range run.Pages {
			st := must(r.PageState(run.First + i))
			if want := (PageState{Class: run.Mix.ClassOf(run.MixSeed, run.MixKey+uint64(i)), Gen: 1}); st != want {
				t.Fatalf("page %d is %v, want %v", run.First+i, st, want)
			}
		}
	}
	got := must(r.AppendRuns(nil, 0, pages))
	if diff := cmp.Diff(runs[:maxChunkRules], got[:maxChunkRules]); diff != "" {
		t.Fatalf("the runs of the mixes the chunk names (-want +got):\n%s", diff)
	}
	if n := got[len(got)-1]; n.First+n.Pages != pages {
		t.Fatalf("runs end at %d", n.First+n.Pages)
	}
}

// TestRunsOfALargeRegion: a 64 GiB guest filled with a realistic mix is a
// run, and is restored into another in one step a chunk.
func TestRunsOfALargeRegion(t *testing.T) {
	src, dst := newLargeRunsRegions(t)
	runs := must(src.AppendRuns(nil, 0, src.Pages()))
	if len(runs) > 3 {
		t.Fatalf("%d runs: %v", len(runs), runs[:3])
	}
	if err := dst.StoreRuns(runs); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(runs, must(dst.AppendRuns(nil, 0, dst.Pages()))); diff != "" {
		t.Fatalf("runs after a restore differ (-want +got):\n%s", diff)
	}
	for _, p := range []int{0, 1, 511, 512, 123457, src.Pages() - 1} {
		if a, b := must(src.PageState(p)), must(dst.PageState(p)); a != b {
			t.Fatalf("page %d is %v, was %v", p, b, a)
		}
	}
}

// newLargeRunsRegions returns a 64 GiB Synthetic region filled with
// MixRealistic, and a fresh one of the same size.
func newLargeRunsRegions(t testing.TB) (src, dst *Region) {
	cfg := Config{SizeBytes: 64 << 30, Kind: Synthetic, Seed: 11}
	src, dst = mustNew(t, cfg), mustNew(t, cfg)
	if err := src.FillMix(0, src.Pages(), MixRealistic()); err != nil {
		t.Fatal(err)
	}
	return src, dst
}

// TestRunsWithConcurrentWriters runs AppendRuns and StoreRuns beside
// fills, stores and collects of the same pages, for the race detector:
// every page read is of one write, and the region ends as the last
// writer left it.
func TestRunsWithConcurrentWriters(t *testing.T) {
	const pages = 4096
	r := mustNew(t, Config{SizeBytes: pages * 64, PageSize: 64, Kind: Synthetic, Seed: 3})
	w := must(r.Map(1000, 2000, 4))
	runs := []Run{
		{First: 0, Pages: 700, Mix: Mix{Parts: MixRealistic().Parts}, MixSeed: 4, MixKey: 0, Gen: 3},
		{First: 700, Pages: 5, Class: ClassExplicit},
		{First: 705, Pages: 1295, Class: ClassText, Gen: 9},
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			var got []Run
			var set PageSet
			for i := range 50 {
				var err error
				switch (g + i) % 4 {
				case 0:
					err = w.StoreRuns(runs)
				case 1:
					got, err = w.AppendRuns(got[:0], 0, w.Pages())
				case 2:
					err = w.FillMix(i, 1500, MixRealistic())
				default:
					err = w.StoreGenerated(i*7, ClassWeights, 1)
					w.CollectDirty(&set)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.StoreRuns(runs); err != nil {
		t.Fatal(err)
	}
	// The pages of the explicit run are as the writers left them.
	got := must(w.AppendRuns(nil, 0, w.Pages()))
	if diff := cmp.Diff(append(runs[:1:1], runs[2:]...), append(clipRuns(got, 0, 700), clipRuns(got, 705, 2000)...)); diff != "" {
		t.Fatalf("runs after the last store (-want +got):\n%s", diff)
	}
}

// BenchmarkRuns measures the runs of a 64 GiB guest filled with a
// realistic mix: reading them, and storing them into another.
func BenchmarkRuns(b *testing.B) {
	b.Run("size=64GiB", func(b *testing.B) {
		src, dst := newLargeRunsRegions(b)
		runs := must(src.AppendRuns(nil, 0, src.Pages()))
		b.Run("op=append", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if runs, err = src.AppendRuns(runs[:0], 0, src.Pages()); err != nil || len(runs) != 1 {
					b.Fatal(err, len(runs))
				}
			}
		})
		b.Run("op=store", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := dst.StoreRuns(runs); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
