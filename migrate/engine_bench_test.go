package migrate

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

// benchRegionBytes is the size of the region the copy benchmarks move.
const benchRegionBytes = 1 << 30

// benchMemory holds the one 1 GiB Dense region the benchmarks copy,
// filled with one mix at a time, and its bytes in a flat slice for the
// baselines. A region per mix would take 5 GiB; refilling this one when
// the mix changes costs a few seconds, outside the timers, and -count
// reruns of a mix reuse it.
var benchMemory struct {
	r       *memory.Region
	all     *memory.PageSet // every page of r
	mix     string          // the mix r holds
	flat    []byte          // r's bytes, when flatMix is mix
	flatMix string
}

// benchRegion returns the benchmark region filled with mix m, and the
// set of all its pages.
func benchRegion(b *testing.B, m memory.Mix) (*memory.Region, *memory.PageSet) {
	b.Helper()
	bm := &benchMemory
	if bm.r == nil {
		r, err := memory.New(memory.Config{SizeBytes: benchRegionBytes, Kind: memory.Dense, Seed: 1})
		must(b, err)
		bm.r, bm.all = r, memory.NewPageSet(r.Pages())
		for p := range r.Pages() {
			bm.all.Add(p)
		}
	}
	if bm.mix != m.Name {
		must(b, bm.r.FillMix(0, bm.r.Pages(), m))
		bm.mix = m.Name
	}
	return bm.r, bm.all
}

// benchBytes returns the bytes of the benchmark region filled with m.
func benchBytes(b *testing.B, m memory.Mix) []byte {
	b.Helper()
	r, _ := benchRegion(b, m)
	bm := &benchMemory
	if bm.flatMix != m.Name {
		if bm.flat == nil {
			bm.flat = make([]byte, benchRegionBytes)
		}
		_, err := r.ReadAt(bm.flat, 0)
		must(b, err)
		bm.flatMix = m.Name
	}
	return bm.flat
}

// benchEngines are the engines of BenchmarkCopyEngine by worker count,
// each with its Writer and the mix it was warmed on. They are kept from
// run to run because warming one — a whole copy, so that every slot has
// grown its buffers for the mix's largest batches and allocs/op shows the
// steady state — costs as much as a run.
var benchEngines = map[int]*benchEngine{}

type benchEngine struct {
	e    *Engine
	w    *checkpoint.Writer
	warm string
}

// warmEngine returns the engine of workers workers, warmed on r filled
// with mix m. Its Writer writes to io.Discard and is never reset, which
// would allocate: it takes batch after batch, as a long stream would.
func warmEngine(b *testing.B, workers int, r *memory.Region, all *memory.PageSet, m memory.Mix) *benchEngine {
	b.Helper()
	be := benchEngines[workers]
	if be == nil {
		e, err := NewEngine(EngineConfig{Workers: workers})
		must(b, err)
		w, err := checkpoint.NewWriter(io.Discard, checkpoint.Metadata{Regions: []checkpoint.RegionInfo{checkpoint.RegionInfoOf(0, r)}},
			checkpoint.WriterOptions{BatchBytes: e.Config().BatchBytes})
		must(b, err)
		be = &benchEngine{e: e, w: w}
		benchEngines[workers] = be
	}
	if be.warm != m.Name {
		_, err := be.e.Copy(context.Background(), be.w, r, 0, all)
		must(b, err)
		be.warm = m.Name
	}
	return be
}

// BenchmarkCopyEngine streams every page of a 1 GiB Dense region of 4 KiB
// pages, filled with each standard mix, through a checkpoint.Writer to
// io.Discard, with 1 and 2 workers.
func BenchmarkCopyEngine(b *testing.B) {
	for _, m := range memory.Mixes() {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("mix=%s/workers=%d", m.Name, workers), func(b *testing.B) {
				r, all := benchRegion(b, m)
				be := warmEngine(b, workers, r, all, m)
				b.SetBytes(benchRegionBytes)
				b.ReportAllocs()
				var wire, raw int64
				for b.Loop() {
					tr, err := be.e.Copy(context.Background(), be.w, r, 0, all)
					if err != nil {
						b.Fatal(err)
					}
					wire += tr.WireBytes
					raw += tr.RawBytes
				}
				b.ReportMetric(float64(wire)/float64(raw), "wire/raw")
			})
		}
	}
}

// BenchmarkBaseline measures what the copy engine is held to on the same
// bytes, on one core: op=copy is plain copy() of the 1 GiB of page bytes,
// held in a []byte (read once from the region filled with the realistic
// mix), 1 MiB at a time into a reused 1 MiB buffer; op=zstd is klauspost
// zstd's EncodeAll of the same bytes for each mix, in batches of
// checkpoint.DefaultBatchBytes, with the options checkpoint's BatchEncoder
// uses at LevelFastest; op=tcp is raw 1 MiB writes over a TCP loopback
// connection to a reader that discards them, the live path's limit.
func BenchmarkBaseline(b *testing.B) {
	const chunk = checkpoint.DefaultBatchBytes
	b.Run("op=copy", func(b *testing.B) {
		src := benchBytes(b, memory.MixRealistic())
		dst := make([]byte, chunk)
		b.SetBytes(benchRegionBytes)
		b.ReportAllocs()
		for b.Loop() {
			for off := 0; off < len(src); off += chunk {
				copy(dst, src[off:off+chunk])
			}
		}
	})
	for _, m := range memory.Mixes() {
		b.Run("op=zstd/mix="+m.Name, func(b *testing.B) {
			src := benchBytes(b, m)
			enc, err := zstd.NewWriter(nil,
				zstd.WithEncoderLevel(zstd.SpeedFastest),
				zstd.WithEncoderConcurrency(1),
				zstd.WithWindowSize(1<<20),
				zstd.WithSingleSegment(true),
				zstd.WithEncoderCRC(false),
			)
			must(b, err)
			defer enc.Close()
			dst := enc.EncodeAll(src[:chunk], make([]byte, 0, chunk+chunk>>10+64))
			b.SetBytes(benchRegionBytes)
			b.ReportAllocs()
			var wire, raw int64
			for b.Loop() {
				for off := 0; off < len(src); off += chunk {
					dst = enc.EncodeAll(src[off:off+chunk], dst[:0])
					wire += int64(len(dst))
				}
				raw += int64(len(src))
			}
			b.ReportMetric(float64(wire)/float64(raw), "wire/raw")
		})
	}
	b.Run("op=tcp", benchmarkTCP)
}
