package memory

import (
	"slices"
	"sync/atomic"
)

// bulkFillMinPages is the fewest pages a fill of a Synthetic region does as
// one operation under the locks of its chunks rather than page by page: a
// word of the dirty log.
const bulkFillMinPages = 64

// fill gives pages [first, first+n) of r, already checked, class c, or,
// with a mix m (Parts not nil), the class m assigns each (by r's seed and
// its index in r), and bumps their generations; it returns the pages it
// filled, all of them but where it failed. A Synthetic region's fill
// of many pages, in a window or in a root without windows, is one
// operation under the locks of its chunks: each metadata chunk the range covers
// whole takes one step (see metaChunk), and the dirty logs, the digest
// cache's stale bits and the recorded sums are marked a word of 64 pages
// at a time. A workload that rewrites gigabytes of framebuffer every
// training iteration then costs microseconds an iteration.
//
// The absent pages of the range (see SetAbsent) are landed first, looking
// at their bits a word of 64 pages at a time, and not at all where none is
// absent; if a fault fails, the pages before its page are filled.
func (r *Region) fill(first, n int, c Class, m Mix) (int, error) {
	if err := r.writable("fill"); err != nil {
		return 0, err
	}
	k, absentErr := n, error(nil)
	if r.absent.Load() != nil {
		k, absentErr = r.landRange(first, n)
	}
	done, err := r.fillPresent(first, k, c, m)
	if err == nil {
		err = absentErr
	}
	return done, err
}

// fillPresent is fill of pages that are present.
func (r *Region) fillPresent(first, n int, c Class, m Mix) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	if len(m.Parts) == 1 {
		c, m.Parts = m.Parts[0].Class, nil
	}
	if n < r.sp.bulkFillMin || !r.bulkWritable() {
		for p := first; p < first+n; p++ {
			pc := c
			if m.Parts != nil {
				pc = m.ClassOf(r.seed, uint64(p))
			}
			if err := r.fillPage(p, pc); err != nil {
				return p - first, err
			}
		}
		return n, nil
	}
	rule := r.ruleFor(c, m)
	sp := r.sp
	abs := r.first + first
	stripes := sp.stripesOf(abs, n)
	stripes.lock(sp)
	defer stripes.unlock(sp)
	if r.unmapped.Load() {
		return 0, ErrUnmapped
	}
	sp.back.releaseRange(abs, abs+n) // a Synthetic region's explicit bytes, which the fill replaces
	sp.fillMeta(abs, n, rule)
	sp.changedRange(abs, n)
	sp.root.log.markRange(abs, n)
	if r.window {
		r.log.markRange(first, n)
	}
	return n, nil
}

// fillEach fills each of pages of r (checked, each in r), once for each
// time it is listed, with the class m, which is valid, assigns it for r's
// seed, as fill does page by page, and returns the pages it filled, all
// of them but where it failed. A Synthetic region's batch, in a window
// or a root without windows, is written under the locks of its range
// taken once, where they are no more than its pages, not a lock a page.
//
// The absent pages listed are landed first, in the order listed; if a
// fault fails, the pages listed before its page are filled.
func (r *Region) fillEach(pages []int, m Mix) (int, error) {
	if err := r.writable("fill"); err != nil {
		return 0, err
	}
	k, absentErr := len(pages), error(nil)
	if r.absent.Load() != nil {
		k, absentErr = r.landPages(pages)
	}
	done, err := r.fillEachPresent(pages[:k], m)
	if err == nil {
		err = absentErr
	}
	return done, err
}

// fillEachPresent is fillEach of pages that are present.
func (r *Region) fillEachPresent(pages []int, m Mix) (int, error) {
	if len(pages) == 0 {
		return 0, nil
	}
	if !r.bulkWritable() {
		for i, p := range pages {
			if err := r.fillPage(p, m.ClassOf(r.seed, uint64(p))); err != nil {
				return i, err
			}
		}
		return len(pages), nil
	}
	lo, hi := slices.Min(pages), slices.Max(pages)
	sp := r.sp
	rule := r.ruleFor(0, m)
	stripes := sp.stripesOf(r.first+lo, hi-lo+1)
	if stripes.count() > len(pages) {
		// Fewer pages than the stripes they span: a lock a page.
		for i, p := range pages {
			t, ok := r.lockPage(p)
			if !ok {
				return i, ErrUnmapped
			}
			sp.rewriteLocked(t, rule)
			r.markLocked(t)
			r.unlockPage(t)
		}
		return len(pages), nil
	}
	stripes.lock(sp)
	defer stripes.unlock(sp)
	if r.unmapped.Load() {
		return 0, ErrUnmapped
	}
	for _, p := range pages {
		t := r.resolve(p)
		sp.rewriteLocked(t, rule)
		r.markLocked(t)
	}
	return len(pages), nil
}

// ruleFor returns the rule of a fill of r with class c, or, if m has
// parts, with m: the last rule made for r where m's parts are its, so
// that a workload filling its buffers with one mix again and again, or a
// pattern writing batches of pages, makes its rule once.
func (r *Region) ruleFor(c Class, m Mix) *pageRule {
	if len(m.Parts) == 1 {
		c, m.Parts = m.Parts[0].Class, nil
	}
	if m.Parts == nil {
		return ruleOf(c, m, 0, 0)
	}
	if u := r.lastRule.Load(); u != nil && slices.Equal(u.mix.parts, m.Parts) {
		return u
	}
	u := ruleOf(c, m, r.seed, r.first)
	r.lastRule.Store(u)
	return u
}

// stripeSpans are the lock stripes of a range of pages, as two runs of
// stripe indices, [lo1, hi1) and [lo2, hi2), ascending and apart: whoever
// takes several stripes takes them in increasing order, so that no two
// such holders wait for each other.
type stripeSpans struct{ lo1, hi1, lo2, hi2 int }

// stripesOf returns the stripes of the chunks of pages [abs, abs+n): every
// stripe for a range of lockStripes chunks or more.
func (sp *space) stripesOf(abs, n int) stripeSpans {
	k0, k1 := abs>>sp.metaShift, (abs+n-1)>>sp.metaShift
	if k1-k0+1 >= lockStripes {
		return stripeSpans{0, lockStripes, lockStripes, lockStripes}
	}
	s0, s1 := k0&(lockStripes-1), k1&(lockStripes-1)
	if s0 <= s1 {
		return stripeSpans{s0, s1 + 1, lockStripes, lockStripes}
	}
	return stripeSpans{0, s1 + 1, s0, lockStripes} // the range wraps around
}

// count returns the number of stripes.
func (s stripeSpans) count() int { return s.hi1 - s.lo1 + s.hi2 - s.lo2 }

func (s stripeSpans) lock(sp *space) {
	for _, r := range [2][2]int{{s.lo1, s.hi1}, {s.lo2, s.hi2}} {
		for i := r[0]; i < r[1]; i++ {
			sp.locks[i].Lock()
		}
	}
}

func (s stripeSpans) unlock(sp *space) {
	for _, r := range [2][2]int{{s.lo1, s.hi1}, {s.lo2, s.hi2}} {
		for i := r[0]; i < r[1]; i++ {
			sp.locks[i].Unlock()
		}
	}
}

// bulkWritable reports whether r's pages can be written many at a time
// under their chunks' locks: r is Synthetic, so that no bytes are made
// page by page, and a window or a root without windows, so that every
// page of it takes r's seed.
func (r *Region) bulkWritable() bool {
	return !r.sp.storesGenerated() && (r.window || !r.sp.hasWindows())
}

// hasWindows reports whether any window is mapped: a root's page then
// may belong to one, whose dirty log a fill marks too.
func (sp *space) hasWindows() bool {
	ws := sp.windows.Load()
	return ws != nil && len(*ws) > 0
}

// markRange is mark for pages [first, first+n), a word at a time. The
// caller holds the locks of every page of the range.
func (l *dirtyLog) markRange(first, n int) {
	if !l.on.Load() || n <= 0 {
		return
	}
	buf := l.bufs[l.cur]
	for w := first >> 6; w <= (first+n-1)>>6; w++ {
		m := ^uint64(0)
		if w<<6 < first || w<<6+64 > first+n {
			m = wordMask(w, first, first+n)
		}
		if atomic.LoadUint64(&buf[w])&m != m {
			atomic.OrUint64(&buf[w], m)
		}
	}
}
