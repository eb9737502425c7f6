package checkpoint

import "encoding/binary"

// Deciding which pages to compress.
//
// Model weights and random bytes do not shrink under zstd (ratio 1.00),
// yet zstd still spends about 150 µs a MiB finding that out — more than
// the copy and check value of the same bytes together. So a batch encoder
// looks at a small sample of each page first and sends the page raw when
// the sample looks like noise, and only the rest go into the batch's zstd
// frame.
//
// The sample is 128 bytes: sixteen 8-byte words spread evenly over the
// page. The statistic is the number of pairs of equal bytes in it. For
// uniform bytes it is about 32 (128·127/2/256); for weights, whose
// exponent bytes repeat, about 130 and never above 230 in 2000 pages; for
// text about 840 and never below 600; activations, half zeros, about 2000.
// A page is sent raw when the count is below incompressiblePairs. A
// misjudged page costs little either way: a noisy page sent to zstd costs
// time, a compressible page sent raw costs ratio.
//
// The same verdict serves S2: the classes sent raw do not shrink under S2
// either, and the others do (TestSamplerFitsS2).
const (
	sampleWords         = 16
	incompressiblePairs = 384
	// minSampledPageBytes: smaller pages are always compressed; sampling
	// a third of a page would not save anything.
	minSampledPageBytes = 1024
)

// looksIncompressible reports whether page p would not shrink under zstd,
// judging by a sample of it. The eight bytes of each word are unrolled: the
// compiler then keeps them in registers, which makes the whole test about
// 40 % faster than a loop over them.
func looksIncompressible(p []byte) bool {
	if len(p) < minSampledPageBytes {
		return false
	}
	var seen [256]uint8
	pairs := 0
	step := len(p) / sampleWords
	for i := range sampleWords {
		w := binary.LittleEndian.Uint64(p[i*step+step/2:])
		b0, b1, b2, b3 := byte(w), byte(w>>8), byte(w>>16), byte(w>>24)
		b4, b5, b6, b7 := byte(w>>32), byte(w>>40), byte(w>>48), byte(w>>56)
		pairs += int(seen[b0])
		seen[b0]++
		pairs += int(seen[b1])
		seen[b1]++
		pairs += int(seen[b2])
		seen[b2]++
		pairs += int(seen[b3])
		seen[b3]++
		pairs += int(seen[b4])
		seen[b4]++
		pairs += int(seen[b5])
		seen[b5]++
		pairs += int(seen[b6])
		seen[b6]++
		pairs += int(seen[b7])
		seen[b7]++
	}
	return pairs < incompressiblePairs
}
