package checkpoint

import (
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
)

// Payloads are built with append and parsed with a decoder that records
// the first problem and then returns zeros, so a parse reads as a straight
// list of fields and is checked once at the end (the pattern of
// encoding/binary's uvarint loops in archive/zip, made sticky).

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendUint64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

func appendString(b []byte, s string) []byte {
	b = appendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	b = appendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// decoder reads fields from a payload. After the first malformed field,
// ok is false, why says what was wrong, and every read returns zero.
// overLimit says the field was well formed but beyond one of the reader's
// Limits, which a caller reports as ErrLimit rather than ErrMalformed.
type decoder struct {
	b         []byte
	off       int
	ok        bool
	overLimit bool
	why       string
}

func newDecoder(b []byte) decoder { return decoder{b: b, ok: true} }

func (d *decoder) fail(why string) {
	if d.ok {
		d.ok, d.why = false, why
	}
}

// failLimit is fail for a field beyond a reader's limit.
func (d *decoder) failLimit(why string) {
	if d.ok {
		d.ok, d.overLimit, d.why = false, true, why
	}
}

// problem is the first problem of a payload, "" if none, and whether it
// is a reader's limit.
func (d *decoder) problem() (why string, overLimit bool) { return d.why, d.overLimit }

func (d *decoder) rest() int { return len(d.b) - d.off }

func (d *decoder) uvarint(what string) uint64 { return readVarint(d, what, binary.Uvarint) }

// readVarint reads a varint with read, binary.Uvarint or binary.Varint.
func readVarint[T uint64 | int64](d *decoder, what string, read func([]byte) (T, int)) T {
	if !d.ok {
		return 0
	}
	v, n := read(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint in " + what)
		return 0
	}
	d.off += n
	return v
}

// uvarintMax reads a varint that must not exceed max.
func (d *decoder) uvarintMax(what string, max uint64) uint64 {
	v := d.uvarint(what)
	if v > max {
		d.fail(what + " out of range")
		return 0
	}
	return v
}

// uvarintLimit reads a varint that must not exceed limit, a reader's
// limit.
func (d *decoder) uvarintLimit(what string, limit uint64) uint64 {
	v := d.uvarint(what)
	if v > limit {
		d.failLimit(what + " " + utoa(v) + " over the limit of " + utoa(limit))
		return 0
	}
	return v
}

// varint reads a signed (zigzag) varint.
func (d *decoder) varint(what string) int64 { return readVarint(d, what, binary.Varint) }

// byte reads one byte.
func (d *decoder) byte(what string) byte {
	if !d.ok {
		return 0
	}
	if d.rest() < 1 {
		d.fail("short " + what)
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *decoder) uint32(what string) uint32 {
	return uint32(d.uvarintMax(what, math.MaxUint32))
}

func (d *decoder) uint64(what string) uint64 {
	if !d.ok {
		return 0
	}
	if d.rest() < 8 {
		d.fail("short " + what)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

// bytes returns the next n bytes, aliasing the payload.
func (d *decoder) bytes(what string, n uint64) []byte {
	if !d.ok {
		return nil
	}
	if n > uint64(d.rest()) {
		d.fail("short " + what)
		return nil
	}
	p := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return p
}

// lenBytes reads a length-prefixed byte string of at most max bytes.
func (d *decoder) lenBytes(what string, max int) []byte {
	n := d.uvarint(what + " length")
	if n > uint64(max) {
		d.fail(what + " too long")
		return nil
	}
	return d.bytes(what, n)
}

// string reads a length-prefixed UTF-8 string of at most max bytes,
// reusing prev when the bytes are equal so that a reader reset onto the
// same stream allocates nothing.
func (d *decoder) string(what string, max int, prev string) string {
	p := d.lenBytes(what, max)
	if !d.ok {
		return ""
	}
	if !utf8.Valid(p) {
		d.fail(what + " is not UTF-8")
		return ""
	}
	if string(p) == prev {
		return prev
	}
	return string(p)
}

// end checks that the payload was consumed. Trailing bytes are fields
// added by a newer minor version when allowExtra is set, and malformed
// otherwise.
func (d *decoder) end(allowExtra bool) {
	if d.ok && d.rest() != 0 && !allowExtra {
		d.fail("trailing bytes")
	}
}

func utoa(v uint64) string { return strconv.FormatUint(v, 10) }
