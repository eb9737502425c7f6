package migrate

import (
	"fmt"
	"strconv"
)

// Digest is a region's xxhash64 content digest, as a Report carries it. It
// prints, and marshals to JSON, as 16 hexadecimal digits: as a JSON number
// most digests would exceed 2^53, which JavaScript and many JSON tools
// silently round, and two different digests would compare equal.
type Digest uint64

// String writes the digest as 16 lower-case hexadecimal digits.
func (d Digest) String() string { return fmt.Sprintf("%016x", uint64(d)) }

// MarshalText writes the digest as String does.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a digest written by MarshalText: exactly 16
// hexadecimal digits, either case.
func (d *Digest) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(string(b), 16, 64)
	if len(b) != 16 || err != nil {
		return fmt.Errorf("%w: digest %q is not 16 hexadecimal digits", ErrConfig, b)
	}
	*d = Digest(v)
	return nil
}
