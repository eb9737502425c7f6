package checkpoint

import "fmt"

// RecordType is the type code of a record. Code 0 is reserved as invalid.
// The top bit marks an optional record, as the case of a PNG chunk name
// does: a reader skips an optional record it does not know and rejects an
// unknown critical one, so a newer minor version can add information a
// reader may ignore without a reader mistaking it for something it can.
type RecordType uint16

// The record types of version 1.2. All are critical.
const (
	// RecordMetadata describes the stream: VM, GPU, profiles and regions.
	// It is the first record, and only the first.
	RecordMetadata RecordType = 0x0001
	// RecordDeviceState carries one vGPU's opaque, versioned state.
	RecordDeviceState RecordType = 0x0002
	// RecordPageBatch carries pages of one region.
	RecordPageBatch RecordType = 0x0003
	// RecordEndRound closes a pre-copy round with its counts and digest.
	RecordEndRound RecordType = 0x0004
	// RecordEndStream closes the stream with its totals and digest. It is
	// the last record.
	RecordEndStream RecordType = 0x0005
	// RecordCodedBatch carries pages of one region as RecordPageBatch
	// does, after a byte naming the codec of the batch's compressed
	// pages. A stream whose header names CodecS2 or CodecMixed carries
	// its page batches as these, and only these; one that names CodecNone
	// or CodecZstd carries RecordPageBatch only. Since version 1.1.
	RecordCodedBatch RecordType = 0x0006
	// RecordAttachment carries a part of an Attachment, data of the
	// caller's. Since version 1.2.
	RecordAttachment RecordType = 0x0007
	// RecordPageRuns carries runs of pages of one region, each a content
	// class or mix at one generation (PageRuns). Since version 1.2.
	RecordPageRuns RecordType = 0x0008
)

// optionalBit marks an optional record type.
const optionalBit = 0x8000

// Optional reports whether t is an optional record type, one a reader
// that does not know it skips.
func (t RecordType) Optional() bool { return t&optionalBit != 0 }

// Valid reports whether t is usable as a type code: neither 0 nor the
// optional bit alone.
func (t RecordType) Valid() bool { return t&^optionalBit != 0 }

// String returns the type's name.
func (t RecordType) String() string {
	switch t {
	case RecordMetadata:
		return "metadata"
	case RecordDeviceState:
		return "device-state"
	case RecordPageBatch:
		return "page-batch"
	case RecordEndRound:
		return "end-round"
	case RecordEndStream:
		return "end-stream"
	case RecordCodedBatch:
		return "coded-page-batch"
	case RecordAttachment:
		return "attachment"
	case RecordPageRuns:
		return "page-runs"
	}
	if t.Optional() {
		return fmt.Sprintf("optional(%#04x)", uint16(t))
	}
	return fmt.Sprintf("critical(%#04x)", uint16(t))
}

// Record is one record as the record layer hands it over: framing checked,
// check value verified, payload decrypted.
type Record struct {
	// Type is the record's type code.
	Type RecordType
	// Seq is the record's sequence number, counted from 0 after the
	// header.
	Seq uint64
	// Offset is the byte offset of the record's header in the stream.
	Offset int64
	// Payload is the plaintext payload. It aliases the reader's buffer
	// and is valid until the next call to Next.
	Payload []byte
}

// recordHeaderSize is the size of a record header: type (2), payload
// length (4), sequence number (8).
const recordHeaderSize = 14

// checkSize is the size of a record's check value, and of the header's.
const checkSize = 8

// batchRecord reports whether rec is a page batch of a stream with header
// h, checking its type against the one the header calls for before
// anything decodes it (BatchDecoder.Decode checks it again): a coded page
// batch in a stream of codec none or zstd is unknown, as it is to a
// reader of version 1.0; a plain one in a stream of codec s2 or mixed is
// malformed. A ParallelApplier's stream checks it before it hands the
// record to a worker, so that a record it should refuse is refused there,
// in stream order.
func batchRecord(rec Record, h Header) (bool, error) {
	switch {
	case rec.Type == RecordCodedBatch && !h.Codec.coded():
		return false, newError(ErrUnknownRecord, rec.Offset, int64(rec.Seq), "%v record in a stream of codec %v", rec.Type, h.Codec)
	case rec.Type == RecordPageBatch && h.Codec.coded():
		return false, newError(ErrMalformed, rec.Offset, int64(rec.Seq), "%v record in a stream of codec %v", rec.Type, h.Codec)
	}
	return rec.Type == RecordPageBatch || rec.Type == RecordCodedBatch, nil
}
