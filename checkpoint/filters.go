package checkpoint

import (
	"encoding/binary"
	"math/bits"
)

// Page filters: the transforms of version 1.3 applied to a page before it
// is compressed (FORMAT.md, "Page filters").
//
// Shuffling groups the bytes of float32 data by significance, as HDF5's
// shuffle filter and Blosc's SHUFFLE do: of a section of n four-byte
// elements, the low bytes of all of them come first, then the second
// bytes, and so on. The sign and exponent bytes of model weights take few
// values and the low mantissa bytes are noise; interleaved, zstd sees noise
// throughout, and grouped, it codes the sign and exponent bytes in about a
// third of their size.
//
// A delta page is sent as the XOR of its content with the content the
// reader holds for it, as QEMU's XBZRLE does for guest RAM: a page changed
// in a few places, or a float page changed in its low mantissa bits (a
// training step), is mostly zero bytes once XORed. The sender learns what
// the reader holds from a DeltaCache of what it last sent.

// PageFilters select the page filters of a BatchEncoder. The zero value
// selects none and the layout of the versions before 1.3; any other value
// gives batches the layout of version 1.3 (EncodedBatch.Filtered), which
// only a stream written with WriterOptions.Filters carries.
type PageFilters struct {
	// Shuffle groups the bytes of the pages that look like float32 data
	// by significance before compression (PageShuffled). It needs a
	// compressing level: at LevelNone no page is shuffled. S2 has no
	// entropy coder, so grouped bytes help it only where they repeat in
	// runs, as the zero high bytes of a delta do: at LevelS2 only delta
	// pages are shuffled.
	Shuffle bool
	// Delta, if set, sends a page as its XOR with what the reader holds
	// (PageDelta) when the cache knows that and the XOR has enough zero
	// bytes (deltaMinZeroDivisor). The cache is told of every page the
	// encoder adds.
	Delta *DeltaCache
}

// Enabled reports whether f selects a filter, and so gives batches the
// layout of version 1.3, which the stream must declare
// (WriterOptions.Filters).
func (f PageFilters) Enabled() bool { return f.Shuffle || f.Delta != nil }

// shuffleElementBytes is the element size of the shuffle: float32.
const shuffleElementBytes = 4

// shuffle writes src, byte-grouped, to dst: byte b of element i goes to
// dst[b*n+i], where n is len(src)/4. len(dst) == len(src), a multiple of
// four.
func shuffle(dst, src []byte) {
	n := len(src) / shuffleElementBytes
	d0, d1, d2, d3 := dst[:n], dst[n:2*n], dst[2*n:3*n], dst[3*n:4*n]
	for i := range n {
		v := binary.LittleEndian.Uint32(src[4*i:])
		d0[i], d1[i], d2[i], d3[i] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
}

// unshuffle undoes shuffle: it writes src, byte-grouped, to dst in element
// order.
func unshuffle(dst, src []byte) {
	n := len(src) / shuffleElementBytes
	s0, s1, s2, s3 := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n]
	for i := range n {
		v := uint32(s0[i]) | uint32(s1[i])<<8 | uint32(s2[i])<<16 | uint32(s3[i])<<24
		binary.LittleEndian.PutUint32(dst[4*i:], v)
	}
}

// Deciding which pages to shuffle. Sixty-four 8-byte words of the page
// are sampled, 128 float32 lanes, and the pairs of equal bytes counted
// among the lanes' top bytes and among their bottom bytes. For uniform
// bytes either count is about 32 (128·127/2/256). Float32 data of one
// scale has top bytes (sign and high exponent bits) of a few values, so
// well above floatTopPairs (weights: about 1700), and bottom bytes (low
// mantissa bits) of noise, so below floatBottomPairs (weights: 30 to 70);
// text repeats its bottom bytes too (about 500), and activations, half
// zeros, even more. The XOR of two generations of weights
// under training has a zero top byte and a noisy bottom one, and is
// shuffled too.
const (
	floatSampleWords = 64
	floatTopPairs    = 384
	floatBottomPairs = 128
)

// looksFloat32 reports whether page p, at least 512 bytes, looks like
// float32 data that shuffling would help.
func looksFloat32(p []byte) bool {
	if len(p) < floatSampleWords*8 {
		return false
	}
	var top, bottom [256]uint8
	topPairs, bottomPairs := 0, 0
	step := len(p) / floatSampleWords
	for i := range floatSampleWords {
		w := binary.LittleEndian.Uint64(p[i*step:])
		t0, t1, b0, b1 := byte(w>>24), byte(w>>56), byte(w), byte(w>>32)
		topPairs += int(top[t0])
		top[t0]++
		topPairs += int(top[t1])
		top[t1]++
		bottomPairs += int(bottom[b0])
		bottom[b0]++
		bottomPairs += int(bottom[b1])
		bottom[b1]++
	}
	return topPairs >= floatTopPairs && bottomPairs <= floatBottomPairs
}

// deltaMinZeroDivisor sets the share of zero bytes an XOR needs to be sent
// as a delta: at least one in deltaMinZeroDivisor, a quarter. Below it the
// XOR is about as noisy as the page itself, as when a page is rewritten
// with fresh content, and the whole page costs no more. Assumption: zero
// bytes are what the compressor removes (zero runs in QEMU's XBZRLE, which
// sends the page whole when its run-length encoded XOR would not be
// smaller); the exact share matters little, since the XOR of a page
// changed in place is mostly zeros and that of a rewritten page almost
// never is. Zero bytes interleaved with noise, as in the XOR of two float
// pages not shuffled, zstd at its fastest hardly removes
// (BenchmarkCodecResent): it is shuffling that groups them in runs.
const deltaMinZeroDivisor = 4

// xorInto writes a XOR b to dst, all of one length, a multiple of eight,
// and returns the number of zero bytes of the result.
func xorInto(dst, a, b []byte) int {
	zeros := 0
	for i := 0; i+8 <= len(dst); i += 8 {
		x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:])
		binary.LittleEndian.PutUint64(dst[i:], x)
		zeros += zeroBytes(x)
	}
	return zeros
}

// zeroBytes returns the number of zero bytes of x.
func zeroBytes(x uint64) int {
	// A byte's high bit is set in y when any of its bits was set in x.
	const lo7 = 0x7f7f7f7f7f7f7f7f
	y := (x&lo7 + lo7) | x
	return 8 - bits.OnesCount64(y&^lo7)
}

// xorInPlace XORs d into p, of one length, a multiple of eight.
func xorInPlace(p, d []byte) {
	for i := 0; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], binary.LittleEndian.Uint64(p[i:])^binary.LittleEndian.Uint64(d[i:]))
	}
}
