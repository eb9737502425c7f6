package memory

import (
	"errors"
	"testing"
	"time"
)

// TestPatternStateRestores checks that a pattern restored from its state,
// onto another region, writes from then on exactly what the original
// writes: the same pages, as many, with the same counts.
func TestPatternStateRestores(t *testing.T) {
	for _, kind := range []PatternKind{Uniform, HotSet, Sweep, Rewrite} {
		cfg := PatternConfig{Kind: kind, RateBytesPerSec: 4096 * 333, FirstPage: 10, Pages: 500, Seed: 8, Mix: MixText()}
		orig := mustNew(t, Config{SizeBytes: 600 * 4096, Kind: Synthetic, Seed: 2})
		p, err := NewPattern(orig, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Advance(1234567 * time.Microsecond); err != nil {
			t.Fatal(err)
		}
		st := p.State()
		st.Config.Mix.Parts[0].Weight = 7 // the state is a copy
		st = p.State()
		copyRegion := mustNew(t, Config{SizeBytes: 600 * 4096, Kind: Synthetic, Seed: 2})
		q, err := RestorePattern(copyRegion, st)
		if err != nil {
			t.Fatalf("%v: %v", kind, err)
		}
		fresh := mustNew(t, Config{SizeBytes: 600 * 4096, Kind: Synthetic, Seed: 2})
		if err := p.Move(fresh); err != nil {
			t.Fatal(err)
		}
		for _, d := range []time.Duration{7654321 * time.Microsecond, 333 * time.Millisecond} {
			a, err := p.Advance(d)
			if err != nil {
				t.Fatal(err)
			}
			b, err := q.Advance(d)
			if err != nil {
				t.Fatal(err)
			}
			if a != b {
				t.Fatalf("%v: original wrote %d pages, restored %d", kind, a, b)
			}
		}
		if p.Written() != q.Written() || p.Iterations() != q.Iterations() {
			t.Fatalf("%v: original %d/%d, restored %d/%d", kind, p.Written(), p.Iterations(), q.Written(), q.Iterations())
		}
		if d, err := FirstDiff(fresh, copyRegion); err != nil || d != -1 {
			t.Fatalf("%v: regions differ at page %d (%v)", kind, d, err)
		}
	}
}

// TestRestorePatternRefusesBadState checks each field's bound.
func TestRestorePatternRefusesBadState(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 64 * 4096, Kind: Synthetic})
	p, err := NewPattern(r, PatternConfig{Kind: Sweep, RateBytesPerSec: 4096, FirstPage: 8, Pages: 32})
	if err != nil {
		t.Fatal(err)
	}
	good := p.State()
	for _, c := range []struct {
		name string
		edit func(*PatternState)
		want error
	}{
		{"no random state", func(s *PatternState) { s.RNG = nil }, ErrConfig},
		{"short random state", func(s *PatternState) { s.RNG = s.RNG[:5] }, ErrConfig},
		{"carry of a page", func(s *PatternState) { s.CarryByteNS = 4096 * uint64(time.Second) }, ErrRate},
		{"cursor past the range", func(s *PatternState) { s.Cursor = 32 }, ErrConfig},
		{"negative cursor", func(s *PatternState) { s.Cursor = -1 }, ErrConfig},
		{"negative count", func(s *PatternState) { s.Written = -1 }, ErrConfig},
		{"range past the region", func(s *PatternState) { s.Config.Pages = 57 }, ErrConfig},
		{"rate too high", func(s *PatternState) { s.Config.RateBytesPerSec = MaxRateBytesPerSec + 1 }, ErrRate},
	} {
		s := good
		s.RNG = append([]byte(nil), good.RNG...)
		c.edit(&s)
		if _, err := RestorePattern(r, s); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := RestorePattern(r, good); err != nil {
		t.Errorf("good state: %v", err)
	}
}
