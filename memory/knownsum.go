package memory

import "sync/atomic"

// knownChunk holds the xxhash64 sums StorePage recorded for 64 pages: a
// migration's destination hashes each page it stores on the goroutine that
// stores it, so that the digest it then checks reads a recorded sum for
// that page instead of the page's bytes. That spreads the destination's
// hashing over its apply workers and off the stun.
//
// sums[i] is written only under page i's lock held for writing, and read
// only under that lock; ok says which sums hold and is changed with atomic
// operations, because its bits belong to pages of 64 different locks.
type knownChunk struct {
	ok   atomic.Uint64
	sums [64]uint64
}

// The known-sum table has one slot for every 64 pages (an eighth of a byte
// a page); a chunk (520 bytes) is made by the first StorePage of a
// non-zero page among its 64, so a sum costs about eight bytes a stored
// page.
func newKnownSums(pages int) []atomic.Pointer[knownChunk] {
	return make([]atomic.Pointer[knownChunk], wordsFor(pages))
}

// recordSum records that page p, just stored, hashes to sum. The caller
// holds p's lock for writing.
func (sp *space) recordSum(p int, sum uint64) {
	slot := &sp.known[p>>6]
	k := slot.Load()
	if k == nil {
		k = new(knownChunk)
		if !slot.CompareAndSwap(nil, k) {
			k = slot.Load()
		}
	}
	k.sums[p&63] = sum
	k.ok.Or(uint64(1) << (uint(p) & 63))
}

// knownSum returns the sum recorded for page p, if it still holds. The
// caller holds p's lock.
func (sp *space) knownSum(p int) (uint64, bool) {
	k := sp.known[p>>6].Load()
	if k == nil || k.ok.Load()&(uint64(1)<<(uint(p)&63)) == 0 {
		return 0, false
	}
	return k.sums[p&63], true
}

// forgetSum drops the sum recorded for page p. The caller changed the page
// and holds its lock for writing.
func (sp *space) forgetSum(p int) {
	k := sp.known[p>>6].Load()
	if bit := uint64(1) << (uint(p) & 63); k != nil && k.ok.Load()&bit != 0 {
		k.ok.And(^bit)
	}
}

// forgetSums drops the sums recorded for pages [first, first+n), which
// were all scrubbed: the class of a scrubbed page is zero, so no digest
// reads a sum of one before it is dropped here.
func (sp *space) forgetSums(first, n int) {
	for w := first >> 6; n > 0 && w <= (first+n-1)>>6; w++ {
		if k := sp.known[w].Load(); k != nil {
			if m := wordMask(w, first, first+n); k.ok.Load()&m != 0 {
				k.ok.And(^m)
			}
		}
	}
}
