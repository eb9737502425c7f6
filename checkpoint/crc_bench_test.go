package checkpoint

import (
	"bytes"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/vgpusim/vgpusim/memory"
)

// BenchmarkFrameCRC measures what zstd's frame checksum (WithEncoderCRC)
// would cost the batch encoder, which turns it off (FORMAT.md says why):
// EncodeAll of 1 MiB batches with the batch encoder's options at
// LevelFastest, with the checksum off and on, over each of crcData's data
// sets. Compare the two settings of each in one run:
//
//	go test -run '^$' -bench 'FrameCRC$' -count 6 ./checkpoint > crc.txt
//	benchstat -col /crc crc.txt
func BenchmarkFrameCRC(b *testing.B) {
	for _, d := range crcData(b) {
		for _, crc := range []bool{false, true} {
			name := "data=" + d.name + "/crc=off"
			if crc {
				name = "data=" + d.name + "/crc=on"
			}
			b.Run(name, func(b *testing.B) {
				enc := crcEncoder(b, crc)
				defer enc.Close()
				dst := enc.EncodeAll(d.src, make([]byte, 0, len(d.src)+len(d.src)>>10+64))
				b.SetBytes(int64(len(d.src)))
				b.ReportAllocs()
				for b.Loop() {
					dst = enc.EncodeAll(d.src, dst[:0])
				}
				b.ReportMetric(float64(len(d.src))/float64(len(dst)), "ratio")
			})
		}
	}
}

// BenchmarkFrameCRCPaired encodes each of crcData's batches with the
// checksum off and on in turn in every iteration, in alternating order, and
// reports the median of the per-iteration ratios as on/off, the time with
// the checksum over the time without. On a machine shared with other work
// BenchmarkFrameCRC's two settings run seconds apart under different
// loads; this ratio does not drift with the load. Each iteration encodes
// the batch twice, so its MB/s counts both.
//
//	go test -run '^$' -bench 'FrameCRCPaired' -count 6 ./checkpoint
func BenchmarkFrameCRCPaired(b *testing.B) {
	for _, d := range crcData(b) {
		b.Run("data="+d.name, func(b *testing.B) {
			encs := [2]*zstd.Encoder{crcEncoder(b, false), crcEncoder(b, true)}
			defer encs[0].Close()
			defer encs[1].Close()
			var dsts [2][]byte
			for k, enc := range encs {
				dsts[k] = enc.EncodeAll(d.src, make([]byte, 0, len(d.src)+len(d.src)>>10+64))
			}
			b.SetBytes(2 * int64(len(d.src)))
			b.ReportAllocs()
			// Made before the loop, so that allocs/op counts neither side.
			ratios := make([]float64, 0, 1<<16)
			i := 0
			for b.Loop() {
				var spent [2]time.Duration
				for j := range encs {
					k := (i + j) % 2
					t0 := time.Now()
					dsts[k] = encs[k].EncodeAll(d.src, dsts[k][:0])
					spent[k] = time.Since(t0)
				}
				ratios = append(ratios, float64(spent[1])/float64(spent[0]))
				i++
			}
			b.ReportMetric(median(ratios), "on/off")
		})
	}
}

// crcData returns the frame checksum benchmarks' data sets, 1 MiB each:
//
//   - realistic: the realistic mix's pages (40 % zero, 30 % weights, 20 %
//     text, 10 % random), every one of them compressed, as
//     BenchmarkBaselineZstd does;
//   - compressed: only the realistic mix's pages the batch encoder
//     compresses (not zero, not incompressible by its sample): what its
//     zstd encoder really sees;
//   - repetitive: one page of text repeated, which zstd compresses far
//     faster than it hashes.
func crcData(b *testing.B) []struct {
	name string
	src  []byte
} {
	b.Helper()
	const batch = 1 << 20
	realistic, _ := benchPages(b, memory.MixRealistic(), batch)
	// The compressible pages of 8 MiB of the realistic mix: about a fifth
	// of them, so more than a batch.
	many, _ := benchPages(b, memory.MixRealistic(), 8*batch)
	var compressed []byte
	for p := 0; p < len(many) && len(compressed) < batch; p += benchPageSize {
		page := many[p : p+benchPageSize]
		if !memory.IsZero(page) && !looksIncompressible(page) {
			compressed = append(compressed, page...)
		}
	}
	if len(compressed) < batch {
		b.Fatalf("%d bytes of compressible pages, want %d", len(compressed), batch)
	}
	text, _ := benchPages(b, memory.MixText(), benchPageSize)
	return []struct {
		name string
		src  []byte
	}{{"realistic", realistic}, {"compressed", compressed}, {"repetitive", bytes.Repeat(text, batch/benchPageSize)}}
}

// crcEncoder returns a zstd encoder with the batch encoder's options at
// LevelFastest, its frame checksum on if crc.
func crcEncoder(b *testing.B, crc bool) *zstd.Encoder {
	b.Helper()
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(LevelFastest.zstdLevel()),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(encoderWindowBytes),
		zstd.WithSingleSegment(true),
		zstd.WithEncoderCRC(crc),
	)
	if err != nil {
		b.Fatal(err)
	}
	return enc
}
