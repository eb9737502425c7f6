package memory

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// Thresholds of ClassifyPage. They were set on the package's generators
// (a page of each generated class is classified as that class at least
// 99 % of the time, at 4 KiB and 64 KiB pages: TestClassifyGenerated) and
// leave a wide margin on each side: generated text is all printable,
// weights' and activations' non-zero words are all small floats, random
// bytes of a 4 KiB page have a collision entropy of about 7.9 bits a byte.
const (
	// classifyTextShare is the least share of a page's non-zero bytes that
	// are text (printable ASCII, tab, CR, LF, or a valid multi-byte UTF-8
	// sequence) in a text page, at least an eighth of whose bytes are
	// non-zero (classifyTextMinBytes): a text file's last page, padded
	// with zeros, still counts.
	classifyTextShare    = 0.9
	classifyTextMinBytes = 8
	// classifyFloatShare is the least share of a float page's non-zero
	// 4-byte words that decode, little-endian, to a float32 of small
	// magnitude: an exponent field in [classifyMinExp, classifyMaxExp],
	// 2^-31 <= |x| < 16. Uniform bytes give 14 % such words; text, whose
	// high bytes are letters, almost none.
	classifyFloatShare = 0.9
	classifyMinExp     = 127 - 31
	classifyMaxExp     = 127 + 3
	// classifyMinFloatWords: at least an eighth of a float page's words
	// are non-zero, so that a page of zeros and a few stray words is not
	// called floats.
	classifyMinFloatWords = 8
	// classifyActivationZeros: a float page with more than a quarter of its
	// words zero is activations (ReLU zeroes half), else weights.
	classifyActivationZeros = 4
	// classifyEntropyShare: a random page's bytes have an entropy of at
	// least this share of the most a page of its length can have,
	// log2(min(256, len)) bits a byte. The entropy is the collision
	// (order 2) entropy of the byte histogram, -log2 of the chance that two
	// bytes drawn from the page are equal: at most the Shannon entropy,
	// about 7.9 bits for a random 4 KiB page, and no logarithm a byte value.
	classifyEntropyShare = 0.9
)

// ClassifyPage returns the content class that the bytes of a page look
// like, for real memory, whose classes no metadata records:
//
//   - ClassZero: every byte is zero.
//   - ClassText: at least an eighth of the bytes are non-zero, 90 % of those
//     are text (printable ASCII, tab, CR, LF, valid multi-byte UTF-8).
//   - ClassWeights: 90 % of the non-zero 4-byte words are float32 of
//     small magnitude (2^-31 <= |x| < 16), at least an eighth of the words
//     are non-zero and at most a quarter zero. bfloat16 pairs pass too;
//     float16 does not.
//   - ClassActivations: as weights, with more than a quarter of the words
//     zero, as ReLU leaves half of them.
//   - ClassRandom: none of the above, and the (collision) entropy of the
//     byte histogram is at least 90 % of log2(min(256, len(p))) bits a
//     byte: compressed, encrypted or random data.
//   - ClassExplicit: none of these; code, tables, sparse structures.
//
// The tests are made in that order. It reads every byte once; a 4 KiB page
// takes a few microseconds. It never returns ClassTrainingWeights: a page
// of that class is ClassWeights here, since one generation of it is a draw
// of the same distribution, and what sets the class apart, that its
// generations differ little, no single page shows.
func ClassifyPage(p []byte) Class {
	if IsZero(p) {
		return ClassZero
	}
	hist := histogram(p)
	words := len(p) / 4
	zeroWords, floats := 0, 0
	for i := 0; i+4 <= len(p); i += 4 {
		w := uint64(binary.LittleEndian.Uint32(p[i:]))
		// Without branches, which the words of activations, half zero,
		// would mispredict half the time: w-1 wraps for w == 0 only, and
		// e-minExp lies below the span only for an exponent in range
		// (zero's, 0, is not).
		zeroWords += int((w - 1) >> 63)
		e := uint32(w>>23&0xff) - classifyMinExp
		floats += int((uint64(e) - (classifyMaxExp - classifyMinExp + 1)) >> 63)
	}
	if looksText(p, &hist) {
		return ClassText
	}
	nonZero := words - zeroWords
	if nonZero > 0 && nonZero*classifyMinFloatWords >= words && float64(floats) >= classifyFloatShare*float64(nonZero) {
		if zeroWords*classifyActivationZeros > words {
			return ClassActivations
		}
		return ClassWeights
	}
	if len(p) >= MinPageSize && entropy(&hist, len(p)) >= classifyEntropyShare*math.Log2(float64(min(256, len(p)))) {
		return ClassRandom
	}
	return ClassExplicit
}

// histogram counts the bytes of p by value, in four histograms that are
// added up at the end, so that equal bytes in a row do not wait on one
// another's count.
func histogram(p []byte) [256]int {
	var h [4][256]uint32
	i := 0
	for ; i+4 <= len(p); i += 4 {
		h[0][p[i]]++
		h[1][p[i+1]]++
		h[2][p[i+2]]++
		h[3][p[i+3]]++
	}
	for ; i < len(p); i++ {
		h[0][p[i]]++
	}
	var sum [256]int
	for b := range sum {
		sum[b] = int(h[0][b]) + int(h[1][b]) + int(h[2][b]) + int(h[3][b])
	}
	return sum
}

// looksText reports whether p, whose byte histogram is hist, is text.
func looksText(p []byte, hist *[256]int) bool {
	nonZero := len(p) - hist[0]
	if nonZero*classifyTextMinBytes < len(p) {
		return false
	}
	printable := hist['\t'] + hist['\n'] + hist['\r']
	for b := 0x20; b < 0x7f; b++ {
		printable += hist[b]
	}
	high := 0
	for b := 0x80; b < 0x100; b++ {
		high += hist[b]
	}
	need := classifyTextShare * float64(nonZero)
	switch {
	case float64(printable) >= need:
		return true
	case float64(printable+high) < need:
		return false
	}
	// Bytes that no UTF-8 sequence holds (0xc0, 0xc1, 0xf5 to 0xff), as
	// floats' and random bytes are full of, rule out text before the
	// slower count of the bytes of valid multi-byte sequences.
	never := hist[0xc0] + hist[0xc1]
	for b := 0xf5; b < 0x100; b++ {
		never += hist[b]
	}
	if float64(printable+high-never) < need {
		return false
	}
	multi := 0
	for i := 0; i < len(p); {
		if p[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(p[i:])
		if r != utf8.RuneError || n > 1 {
			multi += n
		}
		i += n
	}
	return float64(printable+multi) >= need
}

// entropy returns the collision entropy, in bits a byte, of n bytes whose
// histogram is hist: -log2 of the sum of the squares of the bytes' shares.
func entropy(hist *[256]int, n int) float64 {
	sq := 0.0
	for _, c := range hist {
		sq += float64(c) * float64(c)
	}
	return -math.Log2(sq / (float64(n) * float64(n)))
}
