package checkpoint

import (
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// TestLooksIncompressible checks the sampler's verdict on every content
// class over many pages: noise raw, everything else compressed.
func TestLooksIncompressible(t *testing.T) {
	page := make([]byte, 4096)
	for _, c := range []struct {
		class memory.Class
		raw   bool
	}{
		{memory.ClassWeights, true},
		{memory.ClassRandom, true},
		{memory.ClassText, false},
		{memory.ClassActivations, false},
	} {
		wrong := 0
		for p := range 2000 {
			memory.Generate(page, c.class, 77, uint64(p), uint32(p%5))
			if looksIncompressible(page) != c.raw {
				wrong++
			}
		}
		if wrong > 0 {
			t.Errorf("%v: %d of 2000 pages misjudged", c.class, wrong)
		}
	}
	// Repeated bytes and small pages go to zstd.
	for i := range page {
		page[i] = byte(i % 7)
	}
	if looksIncompressible(page) {
		t.Error("a repeating pattern looks incompressible")
	}
	if looksIncompressible(page[:512]) {
		t.Error("a small page is not sent to zstd")
	}
}
