package migrate

import (
	"github.com/vgpusim/vgpusim/memory"
)

// Pages is a set of pages a migration will send, by size: what pre-copy
// left dirty when a round arrived (Source.Dirty), or, in Legacy mode, the
// framebuffer in use that the stun moves whole (Source.UsedFramebuffer).
// A driver takes them from its Source and tells the Core (RoundArrived),
// whose switchover rule predicts the stun from them.
type Pages struct {
	// RawBytes is the pages' raw size.
	RawBytes int64
	// KnownRawBytes is the raw size of those whose content is of a
	// generated class, and KnownWireBytes what they will take on the wire,
	// predicted from their classes (WireModel). The rest, pages of
	// explicit bytes, are predicted at the wire ratio of everything
	// pre-copy sent.
	KnownRawBytes, KnownWireBytes int64
}

// wire is the pages' predicted wire size, with num/den the wire ratio
// measured so far for the pages whose class is not known.
func (p Pages) wire(num, den int64) int64 {
	raw := max(p.RawBytes, 0)
	return max(p.KnownWireBytes, 0) + scaleBytes(raw-min(max(p.KnownRawBytes, 0), raw), num, den)
}

// WirePredictor gives the wire size of counts[c] pages of each generated
// class c, of pageSize bytes, as a driver would send them now.
type WirePredictor func(counts *[memory.ClassExplicit]int64, pageSize int) (int64, error)

// add counts the pages of one region, pageSize bytes each, by class.
func (p *Pages) add(counts *[memory.ClassExplicit + 1]int64, pageSize int, predict WirePredictor) error {
	generated := (*[memory.ClassExplicit]int64)(counts[:memory.ClassExplicit])
	known := int64(0)
	for _, k := range generated {
		known += k
	}
	ps := int64(pageSize)
	p.RawBytes += (known + counts[memory.ClassExplicit]) * ps
	if known == 0 {
		return nil
	}
	w, err := predict(generated, pageSize)
	if err != nil {
		return err
	}
	p.KnownRawBytes += known * ps
	p.KnownWireBytes += w
	return nil
}

// Dirty takes stock of the pages logged dirty in the first n regions,
// without collecting them: their raw size, and for those of a generated
// class the wire size predict gives them, region by region. Both drivers
// predict with the class sizes their pages are sent at, so that the
// prediction is the dirty pages' own, not the ratio of what pre-copy
// happened to send before (a guest's dirty RAM is mostly text and zeros,
// while the weights that filled the first round do not compress). It fails
// only if a region cannot be read (a window whose parent was unmapped) or
// predict fails.
func (s *Source) Dirty(n int, predict WirePredictor) (Pages, error) {
	var d Pages
	if !s.ok() || predict == nil {
		return d, errNoSource
	}
	for _, r := range s.regs[:max(min(n, len(s.regs)), 0)] {
		var counts [memory.ClassExplicit + 1]int64
		if _, err := r.DirtyClasses(&counts); err != nil {
			return Pages{}, wrap(ErrSource, err)
		}
		if err := d.add(&counts, r.PageSize(), predict); err != nil {
			return Pages{}, err
		}
	}
	return d, nil
}

// UsedFramebuffer takes stock of the framebuffer in use, which a Legacy
// stun moves whole, as Dirty does of the dirty pages.
func (s *Source) UsedFramebuffer(predict WirePredictor) (Pages, error) {
	if !s.ok() || predict == nil {
		return Pages{}, errNoSource
	}
	return usedPagesOf(s.regs[1:], predict)
}

// usedPagesOf takes stock of the pages in use of regs.
func usedPagesOf(regs []*memory.Region, predict WirePredictor) (Pages, error) {
	var u Pages
	for _, r := range regs {
		var counts [memory.ClassExplicit + 1]int64
		if err := r.UsedClasses(&counts); err != nil {
			return Pages{}, wrap(ErrSource, err)
		}
		if err := u.add(&counts, r.PageSize(), predict); err != nil {
			return Pages{}, err
		}
	}
	return u, nil
}
