package checkpoint

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// propPage fills p with content of class c from seed: zero, text-like,
// noise, long runs, or half zero and half noise, so that a batch holds
// pages the encoder compresses and pages it sends raw.
func propPage(p []byte, c int, seed uint64) {
	x := seed | 1
	next := func() byte {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return byte(x >> 24)
	}
	switch c {
	case 0:
		clear(p)
	case 1:
		words := []string{"kernel ", "tensor ", "page ", "dirty ", "vgpu ", "round "}
		for n := 0; n < len(p); {
			n += copy(p[n:], words[int(next())%len(words)])
		}
	case 2:
		for i := range p {
			p[i] = next()
		}
	case 3:
		b := next()
		for i := range p {
			if i%97 == 0 {
				b = next()
			}
			p[i] = b
		}
	default:
		clear(p[:len(p)/2])
		for i := len(p) / 2; i < len(p); i++ {
			p[i] = next()
		}
	}
}

type propKey struct {
	region uint32
	index  int
}

type propVal struct {
	gen  uint32
	data []byte
}

// TestPropertyCodecs writes random page sets, round by round, to S2 and
// mixed streams, with a level drawn for each batch — through a Writer
// told SetLevel as it goes, or through a BatchEncoder and WriteBatch as a
// copy engine does — and reads them back: the pages delivered are those
// of a naive reference (the last write of each page), every batch names
// the codec its level has, and the streams' counts and digests verify.
func TestPropertyCodecs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ps := rapid.SampledFrom([]int{64, 512, 1024, 4096}).Draw(t, "pageSize")
		nreg := rapid.IntRange(1, 3).Draw(t, "regions")
		var meta Metadata
		for i := range nreg {
			pages := rapid.IntRange(1, 40).Draw(t, fmt.Sprintf("pages%d", i))
			meta.Regions = append(meta.Regions, RegionInfo{ID: uint32(i * 5), SizeBytes: int64(pages * ps), PageSize: ps, Seed: uint64(i)})
		}
		mixed := rapid.Bool().Draw(t, "mixed")
		wopts := WriterOptions{Level: LevelS2, Mixed: mixed, BatchBytes: ps * rapid.IntRange(1, 12).Draw(t, "batchPages"), StreamID: testStreamID}
		levels := []Level{LevelS2, LevelNone}
		if mixed {
			levels = []Level{LevelFastest, LevelDefault, LevelBetter, LevelBest, LevelNone, LevelS2}
		}
		ropts := drawEncryption(t, &wopts)
		var stream bytes.Buffer
		w, err := NewWriter(&stream, meta, wopts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Release()
		enc, err := NewBatchEncoder(LevelS2)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()

		want := map[propKey]propVal{}
		// The codecs of the batches, in order, known when every batch
		// went through WriteBatch.
		var codecs []Codec
		known := true
		rounds := rapid.IntRange(1, 4).Draw(t, "rounds")
		for range rounds {
			type write struct {
				k propKey
				v propVal
			}
			var writes []write
			for range rapid.IntRange(0, 40).Draw(t, "writes") {
				ri := rapid.IntRange(0, nreg-1).Draw(t, "region")
				k := propKey{meta.Regions[ri].ID, rapid.IntRange(0, meta.Regions[ri].Pages()-1).Draw(t, "index")}
				v := propVal{gen: rapid.Uint32Range(0, 1<<20).Draw(t, "gen"), data: make([]byte, ps)}
				propPage(v.data, rapid.IntRange(0, 4).Draw(t, "class"), rapid.Uint64().Draw(t, "seed"))
				writes = append(writes, write{k, v})
			}
			if rapid.Bool().Draw(t, "throughEncoder") {
				// The engine's way: per region, the round's pages in
				// index order (the last write of each), cut into
				// batches of drawn sizes and levels.
				last := map[propKey]propVal{}
				for _, wr := range writes {
					last[wr.k] = wr.v
				}
				keys := slices.SortedFunc(maps.Keys(last), func(a, b propKey) int {
					if a.region != b.region {
						return int(a.region) - int(b.region)
					}
					return a.index - b.index
				})
				for len(keys) > 0 {
					n := rapid.IntRange(1, 8).Draw(t, "batch")
					level := rapid.SampledFrom(levels).Draw(t, "level")
					if err := enc.SetLevel(level); err != nil {
						t.Fatal(err)
					}
					if err := enc.Begin(keys[0].region, ps); err != nil {
						t.Fatal(err)
					}
					i := 0
					for ; i < len(keys) && i < n && keys[i].region == keys[0].region; i++ {
						v := last[keys[i]]
						if err := enc.Add(keys[i].index, v.gen, v.data); err != nil {
							t.Fatal(err)
						}
						want[keys[i]] = v
					}
					keys = keys[i:]
					b, err := enc.Finish()
					if err != nil {
						t.Fatal(err)
					}
					if err := w.WriteBatch(b); err != nil {
						t.Fatal(err)
					}
					codecs = append(codecs, level.Codec())
				}
			} else {
				known = false
				for _, wr := range writes {
					if rapid.IntRange(0, 3).Draw(t, "switch") == 0 {
						if err := w.SetLevel(rapid.SampledFrom(levels).Draw(t, "level")); err != nil {
							t.Fatal(err)
						}
					}
					if err := w.WritePage(wr.k.region, wr.k.index, wr.v.gen, wr.v.data); err != nil {
						t.Fatal(err)
					}
					want[wr.k] = wr.v
				}
			}
			if _, err := w.EndRound(); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}

		rd, err := NewReader(bytes.NewReader(stream.Bytes()), ropts)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		if h := rd.Header(); h.Codec != wopts.codec() || h.Minor != 1 {
			t.Fatalf("header %+v", h)
		}
		got := map[propKey]propVal{}
		var gotCodecs []Codec
		eachBatch(t, rd, func(b *Batch) {
			if !rd.Header().Codec.Allows(b.Codec) {
				t.Fatalf("batch of codec %v in a stream of %v", b.Codec, rd.Header().Codec)
			}
			gotCodecs = append(gotCodecs, b.Codec)
			for i := range b.Len() {
				p := b.Page(i)
				data := p.Data
				if data == nil {
					data = make([]byte, ps)
				}
				got[propKey{b.Region, p.Index}] = propVal{p.Gen, bytes.Clone(data)}
			}
		})
		if len(got) != len(want) {
			t.Fatalf("%d pages delivered, want %d", len(got), len(want))
		}
		for k, v := range want {
			g, ok := got[k]
			if !ok || g.gen != v.gen || !bytes.Equal(g.data, v.data) {
				t.Fatalf("page %d of region %d: generation %d, want %d, or bytes differ", k.index, k.region, g.gen, v.gen)
			}
		}
		if known && !slices.Equal(gotCodecs, codecs) {
			t.Fatalf("batch codecs %v, want %v", gotCodecs, codecs)
		}
	})
}
