package checkpoint

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// TestSteadyStateAllocations checks that, once warm, writing a batch and
// reading one allocate nothing, for each mix, with and without
// encryption.
func TestSteadyStateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	const pages = 64
	for _, m := range memory.Mixes() {
		for _, enc := range []bool{false, true} {
			t.Run(fmt.Sprintf("mix=%s/encrypted=%v", m.Name, enc), func(t *testing.T) {
				src := newRegion(t, memory.Dense, pages, 4096, 1, m)
				buf := make([]byte, pages*4096)
				if _, err := src.ReadAt(buf, 0); err != nil {
					t.Fatal(err)
				}
				wopts := WriterOptions{BatchBytes: len(buf)}
				ropts := ReaderOptions{}
				if enc {
					wopts.Encryption, wopts.Key = EncryptionRequired, testKey
					ropts.Encryption, ropts.Key = EncryptionRequired, testKey
				}
				var stream bytes.Buffer
				w, err := NewWriter(&stream, Metadata{Regions: []RegionInfo{RegionInfoOf(0, src)}}, wopts)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Release()
				writeOne := func() {
					for p := range pages {
						if err := w.WritePage(0, p, 1, buf[p*4096:(p+1)*4096]); err != nil {
							t.Fatal(err)
						}
					}
					if err := w.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				writeOne()
				stream.Grow(64 * len(buf)) // the sink's growth is not the writer's
				if n := testing.AllocsPerRun(20, writeOne); n != 0 {
					t.Errorf("writing a batch: %v allocations", n)
				}
				fromRegion := func() {
					if err := w.WriteRegion(0, src, nil); err != nil {
						t.Fatal(err)
					}
					if err := w.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				if n := testing.AllocsPerRun(10, fromRegion); n != 0 {
					t.Errorf("writing a region: %v allocations", n)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				rd, err := NewReader(bytes.NewReader(stream.Bytes()), ropts)
				if err != nil {
					t.Fatal(err)
				}
				defer rd.Close()
				readOne := func() {
					if typ, err := rd.Next(); err != nil || typ != RecordPageBatch {
						t.Fatalf("%v %v", typ, err)
					}
				}
				readOne()
				if n := testing.AllocsPerRun(20, readOne); n != 0 {
					t.Errorf("reading a batch: %v allocations", n)
				}
			})
		}
	}
}
