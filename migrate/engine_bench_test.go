package migrate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
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
	// floor is op=floor's layout of r's pages in flat, when floorMix is
	// mix; it and r's bytes take turns in flat.
	floor    []floorBatch
	floorMix string
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
		bm.floorMix = ""
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
	return warmIn(b, benchEngines, workers, r, all, m.Name)
}

// warmIn returns engines' engine of workers workers, made if need be,
// warmed by a whole copy of r when it last copied other content than
// warm names, so that allocs/op shows the steady state.
func warmIn(b *testing.B, engines map[int]*benchEngine, workers int, r *memory.Region, all *memory.PageSet, warm string) *benchEngine {
	b.Helper()
	be := engines[workers]
	if be == nil {
		e, err := NewEngine(EngineConfig{Workers: workers})
		must(b, err)
		w, err := checkpoint.NewWriter(io.Discard, checkpoint.Metadata{Regions: []checkpoint.RegionInfo{checkpoint.RegionInfoOf(0, r)}},
			checkpoint.WriterOptions{BatchBytes: e.Config().BatchBytes})
		must(b, err)
		be = &benchEngine{e: e, w: w}
		engines[workers] = be
	}
	if be.warm != warm {
		_, err := be.e.Copy(context.Background(), be.w, r, 0, all)
		must(b, err)
		be.warm = warm
	}
	return be
}

// copyAll is BenchmarkCopyEngine's loop: be copies every page of r, of
// rawBytes in all, each iteration, and the wire ratio is reported.
func (be *benchEngine) copyAll(b *testing.B, r *memory.Region, all *memory.PageSet, rawBytes int64) {
	b.SetBytes(rawBytes)
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
}

// BenchmarkCopyEngine streams every page of a 1 GiB Dense region of 4 KiB
// pages, filled with each standard mix, through a checkpoint.Writer to
// io.Discard, with 1 and 2 workers, and 4, 8 and 14 where GOMAXPROCS
// allows. With VGPUSIM_IMAGE naming a raw memory image, it streams the
// image too, as content=image/workers=W (engine_image_bench_test.go).
func BenchmarkCopyEngine(b *testing.B) {
	for _, m := range memory.Mixes() {
		for _, workers := range migtest.BenchWorkers() {
			b.Run(fmt.Sprintf("mix=%s/workers=%d", m.Name, workers), func(b *testing.B) {
				r, all := benchRegion(b, m)
				warmEngine(b, workers, r, all, m).copyAll(b, r, all, benchRegionBytes)
			})
		}
	}
	benchmarkCopyImage(b)
}

// BenchmarkBaseline measures what the copy engine is compared with on the
// same bytes, on one core:
//
//   - op=copy is plain copy() of the 1 GiB of page bytes, held in a []byte
//     (read once from the region filled with the realistic mix), 1 MiB at a
//     time into a reused 1 MiB buffer.
//   - op=zstd is klauspost zstd's EncodeAll of the same bytes for each mix,
//     in batches of checkpoint.DefaultBatchBytes, with the options
//     checkpoint's BatchEncoder uses at LevelFastest. It compresses every
//     page, zero pages and incompressible ones included, which the engine
//     never hands to zstd: on a mix holding those, the engine can beat it,
//     so it is a reference, not the engine's limit.
//   - op=floor is the least work the engine's own output asks for: zstd,
//     with the same options, over exactly the pages the engine compresses,
//     batch by batch as the engine cuts them, plus one copy() of each page
//     it sends raw. Zero pages cost it nothing. The pages are classified
//     outside the timer by a checkpoint.BatchEncoder, the engine's own
//     classifier, and laid out beforehand, compressed pages then raw pages,
//     batch after batch; every frame's size is checked against the
//     engine's. What the engine does beyond it — reading each page out of
//     the region, the zero check and the incompressibility sample, copying
//     the compressible pages into the batch, the page table, and the
//     checkpoint.Writer hashing every byte of each record for its check
//     value — is the engine's overhead.
//   - op=tcp is raw 1 MiB writes over a TCP loopback connection to a reader
//     that discards them, the live path's limit.
//
// Each reports the region's 1 GiB, zero pages included, as its bytes, so
// that its MB/s compares directly with BenchmarkCopyEngine's.
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
			enc := benchZstd(b)
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
	for _, m := range memory.Mixes() {
		b.Run("op=floor/mix="+m.Name, func(b *testing.B) { benchmarkFloor(b, m) })
	}
}

// benchZstd returns a zstd encoder with the options checkpoint's
// BatchEncoder uses at LevelFastest.
func benchZstd(b *testing.B) *zstd.Encoder {
	b.Helper()
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(1<<20),
		zstd.WithSingleSegment(true),
		zstd.WithEncoderCRC(false),
	)
	must(b, err)
	return enc
}

// floorBatch is one batch of the engine's output as op=floor lays it out:
// cmp bytes of pages the engine compresses into a frame of frame bytes,
// then raw bytes of pages it sends as they are.
type floorBatch struct {
	cmp, raw, frame int
}

// benchFloor lays out the benchmark region, filled with m, for op=floor in
// the flat buffer: batch by batch as the engine cuts them, the pages the
// engine compresses, then those it sends raw, zero pages left out. The
// engine's own BatchEncoder classifies each page; the kinds are read back
// from the page table of each batch it encodes (see checkpoint/FORMAT.md).
func benchFloor(b *testing.B, m memory.Mix) []floorBatch {
	b.Helper()
	r, _ := benchRegion(b, m)
	bm := &benchMemory
	if bm.floorMix == m.Name {
		return bm.floor
	}
	if bm.flat == nil {
		bm.flat = make([]byte, benchRegionBytes)
	}
	bm.flatMix, bm.floorMix, bm.floor = "", "", bm.floor[:0]
	enc, err := checkpoint.NewBatchEncoder(checkpoint.LevelFastest)
	must(b, err)
	defer enc.Close()
	ps := r.PageSize()
	per := checkpoint.DefaultBatchBytes / ps
	off := 0
	for first := 0; first < r.Pages(); first += per {
		n := min(per, r.Pages()-first)
		must(b, enc.Begin(0, ps))
		for p := first; p < first+n; p++ {
			must(b, enc.AddFrom(r, p))
		}
		eb, err := enc.Finish()
		must(b, err)
		kinds, frame, err := pageKinds(eb.Payload[0])
		if err != nil || len(kinds) != n {
			b.Fatalf("batch at page %d: %d kinds, %v", first, len(kinds), err)
		}
		fb := floorBatch{frame: frame}
		for _, want := range []checkpoint.PageKind{checkpoint.PageZstd, checkpoint.PageRaw} {
			for i, k := range kinds {
				if k != want {
					continue
				}
				_, err := r.ReadAt(bm.flat[off:off+ps], int64(first+i)*int64(ps))
				must(b, err)
				off += ps
				if k == checkpoint.PageZstd {
					fb.cmp += ps
				} else {
					fb.raw += ps
				}
			}
		}
		bm.floor = append(bm.floor, fb)
	}
	bm.floorMix = m.Name
	return bm.floor
}

// pageKinds reads a page batch payload's page table (checkpoint/FORMAT.md)
// from its head: the kind of each page, and the length of the zstd frame.
func pageKinds(head []byte) ([]checkpoint.PageKind, int, error) {
	errShort := errors.New("page table cut short")
	next := func() (uint64, error) {
		v, n := binary.Uvarint(head)
		if n <= 0 {
			return 0, errShort
		}
		head = head[n:]
		return v, nil
	}
	if _, err := next(); err != nil { // region
		return nil, 0, err
	}
	n, err := next()
	if err != nil || n > uint64(len(head)) {
		return nil, 0, errShort
	}
	for range n { // the first index, then the gaps
		if _, err := next(); err != nil {
			return nil, 0, err
		}
	}
	if uint64(len(head)) < n {
		return nil, 0, errShort
	}
	kinds := make([]checkpoint.PageKind, n)
	for i := range kinds {
		kinds[i] = checkpoint.PageKind(head[i])
	}
	head = head[n:]
	for range n { // generations
		if _, err := next(); err != nil {
			return nil, 0, err
		}
	}
	frame, err := next()
	if err != nil || len(head) != 0 {
		return nil, 0, fmt.Errorf("page table: frame length: %v, %d bytes left over", err, len(head))
	}
	return kinds, int(frame), nil
}

// floorRun is op=floor's work for one mix: its layout, encoder and
// buffers.
type floorRun struct {
	floor       []floorBatch
	src         []byte
	enc         *zstd.Encoder
	dst, rawDst []byte
}

// newFloorRun lays out the region filled with m for op=floor and makes one
// pass over it, outside the timer: the encoder's buffers grow, and every
// frame must be the size the engine's was. Close it after use.
func newFloorRun(b *testing.B, m memory.Mix) *floorRun {
	b.Helper()
	f := &floorRun{floor: benchFloor(b, m), src: benchMemory.flat, enc: benchZstd(b),
		dst:    make([]byte, 0, checkpoint.DefaultBatchBytes+checkpoint.DefaultBatchBytes>>10+64),
		rawDst: make([]byte, checkpoint.DefaultBatchBytes)}
	off := 0
	for i, fb := range f.floor {
		f.dst = f.dst[:0]
		if fb.cmp > 0 {
			f.dst = f.enc.EncodeAll(f.src[off:off+fb.cmp], f.dst)
		}
		if len(f.dst) != fb.frame {
			b.Fatalf("batch %d: frame of %d bytes, the engine's %d", i, len(f.dst), fb.frame)
		}
		off += fb.cmp + fb.raw
	}
	return f
}

func (f *floorRun) Close() { _ = f.enc.Close() }

// pass does op=floor's work once and returns the bytes it would send.
func (f *floorRun) pass() (wire int64) {
	off := 0
	for _, fb := range f.floor {
		if fb.cmp > 0 {
			f.dst = f.enc.EncodeAll(f.src[off:off+fb.cmp], f.dst[:0])
			wire += int64(len(f.dst))
			off += fb.cmp
		}
		copy(f.rawDst, f.src[off:off+fb.raw])
		wire += int64(fb.raw)
		off += fb.raw
	}
	return wire
}

// benchmarkFloor is op=floor for mix m: see BenchmarkBaseline.
func benchmarkFloor(b *testing.B, m memory.Mix) {
	f := newFloorRun(b, m)
	defer f.Close()
	b.SetBytes(benchRegionBytes)
	b.ReportAllocs()
	var wire, raw int64
	for b.Loop() {
		wire += f.pass()
		raw += benchRegionBytes
	}
	b.ReportMetric(float64(wire)/float64(raw), "wire/raw")
}

// BenchmarkEngineVsFloor runs, in every iteration, a one-worker copy of
// the 1 GiB region by the engine (as BenchmarkCopyEngine/workers=1) and
// BenchmarkBaseline's op=floor over the same pages, in alternating order,
// and reports the median of the per-iteration ratios of their times as
// engine/floor: what the engine costs over the least work its output asks
// for. On a machine shared with other work the separate benchmarks run
// seconds or minutes apart under different loads; this ratio does not
// drift with the load. Each iteration moves the region twice, so its MB/s
// counts 2 GiB.
func BenchmarkEngineVsFloor(b *testing.B) {
	for _, m := range memory.Mixes() {
		b.Run("mix="+m.Name, func(b *testing.B) {
			r, all := benchRegion(b, m)
			be := warmEngine(b, 1, r, all, m)
			f := newFloorRun(b, m)
			defer f.Close()
			b.SetBytes(2 * benchRegionBytes)
			b.ReportAllocs()
			// Made before the loop, so that allocs/op counts neither side.
			ratios := make([]float64, 0, 1<<16)
			i := 0
			for b.Loop() {
				var engine, floor time.Duration
				for j := range 2 {
					t0 := time.Now()
					if (i+j)%2 == 0 {
						if _, err := be.e.Copy(context.Background(), be.w, r, 0, all); err != nil {
							b.Fatal(err)
						}
						engine = time.Since(t0)
					} else {
						f.pass()
						floor = time.Since(t0)
					}
				}
				ratios = append(ratios, float64(engine)/float64(floor))
				i++
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "engine/floor")
		})
	}
}
