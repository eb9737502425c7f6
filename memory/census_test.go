package memory

import (
	"testing"

	"pgregory.net/rapid"
)

// TestPropCensusMatchesPageStates: DirtyClasses and UsedClasses count, by
// class, exactly the pages a page-by-page reference finds — the pages
// logged dirty (DirtyClasses leaves them logged) and the pages in use —
// on every backing, for the root and a window, after fills of classes and
// mixes, explicit writes and stores.
func TestPropCensusMatchesPageStates(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		kind := rapid.SampledFrom([]Kind{Dense, Sparse, Synthetic}).Draw(rt, "kind")
		pages := rapid.IntRange(1, 300).Draw(rt, "pages")
		root, err := New(Config{SizeBytes: int64(pages) * 4096, PageSize: 4096, Kind: kind, Seed: rapid.Uint64().Draw(rt, "seed")})
		if err != nil {
			rt.Fatal(err)
		}
		r := root
		if rapid.Bool().Draw(rt, "window") && pages > 1 {
			first := rapid.IntRange(0, pages-1).Draw(rt, "first")
			if r, err = root.Map(first, rapid.IntRange(1, pages-first).Draw(rt, "windowPages"), 7); err != nil {
				rt.Fatal(err)
			}
		}
		buf := make([]byte, 4096)
		for range rapid.IntRange(0, 20).Draw(rt, "ops") {
			first := rapid.IntRange(0, r.Pages()-1).Draw(rt, "opFirst")
			n := rapid.IntRange(1, r.Pages()-first).Draw(rt, "opPages")
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				err = r.Fill(first, n, Class(rapid.IntRange(0, int(ClassExplicit)-1).Draw(rt, "class")))
			case 1:
				err = r.FillMix(first, n, MixRealistic())
			case 2:
				buf[rapid.IntRange(0, 4095).Draw(rt, "byte")] ^= 0xa5
				_, err = r.WriteAt(buf, int64(first)*4096)
			default:
				r.CollectDirty(NewPageSet(0))
			}
			if err != nil {
				rt.Fatal(err)
			}
		}
		var wantDirty, wantUsed, gotDirty, gotUsed [ClassExplicit + 1]int64
		logged := NewPageSet(0)
		before := r.DirtyCount()
		n, err := r.DirtyClasses(&gotDirty)
		if err != nil || n != before || r.DirtyCount() != before {
			rt.Fatalf("dirty classes counted %d (%v), log held %d, then %d", n, err, before, r.DirtyCount())
		}
		r.CollectDirty(logged)
		for p := range r.Pages() {
			st, err := r.PageState(p)
			if err != nil {
				rt.Fatal(err)
			}
			if logged.Has(p) {
				wantDirty[min(st.Class, ClassExplicit)]++
			}
			if st.InUse() {
				wantUsed[min(st.Class, ClassExplicit)]++
			}
		}
		if err := r.UsedClasses(&gotUsed); err != nil {
			rt.Fatal(err)
		}
		if gotDirty != wantDirty || gotUsed != wantUsed {
			rt.Fatalf("dirty %v, want %v; used %v, want %v", gotDirty, wantDirty, gotUsed, wantUsed)
		}
	})
}

// TestCensusRefusals: a nil count is refused, and an unmapped window
// cannot be counted.
func TestCensusRefusals(t *testing.T) {
	root, err := New(Config{SizeBytes: 16 * 4096, PageSize: 4096, Kind: Sparse})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.DirtyClasses(nil); err == nil {
		t.Fatal("nil dirty count accepted")
	}
	if err := root.UsedClasses(nil); err == nil {
		t.Fatal("nil used count accepted")
	}
	w, err := root.Map(0, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Unmap(); err != nil {
		t.Fatal(err)
	}
	var c [ClassExplicit + 1]int64
	if _, err := w.DirtyClasses(&c); err == nil {
		t.Fatal("unmapped window's dirty pages counted")
	}
	if err := w.UsedClasses(&c); err == nil {
		t.Fatal("unmapped window's used pages counted")
	}
}
