package memory

// StoreGeneratedFrom stores in r, for each page p of set that src holds as
// generated content, src's class and generation of p, as StoreGenerated
// does, counting the pages of each class in counts; the pages src holds as
// explicit bytes it adds to explicit instead, for the caller to copy. It is
// what a destination that regenerates what it receives does with a round,
// as a Model-fidelity migration's does. src and r must have the same
// number of pages of the same size; set and explicit hold pages of them.
//
// Where r is Synthetic and a window or a root without windows (so that
// every page of it takes r's seed), the pages of a chunk of src are read
// under its lock taken once and stored under r's locks taken once; a
// chunk of src whose pages all follow one rule and that is in set whole
// is stored in one step, as a fill stores it, where besides src is a
// window or a root without windows of another space and the two regions'
// chunks line up: a round of a guest filled in large runs then costs
// microseconds a gigabyte. Otherwise pages are stored one by one.
//
// On an error some pages may be stored and counted already.
func (r *Region) StoreGeneratedFrom(src *Region, set *PageSet, counts *[ClassExplicit]int64, explicit *PageSet) error {
	if err := r.writable("store"); err != nil {
		return err
	}
	switch {
	case src == nil || set == nil || counts == nil || explicit == nil:
		return configError("store generated from: nil region, set or counts")
	case src.pages != r.pages || src.sp.pageSize != r.sp.pageSize:
		return configError("store generated from %d pages of %d bytes into %d pages of %d bytes",
			src.pages, src.sp.pageSize, r.pages, r.sp.pageSize)
	case set.Cap() > r.pages || explicit.Cap() < set.Cap():
		return configError("store generated from a set of %d pages into %d pages, explicit pages into %d",
			set.Cap(), r.pages, explicit.Cap())
	}
	whole := r.chunksWhole(src)
	batched := r.bulkWritable()
	var from, to *pageRule // the last rule of src moved to r
	var batch []pageEntry
	for p := set.Next(0); p >= 0; {
		if whole {
			// The chunk of r must be as long: the last of src's space
			// may be shorter than the one of r's at the same pages.
			if n, u, base, ok := src.uniformChunkAt(p, set); ok && n == r.sp.chunkPagesAt((r.first+p)>>r.sp.metaShift) {
				if u != from {
					from, to = u, u.movedTo(src, r)
				}
				if err := r.setChunk(p, n, to, base); err != nil {
					return err
				}
				u.count(src.first+p, n, counts)
				p = set.Next(p + n)
				continue
			}
		}
		if batched {
			var err error
			if batch, p, err = src.chunkStates(p, set, batch[:0], explicit); err != nil {
				return err
			}
			if err := r.storeEntries(batch, counts); err != nil {
				return err
			}
			continue
		}
		st, err := src.PageState(p)
		if err != nil {
			return err
		}
		if st.Class.Generated() {
			counts[st.Class]++
			if err := r.StoreGenerated(p, st.Class, st.Gen); err != nil {
				return err
			}
		} else {
			explicit.Add(p)
		}
		p = set.Next(p + 1)
	}
	return nil
}

// pageEntry is a page of a region, its class and its generation.
type pageEntry struct {
	p   int
	c   Class
	gen uint32
}

// chunkStates appends to dst the state of each generated page of set from
// p to the end of p's metadata chunk of r, read under the chunk's lock
// taken once, and adds the others to explicit. It returns the entries and
// the next page of set after the chunk.
func (r *Region) chunkStates(p int, set *PageSet, dst []pageEntry, explicit *PageSet) ([]pageEntry, int, error) {
	sp := r.sp
	abs := r.first + p
	end := min(r.pages, (abs>>sp.metaShift+1)<<sp.metaShift-r.first)
	l := sp.lock(abs)
	l.RLock()
	defer l.RUnlock()
	if r.unmapped.Load() {
		return dst, -1, ErrUnmapped
	}
	for ; p >= 0 && p < end; p = set.Next(p + 1) {
		c, gen := sp.state(r.first + p)
		if c.Generated() {
			dst = append(dst, pageEntry{p, c, gen})
		} else {
			explicit.Add(p)
		}
	}
	return dst, p, nil
}

// storeEntries stores each entry in r, Synthetic, a window or a root
// without windows, as StoreGenerated does, under the locks of their range
// taken once, and counts their classes.
func (r *Region) storeEntries(es []pageEntry, counts *[ClassExplicit]int64) error {
	if len(es) == 0 {
		return nil
	}
	sp := r.sp
	stripes := sp.stripesOf(r.first+es[0].p, es[len(es)-1].p-es[0].p+1)
	stripes.lock(sp)
	defer stripes.unlock(sp)
	if r.unmapped.Load() {
		return ErrUnmapped
	}
	for _, e := range es {
		t := r.resolve(e.p)
		sp.setLocked(t, e.c, e.gen)
		r.markLocked(t)
		counts[e.c]++
	}
	return nil
}

// chunksWhole reports whether a metadata chunk of src can be stored into r
// in one step: r is Synthetic, a window or a root without windows (whose
// pages all take r's seed, as a fill's do), src is one too, in another
// space, and their chunks are alike and start at the same pages of each.
func (r *Region) chunksWhole(src *Region) bool {
	return r.bulkWritable() && r.sp != src.sp && (src.window || !src.sp.hasWindows()) &&
		r.sp.metaShift == src.sp.metaShift &&
		(r.first-src.first)&(1<<r.sp.metaShift-1) == 0
}

// uniformChunkAt reports whether page p of r starts a metadata chunk that
// lies in r whole, is in set whole and whose pages all follow one rule,
// and returns the chunk's pages, rule and generation.
func (r *Region) uniformChunkAt(p int, set *PageSet) (n int, u *pageRule, base uint32, ok bool) {
	sp := r.sp
	abs := r.first + p
	k := abs >> sp.metaShift
	n = sp.chunkPagesAt(k)
	if abs != k<<sp.metaShift || p+n > r.pages || !set.hasRange(p, n) {
		return 0, nil, 0, false
	}
	l := sp.lock(abs)
	l.RLock()
	defer l.RUnlock()
	ch := sp.chunkAt(k)
	switch {
	case r.unmapped.Load():
		return 0, nil, 0, false
	case ch == nil:
		return n, zeroRule, 0, true
	case ch.per != nil:
		return 0, nil, 0, false
	}
	return n, ch.rule, ch.base, true
}

// setChunk gives the n pages of the metadata chunk at page p of r rule u
// at generation base, as StoreGenerated gives each: r's explicit bytes
// there are dropped, and the dirty logs, stale digests and recorded sums
// marked.
func (r *Region) setChunk(p, n int, u *pageRule, base uint32) error {
	sp := r.sp
	abs := r.first + p
	l := sp.lock(abs)
	l.Lock()
	if r.unmapped.Load() {
		l.Unlock()
		return ErrUnmapped
	}
	r.storeRangeLocked(p, n, u, base)
	l.Unlock()
	return nil
}

// movedTo returns the rule that gives r's pages the classes u gives the
// same pages of src: a mix's classes are keyed by page indices relative to
// the region that filled them.
func (u *pageRule) movedTo(src, r *Region) *pageRule {
	if u.mix == nil || src.first == r.first {
		return u
	}
	v := *u
	v.keyOff += r.first - src.first
	return &v
}

// count adds the classes of absolute pages [abs, abs+n) under u to counts.
func (u *pageRule) count(abs, n int, counts *[ClassExplicit]int64) {
	if u.mix == nil {
		counts[u.class] += int64(n)
		return
	}
	for q := abs; q < abs+n; q++ {
		counts[u.classOf(q)]++
	}
}
