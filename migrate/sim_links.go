package migrate

import (
	"fmt"
	"slices"
)

// SetLinkCapacity changes the line rate of the link named name from now
// on, as congestion or a NIC renegotiating its speed would: the flows on
// it are shared out again at once, the bytes they moved until now at the
// old rate. The link keeps its efficiency, latency and identity: a
// migration started later with the Link as first declared still joins it
// at the new rate (though its stun estimate, made at the start, assumes
// the rate declared). It fails, wrapping ErrConfig, for a link the Sim does
// not know or a rate outside a Link's range (a link that carries nothing
// is FailLink's FaultLinkStall).
func (s *Sim) SetLinkCapacity(name string, bitsPerSec int64) error {
	i := s.linkIndex(name)
	if i < 0 {
		return fmt.Errorf("%w: no link %q", ErrConfig, name)
	}
	ls := s.links[i]
	l := ls.link
	l.BandwidthBitsPerSec = bitsPerSec
	if err := l.validate(); err != nil {
		return err
	}
	if l.GoodputBytesPerSec() < 1 {
		return fmt.Errorf("%w: link %q at %d bit/s carries no byte a second", ErrConfig, name, bitsPerSec)
	}
	ls.share.capacity = l.GoodputBytesPerSec()
	s.net.allocate()
	ls.bitsPerSec = bitsPerSec
	return nil
}

// Links returns the links the Sim knows, in the order they were first
// used, each with its line rate now.
func (s *Sim) Links() []Link {
	out := make([]Link, len(s.links))
	for i, ls := range s.links {
		out[i] = ls.link
		out[i].BandwidthBitsPerSec = ls.bitsPerSec
	}
	return out
}

// RemoveLink forgets the link named name: a migration started later with a
// link of that name declares it anew. It refuses, wrapping ErrBusy, a link
// a migration under way uses; forgetting a link the Sim does not know does
// nothing.
func (s *Sim) RemoveLink(name string) error {
	i := s.linkIndex(name)
	if i < 0 {
		return nil
	}
	if n := len(s.links[i].share.flows); n > 0 {
		return fmt.Errorf("%w: link %q carries %d migrations", ErrBusy, name, n)
	}
	s.links = slices.Delete(s.links, i, i+1)
	return nil
}

func (s *Sim) linkIndex(name string) int {
	return slices.IndexFunc(s.links, func(ls *linkState) bool { return ls.link.Name == name })
}
