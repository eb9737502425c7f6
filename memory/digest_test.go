package memory

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// naiveDigest is Digest as its doc states it, page by page through
// ReadPage, with no zero-page shortcut, no blocking and no cache.
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

// fullDigest is the digest as it was computed before it was cached: every
// page hashed on every call, in windows of entries, on up to workers
// goroutines. It is the reference the cached digest is checked against
// where naiveDigest is too slow, and the baseline of BenchmarkDigest.
func fullDigest(r *Region, workers int) (uint64, error) {
	const windowPages = 64 << 10
	h := xxhash.New()
	var hdr [16]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(r.sp.pageSize))
	binary.LittleEndian.PutUint64(hdr[8:], uint64(r.pages))
	h.Write(hdr[:])
	zeroSum := xxhash.Sum64(make([]byte, r.sp.pageSize))
	window := min(r.pages, windowPages)
	workers = max(1, min(workers, window/digestMinWorkerPages))
	entries := make([]byte, window*digestEntryBytes)
	scratch, errs := make([][]byte, workers), make([]error, workers)
	for w := range scratch {
		scratch[w] = make([]byte, r.sp.pageSize)
	}
	for first := 0; first < r.pages; first += window {
		n := min(window, r.pages-first)
		share := (n + workers - 1) / workers
		var wg sync.WaitGroup
		for w := range workers {
			lo, hi := w*share, min((w+1)*share, n)
			if lo >= hi {
				break
			}
			wg.Go(func() {
				errs[w] = fullEntries(r, first+lo, hi-lo, entries[lo*digestEntryBytes:], scratch[w], zeroSum)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
		h.Write(entries[:n*digestEntryBytes])
	}
	return h.Sum64(), nil
}

// fullEntries writes the digest entries of pages [first, first+n) of r to
// dst, each page read under its lock.
func fullEntries(r *Region, first, n int, dst, scratch []byte, zeroSum uint64) error {
	for i := range n {
		if err := r.checkPages("digest", first+i, 1); err != nil {
			return err
		}
		t := r.resolve(first + i)
		l := r.sp.lock(t.abs)
		l.RLock()
		c, gen := r.sp.state(t.abs)
		sum := zeroSum
		if c != ClassZero {
			if buf := r.sp.back.page(t.abs); buf != nil {
				sum = xxhash.Sum64(buf)
			} else {
				r.sp.readLocked(t, 0, scratch)
				sum = xxhash.Sum64(scratch)
			}
		}
		l.RUnlock()
		e := dst[i*digestEntryBytes:]
		binary.LittleEndian.PutUint32(e[:4], gen)
		binary.LittleEndian.PutUint64(e[4:12], sum)
	}
	return nil
}

// TestDigestMatchesFormula checks Digest and DigestParallel against the
// documented formula on regions from one page to several chunks of cached
// entries, with zero, generated and written pages at several generations,
// in every backing and with several worker counts, before and after more
// writes.
func TestDigestMatchesFormula(t *testing.T) {
	for _, k := range allKinds {
		for _, pages := range []int{1, 2*digestMinWorkerPages + 1, 5*digestChunkPages + 3*digestMinWorkerPages + 17} {
			r, err := New(Config{SizeBytes: int64(64 * pages), PageSize: 64, Kind: k, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			for round := range 2 {
				if err := r.FillMix(pages/3, pages-pages/3, MixRealistic()); err != nil {
					t.Fatal(err)
				}
				for p := round; p < pages; p += 5 {
					if _, err := r.WriteAt([]byte{byte(p), 1}, int64(p*64+3)); err != nil {
						t.Fatal(err)
					}
				}
				want := naiveDigest(t, r)
				if got, err := fullDigest(r, 2); err != nil || got != want {
					t.Fatalf("%v, %d pages: the uncached digest %x, %v; formula %x", k, pages, got, err, want)
				}
				for _, workers := range []int{0, 1, 2, 3, 8} {
					got, err := r.DigestParallel(workers)
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Errorf("%v, %d pages, round %d, %d workers: digest %x, formula %x", k, pages, round, workers, got, want)
					}
				}
				if got, _ := r.Digest(); got != want {
					t.Errorf("%v, %d pages, round %d: Digest %x, formula %x", k, pages, round, got, want)
				}
			}
		}
	}
}
