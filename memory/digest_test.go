package memory

import (
	"encoding/binary"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// naiveDigest is Digest as its doc states it, page by page through
// ReadPage, with no zero-page shortcut and no blocking.
func naiveDigest(t interface{ Fatal(...any) }, r *Region) uint64 {
	h := xxhash.New()
	h.Write(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(r.PageSize())), uint64(r.Pages())))
	buf := make([]byte, r.PageSize())
	for p := range r.Pages() {
		st, err := r.ReadPage(p, buf)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(nil, st.Gen), xxhash.Sum64(buf)))
	}
	return h.Sum64()
}

// TestDigestMatchesFormula checks Digest and DigestParallel against the
// documented formula on regions from one page to more than one window of
// entries, with zero, generated and written pages at several generations,
// in every backing and with several worker counts.
func TestDigestMatchesFormula(t *testing.T) {
	for _, k := range allKinds {
		for _, pages := range []int{1, 2*digestMinWorkerPages + 1, digestWindowPages + 3*digestMinWorkerPages + 17} {
			r, err := New(Config{SizeBytes: int64(64 * pages), PageSize: 64, Kind: k, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.FillMix(pages/3, pages-pages/3, MixRealistic()); err != nil {
				t.Fatal(err)
			}
			for p := 0; p < pages; p += 5 {
				if _, err := r.WriteAt([]byte{byte(p), 1}, int64(p*64+3)); err != nil {
					t.Fatal(err)
				}
			}
			want := naiveDigest(t, r)
			for _, workers := range []int{0, 1, 2, 3, 8} {
				got, err := r.DigestParallel(workers)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%v, %d pages, %d workers: digest %x, formula %x", k, pages, workers, got, want)
				}
			}
			if got, _ := r.Digest(); got != want {
				t.Errorf("%v, %d pages: Digest %x, formula %x", k, pages, got, want)
			}
		}
	}
}
