package checkpoint

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/vgpusim/vgpusim/memory"
)

// The benchmarks compare the stream's encode and decode paths with plain
// zstd over the same pages, at the same level, with the same encoder and
// decoder options, in the same run:
//
//	go test -run '^$' -bench '.*/.*/batch=1MiB' -count=6 ./checkpoint
//
// Every benchmark reports the raw page bytes per second. The targets: the
// stream's encode and decode each at least 85 % of the baseline's
// throughput on every mix at 1 MiB batches, and no allocation per batch
// once warm (every benchmark does its operation once before it starts
// timing, as the baseline compresses its frame once before it starts).
//
// BenchmarkEncode and BenchmarkDecode run the stream with each codec
// (codec=zstd at LevelFastest, codec=s2 at LevelS2); BenchmarkBaselineS2
// is plain S2 over the same pages, as BenchmarkBaselineZstd is plain zstd:
//
//	go test -run '^$' -bench 'Encode/mix=realistic/batch=1MiB|Decode/mix=realistic/batch=1MiB' -count=6 ./checkpoint
//
// BenchmarkFloor measures the least work the format asks of any encoder or
// decoder of the same batch, to tell the cost of the design from the cost
// of this implementation: on a mix zstd cannot shrink, the baseline's
// decode is one copy of the bytes, while a stream's reader must copy them
// out of its io.Reader and compute their check value before it may use
// them.
//
// BenchmarkVsBaseline runs the stream, the baseline and the floor in turn
// within each iteration and reports their throughputs as ratios to the
// baseline's. On a machine shared with other work the separate benchmarks
// run seconds apart under different loads; these ratios do not drift with
// the load.

var benchBatches = []struct {
	name  string
	bytes int
}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

const benchPageSize = 4096

// benchPages returns n bytes of pages of mix m, as a VM's memory holds
// them, and their generations.
func benchPages(b *testing.B, m memory.Mix, n int) ([]byte, []uint32) {
	pages := n / benchPageSize
	r := newRegion(b, memory.Dense, pages, benchPageSize, 99, memory.Mix{})
	if err := r.FillMix(0, pages, m); err != nil {
		b.Fatal(err)
	}
	src := make([]byte, n)
	gens := make([]uint32, pages)
	for p := range pages {
		st, err := r.ReadPage(p, src[p*benchPageSize:(p+1)*benchPageSize])
		if err != nil {
			b.Fatal(err)
		}
		gens[p] = st.Gen
	}
	return src, gens
}

func benchMeta(n int) Metadata {
	return Metadata{VMID: "bench", GPUModel: "Tesla P40", Profiles: []string{"P40-24q"},
		Regions: []RegionInfo{{ID: 0, SizeBytes: int64(n), PageSize: benchPageSize, Seed: 99}}}
}

// countWriter counts the bytes written to it and keeps none.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func writeBatch(w *Writer, src []byte, gens []uint32) error {
	for p := range gens {
		if err := w.WritePage(0, p, gens[p], src[p*benchPageSize:(p+1)*benchPageSize]); err != nil {
			return err
		}
	}
	return w.Flush()
}

// benchStream returns a whole stream holding the pages as one batch at
// level, and the offsets of the batch record and of its end.
func benchStream(b *testing.B, src []byte, gens []uint32, level Level) (data []byte, batchOff, batchEnd int) {
	var stream bytes.Buffer
	w, err := NewWriter(&stream, benchMeta(len(src)), WriterOptions{Level: level, BatchBytes: len(src)})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Release()
	batchOff = int(w.Offset())
	if err := writeBatch(w, src, gens); err != nil {
		b.Fatal(err)
	}
	batchEnd = int(w.Offset())
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return stream.Bytes(), batchOff, batchEnd
}

// benchOps holds, for one batch of pages, each operation the benchmarks
// time: one batch encoded or decoded by the stream, by the baseline and by
// the floor. Each checks what it produced and has run once, so that what
// it allocates on first use is not counted.
type benchOps struct {
	src  []byte
	gens []uint32

	encode, decode         func()
	baseEncode, baseDecode func()
	floorEncode            func()
	floorDecode            func()

	level        Level  // the stream's
	encodedBytes int64  // the stream's batch record
	baseFrame    []byte // the baseline's last frame
	rd           *Reader
	closers      []func()
}

func (o *benchOps) close() {
	for _, c := range o.closers {
		c()
	}
}

func newBenchOps(b *testing.B, m memory.Mix, batch int) *benchOps {
	return newBenchOpsAt(b, m, batch, LevelFastest)
}

// newBenchOpsAt is newBenchOps with the stream at level; the baseline and
// the floor are zstd's whatever the level.
func newBenchOpsAt(b *testing.B, m memory.Mix, batch int, level Level) *benchOps {
	o := &benchOps{level: level}
	o.src, o.gens = benchPages(b, m, batch)
	src, gens := o.src, o.gens

	// The stream: a Writer writing one batch record, a Reader reading a
	// stream from its header to its batch's pages, as the baseline
	// decodes one frame; both start from bytes in memory. Page data are
	// views of the decoded batch; the baseline's are views of its output
	// buffer.
	var out countWriter
	w, err := NewWriter(&out, benchMeta(batch), WriterOptions{Level: level, BatchBytes: batch})
	if err != nil {
		b.Fatal(err)
	}
	o.closers = append(o.closers, func() { w.Release() })
	o.encode = func() {
		before, seq := out.n, w.rw.Seq()
		if err := writeBatch(w, src, gens); err != nil {
			b.Fatal(err)
		}
		o.encodedBytes = out.n - before
		if w.rw.Seq() != seq+1 || o.encodedBytes < recordHeaderSize+checkSize {
			b.Fatalf("wrote %d records, %d bytes", w.rw.Seq()-seq, o.encodedBytes)
		}
	}
	// The stream's decode reads streamData; the floor's, zstd's data.
	data, batchOff, batchEnd := benchStream(b, src, gens, LevelFastest)
	streamData := data
	if level != LevelFastest {
		streamData, _, _ = benchStream(b, src, gens, level)
	}
	br := bytes.NewReader(data)
	o.rd = &Reader{}
	o.closers = append(o.closers, func() { o.rd.Close() })
	o.decode = func() {
		br.Reset(streamData)
		if err := o.rd.Reset(br, ReaderOptions{}); err != nil {
			b.Fatal(err)
		}
		if t, err := o.rd.Next(); err != nil || t != RecordPageBatch {
			b.Fatalf("%v %v", t, err)
		}
		checkBatch(b, o.rd.Batch(), src, gens, false)
	}

	// The baseline: EncodeAll and DecodeAll of the whole batch, zero
	// pages included, with the batch encoder's options (level, window,
	// single segment, no frame checksum) and the stream decoder's.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(encoderWindowBytes), zstd.WithSingleSegment(true), zstd.WithEncoderCRC(false))
	if err != nil {
		b.Fatal(err)
	}
	o.closers = append(o.closers, func() { enc.Close() })
	lim := DefaultLimits()
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(lim.MaxBatchBytes)),
		zstd.WithDecoderMaxWindow(uint64(lim.MaxWindowBytes)), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		b.Fatal(err)
	}
	o.closers = append(o.closers, dec.Close)
	frame := enc.EncodeAll(src, nil)
	o.baseFrame = make([]byte, 0, len(src)+len(src)>>10+64)
	o.baseEncode = func() {
		o.baseFrame = enc.EncodeAll(src, o.baseFrame[:0])
		if len(o.baseFrame) == 0 {
			b.Fatal("empty frame")
		}
	}
	// The slack zstd wants past a frame's output, as the stream's decoder
	// gives it and as DecodeAll allocates when it has to.
	baseOut := make([]byte, 0, len(src)+zstdSlackBytes)
	o.baseDecode = func() {
		var err error
		baseOut, err = dec.DecodeAll(frame, baseOut[:0])
		if err != nil || len(baseOut) != len(src) {
			b.Fatalf("decoded %d bytes: %v", len(baseOut), err)
		}
	}

	// The floor. Encoding: copy each page that is not zero once into the
	// payload (a page handed to WritePage is the caller's, so it must be
	// copied), compress the compressible ones in one frame, and compute
	// the record's check value; which pages are zero or compressible is
	// decided here, before timing starts. Decoding: copy the stream's
	// bytes out of an io.Reader, compute the batch record's check value,
	// and decompress its frame.
	be, err := NewBatchEncoder(LevelFastest)
	if err != nil {
		b.Fatal(err)
	}
	o.closers = append(o.closers, func() { be.Close() })
	if err := be.Begin(0, benchPageSize); err != nil {
		b.Fatal(err)
	}
	for p := range gens {
		if err := be.Add(p, gens[p], src[p*benchPageSize:(p+1)*benchPageSize]); err != nil {
			b.Fatal(err)
		}
	}
	kinds := slices.Clone(be.kinds)
	eb, err := be.Finish()
	if err != nil {
		b.Fatal(err)
	}
	head, frameLen := slices.Clone(eb.Payload[0]), len(eb.Payload[1])
	cmp := make([]byte, 0, len(src))
	raw := make([]byte, 0, len(src))
	floorFrame := make([]byte, 0, len(src)+len(src)>>10+64)
	var d xxhash.Digest
	o.floorEncode = func() {
		cmp, raw = cmp[:0], raw[:0]
		for p, k := range kinds {
			switch k {
			case PageZstd:
				cmp = append(cmp, src[p*benchPageSize:(p+1)*benchPageSize]...)
			case PageRaw:
				raw = append(raw, src[p*benchPageSize:(p+1)*benchPageSize]...)
			}
		}
		floorFrame = floorFrame[:0]
		if len(cmp) > 0 {
			floorFrame = be.zstds[LevelFastest].EncodeAll(cmp, floorFrame)
		}
		d.Reset()
		d.Write(head)
		d.Write(floorFrame)
		d.Write(raw)
		d.Sum64()
		if len(floorFrame) != frameLen {
			b.Fatalf("frame of %d bytes, want %d", len(floorFrame), frameLen)
		}
	}
	meta := benchMeta(len(src))
	bd, err := NewBatchDecoder(Header{Codec: CodecZstd}, &meta, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	o.closers = append(o.closers, bd.Close)
	floorDec, err := bd.decoder()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, batchEnd)
	rec := buf[batchOff : batchEnd-checkSize]
	payload := rec[recordHeaderSize:]
	recFrame := payload[len(head) : len(head)+frameLen]
	size := 0
	for _, k := range kinds {
		if k == PageZstd {
			size += benchPageSize
		}
	}
	scratch := make([]byte, size+zstdSlackBytes)
	fbr := bytes.NewReader(data)
	o.floorDecode = func() {
		fbr.Reset(data)
		if _, err := io.ReadFull(fbr, buf); err != nil {
			b.Fatal(err)
		}
		xxhash.Sum64(rec)
		if frameLen > 0 {
			out, err := floorDec.DecodeAll(recFrame, scratch[:0:len(scratch)])
			if err != nil || len(out) != size {
				b.Fatalf("decoded %d bytes: %v", len(out), err)
			}
		}
	}

	for _, f := range []func(){o.encode, o.decode, o.baseEncode, o.baseDecode, o.floorEncode, o.floorDecode} {
		f()
	}
	return o
}

// runBench times op over every mix and batch size, each named
// mix=M/batch=B plus suffix.
func runBench(b *testing.B, suffix string, op func(*benchOps) func(), after func(*testing.B, *benchOps)) {
	for _, m := range memory.Mixes() {
		for _, bb := range benchBatches {
			benchCase(b, fmt.Sprintf("mix=%s/batch=%s%s", m.Name, bb.name, suffix), bb.bytes,
				func(b *testing.B) *benchOps { return newBenchOps(b, m, bb.bytes) }, op, after)
		}
	}
}

// benchCase is one case of runBench or runCodecBench: op on the benchOps
// open makes, batchBytes a call, then after.
func benchCase(b *testing.B, name string, batchBytes int, open func(*testing.B) *benchOps,
	op func(*benchOps) func(), after func(*testing.B, *benchOps)) {
	b.Run(name, func(b *testing.B) {
		o := open(b)
		defer o.close()
		f := op(o)
		b.SetBytes(int64(batchBytes))
		b.ReportAllocs()
		for b.Loop() {
			f()
		}
		if after != nil {
			after(b, o)
		}
	})
}

// benchCodecs are the codecs of BenchmarkEncode and BenchmarkDecode.
var benchCodecs = []struct {
	name  string
	level Level
}{{"zstd", LevelFastest}, {"s2", LevelS2}}

// runCodecBench times op of the stream over every mix, batch size and
// codec, each named mix=M/batch=B/codec=C.
func runCodecBench(b *testing.B, op func(*benchOps) func(), after func(*testing.B, *benchOps)) {
	for _, m := range memory.Mixes() {
		for _, bb := range benchBatches {
			for _, c := range benchCodecs {
				benchCase(b, fmt.Sprintf("mix=%s/batch=%s/codec=%s", m.Name, bb.name, c.name), bb.bytes,
					func(b *testing.B) *benchOps { return newBenchOpsAt(b, m, bb.bytes, c.level) }, op, after)
			}
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	runCodecBench(b, func(o *benchOps) func() { return o.encode }, func(b *testing.B, o *benchOps) {
		b.ReportMetric(float64(len(o.src))/float64(o.encodedBytes), "ratio")
		checkRoundTrip(b, o.src, o.gens, o.level)
	})
}

func BenchmarkDecode(b *testing.B) {
	runCodecBench(b, func(o *benchOps) func() { return o.decode }, func(b *testing.B, o *benchOps) {
		checkBatch(b, o.rd.Batch(), o.src, o.gens, true)
	})
}

// BenchmarkBaselineZstd is plain zstd over the same pages: EncodeAll and
// DecodeAll of the whole batch, zero pages included, with the batch
// encoder's options (level, window, single segment, no frame checksum)
// and the stream decoder's.
func BenchmarkBaselineZstd(b *testing.B) {
	runBench(b, "/op=encode", func(o *benchOps) func() { return o.baseEncode }, func(b *testing.B, o *benchOps) {
		b.ReportMetric(float64(len(o.src))/float64(len(o.baseFrame)), "ratio")
	})
	runBench(b, "/op=decode", func(o *benchOps) func() { return o.baseDecode }, nil)
}

func BenchmarkFloor(b *testing.B) {
	runBench(b, "/op=encode", func(o *benchOps) func() { return o.floorEncode }, nil)
	runBench(b, "/op=decode", func(o *benchOps) func() { return o.floorDecode }, nil)
}

// BenchmarkVsBaseline reports, as the metrics stream/base and floor/base,
// the stream's and the floor's throughput over the baseline's. Each
// iteration times the three in turn, in a rotating order, and gives two
// ratios of adjacent timings; the metrics are their medians, which a
// timing stretched by another process's burst does not move.
func BenchmarkVsBaseline(b *testing.B) {
	for _, op := range []string{"encode", "decode"} {
		for _, m := range memory.Mixes() {
			for _, bb := range benchBatches {
				b.Run(fmt.Sprintf("mix=%s/batch=%s/op=%s", m.Name, bb.name, op), func(b *testing.B) {
					o := newBenchOps(b, m, bb.bytes)
					defer o.close()
					fs := [3]func(){o.encode, o.baseEncode, o.floorEncode}
					if op == "decode" {
						fs = [3]func(){o.decode, o.baseDecode, o.floorDecode}
					}
					var stream, floor []float64
					i := 0
					for b.Loop() {
						var spent [3]time.Duration
						for j := range fs {
							k := (i + j) % len(fs)
							t0 := time.Now()
							fs[k]()
							spent[k] = time.Since(t0)
						}
						stream = append(stream, float64(spent[1])/float64(spent[0]))
						floor = append(floor, float64(spent[1])/float64(spent[2]))
						i++
					}
					b.ReportMetric(median(stream), "stream/base")
					b.ReportMetric(median(floor), "floor/base")
				})
			}
		}
	}
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// checkRoundTrip writes the pages to a stream and reads them back, outside
// the timed loop, so that a benchmark cannot pass by producing garbage.
func checkRoundTrip(b *testing.B, src []byte, gens []uint32, level Level) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, benchMeta(len(src)), WriterOptions{Level: level, BatchBytes: len(src)})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Release()
	if err := writeBatch(w, src, gens); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	rd, err := NewReader(&buf, ReaderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	if _, err := rd.Next(); err != nil {
		b.Fatal(err)
	}
	checkBatch(b, rd.Batch(), src, gens, true)
}

// checkBatch checks a decoded batch against the pages it came from: page
// indices, generations and lengths always, bytes if full.
func checkBatch(b *testing.B, bt *Batch, src []byte, gens []uint32, full bool) {
	if bt == nil || bt.Len() != len(gens) {
		b.Fatalf("batch of %v pages, want %d", bt, len(gens))
	}
	for i := range bt.Len() {
		p := bt.Page(i)
		if p.Index != i || p.Gen != gens[i] || (p.Kind != PageZero) != (len(p.Data) == benchPageSize) {
			b.Fatalf("page %d: %d gen %d kind %v len %d", i, p.Index, p.Gen, p.Kind, len(p.Data))
		}
		want := src[i*benchPageSize : (i+1)*benchPageSize]
		if full && (p.Kind == PageZero && !memory.IsZero(want) || p.Kind != PageZero && !bytes.Equal(p.Data, want)) {
			b.Fatalf("page %d differs", i)
		}
	}
}
