package memory

import (
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// knownChunk holds the xxhash64 sums recorded for 128 pages as they were
// stored (StorePage) or read whole (ReadPage): a migration's destination
// hashes each page it stores on the goroutine that stores it, and its
// source each page it sends on the worker that reads it, while the bytes
// are in the cache, so that the digests both ends then compare read a
// recorded sum for that page instead of its bytes. That spreads the
// hashing over the copy's workers and keeps it out of the stun.
//
// A sum is recorded under the page's lock, read (ReadPage) or write
// (StorePage), and dropped under its write lock when the page changes, or,
// for a scrub (which leaves the page zero, whose sum no digest reads),
// after; so any sum that holds while a page's lock is held is the sum of
// its bytes, and two readers recording at once record the same value. sums
// and ok are atomic because readers share a lock, and because the pages of
// a chunk may have different locks (tests make metadata chunks smaller).
type knownChunk struct {
	ok   [knownChunkPages / 64]atomic.Uint64
	sums [knownChunkPages]atomic.Uint64
}

// knownChunkPages is the pages of a knownChunk: 128, so that a chunk
// (1 KiB) costs a destination that stores every page one allocation per
// 128 pages, and a region that stores one page in many a quarter of the
// page's size at most.
const (
	knownChunkShift = 7
	knownChunkPages = 1 << knownChunkShift
)

// knownTable is the known-sum table of a space: a slot for every 128
// pages (a sixteenth of a byte a page), whose chunk is made by the first
// sum recorded among them. The table itself is made by the space's first
// sum: a host's guests that never took part in a migration hold none.
type knownTable []atomic.Pointer[knownChunk]

// knownSlots returns the space's table, or, if it has none, a new one if
// create is set, else nil.
func (sp *space) knownSlots(create bool) knownTable {
	if t := sp.known.Load(); t != nil {
		return *t
	}
	if !create {
		return nil
	}
	t := make(knownTable, (sp.pages+knownChunkPages-1)>>knownChunkShift)
	if !sp.known.CompareAndSwap(nil, &t) {
		return *sp.known.Load()
	}
	return t
}

// knownBit returns the ok word of page p in chunk k and p's bit in it.
func knownBit(k *knownChunk, p int) (*atomic.Uint64, uint64) {
	return &k.ok[p>>6&(knownChunkPages/64-1)], uint64(1) << (uint(p) & 63)
}

// recordSum records that page p hashes to sum. The caller holds p's lock
// and read or stored the page's bytes under it.
func (sp *space) recordSum(p int, sum uint64) {
	slot := &sp.knownSlots(true)[p>>knownChunkShift]
	k := slot.Load()
	if k == nil {
		k = new(knownChunk)
		// Counted before it is installed, so that the count is never
		// below the chunks installed: a zero count lets forgetSums look
		// at none.
		sp.knownChunks.Add(1)
		if !slot.CompareAndSwap(nil, k) {
			sp.knownChunks.Add(-1)
			k = slot.Load()
		}
	}
	k.sums[p&(knownChunkPages-1)].Store(sum)
	w, bit := knownBit(k, p)
	w.Or(bit)
}

// knownSum returns the sum recorded for page p, if it still holds. The
// caller holds p's lock.
func (sp *space) knownSum(p int) (uint64, bool) {
	t := sp.knownSlots(false)
	if t == nil {
		return 0, false
	}
	k := t[p>>knownChunkShift].Load()
	if k == nil {
		return 0, false
	}
	if w, bit := knownBit(k, p); w.Load()&bit == 0 {
		return 0, false
	}
	return k.sums[p&(knownChunkPages-1)].Load(), true
}

// learnSum records the sum of page p, read whole into read under its lock,
// unless one already holds or the page is zero, for which the digest needs
// no sum. A generated page's sum is learnt too: its bytes are a function of
// its window's seed, which is fixed while it is mapped (Map and Unmap
// scrub, which drops the sum), so a Synthetic source's digest does not
// generate again every page the migration read.
func (sp *space) learnSum(p int, read []byte) {
	if c, _ := sp.state(p); c == ClassZero {
		return
	}
	if _, ok := sp.knownSum(p); ok {
		return
	}
	// Stored bytes are hashed where they are stored, which no caller can
	// change; generated ones where they were just generated.
	if buf := sp.back.page(p); buf != nil {
		read = buf
	}
	sp.recordSum(p, xxhash.Sum64(read))
}

// forgetSum drops the sum recorded for page p. The caller changed the page
// and holds its lock for writing.
func (sp *space) forgetSum(p int) {
	if sp.knownChunks.Load() == 0 {
		return
	}
	if k := sp.knownSlots(false)[p>>knownChunkShift].Load(); k != nil {
		if w, bit := knownBit(k, p); w.Load()&bit != 0 {
			w.And(^bit)
		}
	}
}

// forgetSums drops the sums recorded for pages [first, first+n), which
// have all changed: a chunk of sums the range covers whole is dropped in
// one step, and one that holds none is passed over; a space with no chunk
// at all, as one that never took part in a migration, is not looked at,
// so that a fill of gigabytes costs nothing here.
// Dropping a sum is always safe: a page without one is hashed again.
func (sp *space) forgetSums(first, n int) {
	if sp.knownChunks.Load() == 0 {
		return
	}
	t := sp.knownSlots(false)
	for a := first; a < first+n; {
		c := a >> knownChunkShift
		end := min(first+n, (c+1)<<knownChunkShift)
		slot := &t[c]
		if k := slot.Load(); k != nil {
			if end-a == knownChunkPages {
				if slot.CompareAndSwap(k, nil) {
					sp.knownChunks.Add(-1)
				}
			} else {
				for w := a >> 6; w <= (end-1)>>6; w++ {
					ok, _ := knownBit(k, w<<6)
					if m := wordMask(w, a, end); ok.Load()&m != 0 {
						ok.And(^m)
					}
				}
			}
		}
		a = end
	}
}
