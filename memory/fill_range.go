package memory

import "sync/atomic"

// bulkFillMinPages is the fewest pages a fill of a Synthetic region does as
// one operation under every lock stripe rather than page by page: taking
// the 256 stripes costs about what locking a few hundred pages one at a
// time does.
const bulkFillMinPages = 1024

// fill gives pages [first, first+n) of r, already checked, class c, or,
// with a mix m (Parts not nil), the class m assigns each (by r's seed and
// its index in r), and bumps their generations. A Synthetic region's fill of many pages, in a window or in a root without
// windows, is one operation: every stripe is locked once, and the dirty
// logs, the digest cache's stale bits and the recorded sums are marked a
// word of 64 pages at a time. A workload that rewrites gigabytes of
// framebuffer every training iteration costs a few nanoseconds a page.
func (r *Region) fill(first, n int, c Class, m Mix) error {
	if len(m.Parts) == 1 {
		c, m.Parts = m.Parts[0].Class, nil
	}
	if n < r.sp.bulkFillMin || r.sp.storesGenerated() || !r.window && r.sp.hasWindows() {
		for p := first; p < first+n; p++ {
			pc := c
			if m.Parts != nil {
				pc = m.ClassOf(r.seed, uint64(p))
			}
			if err := r.fillPage(p, pc); err != nil {
				return err
			}
		}
		return nil
	}
	sp := r.sp
	for i := range sp.locks {
		sp.locks[i].Lock()
	}
	defer func() {
		for i := range sp.locks {
			sp.locks[i].Unlock()
		}
	}()
	if r.unmapped.Load() {
		return ErrUnmapped
	}
	abs := r.first + first
	sb := sp.sparse() // a Synthetic region's explicit bytes, which the fill frees
	for a := abs; a < abs+n; {
		// One chunk of the overlay at a time: most hold no page.
		end := min(abs+n, (a>>sparseChunkShift+1)<<sparseChunkShift)
		if sb.chunks[a>>sparseChunkShift].Load() != nil {
			for q := a; q < end; q++ {
				if sb.page(q) != nil {
					sb.release(q)
				}
			}
		}
		if m.Parts == nil {
			// One class: tight loops the compiler keeps free of calls.
			if c == ClassZero {
				clear(sp.classes[a:end])
			} else {
				for q := a; q < end; q++ {
					sp.classes[q] = c
				}
			}
		} else {
			for q := a; q < end; q++ {
				sp.classes[q] = m.ClassOf(r.seed, uint64(q-r.first))
			}
		}
		gens := sp.gens[a:end]
		for i := range gens {
			gens[i]++
		}
		a = end
	}
	sp.changedRange(abs, n)
	sp.root.log.markRange(abs, n)
	if r.window {
		r.log.markRange(first, n)
	}
	return nil
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
		if m := wordMask(w, first, first+n); atomic.LoadUint64(&buf[w])&m != m {
			atomic.OrUint64(&buf[w], m)
		}
	}
}
