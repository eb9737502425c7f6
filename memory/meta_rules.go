package memory

import "slices"

// A page's rule is what runs of pages (AppendRuns, StoreRuns) are made
// of: the rule whose class the page has, its chunk's or one of its own. A
// page follows its chunk's rule unless chunkPages.classes names another:
// a class plus one (the rule of that class, or, for ClassExplicit, none:
// the page holds bytes of its own), or, from numClasses+1 on, one of the
// chunk's other rules (chunkPages.rules). Fills and stores of one page
// leave a page a class of its own where it differs from the chunk's rule;
// StoreRuns gives each page exactly the rule of its run, so that the runs
// of a restored region are those it was restored from, wherever its
// chunks start.

// maxChunkRules is the most rules a chunk holds besides its own: as many
// as a byte of classes has codes above the classes. A chunk stored from
// runs of more mixes than that gives the pages of the others their own
// classes, which reads the same but names no mix.
const maxChunkRules = 1<<8 - 1 - int(numClasses)

// sameMix reports whether u and v give every page the same class by the
// same mix: equal parts, seed and key offset.
func (u *pageRule) sameMix(v *pageRule) bool {
	return u == v || u.mix != nil && v.mix != nil && u.seed == v.seed && u.keyOff == v.keyOff &&
		slices.Equal(u.mix.parts, v.mix.parts)
}

// ruleAt returns the rule page i of ch follows, nil for a page holding
// bytes of its own. The caller holds the chunk's lock.
func (ch *metaChunk) ruleAt(i int) *pageRule {
	if ch.per == nil || ch.per.classes == nil {
		return ch.rule
	}
	switch v := ch.per.classes[i]; {
	case v == 0:
		return ch.rule
	case v > numClasses:
		return ch.per.rules[v-numClasses-1]
	case v-1 == ClassExplicit:
		return nil
	default:
		return &classRules[v-1]
	}
}

// ruleCode returns the entry of classes of a page of ch that follows rule
// u: 0 for the chunk's rule, a class plus one for the rule of a class,
// and the code of one of the chunk's other rules for another mix, which
// it adds if need be; false if the chunk holds maxChunkRules other rules
// already.
func (ch *metaChunk) ruleCode(u *pageRule) (Class, bool) {
	switch {
	case u.sameMix(ch.rule):
		return 0, true
	case u.mix == nil:
		return u.class + 1, true
	}
	pp := ch.per
	for j, v := range pp.rules {
		if v.sameMix(u) {
			return numClasses + 1 + Class(j), true
		}
	}
	if len(pp.rules) == maxChunkRules {
		return 0, false
	}
	pp.rules = append(pp.rules, u)
	return numClasses + Class(len(pp.rules)), true
}

// setRuleRange gives pages [abs, abs+n), all of one chunk, the classes of
// rule u at generation gen, so that each follows u (see ruleAt). A range
// of the whole chunk is one step, as a fill's. The caller holds the
// chunk's lock for writing.
func (sp *space) setRuleRange(abs, n int, u *pageRule, gen uint32) {
	k := abs >> sp.metaShift
	if abs == k<<sp.metaShift && n == sp.chunkPagesAt(k) {
		sp.setChunkMeta(k, u, gen)
		return
	}
	if sp.chunkAt(k) == nil && u == zeroRule && gen == 0 {
		return // pages in their initial state, in a group never written
	}
	ch := sp.writableChunk(k)
	if ch.per == nil {
		if gen == ch.base && u.sameMix(ch.rule) {
			return // they follow the chunk's rule at its generation already
		}
		ch.per = new(chunkPages)
	}
	code, ok := ch.ruleCode(u)
	if (code != 0 || !ok) && ch.per.classes == nil {
		ch.per.classes = new([1 << metaChunkShift]Class)
	}
	for q := abs; q < abs+n; q++ {
		i := q & (1<<sp.metaShift - 1)
		ch.per.setDelta(i, gen-ch.base)
		if cs := ch.per.classes; cs != nil {
			cs[i] = code
			if !ok {
				cs[i] = u.classOf(q) + 1
			}
		}
	}
}

// setChunkMeta makes chunk k follow rule u at generation base, every page
// alike. The caller holds the chunk's lock for writing.
func (sp *space) setChunkMeta(k int, u *pageRule, base uint32) {
	// Pages in their initial state stored into a group never written
	// leave it unmade.
	if u != zeroRule || base != 0 || sp.chunkAt(k) != nil {
		*sp.writableChunk(k) = metaChunk{rule: u, base: base}
	}
}
