package checkpoint

import (
	"encoding/binary"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// The newest version this package writes and reads. A reader accepts any
// stream of the same major version whose critical records and flags it
// knows (see FORMAT.md).
//
// A writer declares the oldest minor version that has what its stream
// needs: 1.1 for codec CodecS2 or CodecMixed, 1.3 for page filters
// (WriterOptions.Filters) and for the records of a suspend file
// (WriterOptions.Snapshot), which 1.2 added and whose page runs may name
// since 1.3 the class of weights under training, 1.0 otherwise. A stream of codec
// none or zstd without those records is still written as version 1.0,
// byte for byte as before 1.1 existed, so that a 1.0 reader keeps reading
// what it could read before.
const (
	VersionMajor = 1
	VersionMinor = 3
)

// minorSnapshot is the minor version that added attachments and page
// runs; minorFilters the one that added page filters (shuffled and delta
// pages) and the class of weights under training.
const (
	minorSnapshot = 2
	minorFilters  = 3
)

// minorFor is the minor version a writer declares for a stream of codec
// c, with or without the records of a suspend file and page filters: the
// oldest that knows them. A suspend file declares 1.3 since its page runs
// may name the class of weights under training, which 1.3 added.
func minorFor(c Codec, snapshot, filters bool) uint16 {
	switch {
	case filters, snapshot:
		return minorFilters
	case c.coded():
		return 1
	}
	return 0
}

// magic starts every stream. As PNG's signature does, it has a high-bit
// byte (caught by 7-bit channels), CR LF and LF (caught by line-ending
// conversion) and a ^Z (stops a DOS type).
const magic = "\x89CKP\r\n\x1a\n"

// Header field offsets and sizes (FORMAT.md draws them).
const (
	offMajor      = 8
	offMinor      = 10
	offFlags      = 12
	offHeaderSize = 14
	offStreamID   = 16
	// headerSizeV1 is the size of a version 1.0 header including its
	// check value. A newer minor may append fields before the check; the
	// header size field says where the check is.
	headerSizeV1 = 40
	// maxHeaderSize bounds the header a reader accepts.
	maxHeaderSize = 4096
)

// Codec is the compression a stream's page batches may use.
type Codec uint8

// The codecs. A stream's header names one; in a stream of codec CodecS2
// or CodecMixed, every page batch names its own too (RecordCodedBatch), one
// of the first three.
const (
	// CodecNone: every page is zero or raw.
	CodecNone Codec = 0
	// CodecZstd: compressible pages of a batch share one zstd frame.
	CodecZstd Codec = 1
	// CodecS2: compressible pages of a batch share one S2 block
	// (github.com/klauspost/compress/s2, block format). Since version 1.1.
	CodecS2 Codec = 2
	// CodecMixed, in a header only: each batch may use any of CodecNone,
	// CodecZstd and CodecS2, and names the one it uses, as an adaptive
	// writer's batches do. Since version 1.1.
	CodecMixed Codec = 3
)

// String returns the codec's name.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecZstd:
		return "zstd"
	case CodecS2:
		return "s2"
	case CodecMixed:
		return "mixed"
	}
	return "Codec(" + strconv.Itoa(int(c)) + ")"
}

// Allows reports whether a stream whose header names codec c may carry a
// page batch of codec batch: a batch of codec none in every stream, a
// compressed one in a stream of its own codec, and any of the three in a
// mixed stream. CodecMixed is no batch's codec.
func (c Codec) Allows(batch Codec) bool {
	switch {
	case batch > CodecS2:
		return false
	case batch == CodecNone, c == CodecMixed:
		return c <= CodecMixed
	}
	return batch == c
}

// coded reports whether a stream of codec c carries its page batches as
// coded page batch records, each naming its codec.
func (c Codec) coded() bool { return c == CodecS2 || c == CodecMixed }

// Header flag bits. The low byte is critical: a reader rejects a bit it
// does not know. The high byte is optional: a reader ignores bits it does
// not know there.
const (
	flagCodecMask     = 0x000f
	flagEncrypted     = 0x0010
	flagFilters       = 0x0020 // page batches of version 1.3's layout: shuffled and delta pages
	flagCriticalKnown = flagCodecMask | flagEncrypted | flagFilters
	flagCriticalMask  = 0x00ff
)

// StreamIDSize is the size of a stream id.
const StreamIDSize = 16

// Header is what a stream's header says.
type Header struct {
	// Major and Minor are the stream's version.
	Major, Minor uint16
	// Codec is the compression the stream's page batches may use.
	Codec Codec
	// Encrypted reports whether every record payload is sealed with
	// AES-256-GCM.
	Encrypted bool
	// Filters reports whether the stream's page batches have the layout
	// of version 1.3, which may hold shuffled and delta pages
	// (WriterOptions.Filters).
	Filters bool
	// StreamID is chosen by the writer's caller; it names the stream and
	// is authenticated with every record of an encrypted one.
	StreamID [StreamIDSize]byte
}

// appendHeader appends the encoding of h (version 1.0 layout) with its
// check value.
func appendHeader(b []byte, h Header) []byte {
	start := len(b)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint16(b, h.Major)
	b = binary.LittleEndian.AppendUint16(b, h.Minor)
	flags := uint16(h.Codec) & flagCodecMask
	if h.Encrypted {
		flags |= flagEncrypted
	}
	if h.Filters {
		flags |= flagFilters
	}
	b = binary.LittleEndian.AppendUint16(b, flags)
	b = binary.LittleEndian.AppendUint16(b, headerSizeV1)
	b = append(b, h.StreamID[:]...)
	return binary.LittleEndian.AppendUint64(b, xxhash.Sum64(b[start:]))
}
