package memory

import (
	"iter"
	"math/bits"
)

// PageSet is a set of page indices in [0, Cap()), held as a bitmap. The zero
// value is an empty set of capacity zero; CollectDirty and Reset size it.
// A PageSet is reused across collects so that collecting allocates nothing.
// It is not safe for concurrent use.
type PageSet struct {
	words []uint64
	pages int
}

// NewPageSet returns an empty set able to hold pages [0, pages).
func NewPageSet(pages int) *PageSet {
	s := &PageSet{}
	s.Reset(pages)
	return s
}

// Reset empties the set and sets its capacity to pages, reusing its storage
// where it is large enough.
func (s *PageSet) Reset(pages int) {
	if pages < 0 {
		pages = 0
	}
	n := wordsFor(pages)
	if cap(s.words) < n {
		s.words = make([]uint64, n)
	} else {
		s.words = s.words[:n]
		clear(s.words)
	}
	s.pages = pages
}

// Clone returns a copy of the set, of the same capacity.
func (s *PageSet) Clone() *PageSet {
	return &PageSet{words: append([]uint64(nil), s.words...), pages: s.pages}
}

// Cap returns the number of pages the set can hold.
func (s *PageSet) Cap() int { return s.pages }

// Add inserts page p. A page outside [0, Cap()) is ignored and Add reports
// false.
func (s *PageSet) Add(p int) bool {
	if uint(p) >= uint(s.pages) {
		return false
	}
	s.words[p>>6] |= 1 << (uint(p) & 63)
	return true
}

// Remove deletes page p if present.
func (s *PageSet) Remove(p int) {
	if uint(p) < uint(s.pages) {
		s.words[p>>6] &^= 1 << (uint(p) & 63)
	}
}

// Has reports whether page p is in the set.
func (s *PageSet) Has(p int) bool {
	return uint(p) < uint(s.pages) && s.words[p>>6]&(1<<(uint(p)&63)) != 0
}

// Len returns the number of pages in the set.
func (s *PageSet) Len() int {
	n := 0
	for _, w := range s.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// Next returns the smallest page >= p in the set, or -1 if there is none.
func (s *PageSet) Next(p int) int {
	if p < 0 {
		p = 0
	}
	if p >= s.pages {
		return -1
	}
	i := p >> 6
	w := s.words[i] &^ (1<<(uint(p)&63) - 1)
	for {
		if w != 0 {
			return i<<6 + bits.TrailingZeros64(w)
		}
		i++
		if i >= len(s.words) {
			return -1
		}
		w = s.words[i]
	}
}

// All yields the pages of the set in increasing order. The set must not be
// changed during the iteration.
func (s *PageSet) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i, w := range s.words {
			for w != 0 {
				if !yield(i<<6 + bits.TrailingZeros64(w)) {
					return
				}
				w &= w - 1
			}
		}
	}
}

// AppendTo appends the pages of the set to dst in increasing order.
func (s *PageSet) AppendTo(dst []int) []int {
	for i, w := range s.words {
		for w != 0 {
			dst = append(dst, i<<6+bits.TrailingZeros64(w))
			w &= w - 1
		}
	}
	return dst
}

// addRange adds pages [first, first+n), a word at a time.
func (s *PageSet) addRange(first, n int) {
	for w := first >> 6; n > 0 && w <= (first+n-1)>>6; w++ {
		s.words[w] |= wordMask(w, first, first+n)
	}
}

// hasRange reports whether pages [first, first+n) are all in the set.
func (s *PageSet) hasRange(first, n int) bool {
	if first < 0 || n < 0 || first > s.pages-n {
		return false
	}
	for w := first >> 6; n > 0 && w <= (first+n-1)>>6; w++ {
		if m := wordMask(w, first, first+n); s.words[w]&m != m {
			return false
		}
	}
	return true
}

func wordsFor(pages int) int { return (pages + 63) >> 6 }
