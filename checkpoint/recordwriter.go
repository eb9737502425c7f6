package checkpoint

import (
	"encoding/binary"
	"io"
	"math"

	"github.com/cespare/xxhash/v2"
)

// RecordWriter is the record layer of a stream: it writes the header, then
// records, assigning each its sequence number, sealing its payload when
// the stream is encrypted, and chaining its check value to the previous
// one. It knows nothing of what payloads mean; Writer builds them.
//
// A RecordWriter is the ordered stage of a parallel copy engine: encoders
// on other goroutines produce payloads, and one goroutine hands them to
// WriteRecord in stream order. It is not safe for concurrent use.
type RecordWriter struct {
	w      io.Writer
	hdr    Header
	header []byte // the encoded stream header
	seq    uint64
	prev   uint64 // check value of the previous record, or of the header
	off    int64
	seal   *sealer
	err    error

	out     []byte // small pieces gathered into one Write
	sealBuf []byte
	digest  xxhash.Digest

	codecByte [1]byte  // the codec byte of a coded page batch
	parts     [][]byte // a coded page batch's payload pieces
}

// outFlushBytes is the payload piece size above which a piece is written
// straight from the caller's buffer instead of being gathered: small
// pieces are worth a copy to save a Write call, large ones are not.
const outFlushBytes = 32 << 10

// NewRecordWriter writes the stream header to w and returns a RecordWriter
// for the records that follow.
func NewRecordWriter(w io.Writer, opts WriterOptions) (*RecordWriter, error) {
	rw := &RecordWriter{}
	if err := rw.Reset(w, opts); err != nil {
		return nil, err
	}
	return rw, nil
}

// Reset starts a new stream on w, keeping the buffers, and writes its
// header.
func (rw *RecordWriter) Reset(w io.Writer, opts WriterOptions) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	return rw.reset(w, opts)
}

// reset writes the header of a stream with options opts, which have their
// defaults: version 1.0 unless the codec or the records need a later one
// (minorFor).
func (rw *RecordWriter) reset(w io.Writer, opts WriterOptions) error {
	h := Header{Major: VersionMajor, Codec: opts.codec(), Encrypted: opts.encrypted(), Filters: opts.Filters, StreamID: opts.StreamID}
	h.Minor = minorFor(h.Codec, opts.Snapshot, opts.Filters)
	*rw = RecordWriter{w: w, hdr: h, out: rw.out[:0], sealBuf: rw.sealBuf[:0], parts: rw.parts[:0]}
	rw.header = appendHeader(nil, h)
	rw.prev = binary.LittleEndian.Uint64(rw.header[len(rw.header)-checkSize:])
	if h.Encrypted {
		s, err := newSealer(opts.Key, rw.header)
		if err != nil {
			return err
		}
		rw.seal = s
	}
	rw.out = append(rw.out, rw.header...)
	return rw.flush()
}

// Header returns the header the writer wrote.
func (rw *RecordWriter) Header() Header { return rw.hdr }

// Seq returns the sequence number the next record will get.
func (rw *RecordWriter) Seq() uint64 { return rw.seq }

// Offset returns the number of bytes written so far.
func (rw *RecordWriter) Offset() int64 { return rw.off }

// Err returns the error that stopped the writer, if any.
func (rw *RecordWriter) Err() error { return rw.err }

// WriteRecord writes one record of type t whose payload is the
// concatenation of parts. The parts are not retained. When it returns, the
// whole record has been handed to the io.Writer.
func (rw *RecordWriter) WriteRecord(t RecordType, parts ...[]byte) error {
	if rw.err != nil {
		return rw.err
	}
	if !t.Valid() {
		return rw.invalid("record type %#04x is reserved", uint16(t))
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	wire := n
	if rw.seal != nil {
		wire += gcmTagSize
	}
	if wire > ceilingRecordBytes || wire > math.MaxUint32 {
		return rw.invalid("record payload of %d bytes", n)
	}
	var hdr [checkSize + recordHeaderSize]byte // previous check, then record header
	binary.LittleEndian.PutUint64(hdr[0:], rw.prev)
	rh := hdr[checkSize:]
	binary.LittleEndian.PutUint16(rh[0:], uint16(t))
	binary.LittleEndian.PutUint32(rh[2:], uint32(wire))
	binary.LittleEndian.PutUint64(rh[6:], rw.seq)

	if rw.seal != nil {
		// GCM needs the plaintext in one piece.
		buf := rw.sealBuf[:0]
		if cap(buf) < wire {
			buf = make([]byte, 0, wire)
		}
		for _, p := range parts {
			buf = append(buf, p...)
		}
		rw.sealBuf = buf
		sealed := rw.seal.seal(rw.seq, rh, buf)
		return rw.emit(hdr[:], sealed)
	}
	return rw.emit(hdr[:], parts...)
}

// WriteBatch writes batch b as the record its stream carries: a page
// batch record in a stream of codec none or zstd, a coded page batch
// record naming b's codec (b.Level.Codec()) in a stream of codec s2 or
// mixed. A batch whose codec the stream's header does not allow
// (Codec.Allows) is refused with ErrInvalid, and nothing is written. The
// payload is not retained.
func (rw *RecordWriter) WriteBatch(b EncodedBatch) error {
	if rw.err != nil {
		return rw.err
	}
	c := b.Level.Codec()
	if !rw.hdr.Codec.Allows(c) {
		return rw.invalid("batch at level %v (codec %v) in a stream of codec %v", b.Level, c, rw.hdr.Codec)
	}
	if b.Filtered != rw.hdr.Filters {
		return rw.invalid("batch with page filters %v in a stream with page filters %v", b.Filtered, rw.hdr.Filters)
	}
	if !rw.hdr.Codec.coded() {
		return rw.WriteRecord(RecordPageBatch, b.Payload...)
	}
	rw.codecByte[0] = byte(c)
	rw.parts = append(append(rw.parts[:0], rw.codecByte[:]), b.Payload...)
	err := rw.WriteRecord(RecordCodedBatch, rw.parts...)
	clear(rw.parts) // the pieces are the caller's buffers
	return err
}

// emit hashes and writes the record header and payload pieces, then the
// check value.
func (rw *RecordWriter) emit(hdr []byte, parts ...[]byte) error {
	d := &rw.digest
	d.Reset()
	d.Write(hdr)
	for _, p := range parts {
		d.Write(p)
	}
	check := d.Sum64()

	rw.out = append(rw.out[:0], hdr[checkSize:]...)
	for _, p := range parts {
		if len(p) <= outFlushBytes {
			rw.out = append(rw.out, p...)
			continue
		}
		if err := rw.flush(); err != nil {
			return err
		}
		if err := rw.write(p); err != nil {
			return err
		}
	}
	rw.out = binary.LittleEndian.AppendUint64(rw.out, check)
	if err := rw.flush(); err != nil {
		return err
	}
	rw.prev = check
	rw.seq++
	return nil
}

func (rw *RecordWriter) flush() error {
	if len(rw.out) == 0 {
		return nil
	}
	err := rw.write(rw.out)
	rw.out = rw.out[:0]
	return err
}

func (rw *RecordWriter) write(p []byte) error {
	n, err := rw.w.Write(p)
	rw.off += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		rw.err = newError(ErrWrite, rw.off, int64(rw.seq), "").withCause(err)
		return rw.err
	}
	return nil
}

func (rw *RecordWriter) invalid(format string, args ...any) error {
	e := invalid(format, args...)
	e.Offset = rw.off
	return e
}
