package memory

import "slices"

// Run is a run of consecutive pages of a region that hold generated
// content at one generation: pages of one class, or pages whose classes a
// mix assigns them by consecutive keys, as a fill leaves them. A region's
// runs (AppendRuns) are what it holds besides its explicit bytes, in a
// few bytes a run whatever its length, so that a suspended VM of many
// gigabytes filled in large runs is written as kilobytes and restored
// (StoreRuns) in a step a metadata chunk.
//
// A run carries classes and generations, not seeds: a page's bytes are
// generated with the seed of the region or window that holds it (see
// Generate), so the runs of a window restored into a window of the same
// seed, anywhere in any root, give the same bytes.
type Run struct {
	// First and Pages are the run's pages, relative to the region.
	First, Pages int
	// Class is the class of every page of the run, unless Mix has parts
	// (Class is then ClassZero). ClassExplicit means the pages hold bytes
	// of their own (written with WriteAt or StorePage and not recognized
	// as generated content), which a run does not carry: the caller
	// copies them (ReadPage, StorePage). Gen is then 0 and meaningless.
	Class Class
	// Mix, if it has parts, gives page First+i the class
	// Mix.ClassOf(MixSeed, MixKey+uint64(i)), as a region filled with the
	// mix gives its page First+i: MixSeed is the seed of the region that
	// filled them, and MixKey the index in it of page First. Its Name is
	// empty in the runs AppendRuns returns.
	Mix     Mix
	MixSeed uint64
	MixKey  uint64
	// Gen is the generation of every page of the run.
	Gen uint32
}

// MaxRunMixParts bounds the parts of a run's mix that StoreRuns accepts:
// a mix's classes are worked out part by part for every page read, so a
// run must not bring thousands.
const MaxRunMixParts = 64

// AppendRuns appends to dst the runs of pages [first, first+pages) of r,
// in order, covering every page of the range exactly once, and returns
// the extended slice. Adjacent pages are one run where they can be: the
// same class, or the same mix (equal parts and seed) at consecutive keys,
// at the same generation; pages of explicit bytes are runs of
// ClassExplicit whatever their generations. So a region filled in large
// runs gives a handful of runs whatever its size, read in time
// proportional to its metadata chunks (512 pages each), not its pages.
//
// The runs are canonical: a region restored from them (StoreRuns, and the
// explicit pages copied with StorePage) gives the same runs back, whatever
// its offset in its root, the size of its chunks or its backing — but for
// explicit pages holding generated content, which a Synthetic region
// stores as their class (see StorePage). Dense and Sparse regions have
// runs too, of their pages' classes and generations; their fills set
// pages one by one, so they name a mix only where StoreRuns gave it.
//
// Each chunk is read under its lock, so a run is never half of one write,
// but a range spanning chunks is not read at one instant: call it on a
// region that does not change meanwhile (a stopped VM) to get one state.
// The runs of one call with the same mix share one Parts slice, the
// caller's: r keeps no reference to it. An error (ErrOutOfRange,
// ErrUnmapped) returns dst as it was.
func (r *Region) AppendRuns(dst []Run, first, pages int) ([]Run, error) {
	if err := r.checkPages("runs", first, pages); err != nil {
		return dst, err
	}
	sp := r.sp
	b := runBuilder{r: r, runs: dst, from: len(dst)}
	for p := first; p < first+pages; {
		abs := r.first + p
		k := abs >> sp.metaShift
		end := min(first+pages, (k+1)<<sp.metaShift-r.first)
		l := sp.lock(abs)
		l.RLock()
		if r.unmapped.Load() {
			l.RUnlock()
			return dst, ErrUnmapped
		}
		switch ch := sp.chunkAt(k); {
		case ch == nil:
			b.add(p, end-p, zeroRule, 0)
		case ch.per == nil:
			b.add(p, end-p, ch.rule, ch.base)
		default:
			for q := p; q < end; q++ {
				i := (r.first + q) & (1<<sp.metaShift - 1)
				b.add(q, 1, ch.ruleAt(i), ch.base+ch.per.delta(i))
			}
		}
		l.RUnlock()
		p = end
	}
	return b.runs, nil
}

// runBuilder merges pages into the runs AppendRuns appends.
type runBuilder struct {
	r    *Region
	runs []Run
	from int // the first run of this call: earlier ones are not extended
	// rule and parts are the last mix rule met and the copy of its parts
	// handed out, which the runs of an equal mix share.
	rule  *pageRule
	parts []MixPart
}

// add appends pages [p, p+n) of the region, which follow rule u (nil:
// explicit bytes) at generation gen, extending the last run where the
// pages continue it.
func (b *runBuilder) add(p, n int, u *pageRule, gen uint32) {
	if len(b.runs) > b.from {
		if last := &b.runs[len(b.runs)-1]; last.First+last.Pages == p && b.continues(last, p, u, gen) {
			last.Pages += n
			return
		}
	}
	run := Run{First: p, Pages: n, Gen: gen}
	switch {
	case u == nil:
		run.Class, run.Gen = ClassExplicit, 0
	case u.mix == nil:
		run.Class = u.class
	default:
		run.Mix = Mix{Parts: b.partsOf(u)}
		run.MixSeed, run.MixKey = u.seed, b.key(u, p)
	}
	b.runs = append(b.runs, run)
}

// continues reports whether page p, following u at gen, is the next page
// of last.
func (b *runBuilder) continues(last *Run, p int, u *pageRule, gen uint32) bool {
	switch {
	case u == nil:
		return last.Class == ClassExplicit && last.Mix.Parts == nil
	case last.Gen != gen:
		return false
	case u.mix == nil:
		return last.Mix.Parts == nil && last.Class == u.class
	}
	return last.Mix.Parts != nil && last.MixSeed == u.seed && last.MixKey+uint64(last.Pages) == b.key(u, p) &&
		(u == b.rule || slices.Equal(last.Mix.Parts, u.mix.parts))
}

// key returns the mix key of page p of the region under mix rule u.
func (b *runBuilder) key(u *pageRule, p int) uint64 { return uint64(b.r.first + p - u.keyOff) }

// partsOf returns the caller's copy of the parts of mix rule u, shared
// with the runs before of an equal mix.
func (b *runBuilder) partsOf(u *pageRule) []MixPart {
	if u != b.rule && !slices.Equal(b.parts, u.mix.parts) {
		b.parts = slices.Clone(u.mix.parts)
	}
	b.rule = u
	return b.parts
}
