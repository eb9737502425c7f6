package memory

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestSparseReusesFreedPages checks that a page a sparse region freed and
// another reuses comes back zeroed, whatever the freeing region wrote into
// it, and that resident bytes count pages in use only.
func TestSparseReusesFreedPages(t *testing.T) {
	const pageSize, pages = 64, 64
	full := bytes.Repeat([]byte{0xa5}, pageSize)
	for round := range 3 {
		a := mustNew(t, Config{SizeBytes: pageSize * pages, PageSize: pageSize, Kind: Sparse})
		for p := range pages {
			if err := a.StorePage(p, full, 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Scrub(); err != nil {
			t.Fatal(err)
		}
		if got := a.ResidentBytes(); got != 0 {
			t.Fatalf("round %d: resident %d bytes after a scrub, want 0", round, got)
		}
		// A one-byte write allocates a page and leaves the rest of it
		// zero, even when the page is one a freed.
		b := mustNew(t, Config{SizeBytes: pageSize * pages, PageSize: pageSize, Kind: Sparse})
		want := make([]byte, pageSize)
		want[3] = 1
		got := make([]byte, pageSize)
		for p := range pages {
			if _, err := b.WriteAt([]byte{1}, int64(p*pageSize+3)); err != nil {
				t.Fatal(err)
			}
			if _, err := b.ReadPage(p, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d, page %d after a one-byte write: %x, want %x", round, p, got, want)
			}
		}
		if got := b.ResidentBytes(); got != pageSize*pages {
			t.Fatalf("round %d: resident %d bytes, want %d", round, got, pageSize*pages)
		}
	}
}

// TestRecycledPagesHoldNothingOfTheirLastOwner checks the rule of the
// process-wide page pool: a page a sparse region frees, in any of the ways
// a page is freed, is all zero before another region can take it, and a
// region that reuses freed pages, whatever it then writes into them, reads
// exactly what a dense region given the same writes reads, so that a
// byte of the first owner's (all 0xa5) that survived would show as a
// difference.
func TestRecycledPagesHoldNothingOfTheirLastOwner(t *testing.T) {
	const pageSize, pages = 256, 96
	secret := bytes.Repeat([]byte{0xa5}, pageSize)
	shift := 0
	for 1<<shift < pageSize {
		shift++
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 8 {
		// The first owner fills every page with the secret, a page at a
		// time or a byte run at a time, then frees them all: by Scrub, by
		// zeroing pages, by storing zero pages, by filling them with
		// zeros, or by unmapping the window that holds them.
		owner := mustNew(t, Config{SizeBytes: pageSize * pages, PageSize: pageSize, Kind: Sparse, Seed: 1})
		win, err := owner.Map(0, pages/2, 7)
		if err != nil {
			t.Fatal(err)
		}
		for p := range pages {
			if p%2 == 0 {
				if err := owner.StorePage(p, secret, 1); err != nil {
					t.Fatal(err)
				}
			} else if _, err := owner.WriteAt(secret[:pageSize-5], int64(p*pageSize+5)); err != nil {
				t.Fatal(err)
			}
		}
		for p := pages / 2; p < pages; p++ {
			switch rng.IntN(3) {
			case 0:
				err = owner.StorePage(p, make([]byte, pageSize), 2)
			case 1:
				err = owner.Fill(p, 1, ClassZero)
			default:
				_, err = owner.WriteAt(make([]byte, pageSize), int64(p*pageSize))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := win.Unmap(); err != nil {
			t.Fatal(err)
		}
		if err := owner.Scrub(); err != nil {
			t.Fatal(err)
		}
		if got := owner.ResidentBytes(); got != 0 {
			t.Fatalf("round %d: first owner still holds %d bytes", round, got)
		}

		// What the pool holds now: every page of it all zero. The pages
		// go back for the next owner to reuse.
		var pooled []*[]byte
		for {
			bp, ok := freePages[shift].Get().(*[]byte)
			if !ok {
				break
			}
			if !IsZero(*bp) {
				t.Fatalf("round %d: a pooled page holds %x", round, *bp)
			}
			pooled = append(pooled, bp)
		}
		if len(pooled) == 0 {
			t.Fatalf("round %d: no freed page reached the pool; the test checks nothing", round)
		}
		for _, bp := range pooled {
			freePages[shift].Put(bp)
		}

		// The next owner, sparse or synthetic, writes short runs at any
		// offset, whole pages and generated content into the recycled
		// pages; a dense region that shares nothing gets the same calls.
		kind := []Kind{Sparse, Synthetic}[round%2]
		next := mustNew(t, Config{SizeBytes: pageSize * pages, PageSize: pageSize, Kind: kind, Seed: 9})
		ref := mustNew(t, Config{SizeBytes: pageSize * pages, PageSize: pageSize, Kind: Dense, Seed: 9})
		for range 4 * pages {
			p, op := rng.IntN(pages), rng.Uint64()
			for _, r := range []*Region{next, ref} {
				var err error
				switch op % 4 {
				case 0: // a short run at any offset
					off := int64(p*pageSize) + int64(op>>8%pageSize)
					n := min(int64(1+op>>20%32), int64((p+1)*pageSize)-off)
					_, err = r.WriteAt(bytes.Repeat([]byte{0x11}, int(n)), off)
				case 1: // generated content
					err = r.Fill(p, 1, []Class{ClassWeights, ClassText, ClassRandom}[op>>8%3])
				case 2: // a whole page
					err = r.StorePage(p, bytes.Repeat([]byte{byte(op>>8)&0x7f | 1}, pageSize), uint32(op>>16))
				default: // zero again, freeing the page to the pool
					err = r.Fill(p, 1, ClassZero)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		got, want := make([]byte, pageSize), make([]byte, pageSize)
		for p := range pages {
			if _, err := next.ReadPage(p, got); err != nil {
				t.Fatal(err)
			}
			if _, err := ref.ReadPage(p, want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d, %v page %d reads %x, a dense region given the same writes %x", round, kind, p, got, want)
			}
		}
	}
}

// TestSparseAllocatesPagesInSlabs checks that storing fresh pages into a
// sparse region makes at most one allocation per 32 pages, region and
// chunk table included; that each page of a slab is capped at its own
// length, so that nothing writing through it reaches its neighbour; and
// that freeing a page and storing it again allocates nothing.
func TestSparseAllocatesPagesInSlabs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	const pageSize, pages = 4096, 16384
	data := bytes.Repeat([]byte{3}, pageSize)
	allocs := testing.AllocsPerRun(2, func() {
		drainFreePages(12)
		r := mustNew(t, Config{SizeBytes: pageSize * pages, PageSize: pageSize, Kind: Sparse})
		for p := range pages {
			if err := r.StorePage(p, data, 1); err != nil {
				t.Fatal(err)
			}
		}
		for p := range pages {
			if buf := r.sp.back.page(p); cap(buf) != pageSize {
				t.Fatalf("page %d has capacity %d", p, cap(buf))
			}
		}
	})
	if perPage := allocs / pages; perPage > 1.0/32 {
		t.Errorf("%v allocations for %d fresh pages: %.4f a page, want at most 1/32", allocs, pages, perPage)
	}
	t.Logf("%v allocations for %d fresh pages (%.4f a page)", allocs, pages, allocs/pages)

	r := mustNew(t, Config{SizeBytes: pageSize * 64, PageSize: pageSize, Kind: Sparse})
	zero := make([]byte, pageSize)
	for p := range 64 {
		if err := r.StorePage(p, data, 1); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(20, func() {
		for p := range 64 {
			_ = r.StorePage(p, zero, 2) // released to the pool
			_ = r.StorePage(p, data, 3) // taken back
		}
	}); a != 0 {
		t.Errorf("freeing and reusing pages allocates %v times", a)
	}
}
