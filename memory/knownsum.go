package memory

import "sync/atomic"

// knownChunk holds the xxhash64 sums StorePage recorded for 128 pages: a
// migration's destination hashes each page it stores on the goroutine that
// stores it, so that the digest it then checks reads a recorded sum for
// that page instead of the page's bytes. That spreads the destination's
// hashing over its apply workers and off the stun.
//
// sums[i] is written only under page i's lock held for writing, and read
// only under that lock; ok says which sums hold and is changed with atomic
// operations, because its bits belong to pages of 64 different locks.
type knownChunk struct {
	ok   [knownChunkPages / 64]atomic.Uint64
	sums [knownChunkPages]uint64
}

// knownChunkPages is the pages of a knownChunk: 128, so that a chunk
// (1 KiB) costs a destination that stores every page one allocation per
// 128 pages, and a region that stores one page in many a quarter of the
// page's size at most.
const (
	knownChunkShift = 7
	knownChunkPages = 1 << knownChunkShift
)

// newKnownSums returns the known-sum table of a space: a slot for every
// 128 pages (a sixteenth of a byte a page), whose chunk is made by the
// first StorePage of a non-zero page among them.
func newKnownSums(pages int) []atomic.Pointer[knownChunk] {
	return make([]atomic.Pointer[knownChunk], (pages+knownChunkPages-1)>>knownChunkShift)
}

// knownBit returns the ok word of page p in chunk k and p's bit in it.
func knownBit(k *knownChunk, p int) (*atomic.Uint64, uint64) {
	return &k.ok[p>>6&(knownChunkPages/64-1)], uint64(1) << (uint(p) & 63)
}

// recordSum records that page p, just stored, hashes to sum. The caller
// holds p's lock for writing.
func (sp *space) recordSum(p int, sum uint64) {
	slot := &sp.known[p>>knownChunkShift]
	k := slot.Load()
	if k == nil {
		k = new(knownChunk)
		if !slot.CompareAndSwap(nil, k) {
			k = slot.Load()
		}
	}
	k.sums[p&(knownChunkPages-1)] = sum
	w, bit := knownBit(k, p)
	w.Or(bit)
}

// knownSum returns the sum recorded for page p, if it still holds. The
// caller holds p's lock.
func (sp *space) knownSum(p int) (uint64, bool) {
	k := sp.known[p>>knownChunkShift].Load()
	if k == nil {
		return 0, false
	}
	if w, bit := knownBit(k, p); w.Load()&bit == 0 {
		return 0, false
	}
	return k.sums[p&(knownChunkPages-1)], true
}

// forgetSum drops the sum recorded for page p. The caller changed the page
// and holds its lock for writing.
func (sp *space) forgetSum(p int) {
	if k := sp.known[p>>knownChunkShift].Load(); k != nil {
		if w, bit := knownBit(k, p); w.Load()&bit != 0 {
			w.And(^bit)
		}
	}
}

// forgetSums drops the sums recorded for pages [first, first+n), which
// were all scrubbed: the class of a scrubbed page is zero, so no digest
// reads a sum of one before it is dropped here.
func (sp *space) forgetSums(first, n int) {
	for w := first >> 6; n > 0 && w <= (first+n-1)>>6; w++ {
		k := sp.known[w>>(knownChunkShift-6)].Load()
		if k == nil {
			continue
		}
		ok, _ := knownBit(k, w<<6)
		if m := wordMask(w, first, first+n); ok.Load()&m != 0 {
			ok.And(^m)
		}
	}
}
