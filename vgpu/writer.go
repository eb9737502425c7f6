package vgpu

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// span is a page-aligned byte range of a region whose pages hold one mix
// of content. Every write to a page of a span gives it the class the mix
// assigns to that page, so the page's content after any sequence of writes
// depends only on how many there were, not on their order.
type span struct {
	off, size int64
	mix       memory.Mix
}

func (s span) pages(r *memory.Region) (first, n int) {
	ps := int64(r.PageSize())
	return int(s.off / ps), int(s.size / ps)
}

// fill writes every page of the span once.
func (s span) fill(r *memory.Region) error {
	first, n := s.pages(r)
	if n == 0 {
		return nil
	}
	return r.FillMix(first, n, s.mix)
}

func (s span) write(r *memory.Region, page int) error {
	return r.Fill(page, 1, s.mix.ClassOf(r.Seed(), uint64(page)))
}

// layout hands out consecutive page-aligned spans of a region.
type layout struct {
	next, limit, page int64
	what              string
}

func (l *layout) take(size int64, mix memory.Mix, what string) (span, error) {
	size = (size + l.page - 1) / l.page * l.page
	if size < 0 || size > l.limit-l.next {
		return span{}, fmt.Errorf("%w: %s: %s of %d bytes does not fit (%d of %d bytes free)",
			ErrWorkload, l.what, what, size, max(l.limit-l.next, 0), l.limit)
	}
	s := span{off: l.next, size: size, mix: mix}
	l.next += size
	return s, nil
}

// firstOfFootprint is the size of the first of two spans that share a
// footprint: what the second, rounded up to whole pages, leaves of it. The
// two then fit in the footprint rounded up to a page, so a workload sized
// to a profile's whole usable framebuffer fits it at any page size.
func firstOfFootprint(footprint, second, page int64) int64 {
	return max(footprint-(second+page-1)/page*page, 0)
}

// DirtyPattern is how a workload's background writes choose pages.
type DirtyPattern uint8

// The patterns of background dirtying.
const (
	// DirtyUniform writes pages chosen uniformly at random.
	DirtyUniform DirtyPattern = iota
	// DirtyHotSet sends nine writes in ten to the first tenth of the
	// range, the working set of most programs.
	DirtyHotSet
	// DirtySweep writes the range in order, wrapping around.
	DirtySweep
)

func (p DirtyPattern) String() string {
	switch p {
	case DirtyUniform:
		return "uniform"
	case DirtyHotSet:
		return "hot set"
	case DirtySweep:
		return "sweep"
	}
	return fmt.Sprintf("DirtyPattern(%d)", uint8(p))
}

// maxDirtyRate bounds a dirty rate (1 TB/s) so the page arithmetic stays
// in range.
const maxDirtyRate = 1e12

// dirtier writes a span at a rate in bytes per second of simulated time,
// carrying the fractional page in exact integer arithmetic, so that many
// short advances write exactly what one long advance does. It holds its
// own random source and no region: the caller passes the region each time,
// which lets it move with its workload to another VM.
type dirtier struct {
	span     span
	pattern  DirtyPattern
	baseRate int64
	rate     int64
	rng      *rand.PCG
	carry    uint64 // byte-nanoseconds short of a page
	cursor   int
	written  int64
}

func newDirtier(s span, p DirtyPattern, rate int64, seed uint64) (dirtier, error) {
	if rate < 0 || rate > maxDirtyRate {
		return dirtier{}, configError("dirty rate %d bytes/s outside [0, %g]", rate, maxDirtyRate)
	}
	if p > DirtySweep {
		return dirtier{}, configError("unknown dirty pattern %v", p)
	}
	return dirtier{span: s, pattern: p, baseRate: rate, rate: rate, rng: rand.NewPCG(seed, 0x5851f42d4c957f2d)}, nil
}

// throttle sets the rate to 1-f of the configured one.
func (d *dirtier) throttle(f float64) {
	d.rate = int64(float64(float64(d.baseRate) * (1 - f)))
}

// advance writes the pages due for dt.
func (d *dirtier) advance(r *memory.Region, dt time.Duration) error {
	first, n := d.span.pages(r)
	if n == 0 || d.rate == 0 || dt <= 0 {
		return nil
	}
	div := uint64(r.PageSize()) * uint64(time.Second)
	hi, lo := bits.Mul64(uint64(d.rate), uint64(dt))
	lo, c := bits.Add64(lo, d.carry, 0)
	hi += c
	if hi >= div {
		return fmt.Errorf("%w: %v of dirtying at %d bytes/s", ErrWorkload, dt, d.rate)
	}
	q, rem := bits.Div64(hi, lo, div)
	d.carry = rem
	for range q {
		if err := d.span.write(r, first+d.next(n)); err != nil {
			return err
		}
		d.written++
	}
	return nil
}

func (d *dirtier) next(n int) int {
	switch d.pattern {
	case DirtyHotSet:
		hot := max(n/10, 1)
		if hot == n || d.rng.Uint64()%10 != 0 {
			return int(pick(d.rng.Uint64(), uint64(hot)))
		}
		return hot + int(pick(d.rng.Uint64(), uint64(n-hot)))
	case DirtySweep:
		p := d.cursor
		d.cursor = (d.cursor + 1) % n
		return p
	}
	return int(pick(d.rng.Uint64(), uint64(n)))
}

// pick maps a uniform 64-bit draw onto [0, n).
func pick(x, n uint64) uint64 {
	hi, _ := bits.Mul64(x, n)
	return hi
}

// sweeper writes byte counts into a span in order, wrapping around, as a
// ring of activation or request buffers is reused; the part of a page not
// yet written carries over.
type sweeper struct {
	span   span
	cursor int
	carry  int64
}

// write writes n more bytes; one call rewrites the span at most once.
func (s *sweeper) write(r *memory.Region, n int64) error {
	first, pages := s.span.pages(r)
	if pages == 0 || n <= 0 {
		return nil
	}
	ps := int64(r.PageSize())
	total := s.carry + n
	due := total / ps
	s.carry = total % ps
	if due > int64(pages) {
		due, s.carry = int64(pages), 0
	}
	for range due {
		if err := s.span.write(r, first+s.cursor); err != nil {
			return err
		}
		s.cursor = (s.cursor + 1) % pages
	}
	return nil
}
