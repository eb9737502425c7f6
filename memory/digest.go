package memory

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/cespare/xxhash/v2"
)

// Digest returns r's content digest: the xxhash64 of r's page size and
// page count (u64 each), then, for every page in order, its generation
// (u32) and the xxhash64 of its bytes (u64), all little-endian. Two regions
// with equal digests hold the same content; a migration's two ends compare
// digests instead of bytes.
//
// Hashing each page on its own, rather than the region's bytes in one run,
// lets a zero page cost nothing: its hash is the same for every zero page,
// computed once, and the page is never read. A migration's destination
// digests a framebuffer that is mostly untouched in the time it takes to
// walk its page table. It also lets the pages be hashed in parallel, by
// DigestParallel, to the same value.
func (r *Region) Digest() (uint64, error) { return r.DigestParallel(1) }

// DigestParallel returns Digest, the pages hashed on up to workers
// goroutines (1 or less: the caller's only). The value does not depend on
// workers. A migration's stun waits for both ends' digests, so the live
// mode hashes with GOMAXPROCS workers unless told otherwise.
func (r *Region) DigestParallel(workers int) (uint64, error) {
	h := xxhash.New()
	var hdr [16]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(r.sp.pageSize))
	binary.LittleEndian.PutUint64(hdr[8:], uint64(r.pages))
	h.Write(hdr[:])
	zeroSum := xxhash.Sum64(make([]byte, r.sp.pageSize))
	// Pages go in windows: each worker fills the entries of its share of
	// the window, then the window goes to the outer hash in one write.
	window := min(r.pages, digestWindowPages)
	workers = max(1, min(workers, window/digestMinWorkerPages))
	entries := make([]byte, window*digestEntryBytes)
	scratch, errs := make([][]byte, workers), make([]error, workers)
	for w := range scratch {
		scratch[w] = make([]byte, r.sp.pageSize)
	}
	for first := 0; first < r.pages; first += window {
		n := min(window, r.pages-first)
		if workers == 1 {
			if err := r.pageEntries(first, n, entries, scratch[0], zeroSum); err != nil {
				return 0, err
			}
		} else {
			share := (n + workers - 1) / workers
			var wg sync.WaitGroup
			for w := range workers {
				lo, hi := w*share, min((w+1)*share, n)
				if lo >= hi {
					break
				}
				wg.Go(func() {
					errs[w] = r.pageEntries(first+lo, hi-lo, entries[lo*digestEntryBytes:], scratch[w], zeroSum)
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return 0, err
			}
		}
		h.Write(entries[:n*digestEntryBytes])
	}
	return h.Sum64(), nil
}

const (
	digestEntryBytes = 12 // a page's generation and bytes' hash
	// digestWindowPages bounds the entries held at once: 768 KiB.
	digestWindowPages = 64 << 10
	// digestMinWorkerPages keeps a worker's share worth a goroutine.
	digestMinWorkerPages = 1024
)

// pageEntries writes the digest entries of pages [first, first+n) to dst.
func (r *Region) pageEntries(first, n int, dst, scratch []byte, zeroSum uint64) error {
	for i := range n {
		gen, sum, err := r.pageSum(first+i, scratch, zeroSum)
		if err != nil {
			return err
		}
		e := dst[i*digestEntryBytes:]
		binary.LittleEndian.PutUint32(e[:4], gen)
		binary.LittleEndian.PutUint64(e[4:12], sum)
	}
	return nil
}

// pageSum returns page p's generation and the xxhash64 of its bytes,
// hashed where they are stored: a generated page is produced into scratch,
// a zero page's sum is zeroSum.
func (r *Region) pageSum(p int, scratch []byte, zeroSum uint64) (uint32, uint64, error) {
	if err := r.checkPages("digest", p, 1); err != nil {
		return 0, 0, err
	}
	t := r.resolve(p)
	l := r.sp.lock(t.abs)
	l.RLock()
	defer l.RUnlock()
	if r.unmapped.Load() {
		return 0, 0, ErrUnmapped
	}
	gen := r.sp.gens[t.abs]
	// A page of the zero class reads as zeros in every backing.
	if r.sp.classes[t.abs] == ClassZero {
		return gen, zeroSum, nil
	}
	if buf := r.sp.back.page(t.abs); buf != nil {
		return gen, xxhash.Sum64(buf), nil
	}
	r.sp.readLocked(t, 0, scratch)
	return gen, xxhash.Sum64(scratch), nil
}
