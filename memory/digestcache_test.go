package memory

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cespare/xxhash/v2"
	"pgregory.net/rapid"
)

// digestMachine drives one root of a drawn backing through random
// interleavings of every kind of change — writes of any length and
// content, fills, mixes, whole-page stores of zero and non-zero bytes at
// any generation (the same generation with other bytes, the same bytes at
// another generation), generated stores, scrubs, maps and unmaps, through
// the root or a window — and digests of the root and its windows on any
// number of workers, each checked against the documented formula computed
// from scratch. It also throws the cache away at times, so that a cache
// made after changes is checked too.
func digestMachine(t *rapid.T) {
	const pageSize = 64
	kind := rapid.SampledFrom(allKinds).Draw(t, "kind")
	pages := rapid.IntRange(1, 3*digestChunkPages/2).Draw(t, "pages")
	root := mustNew(t, Config{SizeBytes: int64(pages * pageSize), PageSize: pageSize, Kind: kind, Seed: rapid.Uint64().Draw(t, "seed")})
	var windows []*Region
	minWorkerPages := rapid.SampledFrom([]int{1, 7, digestMinWorkerPages}).Draw(t, "minWorkerPages")

	view := func(t *rapid.T) *Region {
		return rapid.SampledFrom(append([]*Region{root}, windows...)).Draw(t, "view")
	}
	page := func(t *rapid.T, r *Region) []byte {
		b := make([]byte, pageSize)
		switch rapid.IntRange(0, 3).Draw(t, "content") {
		case 0: // zero
		case 1:
			b[rapid.IntRange(0, pageSize-1).Draw(t, "at")] = rapid.Byte().Draw(t, "b")
		default:
			Generate(b, ClassRandom, rapid.Uint64().Draw(t, "s"), 0, 0)
		}
		return b
	}
	classes := []Class{ClassZero, ClassWeights, ClassActivations, ClassText, ClassRandom, ClassTrainingWeights}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Repeat(map[string]func(*rapid.T){
		"write": func(t *rapid.T) {
			r := view(t)
			off := rapid.Int64Range(0, r.Size()-1).Draw(t, "off")
			n := rapid.IntRange(0, int(min(r.Size()-off, 3*pageSize))).Draw(t, "n")
			data := rapid.SliceOfN(rapid.SampledFrom([]byte{0, 0, 0, 1, 0xff}), n, n).Draw(t, "data")
			_, err := r.WriteAt(data, off)
			must(err)
		},
		"rewrite": func(t *rapid.T) {
			// The same bytes again: only the generation changes.
			r := view(t)
			p := rapid.IntRange(0, r.Pages()-1).Draw(t, "page")
			b := make([]byte, pageSize)
			_, err := r.ReadPage(p, b)
			must(err)
			_, err = r.WriteAt(b, int64(p*pageSize))
			must(err)
		},
		"read": func(t *rapid.T) {
			// Records the page's sum, which the digest then reads.
			r := view(t)
			_, err := r.ReadPage(rapid.IntRange(0, r.Pages()-1).Draw(t, "page"), make([]byte, pageSize))
			must(err)
		},
		"fill": func(t *rapid.T) {
			r := view(t)
			first := rapid.IntRange(0, r.Pages()-1).Draw(t, "first")
			n := rapid.IntRange(0, r.Pages()-first).Draw(t, "n")
			must(r.Fill(first, n, rapid.SampledFrom(classes).Draw(t, "class")))
		},
		"fillMix": func(t *rapid.T) {
			r := view(t)
			first := rapid.IntRange(0, r.Pages()-1).Draw(t, "first")
			n := rapid.IntRange(0, r.Pages()-first).Draw(t, "n")
			must(r.FillMix(first, n, rapid.SampledFrom(Mixes()).Draw(t, "mix")))
		},
		"store": func(t *rapid.T) {
			r := view(t)
			p := rapid.IntRange(0, r.Pages()-1).Draw(t, "page")
			gen := rapid.SampledFrom([]uint32{0, 1, 2, 1 << 31}).Draw(t, "gen")
			must(r.StorePage(p, page(t, r), gen))
		},
		"storeSameGen": func(t *rapid.T) {
			// Other bytes at the generation the page has.
			r := view(t)
			p := rapid.IntRange(0, r.Pages()-1).Draw(t, "page")
			st, err := r.PageState(p)
			must(err)
			must(r.StorePage(p, page(t, r), st.Gen))
		},
		"storeSameBytes": func(t *rapid.T) {
			// The bytes the page holds at another generation.
			r := view(t)
			p := rapid.IntRange(0, r.Pages()-1).Draw(t, "page")
			b := make([]byte, pageSize)
			st, err := r.ReadPage(p, b)
			must(err)
			must(r.StorePage(p, b, st.Gen+1))
		},
		"storeGenerated": func(t *rapid.T) {
			r := view(t)
			p := rapid.IntRange(0, r.Pages()-1).Draw(t, "page")
			must(r.StoreGenerated(p, rapid.SampledFrom(classes).Draw(t, "class"), rapid.Uint32Range(0, 3).Draw(t, "gen")))
		},
		"scrub": func(t *rapid.T) {
			must(view(t).Scrub())
		},
		"map": func(t *rapid.T) {
			first := rapid.IntRange(0, pages-1).Draw(t, "first")
			n := rapid.IntRange(1, pages-first).Draw(t, "n")
			w, err := root.Map(first, n, rapid.Uint64().Draw(t, "wseed"))
			if errors.Is(err, ErrOverlap) {
				t.Skip("overlap")
			}
			must(err)
			windows = append(windows, w)
		},
		"unmap": func(t *rapid.T) {
			if len(windows) == 0 {
				t.Skip("no window")
			}
			w := rapid.SampledFrom(windows).Draw(t, "window")
			must(w.Unmap())
			windows = slices.DeleteFunc(windows, func(x *Region) bool { return x == w })
			if _, err := w.Digest(); !errors.Is(err, ErrUnmapped) {
				t.Fatalf("digest of an unmapped window: %v", err)
			}
		},
		"dropCache": func(t *rapid.T) {
			root.sp.digest.Store(nil)
		},
		"digest": func(t *rapid.T) {
			r := view(t)
			workers := rapid.IntRange(0, 4).Draw(t, "workers")
			want := naiveDigest(t, r)
			got, err := r.DigestParallel(workers)
			must(err)
			if got != want {
				t.Fatalf("%v region at page %d (%d pages), %d workers: digest %x, the formula %x", kind, r.FirstPage(), r.Pages(), workers, got, want)
			}
			if full, err := fullDigest(r, workers); err != nil || full != want {
				t.Fatalf("the uncached digest %x, %v; the formula %x", full, err, want)
			}
			root.sp.digest.Load().minWorkerPages = minWorkerPages
		},
	})
}

func TestDigestCacheMatchesFormula(t *testing.T) {
	rapid.Check(t, digestMachine)
}

// TestDigestWithConcurrentWriters runs writers of every kind, a mapper and
// digesters at once — the cache made while they run, or before with a
// refresh split however finely — and checks, once the writers stopped,
// that the digest of the root and of each window equals the formula's.
// Under -race it also checks that the cache is read and written safely.
func TestDigestWithConcurrentWriters(t *testing.T) {
	const pageSize = 64
	pages := 4 * digestChunkPages
	steps := 3000
	if raceEnabled || testing.Short() {
		steps = 600
	}
	for _, k := range allKinds {
		for _, precreate := range []bool{false, true} {
			root := mustNew(t, Config{SizeBytes: int64(pages * pageSize), PageSize: pageSize, Kind: k, Seed: 3})
			if precreate {
				root.sp.digestCache().minWorkerPages = 1
			}
			// Two fixed windows writers use, and pages between them that
			// a mapper maps and unmaps.
			w1, err := root.Map(0, digestChunkPages, 11)
			if err != nil {
				t.Fatal(err)
			}
			w2, err := root.Map(3*digestChunkPages, digestChunkPages-5, 12)
			if err != nil {
				t.Fatal(err)
			}
			views := []*Region{root, w1, w2}
			var wg sync.WaitGroup
			var stop sync.WaitGroup
			stop.Add(3)
			done := make(chan struct{})
			for i := range 2 {
				wg.Go(func() {
					defer stop.Done()
					concurrentWriter(t, rand.New(rand.NewPCG(uint64(i), 9)), views, steps)
				})
			}
			wg.Go(func() {
				defer stop.Done()
				for i := range steps / 20 {
					w, err := root.Map(digestChunkPages+i%50, digestChunkPages, uint64(i))
					if err != nil {
						t.Error(err)
						return
					}
					if err := w.Fill(0, 40, ClassText); err != nil {
						t.Error(err)
					}
					if err := w.Unmap(); err != nil {
						t.Error(err)
					}
				}
			})
			for _, r := range views {
				wg.Go(func() {
					for {
						select {
						case <-done:
							return
						default:
						}
						if _, err := r.DigestParallel(2); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			stop.Wait()
			close(done)
			wg.Wait()
			for i, r := range views {
				want := naiveDigest(t, r)
				for _, workers := range []int{1, 2} {
					if got, err := r.DigestParallel(workers); err != nil || got != want {
						t.Errorf("%v, precreated %v, view %d, %d workers: digest %x, %v after the writers stopped; the formula %x", k, precreate, i, workers, got, err, want)
					}
				}
			}
		}
	}
}

// concurrentWriter makes steps random changes of every kind through views.
func concurrentWriter(t *testing.T, rng *rand.Rand, views []*Region, steps int) {
	ps := views[0].PageSize()
	data := bytes.Repeat([]byte{0xa5}, ps)
	read := make([]byte, ps)
	for range steps {
		r := views[rng.IntN(len(views))]
		p := rng.IntN(r.Pages())
		var err error
		switch rng.IntN(9) {
		case 0:
			off := int64(p*ps + rng.IntN(ps))
			_, err = r.WriteAt(data[:min(int64(1+rng.IntN(ps)), r.Size()-off)], off)
		case 1:
			err = r.Fill(p, min(7, r.Pages()-p), Class(rng.IntN(int(ClassExplicit))))
		case 2:
			err = r.FillMix(p, min(33, r.Pages()-p), MixRealistic())
		case 3:
			data[rng.IntN(ps)]++
			err = r.StorePage(p, data, rng.Uint32N(4))
		case 4:
			err = r.StorePage(p, make([]byte, ps), rng.Uint32N(4))
		case 5:
			err = r.StoreGenerated(p, ClassWeights, rng.Uint32N(4))
		case 6:
			if r != views[0] && rng.IntN(10) == 0 {
				err = r.Scrub()
			}
		case 7:
			_, err = r.ReadPage(p, read) // records the page's sum
		default:
			_, err = r.WriteAt(make([]byte, ps), int64(p*ps))
		}
		if err != nil {
			t.Error(err)
			return
		}
	}
}

// TestDigestCacheFacts checks what the documentation says the cache costs
// and does: nothing for pages in their initial state, one chunk of entries
// for a run of 512 pages with one page written, no allocation for a digest
// after no change, and a sum StorePage or ReadPage recorded read instead of
// the page until the page changes.
func TestDigestCacheFacts(t *testing.T) {
	const pageSize = 4096
	pages := 10 * digestChunkPages
	r := mustNew(t, Config{SizeBytes: int64(pages * pageSize), Kind: Sparse, Seed: 1})
	chunks := func() int {
		n := 0
		for _, ch := range r.sp.digest.Load().chunks {
			if ch != nil {
				n++
			}
		}
		return n
	}
	digest := func() uint64 {
		t.Helper()
		d, err := r.DigestParallel(2)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveDigest(t, r); d != want {
			t.Fatalf("digest %x, the formula %x", d, want)
		}
		return d
	}
	digest()
	if n := chunks(); n != 0 {
		t.Errorf("an untouched region holds %d chunks of entries, want 0", n)
	}
	if err := r.Fill(3*digestChunkPages+7, 1, ClassText); err != nil {
		t.Fatal(err)
	}
	digest()
	if n := chunks(); n != 1 {
		t.Errorf("one page written: %d chunks of entries, want 1", n)
	}
	if !raceEnabled {
		if a := testing.AllocsPerRun(20, func() { _, _ = r.Digest() }); a != 0 {
			t.Errorf("a digest after no change allocates %v times", a)
		}
	}

	// A stored page's recorded sum is what the digest uses: bytes changed
	// behind the region's back (which no caller can do) go unseen, and
	// any change through the region makes the digest read the page again.
	p := 5*digestChunkPages + 1
	data := bytes.Repeat([]byte{9}, pageSize)
	if err := r.StorePage(p, data, 4); err != nil {
		t.Fatal(err)
	}
	stored := digest()
	r.sp.back.page(p)[100] = 1
	// Stale, but the recorded sum still holds.
	atomic.OrUint64(&r.sp.digest.Load().stale[p>>6], 1<<(p&63))
	if d, _ := r.Digest(); d != stored {
		t.Fatalf("the digest read the page instead of the sum StorePage recorded")
	}
	r.sp.back.page(p)[100] = 9
	if _, err := r.WriteAt([]byte{9}, int64(p*pageSize)); err != nil {
		t.Fatal(err)
	}
	r.sp.back.page(p)[100] = 1
	digest() // reads the page: the write dropped the sum
	if err := r.StorePage(p, make([]byte, pageSize), 4); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.sp.knownSum(p); ok {
		t.Fatal("a zero page stored keeps the sum of the page before it")
	}
	digest()

	// A page read whole has its sum recorded, as a migration's source
	// reads the pages it sends; a zero page does not, and a write drops
	// the sum.
	q := 7*digestChunkPages + 3
	if err := r.Fill(q, 1, ClassWeights); err != nil {
		t.Fatal(err)
	}
	page := make([]byte, pageSize)
	for _, c := range []struct {
		p    int
		want bool
	}{{q, true}, {q + 1, false}} {
		if _, err := r.ReadPage(c.p, page); err != nil {
			t.Fatal(err)
		}
		if sum, ok := r.sp.knownSum(c.p); ok != c.want || ok && sum != xxhash.Sum64(page) {
			t.Errorf("page %d read: recorded sum %x (%v), want one: %v", c.p, sum, ok, c.want)
		}
	}
	read := digest()
	r.sp.back.page(q)[0] ^= 1
	if d, _ := r.Digest(); d != read {
		t.Fatalf("the digest read the page instead of the sum ReadPage recorded")
	}
	r.sp.back.page(q)[0] ^= 1
	if _, err := r.WriteAt([]byte{1}, int64(q*pageSize)); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.sp.knownSum(q); ok {
		t.Fatal("a page written keeps the sum ReadPage recorded before")
	}
	digest()
}
