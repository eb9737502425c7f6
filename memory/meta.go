package memory

import (
	"slices"
	"sync/atomic"
)

// metaChunkShift is log2 of the pages whose class and generation one
// metaChunk keeps: 512 pages, 2 MiB of 4 KiB pages, the pages of a sparse
// chunk. A chunk costs 24 bytes while its pages follow one rule, so the
// metadata of a 64 GiB guest filled in large runs is a few megabytes, not
// the 80 MiB that five bytes a page would be.
const metaChunkShift = 9

// metaGroupShift is log2 of the chunks of a metaGroup: 64, 128 MiB of
// 4 KiB pages. A group is made by the first write to one of its pages, so
// the part of a guest's memory never written costs eight bytes a group.
const metaGroupShift = 6

// metaGroup is the chunks of 1<<metaGroupShift consecutive chunks.
type metaGroup [1 << metaGroupShift]metaChunk

// pageRule gives every page of a run its class: one class, or the class a
// mix assigns each page for the seed and key of the region that filled it.
// A rule is never changed once made, so chunks share it.
type pageRule struct {
	class  Class
	mix    *mixPicker // nil: every page is class; else the mix, bound to the filling region's seed
	seed   uint64     // the seed mix is bound to, which a run of its pages names (AppendRuns)
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
	// The rule keeps a copy of the parts: the pages' classes are worked
	// out when they are read, and the caller may change its Mix after.
	m.Parts = slices.Clone(m.Parts)
	k := m.picker(seed)
	return &pageRule{mix: &k, seed: seed, keyOff: first}
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

// chunkPages is what the pages of a chunk hold beyond its rule and base:
// each page's generation minus base, modulo 2^32, in a byte while every
// page's fits one (random dirtying leaves pages a few writes apart), else
// in four; and, once a page's class differs from the rule's, each page's
// own class. A chunk of pages rewritten at random with the rule's classes
// costs half a kilobyte, not two and a half. Tests that make chunks
// smaller use the start of each array.
type chunkPages struct {
	narrow  [1 << metaChunkShift]uint8
	wide    *[1 << metaChunkShift]uint32 // if not nil, the deltas, and narrow is unused
	classes *[1 << metaChunkShift]Class  // a page's class plus one, or 0: the rule's; nil: all the rule's; see also rules
	// rules are the mixes pages of the chunk follow other than its rule's,
	// which a page's entry in classes names from numClasses+1 on: a
	// region restored from runs (StoreRuns) whose chunks do not line up
	// with its source's holds two mixes in one chunk. See meta_rules.go.
	rules []*pageRule
}

func (pp *chunkPages) delta(i int) uint32 {
	if pp.wide != nil {
		return pp.wide[i]
	}
	return uint32(pp.narrow[i])
}

func (pp *chunkPages) setDelta(i int, d uint32) {
	if pp.wide == nil {
		if d <= 0xff {
			pp.narrow[i] = uint8(d)
			return
		}
		pp.wide = new([1 << metaChunkShift]uint32)
		for j, x := range pp.narrow {
			pp.wide[j] = uint32(x)
		}
	}
	pp.wide[i] = d
}

// sameDelta reports whether the first n pages have one delta, and which.
func (pp *chunkPages) sameDelta(n int) (uint32, bool) {
	d := pp.delta(0)
	for i := 1; i < n; i++ {
		if pp.delta(i) != d {
			return 0, false
		}
	}
	return d, true
}

// newMeta returns the metadata of pages pages in chunks of 1<<shift
// pages, all zero at generation 0: a slot for each group, none made.
func newMeta(pages int, shift uint) []atomic.Pointer[metaGroup] {
	chunks := (pages + 1<<shift - 1) >> shift
	return make([]atomic.Pointer[metaGroup], (chunks+1<<metaGroupShift-1)>>metaGroupShift)
}

// chunkAt returns chunk k, or nil if no page of its group was ever
// written: every page of it is then zero at generation 0. The caller holds
// the chunk's lock.
func (sp *space) chunkAt(k int) *metaChunk {
	g := sp.meta[k>>metaGroupShift].Load()
	if g == nil {
		return nil
	}
	return &g[k&(1<<metaGroupShift-1)]
}

// writableChunk returns chunk k, making its group if it has none. The
// caller holds the chunk's lock for writing; the chunks of a group have
// different locks, so a group is installed with compare-and-swap, its
// chunks in their initial state before anyone can see it.
func (sp *space) writableChunk(k int) *metaChunk {
	slot := &sp.meta[k>>metaGroupShift]
	g := slot.Load()
	if g == nil {
		g = new(metaGroup)
		for i := range g {
			g[i].rule = zeroRule
		}
		if !slot.CompareAndSwap(nil, g) {
			g = slot.Load()
		}
	}
	return &g[k&(1<<metaGroupShift-1)]
}

// chunkPagesAt returns the number of pages of chunk k: 1<<metaShift but
// for the last chunk of a space whose size is not a multiple.
func (sp *space) chunkPagesAt(k int) int {
	return min(1<<sp.metaShift, sp.pages-k<<sp.metaShift)
}

// state returns the class and generation of page p. The caller holds p's
// lock.
func (sp *space) state(p int) (Class, uint32) {
	ch, i := sp.chunkAt(p>>sp.metaShift), p&(1<<sp.metaShift-1)
	if ch == nil {
		return ClassZero, 0
	}
	if ch.per == nil {
		return ch.rule.classOf(p), ch.base
	}
	gen := ch.base + ch.per.delta(i)
	if cs := ch.per.classes; cs != nil && cs[i] != 0 {
		if cs[i] > numClasses {
			return ch.per.rules[cs[i]-numClasses-1].classOf(p), gen
		}
		return cs[i] - 1, gen
	}
	return ch.rule.classOf(p), gen
}

// gen returns the generation of page p, without the class state works
// out. The caller holds p's lock.
func (sp *space) gen(p int) uint32 {
	ch, i := sp.chunkAt(p>>sp.metaShift), p&(1<<sp.metaShift-1)
	if ch == nil {
		return 0
	}
	if ch.per == nil {
		return ch.base
	}
	return ch.base + ch.per.delta(i)
}

// setState gives page p class c at generation gen. The caller holds p's
// lock for writing.
func (sp *space) setState(p int, c Class, gen uint32) {
	ch, i := sp.writableChunk(p>>sp.metaShift), p&(1<<sp.metaShift-1)
	if ch.per == nil {
		ch.per = new(chunkPages)
	}
	ch.per.setDelta(i, gen-ch.base)
	switch cs := ch.per.classes; {
	case cs != nil:
		cs[i] = c + 1
	case c != ch.rule.classOf(p):
		ch.per.classes = new([1 << metaChunkShift]Class)
		ch.per.classes[i] = c + 1
	}
}

// rewriteLocked gives page t the class rule u assigns it at its
// generation plus one, as setLocked does. Where t's chunk follows u
// already and the space stores no generated bytes, as a page rewritten
// again and again by one pattern's mix does, the page only takes u again
// and its delta goes up: no class is worked out, which for a mix is a
// hash a page. The page lock is held for writing.
func (sp *space) rewriteLocked(t target, u *pageRule) {
	ch := sp.writableChunk(t.abs >> sp.metaShift)
	if ch.rule != u || sp.storesGenerated() {
		sp.setLocked(t, u.classOf(t.abs), sp.gen(t.abs)+1)
		return
	}
	sp.back.release(t.abs) // bytes of its own it held, as putGenerated drops them
	i := t.abs & (1<<sp.metaShift - 1)
	if ch.per == nil {
		ch.per = new(chunkPages)
	}
	ch.per.setDelta(i, ch.per.delta(i)+1)
	if cs := ch.per.classes; cs != nil {
		cs[i] = 0 // the chunk's rule
	}
	sp.changed(t.abs)
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
			sp.writableChunk(k).fill(u, sp.chunkPagesAt(k))
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
	ch.per.classes, ch.per.rules = nil, nil
	if d, ok := ch.per.sameDelta(n); ok {
		ch.base += d
		ch.per = nil
	}
}

// resetMeta returns pages [abs, abs+n) to zero at generation 0. The caller
// holds the locks of every page of the range for writing.
func (sp *space) resetMeta(abs, n int) {
	for a := abs; a < abs+n; {
		k := a >> sp.metaShift
		end := min(abs+n, (k+1)<<sp.metaShift)
		if a == k<<sp.metaShift && end-a == sp.chunkPagesAt(k) {
			if ch := sp.chunkAt(k); ch != nil {
				*ch = metaChunk{rule: zeroRule}
			}
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
	ch := sp.chunkAt(k)
	return ch == nil || ch.per == nil && ch.rule == zeroRule && ch.base == 0
}
