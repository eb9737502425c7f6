package memory

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// backedRegions is one root per backing, driven through the same operations
// as the reference, with the windows mapped on each.
type backedRegions struct {
	roots   []*Region
	windows map[int][]*Region // reference window id -> one window per root
	ids     []int             // mapped window ids, in map order
}

var allKinds = []Kind{Dense, Sparse, Synthetic}

// regionMachine checks every backing against the naive reference under a
// random sequence of operations.
func regionMachine(t *rapid.T) {
	pageSize := rapid.SampledFrom([]int{64, 128, 4096}).Draw(t, "pageSize")
	pages := rapid.IntRange(1, 48).Draw(t, "pages")
	seed := rapid.Uint64().Draw(t, "seed")
	ref := newRefSpace(pageSize, pages, seed)
	// Both ways of collecting: swapping words (the way of a log this
	// small) and swapping bitmaps (forced).
	flipMinWords := rapid.SampledFrom([]int{flipMinWords, 0}).Draw(t, "flipMinWords")
	// Fills page by page, or (a Synthetic region) as one operation at
	// any size.
	bulkFillMin := rapid.SampledFrom([]int{bulkFillMinPages, 1}).Draw(t, "bulkFillMin")
	// Metadata chunks of one page to eight, so that fills, stores and
	// scrubs cover chunks whole and in part, or the size they have.
	metaShift := rapid.SampledFrom([]uint{metaChunkShift, 0, 1, 2, 3}).Draw(t, "metaShift")
	br := backedRegions{windows: map[int][]*Region{}}
	for _, k := range allKinds {
		r, err := New(Config{SizeBytes: int64(pageSize * pages), PageSize: pageSize, Kind: k, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		r.log.flipMinWords = flipMinWords
		r.sp.bulkFillMin = bulkFillMin
		r.sp.setMetaShift(metaShift)
		br.roots = append(br.roots, r)
	}
	size := int64(pageSize * pages)
	classes := []Class{ClassZero, ClassWeights, ClassActivations, ClassText, ClassRandom, ClassTrainingWeights}

	// view picks the root (id 0) or a mapped window, returning per-backing
	// regions and how to turn a relative page into an absolute one.
	view := func(t *rapid.T) (int, []*Region, int) {
		id := rapid.SampledFrom(append([]int{0}, br.ids...)).Draw(t, "view")
		if id == 0 {
			return 0, br.roots, 0
		}
		return id, br.windows[id], ref.window(id).first
	}

	t.Repeat(map[string]func(*rapid.T){
		"": func(t *rapid.T) {
			for i, r := range br.roots {
				if err := ref.checkEqual(r); err != nil {
					t.Fatalf("%v: %v", allKinds[i], err)
				}
			}
		},
		"write": func(t *rapid.T) {
			id, rs, base := view(t)
			vsize := rs[0].Size()
			off := rapid.Int64Range(0, vsize).Draw(t, "off")
			n := rapid.IntRange(0, int(min(vsize-off, int64(3*pageSize)))).Draw(t, "n")
			data := rapid.SliceOfN(rapid.SampledFrom([]byte{0, 0, 1, 0xff, 7}), n, n).Draw(t, "data")
			for _, r := range rs {
				if got, err := r.WriteAt(data, off); err != nil || got != n {
					t.Fatalf("WriteAt(%d, %d) = %d, %v", n, off, got, err)
				}
			}
			_ = id
			for i := 0; i < n; {
				abs := int((off+int64(i))/int64(pageSize)) + base
				in := int((off + int64(i)) % int64(pageSize))
				c := min(n-i, pageSize-in)
				ref.write(abs, data[i:i+c], in)
				i += c
			}
		},
		"readOutOfRange": func(t *rapid.T) {
			_, rs, _ := view(t)
			off := rapid.Int64Range(-3, rs[0].Size()+3).Draw(t, "off")
			n := rapid.IntRange(0, 2*pageSize).Draw(t, "n")
			inside := off >= 0 && off+int64(n) <= rs[0].Size()
			for _, r := range rs {
				buf := make([]byte, n)
				got, err := r.ReadAt(buf, off)
				if inside != (err == nil) || (!inside && (got != 0 || !errors.Is(err, ErrOutOfRange))) {
					t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", n, off, got, err)
				}
				if _, err := r.WriteAt(buf, off); inside != (err == nil) {
					t.Fatalf("WriteAt(%d bytes at %d): %v", n, off, err)
				}
				if inside {
					// The write above stored what was read: no change
					// of bytes, but one more generation a page.
					continue
				}
			}
			if inside {
				for i := 0; i < n; {
					abs := int((off+int64(i))/int64(pageSize)) + ref.viewBase(rs[0])
					in := int((off + int64(i)) % int64(pageSize))
					c := min(n-i, pageSize-in)
					ref.write(abs, ref.page(abs)[in:in+c], in)
					i += c
				}
			}
		},
		"fill": func(t *rapid.T) {
			_, rs, base := view(t)
			first := rapid.IntRange(0, rs[0].Pages()-1).Draw(t, "first")
			n := rapid.IntRange(0, rs[0].Pages()-first).Draw(t, "n")
			c := rapid.SampledFrom(classes).Draw(t, "class")
			for _, r := range rs {
				if err := r.Fill(first, n, c); err != nil {
					t.Fatal(err)
				}
			}
			for p := base + first; p < base+first+n; p++ {
				ref.set(p, c, ref.gens[p]+1)
			}
		},
		"fillMix": func(t *rapid.T) {
			_, rs, base := view(t)
			m := rapid.SampledFrom(Mixes()).Draw(t, "mix")
			for _, r := range rs {
				if err := r.FillMix(0, r.Pages(), m); err != nil {
					t.Fatal(err)
				}
			}
			for p := range rs[0].Pages() {
				ref.set(base+p, m.ClassOf(rs[0].Seed(), uint64(p)), ref.gens[base+p]+1)
			}
		},
		"store": func(t *rapid.T) {
			_, rs, base := view(t)
			p := rapid.IntRange(0, rs[0].Pages()-1).Draw(t, "page")
			gen := rapid.Uint32().Draw(t, "gen")
			data := make([]byte, pageSize)
			// A page of generated content, as a destination receives
			// a synthetic source's pages, which a Synthetic region
			// stores as its class; or one byte off it, which it must not.
			if rapid.Bool().Draw(t, "generated") {
				seed, key, _ := ref.key(base + p)
				Generate(data, rapid.SampledFrom(classes).Draw(t, "class"), seed, key, gen)
			}
			if rapid.Bool().Draw(t, "nonzero") {
				data[rapid.IntRange(0, pageSize-1).Draw(t, "at")] ^= 1
			}
			for _, r := range rs {
				if err := r.StorePage(p, data, gen); err != nil {
					t.Fatal(err)
				}
			}
			ref.data[base+p] = data
			ref.gens[base+p] = gen
			// Stored whole: a page of zeros is stored as ClassZero.
			ref.classed[base+p] = !IsZero(data)
			ref.mark(base + p)
		},
		"storeGenerated": func(t *rapid.T) {
			_, rs, base := view(t)
			p := rapid.IntRange(0, rs[0].Pages()-1).Draw(t, "page")
			gen := rapid.Uint32().Draw(t, "gen")
			c := rapid.SampledFrom(classes).Draw(t, "class")
			for _, r := range rs {
				if err := r.StoreGenerated(p, c, gen); err != nil {
					t.Fatal(err)
				}
			}
			ref.set(base+p, c, gen)
		},
		"collect": func(t *rapid.T) {
			id, rs, _ := view(t)
			want := ref.collect(id)
			for _, r := range rs {
				var set PageSet
				n := r.CollectDirty(&set)
				got := set.AppendTo(nil)
				if n != len(got) || !slices.Equal(got, want) {
					t.Fatalf("%v log %d: collected %v (n=%d), want %v", r.Kind(), id, got, n, want)
				}
			}
		},
		"toggleLog": func(t *rapid.T) {
			id, rs, _ := view(t)
			on := rapid.Bool().Draw(t, "on")
			for _, r := range rs {
				if on {
					r.StartDirtyLog()
				} else {
					r.StopDirtyLog()
				}
			}
			ref.logOn[id] = on
			clear(ref.dirty[id])
		},
		"map": func(t *rapid.T) {
			first := rapid.IntRange(0, pages-1).Draw(t, "first")
			n := rapid.IntRange(1, pages-first).Draw(t, "n")
			wseed := rapid.Uint64().Draw(t, "wseed")
			id, ok := ref.mapWindow(first, n, wseed)
			for _, r := range br.roots {
				w, err := r.Map(first, n, wseed)
				if ok != (err == nil) || (!ok && !errors.Is(err, ErrOverlap)) {
					t.Fatalf("Map(%d, %d): %v, reference ok=%v", first, n, err, ok)
				}
				if ok {
					w.log.flipMinWords = flipMinWords
					br.windows[id] = append(br.windows[id], w)
				}
			}
			if ok {
				br.ids = append(br.ids, id)
			}
		},
		"unmap": func(t *rapid.T) {
			if len(br.ids) == 0 {
				// Nothing to unmap: a step that does nothing, not a
				// skip, so that input drawing only this action (as the
				// fuzzer's can) is still a valid run.
				return
			}
			id := rapid.SampledFrom(br.ids).Draw(t, "id")
			for _, w := range br.windows[id] {
				if err := w.Unmap(); err != nil {
					t.Fatal(err)
				}
				if _, err := w.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrUnmapped) {
					t.Fatalf("read after Unmap: %v", err)
				}
			}
			ref.unmap(id)
			delete(br.windows, id)
			br.ids = slices.DeleteFunc(br.ids, func(x int) bool { return x == id })
		},
		"scrubRoot": func(t *rapid.T) {
			if len(br.ids) > 0 {
				return // a root with windows: unmap covers its scrub
			}
			for _, r := range br.roots {
				if err := r.Scrub(); err != nil {
					t.Fatal(err)
				}
			}
			ref.scrub(0, pages)
			clear(ref.dirty[0])
		},
		"digest": func(t *rapid.T) {
			d0, err := br.roots[0].Digest()
			if err != nil {
				t.Fatal(err)
			}
			if want := naiveDigest(t, br.roots[0]); d0 != want {
				t.Fatalf("digest %x, the documented formula gives %x", d0, want)
			}
			for _, r := range br.roots[1:] {
				if d, _ := r.Digest(); d != d0 {
					t.Fatalf("%v digest %x, dense %x", r.Kind(), d, d0)
				}
			}
			_ = size
		},
	})
}

// viewBase returns the absolute first page of a region of the reference's
// shape.
func (s *refSpace) viewBase(r *Region) int { return r.FirstPage() }

func TestRegionMatchesReference(t *testing.T) {
	rapid.Check(t, regionMachine)
}

// FuzzRegionOps runs the reference state machine on fuzzer-chosen bytes:
// writes, fills, stores, collects, maps and unmaps, checked after every
// step against the naive reference on all three backings.
func FuzzRegionOps(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(regionMachine))
}
