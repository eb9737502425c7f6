package memory

import (
	"errors"
	"testing"
)

// A nil page set or region given to a method that needs one is refused
// with an error wrapping ErrConfig, or, for CollectDirty, collects nothing;
// nothing panics and nothing changes.
func TestNilArguments(t *testing.T) {
	r, err := New(Config{SizeBytes: 16 << 10, PageSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Fill(1, 2, ClassText); err != nil {
		t.Fatal(err)
	}
	if n := r.CollectDirty(nil); n != 0 || r.DirtyCount() != 2 {
		t.Errorf("CollectDirty(nil) = %d, %d pages still dirty; want 0 and 2", n, r.DirtyCount())
	}
	if err := r.UsedPages(nil); !errors.Is(err, ErrConfig) {
		t.Errorf("UsedPages(nil): %v", err)
	}
	for _, c := range [][2]*Region{{r, nil}, {nil, r}, {nil, nil}} {
		if _, err := FirstDiff(c[0], c[1]); !errors.Is(err, ErrConfig) {
			t.Errorf("FirstDiff with a nil region: %v", err)
		}
	}
	if _, err := NewPattern(nil, PatternConfig{Pages: 1}); !errors.Is(err, ErrConfig) {
		t.Errorf("NewPattern(nil): %v", err)
	}
	p, err := NewPattern(r, PatternConfig{Kind: Uniform, RateBytesPerSec: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Move(nil); !errors.Is(err, ErrConfig) {
		t.Errorf("Move(nil): %v", err)
	}
}
