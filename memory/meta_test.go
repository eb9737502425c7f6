package memory

import (
	"slices"
	"testing"
)

// setMetaShift makes the metadata chunks of a space no page has been
// written to yet 1<<shift pages, so that tests of small regions cover
// chunks whole.
func (sp *space) setMetaShift(shift uint) {
	sp.metaShift = shift
	sp.meta = newMeta(sp.pages, shift)
}

// TestStripesOf: the stripes a range locks are those of its chunks, each
// once, in increasing order, for ranges that wrap around the stripes too.
func TestStripesOf(t *testing.T) {
	sp := &space{metaShift: 2}
	for _, tc := range []struct{ abs, n int }{
		{0, 1}, {3, 2}, {0, 4 * lockStripes}, {4*lockStripes - 4, 8}, {4 * 250, 4 * 10}, {5, 4*lockStripes - 8}, {1, 4 * lockStripes},
	} {
		want := map[int]bool{}
		for p := tc.abs; p < tc.abs+tc.n; p++ {
			want[p>>sp.metaShift&(lockStripes-1)] = true
		}
		s := sp.stripesOf(tc.abs, tc.n)
		var got []int
		for _, r := range [2][2]int{{s.lo1, s.hi1}, {s.lo2, s.hi2}} {
			for i := r[0]; i < r[1]; i++ {
				got = append(got, i)
			}
		}
		if len(got) != len(want) || len(got) != s.count() || !slices.IsSorted(got) {
			t.Errorf("pages [%d, +%d): stripes %v, want the %d of %v in order", tc.abs, tc.n, got, len(want), want)
		}
		for _, i := range got {
			if !want[i] {
				t.Errorf("pages [%d, +%d): stripe %d is not one of theirs", tc.abs, tc.n, i)
			}
		}
	}
}

// A fill's classes are the mix's at the fill: changing the Mix after does
// not change the pages, though a chunk works its pages' classes out only
// when they are read.
func TestFillKeepsItsMix(t *testing.T) {
	r, err := New(Config{SizeBytes: 4096 * 64, PageSize: 64, Kind: Synthetic, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	m := MixRealistic()
	if err := r.FillMix(0, r.Pages(), m); err != nil {
		t.Fatal(err)
	}
	var before []PageState
	for p := range r.Pages() {
		st, _ := r.PageState(p)
		before = append(before, st)
	}
	for i := range m.Parts {
		m.Parts[i].Class = ClassRandom
	}
	for p := range r.Pages() {
		if st, _ := r.PageState(p); st != before[p] {
			t.Fatalf("page %d: %v after the caller changed its mix, %v before", p, st, before[p])
		}
	}
}
