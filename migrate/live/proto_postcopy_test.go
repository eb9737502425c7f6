package live

import (
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
)

// TestOwedChunksRoundTrip (rapid): the list of the pages that follow, cut
// into bitmap messages for any regions (empty ones, ones that span several
// messages) and any pages, reads back at the destination as the same
// sets, page for page against a naive reference, with the count the
// header announces; a message taken out of its order, dropped, or with a
// bit set past its region's end is refused.
func TestOwedChunksRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sizes := rapid.SliceOfN(rapid.IntRange(0, 3*8*owedChunkBits), 1, 4).Draw(t, "pages")
		sets := make([]*memory.PageSet, len(sizes))
		want := make([]map[int]bool, len(sizes))
		for i, n := range sizes {
			sets[i], want[i] = memory.NewPageSet(n), map[int]bool{}
			if n == 0 {
				continue
			}
			for _, p := range rapid.SliceOfN(rapid.IntRange(0, n-1), 0, 64).Draw(t, "owed") {
				sets[i].Add(p)
				want[i][p] = true
			}
		}
		chunks, pages := owedChunks(sets)
		var total int64
		for _, w := range want {
			total += int64(len(w))
		}
		if pages != total {
			t.Fatalf("owedChunks counted %d pages, the sets hold %d", pages, total)
		}
		rd := newOwedReader(sizes)
		for _, c := range chunks {
			if err := rd.add(c.encode()); err != nil {
				t.Fatalf("chunk of region %d from %d: %v", c.Region, c.First, err)
			}
		}
		if err := rd.done(pages); err != nil {
			t.Fatal(err)
		}
		for i, n := range sizes {
			for p := range n {
				if rd.sets[i].Has(p) != want[i][p] {
					t.Fatalf("region %d page %d: read %v, sent %v", i, p, rd.sets[i].Has(p), want[i][p])
				}
			}
		}
		if len(chunks) == 0 {
			return
		}
		// A message out of its place, one dropped, or a bit past the end.
		k := rapid.IntRange(0, len(chunks)-1).Draw(t, "chunk")
		bad := newOwedReader(sizes)
		var err error
		switch rapid.IntRange(0, 2).Draw(t, "mutation") {
		case 0:
			for i, c := range chunks {
				if i == k {
					continue
				}
				if err = bad.add(c.encode()); err != nil {
					break
				}
			}
			if err == nil {
				err = bad.done(pages)
			}
		case 1:
			c := chunks[k]
			if k+1 < len(chunks) {
				c = chunks[k+1]
			} else if k > 0 {
				c = chunks[k-1]
			} else {
				c.First++
			}
			for _, prev := range chunks[:k] {
				if err = bad.add(prev.encode()); err != nil {
					t.Fatalf("a good chunk: %v", err)
				}
			}
			err = bad.add(c.encode())
		case 2:
			c := chunks[len(chunks)-1]
			end := sizes[c.Region] - c.First
			if end%8 == 0 {
				// No spare bit in the last byte: a byte too many instead.
				c.Bits = append(append([]byte(nil), c.Bits...), 1)
			} else {
				c.Bits = append([]byte(nil), c.Bits...)
				c.Bits[len(c.Bits)-1] |= 1 << (end % 8)
			}
			for _, prev := range chunks[:len(chunks)-1] {
				if err = bad.add(prev.encode()); err != nil {
					t.Fatalf("a good chunk: %v", err)
				}
			}
			err = bad.add(c.encode())
		}
		if !errors.Is(err, migrate.ErrStream) {
			t.Fatalf("a mutated list: %v, want ErrStream", err)
		}
	})
}
