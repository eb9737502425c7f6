package checkpoint

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// TestSteadyStateAllocations checks that, once warm, writing a batch and
// reading one allocate nothing, for each mix and codec, with and without
// encryption; a mixed stream's batches take the three codecs in turn.
func TestSteadyStateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	codecs := []struct {
		name string
		opts WriterOptions
	}{{"zstd", WriterOptions{}}, {"s2", WriterOptions{Level: LevelS2}}, {"mixed", WriterOptions{Mixed: true}}}
	for _, m := range memory.Mixes() {
		for _, c := range codecs {
			for _, enc := range []bool{false, true} {
				if enc && c.name != "zstd" {
					continue // encryption does not depend on the codec
				}
				t.Run(fmt.Sprintf("mix=%s/codec=%s/encrypted=%v", m.Name, c.name, enc), func(t *testing.T) {
					allocsOfOneBatch(t, m, c.opts, enc)
				})
			}
		}
	}
}

// allocsOfOneBatch writes and reads batches of 64 pages of mix m with
// wopts, warm, and fails the test on any allocation.
func allocsOfOneBatch(t *testing.T, m memory.Mix, wopts WriterOptions, enc bool) {
	const pages = 64
	src := newRegion(t, memory.Dense, pages, 4096, 1, m)
	buf := make([]byte, pages*4096)
	if _, err := src.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	wopts.BatchBytes = len(buf)
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
	turn := 0
	writeOne := func() {
		if wopts.Mixed {
			if err := w.SetLevel([]Level{LevelS2, LevelFastest, LevelNone}[turn%3]); err != nil {
				t.Fatal(err)
			}
			turn++
		}
		for p := range pages {
			if err := w.WritePage(0, p, 1, buf[p*4096:(p+1)*4096]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // every level of a mixed stream
		writeOne()
	}
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
	for range 3 {
		readOne()
	}
	if n := testing.AllocsPerRun(20, readOne); n != 0 {
		t.Errorf("reading a batch: %v allocations", n)
	}
}
