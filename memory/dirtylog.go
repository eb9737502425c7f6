package memory

import (
	"math/bits"
	"sync/atomic"
)

// dirtyLog is one bit a page, set by writers with atomic OR and taken by a
// collector with atomic swap, so that a write racing a collect is reported
// by that collect or the next and never lost: a writer stores its data
// before it sets the bit, and the collector clears the bit before it reads
// the data.
type dirtyLog struct {
	words []uint64
	pages int
	on    atomic.Bool
}

func newDirtyLog(pages int) *dirtyLog {
	l := &dirtyLog{words: make([]uint64, wordsFor(pages)), pages: pages}
	l.on.Store(true)
	return l
}

// mark sets the bit of page p if logging is on. Reading the word first
// spares the locked instruction when a hot page is written again before
// the next collect.
func (l *dirtyLog) mark(p int) {
	if !l.on.Load() {
		return
	}
	w := &l.words[p>>6]
	bit := uint64(1) << (uint(p) & 63)
	if atomic.LoadUint64(w)&bit == 0 {
		atomic.OrUint64(w, bit)
	}
}

// collect moves every set bit into dst (resized to the log) and clears it
// in the log. It returns the number of pages collected.
func (l *dirtyLog) collect(dst *PageSet) int {
	if dst.pages != l.pages || len(dst.words) != len(l.words) {
		dst.Reset(l.pages)
	}
	n := 0
	for i := range l.words {
		w := &l.words[i]
		var v uint64
		if atomic.LoadUint64(w) != 0 {
			v = atomic.SwapUint64(w, 0)
			n += bits.OnesCount64(v)
		}
		dst.words[i] = v
	}
	return n
}

// count returns the number of set bits without clearing them.
func (l *dirtyLog) count() int {
	n := 0
	for i := range l.words {
		n += bits.OnesCount64(atomic.LoadUint64(&l.words[i]))
	}
	return n
}

func (l *dirtyLog) clear() {
	for i := range l.words {
		if atomic.LoadUint64(&l.words[i]) != 0 {
			atomic.StoreUint64(&l.words[i], 0)
		}
	}
}
