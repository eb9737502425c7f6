package memory

import (
	"bytes"
	"testing"
)

// goldenDigestRegion builds one fixed region of kind k: a window, zero,
// generated, written and stored pages at several generations. The digests
// of it below were recorded before the digest was cached; the value is
// part of the migration stream's format and must never change.
func goldenDigestRegion(t fataler, k Kind, pageSize int) (root, win *Region) {
	const pages = 700
	root = mustNew(t, Config{SizeBytes: int64(pages * pageSize), PageSize: pageSize, Kind: k, Seed: 42})
	win, err := root.Map(600, 64, 9)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.FillMix(0, 500, MixRealistic()); err != nil {
		t.Fatal(err)
	}
	if err := win.FillMix(0, 64, MixRealistic()); err != nil {
		t.Fatal(err)
	}
	if err := root.Fill(100, 20, ClassText); err != nil {
		t.Fatal(err)
	}
	if _, err := root.WriteAt([]byte("golden"), int64(3*pageSize+5)); err != nil {
		t.Fatal(err)
	}
	if _, err := win.WriteAt(bytes.Repeat([]byte{7}, 3*pageSize), int64(pageSize/2)); err != nil {
		t.Fatal(err)
	}
	if err := root.StorePage(550, bytes.Repeat([]byte{0x5a}, pageSize), 77); err != nil {
		t.Fatal(err)
	}
	if err := root.StorePage(551, make([]byte, pageSize), 3); err != nil {
		t.Fatal(err)
	}
	if err := root.StoreGenerated(552, ClassActivations, 12); err != nil {
		t.Fatal(err)
	}
	if err := root.Fill(20, 5, ClassZero); err != nil {
		t.Fatal(err)
	}
	return root, win
}

// TestDigestGolden checks that the digest of fixed content is the value
// it always was, on every backing and page size, for a root and a window.
func TestDigestGolden(t *testing.T) {
	golden := map[int][2]uint64{ // page size -> root, window
		64:   {0x21e914fd5201f0b6, 0xec0338902752c112},
		4096: {0xd5a2801a51b0204d, 0x79098c9ed0f2630c},
	}
	// after: the root's digest once more was written after the first
	// digests, and the window unmapped.
	after := map[int]uint64{64: 0xd9e3b3fe01d2e8a3, 4096: 0xbe5e55a7c8a4e8c9}
	for _, pageSize := range []int{64, 4096} {
		for _, k := range allKinds {
			root, win := goldenDigestRegion(t, k, pageSize)
			for i, r := range []*Region{root, win} {
				for _, workers := range []int{1, 2} {
					got, err := r.DigestParallel(workers)
					if err != nil {
						t.Fatal(err)
					}
					if want := golden[pageSize][i]; got != want {
						t.Errorf("%v, page size %d, region %d, %d workers: digest %#x, want %#x", k, pageSize, i, workers, got, want)
					}
				}
			}
			if _, err := root.WriteAt([]byte("again"), int64(3*pageSize+1)); err != nil {
				t.Fatal(err)
			}
			if err := root.StorePage(551, bytes.Repeat([]byte{1}, pageSize), 4); err != nil {
				t.Fatal(err)
			}
			if err := win.Unmap(); err != nil {
				t.Fatal(err)
			}
			if err := root.Fill(10, 1, ClassRandom); err != nil {
				t.Fatal(err)
			}
			for _, workers := range []int{1, 2} {
				got, err := root.DigestParallel(workers)
				if err != nil {
					t.Fatal(err)
				}
				if want := after[pageSize]; got != want {
					t.Errorf("%v, page size %d, after more writes, %d workers: digest %#x, want %#x", k, pageSize, workers, got, want)
				}
			}
		}
	}
}
