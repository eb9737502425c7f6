package checkpoint

import (
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// BenchmarkCodec compares, on each content, a batch encoder without page
// filters with one that shuffles float32 pages, at zstd's fastest level
// and S2's, in one run; it reports the wire bytes of a batch over its raw
// bytes (wire/raw) beside the throughput of the raw bytes:
//
//	go test -run '^$' -bench 'Codec/' -count 3 ./checkpoint
//
// The target: on model weights, where zstd alone gives 1.00 (the pages go
// raw), shuffle+zstd at most 0.85.
func BenchmarkCodec(b *testing.B) {
	contents := []struct {
		name string
		mix  memory.Mix
	}{
		{"weights", memory.MixWeights()},
		{"activations", memory.MixActivations()},
		{"text", memory.MixText()},
		{"realistic", memory.MixRealistic()},
	}
	codecs := []struct {
		name    string
		level   Level
		shuffle bool
	}{
		{"zstd", LevelFastest, false},
		{"shuffle+zstd", LevelFastest, true},
		{"s2", LevelS2, false},
		{"shuffle+s2", LevelS2, true},
	}
	const batchBytes = 1 << 20
	for _, content := range contents {
		src, gens := benchPages(b, content.mix, batchBytes)
		for _, codec := range codecs {
			b.Run("content="+content.name+"/codec="+codec.name, func(b *testing.B) {
				enc, err := NewBatchEncoder(codec.level)
				if err != nil {
					b.Fatal(err)
				}
				defer enc.Close()
				enc.SetFilters(PageFilters{Shuffle: codec.shuffle})
				encode := func() int64 { return encodeBenchBatch(b, enc, src, gens) }
				wire := encode()
				b.SetBytes(batchBytes)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					encode()
				}
				b.ReportMetric(float64(wire)/batchBytes, "wire/raw")
			})
		}
	}
}

// BenchmarkCodecResent encodes a batch of pages sent again, their
// previous content in the delta cache: weights under a training step's
// update (memory.ClassTrainingWeights) at their next generation, the
// pages the training workload rewrites. It compares zstd alone, zstd with
// delta pages, and zstd with delta and shuffled pages, and reports
// wire/raw:
//
//	go test -run '^$' -bench 'CodecResent' -count 3 ./checkpoint
func BenchmarkCodecResent(b *testing.B) {
	const batchBytes = 1 << 20
	pages := batchBytes / benchPageSize
	before, gens := benchPages(b, memory.MixTrainingWeights(), batchBytes)
	after := make([]byte, batchBytes)
	for p := range pages {
		gens[p]++
		memory.Generate(after[p*benchPageSize:(p+1)*benchPageSize], memory.ClassTrainingWeights, 99, uint64(p), gens[p])
	}
	for _, codec := range []struct {
		name           string
		shuffle, delta bool
	}{{"zstd", false, false}, {"zstd+delta", false, true}, {"zstd+delta+shuffle", true, true}} {
		b.Run("content=training-weights/codec="+codec.name, func(b *testing.B) {
			enc, err := NewBatchEncoder(LevelFastest)
			if err != nil {
				b.Fatal(err)
			}
			defer enc.Close()
			cache, err := NewDeltaCache(2 * batchBytes)
			if err != nil {
				b.Fatal(err)
			}
			encode := func(src []byte) int64 { return encodeBenchBatch(b, enc, src, gens) }
			// Each encode sends the pages again with what the last one
			// sent held: the pages before, then the pages after.
			resend := func() int64 {
				if err := cache.Reset(benchMeta(batchBytes).Regions); err != nil {
					b.Fatal(err)
				}
				encode(before)
				cache.Commit()
				wire := encode(after)
				cache.Discard()
				return wire
			}
			f := PageFilters{Shuffle: codec.shuffle}
			if codec.delta {
				f.Delta = cache
			}
			enc.SetFilters(f)
			wire := resend()
			b.SetBytes(batchBytes)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				if err := cache.Reset(benchMeta(batchBytes).Regions); err != nil {
					b.Fatal(err)
				}
				encode(before)
				cache.Commit()
				b.StartTimer()
				encode(after)
				cache.Discard()
			}
			b.ReportMetric(float64(wire)/batchBytes, "wire/raw")
		})
	}
}

// encodeBenchBatch encodes src, pages of benchPageSize at generations
// gens, as one batch with enc, and returns its payload's size.
func encodeBenchBatch(b *testing.B, enc *BatchEncoder, src []byte, gens []uint32) int64 {
	if err := enc.Begin(0, benchPageSize); err != nil {
		b.Fatal(err)
	}
	for p := range gens {
		if err := enc.Add(p, gens[p], src[p*benchPageSize:(p+1)*benchPageSize]); err != nil {
			b.Fatal(err)
		}
	}
	eb, err := enc.Finish()
	if err != nil {
		b.Fatal(err)
	}
	return eb.PayloadBytes()
}
