package memory

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// PatternState is everything a Pattern holds beyond the region it writes:
// its configuration (at its current rate), its random state, the
// fractional page it carries, its position and its counts. State returns
// it and RestorePattern makes a Pattern of it, so a suspended workload's
// writes go on, after a resume, exactly as if it had never stopped.
type PatternState struct {
	Config PatternConfig
	// RNG is the random source, as rand.PCG's MarshalBinary gives it.
	RNG []byte
	// CarryByteNS is the byte-nanoseconds not yet making up a page, less
	// than a page's size times a second.
	CarryByteNS uint64
	// Cursor is the next page, relative to the range, that a Sweep or
	// Rewrite pattern writes.
	Cursor int
	// Written and Passes are what Written and Iterations return.
	Written, Passes int64
}

// State returns the pattern's state.
func (p *Pattern) State() PatternState {
	rng, _ := p.rng.MarshalBinary() // a PCG's marshalling cannot fail
	cfg := p.cfg
	cfg.Mix.Parts = slices.Clone(cfg.Mix.Parts)
	return PatternState{Config: cfg, RNG: rng, CarryByteNS: p.carry, Cursor: p.cursor,
		Written: p.written, Passes: p.passes}
}

// RestorePattern returns a Pattern over r in state s, as State returned
// it. It checks s as NewPattern checks a configuration, and that the
// random state, the carry, the cursor and the counts are ones a Pattern
// could hold; an error wraps ErrConfig or ErrRate.
func RestorePattern(r *Region, s PatternState) (*Pattern, error) {
	p, err := NewPattern(r, s.Config)
	if err != nil {
		return nil, err
	}
	rng := new(rand.PCG)
	if err := rng.UnmarshalBinary(s.RNG); err != nil {
		return nil, configError("pattern random state: %v", err)
	}
	switch {
	case s.CarryByteNS >= uint64(r.PageSize())*uint64(time.Second):
		return nil, fmt.Errorf("%w: pattern carry of %d byte-ns, a page is %d bytes", ErrRate, s.CarryByteNS, r.PageSize())
	case s.Cursor < 0 || s.Cursor >= p.cfg.Pages:
		return nil, configError("pattern cursor %d outside its %d pages", s.Cursor, p.cfg.Pages)
	case s.Written < 0 || s.Passes < 0:
		return nil, configError("pattern counts %d written, %d passes", s.Written, s.Passes)
	}
	p.rng, p.carry, p.cursor, p.written, p.passes = rng, s.CarryByteNS, s.Cursor, s.Written, s.Passes
	return p, nil
}
