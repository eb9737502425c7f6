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
				encode := func() int64 {
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
					return payloadLen(eb)
				}
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

// payloadLen returns the size of b's payload.
func payloadLen(b EncodedBatch) int64 {
	n := 0
	for _, p := range b.Payload {
		n += len(p)
	}
	return int64(n)
}
