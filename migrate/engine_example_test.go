package migrate_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
)

// Encode 64 MiB of guest memory with two workers into a checkpoint
// stream. The stream is the same, byte for byte, whatever the number of
// workers.
func ExampleEngine() {
	ram, _ := memory.New(memory.Config{SizeBytes: 64 << 20, Kind: memory.Dense, Seed: 1})
	_ = ram.FillMix(0, ram.Pages(), memory.MixRealistic())

	streams := map[int][]byte{}
	for _, workers := range []int{1, 2} {
		eng, err := migrate.NewEngine(migrate.EngineConfig{Workers: workers})
		if err != nil {
			fmt.Println(err)
			return
		}
		var wire bytes.Buffer
		meta := checkpoint.Metadata{Regions: []checkpoint.RegionInfo{checkpoint.RegionInfoOf(0, ram)}}
		w, _ := checkpoint.NewWriter(&wire, meta, checkpoint.WriterOptions{BatchBytes: eng.Config().BatchBytes})
		// A nil set copies every page not in its initial state.
		tr, err := eng.Copy(context.Background(), w, ram, 0, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = w.Close()
		_ = w.Release()
		_ = eng.Close()
		streams[workers] = wire.Bytes()
		if workers == 1 {
			fmt.Printf("%d pages, %d of them zero, %d MiB raw\n", tr.Pages, tr.ZeroPages, tr.RawBytes>>20)
		}
	}
	fmt.Println("same stream with 1 and 2 workers:", bytes.Equal(streams[1], streams[2]))
	// Output:
	// 16384 pages, 6645 of them zero, 64 MiB raw
	// same stream with 1 and 2 workers: true
}
