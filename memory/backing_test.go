package memory

import (
	"bytes"
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
