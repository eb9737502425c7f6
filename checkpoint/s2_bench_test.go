package checkpoint

import (
	"fmt"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/vgpusim/vgpusim/memory"
)

// BenchmarkBaselineS2 is plain S2 over the same pages as the stream's
// benchmarks: s2.Encode and s2.Decode of the whole batch, zero pages and
// pages the stream sends raw included, into buffers that need not grow.
func BenchmarkBaselineS2(b *testing.B) {
	for _, op := range []string{"encode", "decode"} {
		for _, m := range memory.Mixes() {
			for _, bb := range benchBatches {
				b.Run(fmt.Sprintf("mix=%s/batch=%s/op=%s", m.Name, bb.name, op), func(b *testing.B) {
					src, _ := benchPages(b, m, bb.bytes)
					block := make([]byte, s2.MaxEncodedLen(len(src)))
					block = s2.Encode(block, src)
					out := make([]byte, len(src))
					f := func() {
						block = s2.Encode(block[:cap(block)], src)
					}
					if op == "decode" {
						f = func() {
							var err error
							if out, err = s2.Decode(out, block); err != nil || len(out) != len(src) {
								b.Fatalf("decoded %d bytes: %v", len(out), err)
							}
						}
					}
					f()
					b.SetBytes(int64(len(src)))
					b.ReportAllocs()
					for b.Loop() {
						f()
					}
					if op == "encode" {
						b.ReportMetric(float64(len(src))/float64(len(block)), "ratio")
					}
				})
			}
		}
	}
}
