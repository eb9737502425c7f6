package memory

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"time"
)

// PatternKind is the shape of the writes a Pattern makes.
type PatternKind uint8

const (
	// Uniform writes pages chosen uniformly at random.
	Uniform PatternKind = iota + 1
	// HotSet sends nine writes in ten to a hot set, the first tenth of
	// the range (at least one page), chosen uniformly within it; the rest
	// go uniformly to the other pages.
	HotSet
	// Sweep writes the pages in order, wrapping around at the end.
	Sweep
	// Rewrite rewrites the whole range in order, one pass an iteration, as
	// a training step rewrites a model's weights; Iterations counts the
	// passes completed.
	Rewrite
)

func (k PatternKind) String() string {
	switch k {
	case Uniform:
		return "uniform"
	case HotSet:
		return "hotset"
	case Sweep:
		return "sweep"
	case Rewrite:
		return "rewrite"
	}
	return fmt.Sprintf("PatternKind(%d)", uint8(k))
}

// MaxRateBytesPerSec bounds a Pattern's rate: 1 TB/s, above the bandwidth
// of any memory a workload writes (a Tesla P40's framebuffer moves 346
// GB/s), and low enough that one Advance of a realistic interval stays a
// bounded number of page writes.
const MaxRateBytesPerSec = 1e12

// The shape of a HotSet pattern: a tenth of the range, at least one page,
// takes nine writes in ten. Assumption: the 90/10 rule of thumb of
// locality (Hennessy and Patterson, "Computer Architecture: A Quantitative
// Approach", chapter 1, principle of locality: a program spends about 90 %
// of its time in 10 % of its code), applied to the pages a program
// writes, because no published write-locality figure for the modelled
// applications was found.
const (
	hotDivisor = 10 // the hot set is the first 1/hotDivisor of the range
	coldOneIn  = 10 // one write in coldOneIn goes outside the hot set
)

// PatternConfig describes a Pattern.
type PatternConfig struct {
	Kind PatternKind
	// RateBytesPerSec is how many bytes of pages the pattern writes a
	// second of simulated time, at most MaxRateBytesPerSec. Zero writes
	// nothing.
	RateBytesPerSec int64
	// FirstPage and Pages select the range written; Pages zero means to
	// the end of the region.
	FirstPage, Pages int
	// Mix chooses each written page's content class; an empty Mix means
	// MixRealistic. The pattern keeps a copy.
	Mix Mix
	// Seed drives the choice of pages.
	Seed uint64
}

// Pattern writes a range of a Region's pages at a rate over simulated time.
// Advancing it by d writes exactly rate×d worth of pages, carrying the
// fractional page to the next call, so many small steps write the same
// pages as one large step. Move carries it, random state and all, to
// another region, as a workload's writes follow its VM to another host.
// It is not safe for concurrent use; the Region it writes is.
type Pattern struct {
	r       *Region
	cfg     PatternConfig
	rng     *rand.PCG
	hot     int    // pages in the hot set
	carry   uint64 // byte-nanoseconds not yet making up a page
	cursor  int
	written int64
	passes  int64
	batch   []int // pages chosen and not written yet: see advanceEach
}

// NewPattern returns a Pattern over r.
func NewPattern(r *Region, cfg PatternConfig) (*Pattern, error) {
	if r == nil {
		return nil, configError("pattern over a nil region")
	}
	if cfg.Pages == 0 {
		cfg.Pages = r.Pages() - cfg.FirstPage
	}
	if cfg.FirstPage < 0 || cfg.Pages <= 0 || cfg.FirstPage > r.Pages()-cfg.Pages {
		return nil, configError("pattern range [%d, +%d) outside %d pages", cfg.FirstPage, cfg.Pages, r.Pages())
	}
	if cfg.Kind < Uniform || cfg.Kind > Rewrite {
		return nil, configError("unknown pattern %v", cfg.Kind)
	}
	if len(cfg.Mix.Parts) == 0 {
		cfg.Mix = MixRealistic()
	}
	if err := cfg.Mix.Validate(); err != nil {
		return nil, err
	}
	// A copy of the parts, so that a caller changing its Mix afterwards
	// does not change what the pattern writes.
	cfg.Mix.Parts = slices.Clone(cfg.Mix.Parts)
	p := &Pattern{r: r, rng: rand.NewPCG(cfg.Seed, 0x5851f42d4c957f2d), hot: max(cfg.Pages/hotDivisor, 1)}
	p.cfg = cfg
	if err := p.SetRate(cfg.RateBytesPerSec); err != nil {
		return nil, err
	}
	return p, nil
}

// Move makes the pattern write r from the next Advance on, keeping its
// random state, the fractional page it carries, its position and its
// counts, so that its writes go on as if nothing had moved. r must have
// the same page size as the region the pattern was made for, and hold its
// range.
func (p *Pattern) Move(r *Region) error {
	if r == p.r {
		return nil
	}
	if r == nil {
		return configError("pattern moved to a nil region")
	}
	if r.PageSize() != p.r.PageSize() {
		return fmt.Errorf("%w: pattern of %d-byte pages moved to a region of %d-byte pages", ErrPageSize, p.r.PageSize(), r.PageSize())
	}
	if p.cfg.FirstPage+p.cfg.Pages > r.Pages() {
		return configError("pattern range [%d, +%d) outside %d pages", p.cfg.FirstPage, p.cfg.Pages, r.Pages())
	}
	p.r = r
	return nil
}

// SetRate changes the rate from the next Advance on, as a migration
// throttles a workload; the fractional page carried so far is kept.
func (p *Pattern) SetRate(bytesPerSec int64) error {
	if bytesPerSec < 0 || bytesPerSec > MaxRateBytesPerSec {
		return fmt.Errorf("%w: %d bytes/s", ErrRate, bytesPerSec)
	}
	p.cfg.RateBytesPerSec = bytesPerSec
	return nil
}

// Rate returns the rate in bytes per second.
func (p *Pattern) Rate() int64 { return p.cfg.RateBytesPerSec }

// Written returns the number of page writes made so far.
func (p *Pattern) Written() int64 { return p.written }

// Iterations returns the number of whole passes over the range completed
// by a Sweep or Rewrite pattern.
func (p *Pattern) Iterations() int64 { return p.passes }

// Due returns how many pages an Advance by d would write, without writing.
func (p *Pattern) Due(d time.Duration) (int64, error) {
	n, _, err := p.due(d)
	return n, err
}

// due computes (carry + rate×d) / (pageSize × 1e9) exactly in 128 bits.
func (p *Pattern) due(d time.Duration) (int64, uint64, error) {
	if d < 0 {
		return 0, 0, fmt.Errorf("%w: negative interval %v", ErrRate, d)
	}
	div := uint64(p.r.PageSize()) * uint64(time.Second)
	hi, lo := bits.Mul64(uint64(p.cfg.RateBytesPerSec), uint64(d))
	lo, c := bits.Add64(lo, p.carry, 0)
	hi += c
	if hi >= div {
		return 0, 0, fmt.Errorf("%w: %v at %d bytes/s", ErrRate, d, p.cfg.RateBytesPerSec)
	}
	q, rem := bits.Div64(hi, lo, div)
	if q > 1<<62 {
		return 0, 0, fmt.Errorf("%w: %v at %d bytes/s", ErrRate, d, p.cfg.RateBytesPerSec)
	}
	return int64(q), rem, nil
}

// Advance writes the pages due for d of simulated time and returns how many
// it wrote. The absent pages it writes (see Region.SetAbsent) are landed
// first; if one cannot be, Advance stops with an *AbsentError, having
// written the pages due before it.
func (p *Pattern) Advance(d time.Duration) (int64, error) {
	n, rem, err := p.due(d)
	if err != nil {
		return 0, err
	}
	if p.cfg.Kind == Sweep || p.cfg.Kind == Rewrite {
		return p.advanceRuns(n, rem)
	}
	return p.advanceEach(n, rem)
}

// patternBatchPages is the most pages a Uniform or HotSet pattern chooses
// before it writes them.
const patternBatchPages = 4096

// advanceEach writes the n pages due of a Uniform or HotSet pattern, in
// batches of the pages it chose, each written as fillEach writes them.
func (p *Pattern) advanceEach(n int64, rem uint64) (int64, error) {
	for done := int64(0); done < n; {
		k := int(min(n-done, patternBatchPages))
		p.batch = p.batch[:0]
		for range k {
			p.batch = append(p.batch, p.cfg.FirstPage+p.nextPage())
		}
		if n, err := p.r.fillEach(p.batch, p.cfg.Mix); err != nil {
			p.written += int64(n)
			return done + int64(n), err
		}
		done += int64(k)
		p.written += int64(k)
	}
	p.carry = rem
	return n, nil
}

// advanceRuns writes the n pages due of a Sweep or Rewrite pattern as
// runs, each a fill, which a Synthetic region makes in one step a chunk
// of pages: what nextPage would choose one page at a time.
func (p *Pattern) advanceRuns(n int64, rem uint64) (int64, error) {
	for done := int64(0); done < n; {
		k := int(min(n-done, int64(p.cfg.Pages-p.cursor)))
		if n, err := p.r.fill(p.cfg.FirstPage+p.cursor, k, 0, p.cfg.Mix); err != nil {
			p.written += int64(n)
			p.cursor += n // where the next write goes, as page by page
			return done + int64(n), err
		}
		done += int64(k)
		p.written += int64(k)
		if p.cursor += k; p.cursor == p.cfg.Pages {
			p.cursor = 0
			p.passes++
		}
	}
	p.carry = rem
	return n, nil
}

// nextPage returns the next page, relative to the range, to write.
func (p *Pattern) nextPage() int {
	n := p.cfg.Pages
	switch p.cfg.Kind {
	case Uniform:
		return int(uniform(p.rng.Uint64(), uint64(n)))
	case HotSet:
		if p.hot == n || p.rng.Uint64()%coldOneIn != 0 {
			return int(uniform(p.rng.Uint64(), uint64(p.hot)))
		}
		return p.hot + int(uniform(p.rng.Uint64(), uint64(n-p.hot)))
	default: // Sweep, Rewrite
		page := p.cursor
		p.cursor++
		if p.cursor == n {
			p.cursor = 0
			p.passes++
		}
		return page
	}
}

// uniform maps a uniform 64-bit draw onto [0, n) by multiply-high, which is
// unbiased enough for page choice and needs no division.
func uniform(x, n uint64) uint64 {
	hi, _ := bits.Mul64(x, n)
	return hi
}
