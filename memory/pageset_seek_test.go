package memory

import (
	"testing"

	"pgregory.net/rapid"
)

// seekByNext is the reference for Seek: n steps of Next.
func seekByNext(s *PageSet, p, n int) int {
	q := s.Next(p)
	for ; q >= 0 && n > 0; n-- {
		q = s.Next(q + 1)
	}
	return q
}

func TestPageSetSeekMatchesNext(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pages := rapid.IntRange(0, 700).Draw(t, "pages")
		s := NewPageSet(pages)
		density := rapid.IntRange(0, 100).Draw(t, "density")
		for p := range pages {
			if rapid.IntRange(0, 99).Draw(t, "bit") < density {
				s.Add(p)
			}
		}
		for range 20 {
			p := rapid.IntRange(-3, pages+3).Draw(t, "p")
			n := rapid.IntRange(-1, pages+2).Draw(t, "n")
			if got, want := s.Seek(p, n), seekByNext(s, p, max(n, 0)); got != want {
				t.Fatalf("Seek(%d, %d) = %d, want %d", p, n, got, want)
			}
		}
	})
}

func TestPageSetSeekEdges(t *testing.T) {
	var empty PageSet
	if got := empty.Seek(0, 0); got != -1 {
		t.Errorf("empty set: Seek(0, 0) = %d, want -1", got)
	}
	full := NewPageSet(130)
	for p := range 130 {
		full.Add(p)
	}
	for _, c := range []struct{ p, n, want int }{
		{0, 0, 0}, {0, 63, 63}, {0, 64, 64}, {0, 129, 129}, {0, 130, -1},
		{5, 60, 65}, {127, 2, 129}, {127, 3, -1}, {130, 0, -1},
	} {
		if got := full.Seek(c.p, c.n); got != c.want {
			t.Errorf("full set: Seek(%d, %d) = %d, want %d", c.p, c.n, got, c.want)
		}
	}
	// Every position of the n-th bit within one word.
	var one PageSet
	one.Reset(64)
	for p := 0; p < 64; p += 2 {
		one.Add(p)
	}
	for n := range 32 {
		if got := one.Seek(0, n); got != 2*n {
			t.Errorf("even pages: Seek(0, %d) = %d, want %d", n, got, 2*n)
		}
	}
}

func TestPageSetSeekAllocatesNothing(t *testing.T) {
	s := NewPageSet(1 << 16)
	for p := 0; p < 1<<16; p += 3 {
		s.Add(p)
	}
	if n := testing.AllocsPerRun(10, func() { s.Seek(17, 5000) }); n != 0 {
		t.Errorf("Seek: %v allocations", n)
	}
}

func BenchmarkPageSetSeek(b *testing.B) {
	s := NewPageSet(1 << 18)
	for p := range 1 << 18 {
		s.Add(p)
	}
	for b.Loop() {
		for p := 0; p >= 0; p = s.Seek(p, 256) {
		}
	}
}
