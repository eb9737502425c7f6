package memory

import (
	"sync"
	"testing"
)

// TestChunkLocksUnderLoad runs every operation that takes several chunk
// stripes, or all of them, at once on one region whose chunks outnumber
// the stripes (so a range's stripes wrap around): bulk fills, batches of
// random pages, a Model round stored from another region, dirty logs
// turned on, collected and off, scrubs, digests and used-page scans. Under
// the race detector it checks that they share the metadata as the locks
// say; anywhere, that none waits for another forever.
func TestChunkLocksUnderLoad(t *testing.T) {
	const pages = 4096
	mk := func() *Region {
		r, err := New(Config{SizeBytes: pages * 64, PageSize: 64, Kind: Synthetic, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		r.sp.setMetaShift(3) // 512 chunks over 256 stripes
		r.sp.bulkFillMin = 1
		return r
	}
	r, src := mk(), mk()
	if err := src.FillMix(0, pages, MixRealistic()); err != nil {
		t.Fatal(err)
	}
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	var wg sync.WaitGroup
	fail := func(err error) {
		if err != nil {
			t.Error(err)
		}
	}
	for w := range 2 {
		wg.Go(func() {
			rng := wyrand(w + 1)
			for i := range rounds {
				first := int(uniform(rng.next(), pages))
				n := 1 + int(uniform(rng.next(), uint64(pages-first)))
				if i%2 == 0 {
					fail(r.Fill(first, n, ClassWeights))
				} else {
					fail(r.FillMix(first, n, MixRealistic()))
				}
			}
		})
	}
	wg.Go(func() {
		rng := wyrand(7)
		batch := make([]int, 64)
		for range rounds {
			for i := range batch {
				batch[i] = int(uniform(rng.next(), pages))
			}
			_, err := r.fillEach(batch, MixRealistic())
			fail(err)
		}
	})
	wg.Go(func() {
		all := NewPageSet(pages)
		for p := range pages {
			all.Add(p)
		}
		for range rounds / 4 {
			var counts [ClassExplicit]int64
			fail(r.StoreGeneratedFrom(src, all, &counts, NewPageSet(pages)))
		}
	})
	wg.Go(func() {
		var set PageSet
		for i := range rounds {
			r.StartDirtyLog()
			r.CollectDirty(&set)
			if i%3 == 0 {
				r.StopDirtyLog()
			}
		}
	})
	wg.Go(func() {
		var set PageSet
		for i := range rounds / 4 {
			fail(r.UsedPages(&set))
			if _, err := r.Digest(); err != nil {
				t.Error(err)
			}
			if i%10 == 0 {
				fail(r.Scrub())
			}
		}
	})
	wg.Wait()
}
