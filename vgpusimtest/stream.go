package vgpusimtest

import (
	"encoding/binary"
	"fmt"

	"github.com/vgpusim/vgpusim/checkpoint"
)

// The framing of a checkpoint stream, as FORMAT.md documents it.
const (
	headerSizeOffset = 14   // the header's u16 size field
	minHeaderBytes   = 40   // the smallest header a reader accepts
	maxHeaderBytes   = 4096 // the largest
	recordHeadBytes  = 14   // type u16, length u32, sequence u64
	recordCheckBytes = 8    // the check value after the payload
)

// RecordSpan is where one record of a checkpoint stream lies, as its
// framing says. Nothing in it is checked: not its check value, nor its
// sequence number, nor its type.
type RecordSpan struct {
	// Type is the record's type field.
	Type checkpoint.RecordType
	// Seq is its sequence number field.
	Seq uint64
	// Offset is where its header starts, from the start of the stream.
	Offset int64
	// Bytes is the whole record's size: its 14-byte header, its payload
	// and its 8-byte check value.
	Bytes int64
}

// End is the offset just past the record.
func (r RecordSpan) End() int64 { return r.Offset + r.Bytes }

// Records splits a checkpoint stream into its records, reading only the
// header's size field and each record's length: whatever the stream holds
// otherwise, damaged, hostile or encrypted. It returns the records that
// lie whole in the stream, in order, and, with them, an error wrapping
// ErrFraming if the header size is out of the range a reader accepts (40
// to 4096 bytes) or more than the stream, or if bytes after the last
// whole record are not a whole record. It allocates in proportion to the
// records it finds, at most one for every 22 bytes of stream.
func Records(stream []byte) ([]RecordSpan, error) {
	hdr, err := headerBytes(stream)
	if err != nil {
		return nil, err
	}
	var recs []RecordSpan
	off := hdr
	for off < int64(len(stream)) {
		rest := stream[off:]
		if len(rest) < recordHeadBytes {
			return recs, fmt.Errorf("%w: %d bytes at offset %d, short of a record header", ErrFraming, len(rest), off)
		}
		size := recordHeadBytes + int64(binary.LittleEndian.Uint32(rest[2:])) + recordCheckBytes
		if size > int64(len(rest)) {
			return recs, fmt.Errorf("%w: record of %d bytes at offset %d, %d left", ErrFraming, size, off, len(rest))
		}
		recs = append(recs, RecordSpan{
			Type:   checkpoint.RecordType(binary.LittleEndian.Uint16(rest)),
			Seq:    binary.LittleEndian.Uint64(rest[6:]),
			Offset: off,
			Bytes:  size,
		})
		off += size
	}
	return recs, nil
}

// headerBytes returns the size of the stream's header, from its size
// field.
func headerBytes(stream []byte) (int64, error) {
	if len(stream) < headerSizeOffset+2 {
		return 0, fmt.Errorf("%w: %d bytes, short of the header's size field", ErrFraming, len(stream))
	}
	n := int64(binary.LittleEndian.Uint16(stream[headerSizeOffset:]))
	if n < minHeaderBytes || n > maxHeaderBytes || n > int64(len(stream)) {
		return 0, fmt.Errorf("%w: header of %d bytes in a stream of %d", ErrFraming, n, len(stream))
	}
	return n, nil
}

// framed is a stream split for a mutator: its header's size, its whole
// records, and the error that stopped the split, if any.
type framed struct {
	stream []byte
	header int64
	recs   []RecordSpan
	err    error
}

func split(stream []byte) (framed, error) {
	hdr, err := headerBytes(stream)
	if err != nil {
		return framed{}, err
	}
	recs, err := Records(stream)
	return framed{stream: stream, header: hdr, recs: recs, err: err}, nil
}

// record returns the bytes of record i, or why there is none.
func (s framed) record(i int) ([]byte, error) {
	if err := s.check(i, len(s.recs)-1); err != nil {
		return nil, err
	}
	r := s.recs[i]
	return s.stream[r.Offset:r.End()], nil
}

// boundary returns the offset before record i, or just after the last
// whole record for i == len(s.recs).
func (s framed) boundary(i int) (int64, error) {
	if err := s.check(i, len(s.recs)); err != nil {
		return 0, err
	}
	if i == len(s.recs) {
		if i == 0 {
			return s.header, nil
		}
		return s.recs[i-1].End(), nil
	}
	return s.recs[i].Offset, nil
}

// check reports an index i outside [0, last]: as the framing's error if
// the framing stopped short, as ErrOutOfRange otherwise.
func (s framed) check(i, last int) error {
	switch {
	case i >= 0 && i <= last:
		return nil
	case i > last && s.err != nil:
		return fmt.Errorf("record %d: %w", i, s.err)
	}
	return fmt.Errorf("%w: record %d of a stream of %d", ErrOutOfRange, i, len(s.recs))
}

// join returns the concatenation of parts in a new slice.
func join(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
