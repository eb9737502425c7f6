package memory

// InUse reports whether a page in state s is not in its initial state:
// written or stored since its region was made or last scrubbed, or holding
// content other than zeros. It is the one test of "a page in use" — what a
// migration's first round sends, what a checkpoint of a whole region
// holds, and what a Legacy stun moves of a framebuffer.
func (s PageState) InUse() bool { return s.Gen != 0 || s.Class != ClassZero }

// UsedPages resets dst to r's size and adds every page of r that is in use
// (PageState.InUse). It fails, with dst partly filled, only if r cannot be
// read (a window whose parent was unmapped), or, changing nothing, if dst
// is nil.
func (r *Region) UsedPages(dst *PageSet) error {
	if dst == nil {
		return configError("used pages into a nil page set")
	}
	dst.Reset(r.Pages())
	return r.eachUsed(func(first, n int, _ *pageRule) { dst.addRange(first, n) })
}

// UsedBytes is the size of r's pages in use. It counts them without
// building a set: a Legacy migration asks it of every framebuffer after
// each round.
func (r *Region) UsedBytes() (int64, error) {
	n := int64(0)
	if err := r.eachUsed(func(_, k int, _ *pageRule) { n += int64(k) }); err != nil {
		return 0, err
	}
	return n * int64(r.PageSize()), nil
}

// eachUsed calls f with each run of pages of r in use, [first, first+n),
// in order, a metadata chunk at a time under its lock: a chunk in its
// initial state is passed over, and one whose pages were all filled as a
// run is one call, without looking at each page, with u the rule the run
// follows (nil for a run of one page).
func (r *Region) eachUsed(f func(first, n int, u *pageRule)) error {
	sp := r.sp
	for p := 0; p < r.pages; {
		abs := r.first + p
		k := abs >> sp.metaShift
		end := min(r.pages, (k+1)<<sp.metaShift-r.first)
		l := sp.lock(abs)
		l.RLock()
		if r.unmapped.Load() {
			l.RUnlock()
			return ErrUnmapped
		}
		switch ch := sp.chunkAt(k); {
		case sp.pristine(k):
		case ch.per == nil && ch.base != 0:
			f(p, end-p, ch.rule)
		default:
			for q := p; q < end; q++ {
				// A page written since its scrub is in use whatever its
				// class, which takes a mix's hash to work out.
				if sp.gen(r.first+q) != 0 {
					f(q, 1, nil)
				} else if c, gen := sp.state(r.first + q); (PageState{Gen: gen, Class: c}).InUse() {
					f(q, 1, nil)
				}
			}
		}
		l.RUnlock()
		p = end
	}
	return nil
}

// UsedClasses counts r's pages in use (PageState.InUse) by the class each
// holds: counts[c] gains the pages of each generated class c,
// counts[ClassExplicit] those whose bytes were written explicitly. A
// Legacy migration asks it of each framebuffer, whose pages in use its
// stun moves whole, to predict their wire size from what they hold. It
// fails only for a window that was unmapped, or, changing nothing, for a
// nil counts.
func (r *Region) UsedClasses(counts *[ClassExplicit + 1]int64) error {
	if counts == nil {
		return configError("used classes into a nil count")
	}
	sp := r.sp
	generated := (*[ClassExplicit]int64)(counts[:ClassExplicit])
	// eachUsed calls f under the chunk's lock, which state needs. A run
	// of one rule is counted by the rule: at once for one class, page by
	// page only for a mix.
	return r.eachUsed(func(first, n int, u *pageRule) {
		if u != nil {
			u.count(r.first+first, n, generated)
			return
		}
		for q := first; q < first+n; q++ {
			c, _ := sp.state(r.first + q)
			counts[min(c, ClassExplicit)]++
		}
	})
}
