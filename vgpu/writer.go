package vgpu

import (
	"fmt"
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

// errNoRegion is the error of a workload driven through an Env without a
// VM, which gives it no region to write.
var errNoRegion = fmt.Errorf("%w: no region to write", ErrWorkload)

func (s span) pages(r *memory.Region) (first, n int) {
	ps := int64(r.PageSize())
	return int(s.off / ps), int(s.size / ps)
}

// fill writes every page of the span once.
func (s span) fill(r *memory.Region) error {
	if r == nil {
		return errNoRegion
	}
	first, n := s.pages(r)
	if n == 0 {
		return nil
	}
	return r.FillMix(first, n, s.mix)
}

// layout hands out consecutive page-aligned spans of a region.
type layout struct {
	next, limit, page int64
	what              string
}

// fbLayout returns the layout of the usable framebuffer of env's vGPU 0,
// the one every vGPU of the VM shares (they are all of one type).
func fbLayout(env *Env) (layout, error) {
	usable, err := env.UsableFramebufferBytes(0)
	if err != nil {
		return layout{}, err
	}
	fb, err := env.Framebuffer(0)
	if err != nil {
		return layout{}, err
	}
	return layout{limit: usable, page: int64(fb.PageSize()), what: "framebuffer of " + env.VMID()}, nil
}

// ramLayout returns the layout of env's guest memory after the guest OS
// footprint.
func ramLayout(env *Env) (layout, error) {
	ram := env.RAM()
	if ram == nil {
		return layout{}, errNoRegion
	}
	return layout{next: env.RAMWorkloadBase(), limit: ram.Size(), page: int64(ram.PageSize()), what: "guest memory of " + env.VMID()}, nil
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

// dirtier is a workload's background dirtying of one span: a
// memory.Pattern over the span's pages (nil for an empty span, which
// writes nothing), and the rate the workload was configured with, which a
// throttle scales. The pattern is made on the VM the workload starts on
// and moved, with each advance, to the region the Env hands out, so that
// the writes follow the workload to another VM, random state and all.
type dirtier struct {
	p    *memory.Pattern
	rate int64 // configured, before any throttle
}

// newDirtier returns a dirtier of span s of region r, writing with kind
// (zero means memory.Uniform) at rate bytes per second, its page choices
// drawn from seed.
func newDirtier(r *memory.Region, s span, kind memory.PatternKind, rate int64, seed uint64) (dirtier, error) {
	if r == nil {
		return dirtier{}, errNoRegion
	}
	if kind == 0 {
		kind = memory.Uniform
	}
	if kind > memory.Rewrite {
		return dirtier{}, configError("unknown dirty pattern %v", kind)
	}
	if rate < 0 || rate > memory.MaxRateBytesPerSec {
		return dirtier{}, configError("dirty rate %d bytes/s outside [0, %g]", rate, float64(memory.MaxRateBytesPerSec))
	}
	first, n := s.pages(r)
	if n == 0 {
		return dirtier{rate: rate}, nil
	}
	p, err := memory.NewPattern(r, memory.PatternConfig{Kind: kind, RateBytesPerSec: rate, FirstPage: first, Pages: n, Mix: s.mix, Seed: seed})
	if err != nil {
		return dirtier{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return dirtier{p: p, rate: rate}, nil
}

// throttle sets the rate to 1-f of the configured one.
func (d *dirtier) throttle(f float64) {
	if d.p != nil {
		// At most the configured rate, which NewPattern accepted: SetRate
		// cannot fail.
		_ = d.p.SetRate(int64(float64(float64(d.rate) * (1 - f))))
	}
}

// advance writes the pages of r due for dt.
func (d *dirtier) advance(r *memory.Region, dt time.Duration) error {
	if d.p == nil || dt <= 0 {
		return nil
	}
	if r == nil {
		return errNoRegion
	}
	if err := d.p.Move(r); err != nil {
		return fmt.Errorf("%w: %w", ErrWorkload, err)
	}
	if _, err := d.p.Advance(dt); err != nil {
		return fmt.Errorf("%w: %v of dirtying: %w", ErrWorkload, dt, err)
	}
	return nil
}

// written returns the pages written so far.
func (d *dirtier) written() int64 {
	if d.p == nil {
		return 0
	}
	return d.p.Written()
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
	if r == nil {
		return errNoRegion
	}
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
	// In runs, at most two (the ring wraps once): a fill of a run costs a
	// Synthetic region a step a chunk of pages, not a step a page.
	for due > 0 {
		k := min(int(due), pages-s.cursor)
		if err := r.FillMix(first+s.cursor, k, s.span.mix); err != nil {
			return err
		}
		due -= int64(k)
		s.cursor = (s.cursor + k) % pages
	}
	return nil
}
