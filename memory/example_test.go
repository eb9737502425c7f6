package memory_test

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// A guest's RAM is written, its dirty pages collected into a reused set,
// and written again: only the pages written since the collect are dirty.
func Example() {
	ram, err := memory.New(memory.Config{SizeBytes: 1 << 20, Kind: memory.Sparse, Seed: 1})
	if err != nil {
		panic(err)
	}
	if _, err := ram.WriteAt([]byte("hello, page 3"), 3*4096+100); err != nil {
		panic(err)
	}
	if err := ram.Fill(10, 2, memory.ClassText); err != nil {
		panic(err)
	}
	var dirty memory.PageSet
	n := ram.CollectDirty(&dirty)
	fmt.Println(n, dirty.AppendTo(nil))

	_ = ram.Fill(11, 1, memory.ClassWeights)
	fmt.Println(ram.CollectDirty(&dirty), dirty.AppendTo(nil))
	st, _ := ram.PageState(11)
	fmt.Println(st.Gen, st.Class)
	// Output:
	// 3 [3 10 11]
	// 1 [11]
	// 2 weights
}

// A GPU framebuffer is partitioned into windows, one a vGPU. A window
// cannot reach outside itself, and the next window mapped over the same
// pages reads zero.
func ExampleRegion_Map() {
	fb, _ := memory.New(memory.Config{SizeBytes: 8 << 20, PageSize: 64 << 10, Kind: memory.Synthetic})
	a, _ := fb.Map(0, 64, 100)  // pages 0-63
	b, _ := fb.Map(64, 64, 200) // pages 64-127
	_, err := a.WriteAt(make([]byte, 2), a.Size()-1)
	fmt.Println(err)

	_, _ = a.WriteAt([]byte("secret"), 0)
	_ = a.Unmap()
	next, _ := fb.Map(0, 64, 300)
	buf := make([]byte, 6)
	_, _ = next.ReadAt(buf, 0)
	fmt.Printf("%q %d\n", buf, b.Pages())
	// Output:
	// memory: write [4194303, +2) outside region of 4194304
	// "\x00\x00\x00\x00\x00\x00" 64
}

// A Pattern dirties a region at a rate over simulated time; small steps
// add up to exactly what one large step writes.
func ExamplePattern() {
	fb, _ := memory.New(memory.Config{SizeBytes: 1 << 30, Kind: memory.Synthetic, Seed: 7})
	p, _ := memory.NewPattern(fb, memory.PatternConfig{
		Kind:            memory.HotSet,
		RateBytesPerSec: 100 << 20, // 100 MiB/s
		Mix:             memory.MixWeights(),
		Seed:            1,
	})
	for range 10 {
		_, _ = p.Advance(10 * time.Millisecond)
	}
	fmt.Println(p.Written(), fb.DirtyCount() <= 2560)
	// Output:
	// 2560 true
}
