package checkpoint

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/vgpusim/vgpusim/memory"
)

// The benchmarks compare the stream's encode and decode paths with plain
// zstd over the same pages, at the same level, with the same encoder
// options, in the same run:
//
//	go test -run '^$' -bench 'BenchmarkEncode|BenchmarkDecode|BenchmarkBaselineZstd' -benchmem ./checkpoint
//
// Every benchmark reports the raw page bytes per second. The targets: the
// stream's encode and decode each at least 85 % of the baseline's
// throughput on every mix at 1 MiB batches, and no allocation per batch
// once warm.

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

func BenchmarkEncode(b *testing.B) {
	for _, m := range memory.Mixes() {
		for _, bb := range benchBatches {
			b.Run(fmt.Sprintf("mix=%s/batch=%s", m.Name, bb.name), func(b *testing.B) {
				src, gens := benchPages(b, m, bb.bytes)
				var out countWriter
				w, err := NewWriter(&out, benchMeta(bb.bytes), WriterOptions{BatchBytes: bb.bytes})
				if err != nil {
					b.Fatal(err)
				}
				defer w.Release()
				b.SetBytes(int64(bb.bytes))
				b.ReportAllocs()
				var recordBytes int64
				for b.Loop() {
					before, seq := out.n, w.rw.Seq()
					if err := writeBatch(w, src, gens); err != nil {
						b.Fatal(err)
					}
					recordBytes = out.n - before
					if w.rw.Seq() != seq+1 || recordBytes < recordHeaderSize+checkSize {
						b.Fatalf("wrote %d records, %d bytes", w.rw.Seq()-seq, recordBytes)
					}
				}
				b.ReportMetric(float64(bb.bytes)/float64(recordBytes), "ratio")
				checkRoundTrip(b, src, gens)
			})
		}
	}
}

// checkRoundTrip writes the pages to a stream and reads them back, outside
// the timed loop, so that a benchmark cannot pass by producing garbage.
func checkRoundTrip(b *testing.B, src []byte, gens []uint32) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, benchMeta(len(src)), WriterOptions{BatchBytes: len(src)})
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

// BenchmarkDecode reads a stream of one batch per iteration, from its
// header to the batch's pages, as the baseline decodes one frame: both
// start from bytes in memory that the cache holds. Page data are views of
// the decoded batch; the baseline's are views of its output buffer.
func BenchmarkDecode(b *testing.B) {
	for _, m := range memory.Mixes() {
		for _, bb := range benchBatches {
			b.Run(fmt.Sprintf("mix=%s/batch=%s", m.Name, bb.name), func(b *testing.B) {
				src, gens := benchPages(b, m, bb.bytes)
				var stream bytes.Buffer
				w, err := NewWriter(&stream, benchMeta(bb.bytes), WriterOptions{BatchBytes: bb.bytes})
				if err != nil {
					b.Fatal(err)
				}
				if err := writeBatch(w, src, gens); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				w.Release()
				data := stream.Bytes()
				br := bytes.NewReader(data)
				rd := &Reader{}
				defer rd.Close()
				b.SetBytes(int64(bb.bytes))
				b.ReportAllocs()
				for b.Loop() {
					br.Reset(data)
					if err := rd.Reset(br, ReaderOptions{}); err != nil {
						b.Fatal(err)
					}
					if t, err := rd.Next(); err != nil || t != RecordPageBatch {
						b.Fatalf("%v %v", t, err)
					}
					checkBatch(b, rd.Batch(), src, gens, false)
				}
				checkBatch(b, rd.Batch(), src, gens, true)
			})
		}
	}
}

// BenchmarkBaselineZstd is plain zstd over the same pages: EncodeAll and
// DecodeAll of the whole batch, zero pages included, with the batch
// encoder's options.
func BenchmarkBaselineZstd(b *testing.B) {
	for _, m := range memory.Mixes() {
		for _, bb := range benchBatches {
			src, _ := benchPages(b, m, bb.bytes)
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
				zstd.WithWindowSize(encoderWindowBytes), zstd.WithSingleSegment(true), zstd.WithEncoderCRC(false))
			if err != nil {
				b.Fatal(err)
			}
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(4<<20),
				zstd.WithDecoderMaxWindow(4<<20), zstd.WithDecodeAllCapLimit(true))
			if err != nil {
				b.Fatal(err)
			}
			frame := enc.EncodeAll(src, nil)
			name := fmt.Sprintf("mix=%s/batch=%s", m.Name, bb.name)
			b.Run(name+"/op=encode", func(b *testing.B) {
				dst := make([]byte, 0, len(src)+len(src)>>10+64)
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				for b.Loop() {
					dst = enc.EncodeAll(src, dst[:0])
					if len(dst) == 0 {
						b.Fatal("empty frame")
					}
				}
				b.ReportMetric(float64(len(src))/float64(len(dst)), "ratio")
			})
			b.Run(name+"/op=decode", func(b *testing.B) {
				dst := make([]byte, 0, len(src))
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				for b.Loop() {
					dst, err = dec.DecodeAll(frame, dst[:0])
					if err != nil || len(dst) != len(src) {
						b.Fatalf("decoded %d bytes: %v", len(dst), err)
					}
				}
				if !bytes.Equal(dst, src) {
					b.Fatal("decoded bytes differ")
				}
			})
			enc.Close()
			dec.Close()
		}
	}
}
