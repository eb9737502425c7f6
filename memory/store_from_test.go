package memory

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestStoreGeneratedFromMatchesPageByPage checks StoreGeneratedFrom against
// the naive way, PageState and StoreGenerated a page at a time: windows at
// offsets whose chunks line up or do not, sources filled in runs and
// written page by page, sets that cover chunks whole or in part, every
// backing at the destination.
func TestStoreGeneratedFromMatchesPageByPage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		shift := rapid.SampledFrom([]uint{0, 2, 3}).Draw(t, "metaShift")
		pages := rapid.IntRange(1, 40).Draw(t, "pages")
		const ps = 64
		newWindow := func(kind Kind, label string) *Region {
			off, tail := rapid.IntRange(0, 12).Draw(t, label+"Off"), rapid.IntRange(0, 5).Draw(t, label+"Tail")
			root, err := New(Config{SizeBytes: int64(ps * (off + pages + tail)), PageSize: ps, Kind: kind, Seed: 77})
			if err != nil {
				t.Fatal(err)
			}
			root.sp.setMetaShift(shift)
			root.sp.bulkFillMin = 1
			if off == 0 && tail == 0 && rapid.Bool().Draw(t, label+"Root") {
				return root
			}
			w, err := root.Map(off, pages, 77) // the roots' seed: a migration's two ends have one
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		src := newWindow(Synthetic, "src")
		classes := []Class{ClassZero, ClassWeights, ClassText, ClassRandom}
		for range rapid.IntRange(0, 8).Draw(t, "ops") {
			first := rapid.IntRange(0, pages-1).Draw(t, "first")
			n := rapid.IntRange(1, pages-first).Draw(t, "n")
			var err error
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				err = src.Fill(first, n, rapid.SampledFrom(classes).Draw(t, "class"))
			case 1:
				err = src.FillMix(first, n, MixRealistic())
			default:
				_, err = src.WriteAt([]byte{1, 2, 3}, int64(first*ps))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		set := NewPageSet(pages)
		if rapid.Bool().Draw(t, "used") {
			if err := src.UsedPages(set); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, p := range rapid.SliceOf(rapid.IntRange(0, pages-1)).Draw(t, "set") {
				set.Add(p)
			}
		}
		kind := rapid.SampledFrom(allKinds).Draw(t, "dstKind")
		fast, naive := newWindow(kind, "fast"), newWindow(kind, "naive")
		for _, r := range []*Region{fast, naive} {
			if err := r.Fill(0, pages, ClassText); err != nil { // to be overwritten
				t.Fatal(err)
			}
			r.StartDirtyLog()
		}
		var gotCounts, wantCounts [ClassExplicit]int64
		gotExplicit, wantExplicit := NewPageSet(pages), NewPageSet(pages)
		if err := fast.StoreGeneratedFrom(src, set, &gotCounts, gotExplicit); err != nil {
			t.Fatal(err)
		}
		for p := range set.All() {
			st, err := src.PageState(p)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Class.Generated() {
				wantExplicit.Add(p)
				continue
			}
			wantCounts[st.Class]++
			if err := naive.StoreGenerated(p, st.Class, st.Gen); err != nil {
				t.Fatal(err)
			}
		}
		if gotCounts != wantCounts {
			t.Fatalf("counts %v, want %v", gotCounts, wantCounts)
		}
		if g, w := gotExplicit.AppendTo(nil), wantExplicit.AppendTo(nil); !slices.Equal(g, w) {
			t.Fatalf("explicit %v, want %v", g, w)
		}
		a, b := make([]byte, ps), make([]byte, ps)
		for p := range pages {
			sa, err1 := fast.ReadPage(p, a)
			sb, err2 := naive.ReadPage(p, b)
			if err1 != nil || err2 != nil || sa != sb || !slices.Equal(a, b) {
				t.Fatalf("page %d: %v %x, want %v %x (%v, %v)", p, sa, a[:8], sb, b[:8], err1, err2)
			}
		}
		var dg, dw PageSet
		fast.CollectDirty(&dg)
		naive.CollectDirty(&dw)
		if g, w := dg.AppendTo(nil), dw.AppendTo(nil); !slices.Equal(g, w) {
			t.Fatalf("dirty %v, want %v", g, w)
		}
	})
}

func TestStoreGeneratedFromRefuses(t *testing.T) {
	a, _ := New(Config{SizeBytes: 1 << 20, Kind: Synthetic})
	b, _ := New(Config{SizeBytes: 2 << 20, Kind: Synthetic})
	var counts [ClassExplicit]int64
	set, explicit := NewPageSet(a.Pages()), NewPageSet(a.Pages())
	for _, tc := range []struct {
		name string
		dst  *Region
		src  *Region
		set  *PageSet
	}{
		{"sizes differ", b, a, set},
		{"nil source", a, nil, set},
		{"nil set", a, a, nil},
		{"set too large", a, a, NewPageSet(b.Pages())},
	} {
		if err := tc.dst.StoreGeneratedFrom(tc.src, tc.set, &counts, explicit); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
}
