package memory

// metaChunkShift is log2 of the pages whose class and generation one
// metaChunk keeps: 512 pages, 2 MiB of 4 KiB pages, the pages of a sparse
// chunk. A chunk costs 24 bytes while its pages follow one rule, so the
// metadata of a 64 GiB guest filled in large runs is a few megabytes, not
// the 80 MiB that five bytes a page would be.
const metaChunkShift = 9

// pageRule gives every page of a run its class: one class, or the class a
// mix assigns each page for the seed and key of the region that filled it.
// A rule is never changed once made, so chunks share it.
type pageRule struct {
	class  Class
	mix    *mixPicker // nil: every page is class; else the mix, bound to the filling region's seed
	keyOff int        // the key of absolute page p is p - keyOff, for mix
}

// classRules are the rules of a single class, one for each, so that a fill
// of one class allocates no rule.
var classRules = func() (rs [ClassExplicit]pageRule) {
	for c := range rs {
		rs[c].class = Class(c)
	}
	return rs
}()

// zeroRule is the rule of a chunk in its initial state.
var zeroRule = &classRules[ClassZero]

// ruleOf returns the rule that fills pages with class c, or, if m has
// parts, with the class m assigns each for a region of seed whose first
// page is first.
func ruleOf(c Class, m Mix, seed uint64, first int) *pageRule {
	if m.Parts == nil {
		return &classRules[c]
	}
	k := m.picker(seed)
	return &pageRule{mix: &k, keyOff: first}
}

func (u *pageRule) classOf(abs int) Class {
	if u.mix == nil {
		return u.class
	}
	return u.mix.classOf(uint64(abs - u.keyOff))
}

// metaChunk is the class and generation of each of its pages: a page's
// class is the rule's unless the page has its own, and its generation is
// base plus the page's own delta. A fill of the whole chunk is then one
// step whatever the pages held: the rule becomes the fill's, every page's
// own class is dropped, and base goes up by one, which bumps every page's
// generation and keeps their differences. Pages are given their own class
// or delta (per, allocated on the first) only when a page is set alone or
// a fill covers part of the chunk. All pages of a chunk share one lock
// (space.lock), which guards the chunk.
type metaChunk struct {
	rule *pageRule
	base uint32
	per  *chunkPages
}

// chunkPages is what the pages of a chunk hold beyond its rule and base,
// one allocation of 2.5 KiB. Tests that make chunks smaller use the start
// of each array.
type chunkPages struct {
	classes [1 << metaChunkShift]Class  // a page's class plus one, or 0: the rule's
	delta   [1 << metaChunkShift]uint32 // a page's generation minus base, modulo 2^32
}

// newMeta returns the metadata of pages pages, all zero at generation 0.
func newMeta(pages int, shift uint) []metaChunk {
	m := make([]metaChunk, (pages+1<<shift-1)>>shift)
	for i := range m {
		m[i].rule = zeroRule
	}
	return m
}

// chunkOf returns the chunk of absolute page p and p's index in it.
func (sp *space) chunkOf(p int) (*metaChunk, int) {
	return &sp.meta[p>>sp.metaShift], p & (1<<sp.metaShift - 1)
}

// chunkPagesAt returns the number of pages of chunk k: 1<<metaShift but
// for the last chunk of a space whose size is not a multiple.
func (sp *space) chunkPagesAt(k int) int {
	return min(1<<sp.metaShift, sp.pages-k<<sp.metaShift)
}

// state returns the class and generation of page p. The caller holds p's
// lock.
func (sp *space) state(p int) (Class, uint32) {
	ch, i := sp.chunkOf(p)
	if ch.per == nil {
		return ch.rule.classOf(p), ch.base
	}
	c := ch.per.classes[i]
	if c == 0 {
		c = ch.rule.classOf(p) + 1
	}
	return c - 1, ch.base + ch.per.delta[i]
}

// gen returns the generation of page p, without the class state works
// out. The caller holds p's lock.
func (sp *space) gen(p int) uint32 {
	ch, i := sp.chunkOf(p)
	if ch.per == nil {
		return ch.base
	}
	return ch.base + ch.per.delta[i]
}

// setState gives page p class c at generation gen. The caller holds p's
// lock for writing.
func (sp *space) setState(p int, c Class, gen uint32) {
	ch, i := sp.chunkOf(p)
	if ch.per == nil {
		ch.per = new(chunkPages)
	}
	ch.per.classes[i] = c + 1
	ch.per.delta[i] = gen - ch.base
}

// fillMeta gives pages [abs, abs+n) the classes of rule u and bumps their
// generations. The caller holds the locks of every page of the range for
// writing. A chunk the range covers whole costs a step; the pages of a
// chunk it covers in part, a step each.
func (sp *space) fillMeta(abs, n int, u *pageRule) {
	for a := abs; a < abs+n; {
		k := a >> sp.metaShift
		end := min(abs+n, (k+1)<<sp.metaShift)
		if a == k<<sp.metaShift && end-a == sp.chunkPagesAt(k) {
			sp.meta[k].fill(u, sp.chunkPagesAt(k))
		} else {
			for q := a; q < end; q++ {
				sp.setState(q, u.classOf(q), sp.gen(q)+1)
			}
		}
		a = end
	}
}

// fill is fillMeta for the whole chunk, of n pages a chunk. Where every
// page's delta is then the same and none has its own class, the chunk is
// one rule again and frees its pages' metadata.
func (ch *metaChunk) fill(u *pageRule, n int) {
	ch.rule = u
	ch.base++
	if ch.per == nil {
		return
	}
	clear(ch.per.classes[:n])
	d := ch.per.delta[0]
	for _, x := range ch.per.delta[:n] {
		if x != d {
			return
		}
	}
	ch.base += d
	ch.per = nil
}

// resetMeta returns pages [abs, abs+n) to zero at generation 0. The caller
// holds the locks of every page of the range for writing.
func (sp *space) resetMeta(abs, n int) {
	for a := abs; a < abs+n; {
		k := a >> sp.metaShift
		end := min(abs+n, (k+1)<<sp.metaShift)
		if a == k<<sp.metaShift && end-a == sp.chunkPagesAt(k) {
			sp.meta[k] = metaChunk{rule: zeroRule}
		} else {
			for q := a; q < end; q++ {
				sp.setState(q, ClassZero, 0)
			}
		}
		a = end
	}
}

// pristine reports whether every page of chunk k is in its initial state,
// zero at generation 0, without looking at each. The caller holds the
// chunk's lock.
func (sp *space) pristine(k int) bool {
	ch := &sp.meta[k]
	return ch.per == nil && ch.rule == zeroRule && ch.base == 0
}
