package memory

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// dirtyLog is one bit a page in two bitmaps of 64-bit words: writers set
// bits in the current one with atomic OR; a collect makes the other one
// current and then reads and clears the old one with plain loads and
// stores. The bitmaps exist only while logging is on: a host's regions
// log only while a migration collects them, and a bit a page of every
// guest's memory is most of what an idle simulated host would hold.
//
// Swapping bitmaps instead of swapping every word is what keeps a collect
// of a large, lightly dirtied space under a millisecond: at 1 % of 6.3 M
// pages about half the words hold a bit, and an atomic swap of each of
// them, behind a branch the processor cannot predict, costs several times
// a plain pass over the words.
//
// Swapping costs a fixed few microseconds (taking every stripe lock), so a
// small log, under flipMinWords words, is collected the simple way
// instead: each word that holds a bit is swapped with zero atomically.
//
// The swap is safe because every mark is made under the page's stripe lock
// (markLocked) and the collect changes cur while holding all the stripe
// locks: a writer that marked the old bitmap has released its lock before
// the swap, and one that marks after it sees the new bitmap. So a write
// that races a collect is reported by that collect or the next, never
// lost: a writer stores its data before it sets the bit, and the caller of
// collect reads the data after the bitmap holding the bit was swapped out.
type dirtyLog struct {
	bufs  [2][]uint64
	pages int
	on    atomic.Bool
	// locks are the stripe locks of the space the log's pages belong to.
	locks []paddedRWMutex

	// flipMinWords is the size from which collect swaps bitmaps rather
	// than words; tests lower it to exercise both ways.
	flipMinWords int

	// mu serializes collect, count and clear, so that no one reads the
	// current bitmap while a collect clears it with plain stores after
	// swapping it out.
	mu sync.Mutex
	// cur indexes the bitmap writers mark. It changes only while every
	// stripe lock and mu are held, and mark reads it under a stripe lock,
	// so it needs no atomic access.
	cur int
}

// flipMinWords is the log size, in words, from which swapping bitmaps
// (a fixed cost of about 8 µs on a 2-core machine) beats swapping each
// word that holds a bit (7 to 15 ns each, most of it a mispredicted
// branch): 1024 words are 65536 pages, 256 MiB of 4 KiB pages.
const flipMinWords = 1024

// newDirtyLog returns a log of pages pages, on if on is set.
func newDirtyLog(pages int, locks []paddedRWMutex, on bool) *dirtyLog {
	l := &dirtyLog{pages: pages, locks: locks, flipMinWords: flipMinWords}
	if on {
		l.start()
	}
	return l
}

// start clears the log and turns it on, making its bitmaps if it has none.
// A writer that sees the log on sees the bitmaps: they are stored before
// on is.
func (l *dirtyLog) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bufs[0] == nil {
		n := wordsFor(l.pages)
		l.cur = 0
		l.bufs[0] = make([]uint64, n)
		if n >= l.flipMinWords {
			l.bufs[1] = make([]uint64, n)
		}
	} else {
		l.clearLocked()
	}
	l.on.Store(true)
}

// stop turns the log off and drops its bitmaps. It takes every stripe
// lock, as a collect's swap does, so that no writer that saw the log on
// is still marking a bitmap.
func (l *dirtyLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.locks {
		l.locks[i].Lock()
	}
	l.on.Store(false)
	l.bufs = [2][]uint64{}
	for i := range l.locks {
		l.locks[i].Unlock()
	}
}

// mark sets the bit of page p if logging is on. The caller holds the stripe
// lock of p's page in the space. Reading the word first spares the locked
// instruction when a hot page is written again before the next collect.
func (l *dirtyLog) mark(p int) {
	if !l.on.Load() {
		return
	}
	w := &l.bufs[l.cur][p>>6]
	bit := uint64(1) << (uint(p) & 63)
	if atomic.LoadUint64(w)&bit == 0 {
		atomic.OrUint64(w, bit)
	}
}

// collect moves every set bit into dst (resized to the log) and clears it
// in the log. It returns the number of pages collected.
func (l *dirtyLog) collect(dst *PageSet) int {
	if dst.pages != l.pages || len(dst.words) != wordsFor(l.pages) {
		dst.Reset(l.pages)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.bufs[l.cur]
	if old == nil {
		clear(dst.words) // off: nothing was written since it was turned off
		return 0
	}
	if len(old) < l.flipMinWords {
		n := 0
		for i := range old {
			var v uint64
			if atomic.LoadUint64(&old[i]) != 0 {
				v = atomic.SwapUint64(&old[i], 0)
				n += bits.OnesCount64(v)
			}
			dst.words[i] = v
		}
		return n
	}
	if l.bufs[l.cur^1] == nil {
		// Only a test that lowered flipMinWords gets here.
		l.bufs[l.cur^1] = make([]uint64, len(old))
	}
	for i := range l.locks {
		l.locks[i].Lock()
	}
	l.cur ^= 1
	for i := range l.locks {
		l.locks[i].Unlock()
	}
	// No writer can reach old any more: plain loads and stores suffice.
	n := 0
	for i, v := range old {
		dst.words[i] = v
		n += bits.OnesCount64(v)
	}
	clear(old)
	return n
}

// count returns the number of set bits without clearing them.
func (l *dirtyLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for i := range l.bufs[l.cur] {
		n += bits.OnesCount64(atomic.LoadUint64(&l.bufs[l.cur][i]))
	}
	return n
}

// clear drops every set bit. The bitmap not current is always clear
// outside a collect.
func (l *dirtyLog) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clearLocked()
}

// clearLocked is clear with l.mu held.
func (l *dirtyLog) clearLocked() {
	words := l.bufs[l.cur]
	for i := range words {
		if atomic.LoadUint64(&words[i]) != 0 {
			atomic.StoreUint64(&words[i], 0)
		}
	}
}

// current returns the bitmap writers mark, for tests and benchmarks that
// set bits directly. No collect may run at the same time.
func (l *dirtyLog) current() []uint64 { return l.bufs[l.cur] }

// each calls f with every page whose bit is set, in order, without
// clearing it, and returns how many there were. It holds l.mu, as collect
// does, so that f may take stripe locks in the order collect takes them.
func (l *dirtyLog) each(f func(p int)) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for i := range l.bufs[l.cur] {
		for w := atomic.LoadUint64(&l.bufs[l.cur][i]); w != 0; w &= w - 1 {
			f(i<<6 | bits.TrailingZeros64(w))
			n++
		}
	}
	return n
}
