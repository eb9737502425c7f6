package memory

import "bytes"

// zeroPage is compared against, never written.
var zeroPage [64 << 10]byte

// IsZero reports whether every byte of b is zero. It compares against a
// static zero buffer with bytes.Equal, whose vectorized loop runs at memory
// speed, after a cheap look at the first word that rejects most data pages
// without a full pass.
func IsZero(b []byte) bool {
	if len(b) >= 8 && (b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7]) != 0 {
		return false
	}
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
