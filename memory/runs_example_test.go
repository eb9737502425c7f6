package memory_test

import (
	"fmt"

	"github.com/vgpusim/vgpusim/memory"
)

// A suspended guest is its runs and its pages of explicit bytes: a region
// filled as a training job fills one is a few runs whatever its size, and
// restored into a region of the same seed it reads the same.
func ExampleRegion_AppendRuns() {
	cfg := memory.Config{SizeBytes: 16 << 20, Kind: memory.Synthetic, Seed: 7}
	guest, _ := memory.New(cfg)
	_ = guest.FillMix(0, guest.Pages(), memory.MixRealistic())
	_ = guest.Fill(1000, 24, memory.ClassText)
	_, _ = guest.WriteAt([]byte("hello"), 3000*4096)

	runs, _ := guest.AppendRuns(nil, 0, guest.Pages())
	for _, r := range runs {
		switch {
		case r.Mix.Parts != nil:
			fmt.Printf("[%d, +%d) mix of %d parts from key %d, gen %d\n", r.First, r.Pages, len(r.Mix.Parts), r.MixKey, r.Gen)
		case r.Class == memory.ClassExplicit:
			fmt.Printf("[%d, +%d) explicit\n", r.First, r.Pages)
		default:
			fmt.Printf("[%d, +%d) %v, gen %d\n", r.First, r.Pages, r.Class, r.Gen)
		}
	}

	resumed, _ := memory.New(cfg)
	_ = resumed.StoreRuns(runs)
	page := make([]byte, guest.PageSize())
	for _, r := range runs {
		for p := r.First; r.Class == memory.ClassExplicit && p < r.First+r.Pages; p++ {
			st, _ := guest.ReadPage(p, page)
			_ = resumed.StorePage(p, page, st.Gen)
		}
	}
	d, _ := memory.FirstDiff(guest, resumed)
	fmt.Println("first difference:", d)
	// Output:
	// [0, +1000) mix of 4 parts from key 0, gen 1
	// [1000, +24) text, gen 2
	// [1024, +1976) mix of 4 parts from key 1024, gen 1
	// [3000, +1) explicit
	// [3001, +1095) mix of 4 parts from key 3001, gen 1
	// first difference: -1
}
