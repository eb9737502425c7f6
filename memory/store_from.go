package memory

// StoreGeneratedFrom stores in r, for each page p of set that src holds as
// generated content, src's class and generation of p, as StoreGenerated
// does, counting the pages of each class in counts; the pages src holds as
// explicit bytes it adds to explicit instead, for the caller to copy. It is
// what a destination that regenerates what it receives does with a round,
// as a Model-fidelity migration's does. src and r must have the same
// number of pages of the same size; set and explicit hold pages of them.
//
// Where r is Synthetic and a metadata chunk of src whose pages all follow
// one rule is in set whole, the chunk is stored in one step, as a fill
// stores it: a round of a guest filled in large runs costs microseconds a
// gigabyte. r's other pages are stored one by one.
//
// On an error some pages may be stored and counted already.
func (r *Region) StoreGeneratedFrom(src *Region, set *PageSet, counts *[ClassExplicit]int64, explicit *PageSet) error {
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
	var from, to *pageRule // the last rule of src moved to r
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

// chunksWhole reports whether a metadata chunk of src can be stored into r
// in one step: r is Synthetic, a window or a root without windows (whose
// pages all take r's seed, as a fill's do), src is one too, in another
// space, and their chunks are alike and start at the same pages of each.
func (r *Region) chunksWhole(src *Region) bool {
	alone := func(x *Region) bool { return x.window || !x.sp.hasWindows() }
	return r.sp.kind == Synthetic && r.sp != src.sp && alone(r) && alone(src) &&
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
	ch := &sp.meta[k]
	if ch.per != nil || r.unmapped.Load() {
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
	sp.back.releaseRange(abs, abs+n)
	sp.meta[abs>>sp.metaShift] = metaChunk{rule: u, base: base}
	sp.root.log.markRange(abs, n)
	if r.window {
		r.log.markRange(p, n)
	}
	// Under the lock: a sum recorded for the bytes the pages held must
	// not be read for the bytes they hold now.
	sp.changedRange(abs, n)
	l.Unlock()
	return nil
}

// movedTo returns the rule that gives r's pages the classes u gives the
// same pages of src: a mix's classes are keyed by page indices relative to
// the region that filled them.
func (u *pageRule) movedTo(src, r *Region) *pageRule {
	if u.mix.Parts == nil || src.first == r.first {
		return u
	}
	v := *u
	v.keyOff += r.first - src.first
	return &v
}

// count adds the classes of absolute pages [abs, abs+n) under u to counts.
func (u *pageRule) count(abs, n int, counts *[ClassExplicit]int64) {
	if u.mix.Parts == nil {
		counts[u.class] += int64(n)
		return
	}
	for q := abs; q < abs+n; q++ {
		counts[u.classOf(q)]++
	}
}
