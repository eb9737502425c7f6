package memory

import "math/bits"

// Seek returns the page n places after Next(p) in the set's increasing
// order: Seek(p, 0) is Next(p), Seek(p, 1) the page after it, and so on.
// It returns -1 if fewer than n+1 pages of the set are >= p; a negative n
// counts as 0.
//
// Seek counts whole words at a time, so that a copy engine cutting a set
// into batches of n pages finds where each batch starts in about n/64
// steps, without visiting its pages one by one.
func (s *PageSet) Seek(p, n int) int {
	p = max(p, 0)
	n = max(n, 0)
	if p >= s.pages {
		return -1
	}
	i := p >> 6
	w := s.words[i] &^ (1<<(uint(p)&63) - 1)
	for {
		c := bits.OnesCount64(w)
		if n < c {
			return i<<6 + selectBit(w, n)
		}
		n -= c
		i++
		if i >= len(s.words) {
			return -1
		}
		w = s.words[i]
	}
}

// selectBit returns the position of the n-th (from 0) set bit of w, which
// must have more than n bits set. It halves the word while the wanted bit
// lies in the upper half, then walks at most seven bits.
func selectBit(w uint64, n int) int {
	pos := 0
	if c := bits.OnesCount32(uint32(w)); n >= c {
		n, w, pos = n-c, w>>32, pos+32
	}
	if c := bits.OnesCount16(uint16(w)); n >= c {
		n, w, pos = n-c, w>>16, pos+16
	}
	if c := bits.OnesCount8(uint8(w)); n >= c {
		n, w, pos = n-c, w>>8, pos+8
	}
	for ; n > 0; n-- {
		w &= w - 1
	}
	return pos + bits.TrailingZeros64(w)
}
