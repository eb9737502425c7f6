package checkpoint

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/cespare/xxhash/v2"
)

// RecordReader is the record layer of a stream read back: it checks the
// header, then hands over records one by one after checking each one's
// length against the limits, its sequence number, its check value and —
// in an encrypted stream — its authentication, in that order, and before
// anything looks inside the payload. It knows nothing of what payloads
// mean; Reader decodes them.
//
// Its zero value is ready for Reset, which reads the stream's header.
// Errors are sticky: after the first, every call returns it. A
// RecordReader is not safe for concurrent use.
type RecordReader struct {
	r      io.Reader
	opts   ReaderOptions
	hdr    Header
	header []byte
	seq    uint64 // sequence number expected next
	prev   uint64
	off    int64
	seal   *sealer
	err    error

	buf    []byte                             // payload and check value of the current record
	recHdr [checkSize + recordHeaderSize]byte // previous check, then record header
	digest xxhash.Digest
}

// minGrowBytes is the first buffer a record payload is read into; a
// payload larger than that is read in pieces into a buffer doubled as the
// bytes arrive, so that a length field claiming more than the stream holds
// costs at most twice what the stream really sent.
const minGrowBytes = 64 << 10

// Reset starts reading a new stream from r, keeping the buffers, and reads
// its header.
func (rr *RecordReader) Reset(r io.Reader, opts ReaderOptions) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	*rr = RecordReader{r: r, opts: opts, buf: rr.buf[:0], header: rr.header[:0]}
	if err := rr.readHeader(); err != nil {
		rr.err = err
		return err
	}
	return nil
}

func (rr *RecordReader) readHeader() error {
	fixed := rr.recHdr[:offStreamID] // the record header buffer is free yet
	n, err := io.ReadFull(rr.r, fixed)
	rr.off = int64(n)
	if m := min(n, len(magic)); string(fixed[:m]) != magic[:m] {
		return newError(ErrBadMagic, 0, -1, "")
	}
	if err != nil {
		return rr.truncated(err, "in header")
	}
	if major := binary.LittleEndian.Uint16(fixed[offMajor:]); major != VersionMajor {
		return newError(ErrVersion, offMajor, -1, "major version %d, want %d", major, VersionMajor)
	}
	size := int(binary.LittleEndian.Uint16(fixed[offHeaderSize:]))
	if size < headerSizeV1 || size > maxHeaderSize {
		return newError(ErrMalformed, offHeaderSize, -1, "header size %d", size)
	}
	h := append(rr.header[:0], fixed...)
	h = append(h, make([]byte, size-len(fixed))...)
	n, err = io.ReadFull(rr.r, h[len(fixed):])
	rr.off += int64(n)
	if err != nil {
		return rr.truncated(err, "in header")
	}
	rr.header = h
	want := binary.LittleEndian.Uint64(h[size-checkSize:])
	if got := xxhash.Sum64(h[:size-checkSize]); got != want {
		return newError(ErrChecksum, int64(size-checkSize), -1, "header check computed %#016x, stream says %#016x", got, want)
	}
	flags := binary.LittleEndian.Uint16(h[offFlags:])
	if unknown := flags & flagCriticalMask &^ flagCriticalKnown; unknown != 0 {
		return newError(ErrVersion, offFlags, -1, "unknown critical flags %#04x", unknown)
	}
	codec := Codec(flags & flagCodecMask)
	minor := binary.LittleEndian.Uint16(h[offMinor:])
	switch {
	case codec > CodecMixed:
		return newError(ErrVersion, offFlags, -1, "unknown codec %d", codec)
	case minor < minorFor(codec, false, false):
		// What a reader of the version the stream declares would say.
		return newError(ErrVersion, offFlags, -1, "codec %v in a version %d.%d stream", codec, VersionMajor, minor)
	case flags&flagFilters != 0 && minor < minorFilters:
		return newError(ErrVersion, offFlags, -1, "page filters in a version %d.%d stream", VersionMajor, minor)
	}
	rr.hdr = Header{
		Major:     VersionMajor,
		Minor:     minor,
		Codec:     codec,
		Encrypted: flags&flagEncrypted != 0,
		Filters:   flags&flagFilters != 0,
	}
	copy(rr.hdr.StreamID[:], h[offStreamID:])
	rr.prev = want

	mode := rr.opts.Encryption
	switch {
	case rr.hdr.Encrypted && rr.opts.Key == nil:
		return newError(ErrEncryptionMode, offFlags, -1, "stream is encrypted, reader mode %v has no key", mode)
	case !rr.hdr.Encrypted && mode == EncryptionRequired:
		return newError(ErrEncryptionMode, offFlags, -1, "stream is plaintext, reader requires encryption")
	case rr.hdr.Encrypted:
		s, err := newSealer(rr.opts.Key, h)
		if err != nil {
			return err
		}
		rr.seal = s
	}
	return nil
}

// Header returns the stream's header.
func (rr *RecordReader) Header() Header { return rr.hdr }

// Offset returns the number of bytes consumed so far.
func (rr *RecordReader) Offset() int64 { return rr.off }

// Next returns the next record. At the end of the input, exactly between
// two records, it returns io.EOF and may be called again if more input
// arrives; whether the stream was complete is for the caller to say (a
// Reader expects an end-of-stream record). Every other error is an *Error
// and is sticky.
func (rr *RecordReader) Next() (Record, error) {
	if rr.err != nil {
		return Record{}, rr.err
	}
	start := rr.off
	hdr := rr.recHdr[:]
	binary.LittleEndian.PutUint64(hdr, rr.prev)
	rh := hdr[checkSize:]
	n, err := io.ReadFull(rr.r, rh)
	if err == io.EOF {
		return Record{}, io.EOF
	}
	rr.off += int64(n)
	if err != nil {
		return Record{}, rr.fail(rr.truncated(err, "in record header"))
	}
	t := RecordType(binary.LittleEndian.Uint16(rh[0:]))
	size := int64(binary.LittleEndian.Uint32(rh[2:]))
	seq := binary.LittleEndian.Uint64(rh[6:])
	sseq := int64(seq)
	switch {
	case size > int64(rr.opts.Limits.MaxRecordBytes):
		return Record{}, rr.fail(newError(ErrLimit, start, sseq, "record of %d bytes, limit %d", size, rr.opts.Limits.MaxRecordBytes))
	case seq != rr.seq:
		return Record{}, rr.fail(newError(ErrSequence, start, sseq, "sequence number %d, want %d", seq, rr.seq))
	case start+recordHeaderSize+size+checkSize > rr.opts.Limits.MaxTotalBytes:
		return Record{}, rr.fail(newError(ErrLimit, start, sseq, "stream longer than %d bytes", rr.opts.Limits.MaxTotalBytes))
	}
	body, err := rr.readN(int(size) + checkSize)
	if err != nil {
		return Record{}, rr.fail(rr.truncated(err, "in record payload"))
	}
	payload := body[:size:size]
	want := binary.LittleEndian.Uint64(body[size:])
	d := &rr.digest
	d.Reset()
	d.Write(hdr)
	d.Write(payload)
	if got := d.Sum64(); got != want {
		return Record{}, rr.fail(newError(ErrChecksum, start, sseq, "record check computed %#016x, stream says %#016x", got, want))
	}
	if !t.Valid() {
		return Record{}, rr.fail(newError(ErrMalformed, start, sseq, "reserved record type %#04x", uint16(t)))
	}
	if rr.seal != nil {
		payload, err = rr.seal.open(seq, rh, payload)
		if err != nil {
			return Record{}, rr.fail(newError(ErrAuth, start, sseq, "record does not open"))
		}
	}
	rr.prev = want
	rr.seq++
	return Record{Type: t, Seq: seq, Offset: start, Payload: payload}, nil
}

// readN reads n bytes into rr.buf, growing it as the bytes arrive.
func (rr *RecordReader) readN(n int) ([]byte, error) {
	buf := rr.buf[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, max(2*cap(buf), minGrowBytes)))
			copy(grown, buf)
			buf = grown
		}
		k, err := io.ReadFull(rr.r, buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+k]
		rr.off += int64(k)
		if err != nil {
			rr.buf = buf
			return nil, err
		}
	}
	rr.buf = buf
	return buf, nil
}

func (rr *RecordReader) fail(err error) error {
	rr.err = err
	return err
}

// truncated reports the input ending (or failing) at the current offset.
func (rr *RecordReader) truncated(err error, where string) error {
	e := newError(ErrTruncated, rr.off, -1, "%s", where)
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		e.Cause = err
	}
	return e
}

// takeBuffer hands the caller the buffer the last record's payload
// aliases, and reads the next record into next (grown as needed; nil is
// fine). A ParallelApplier's stream passes each page batch's buffer to a
// worker this way, without copying it.
func (rr *RecordReader) takeBuffer(next []byte) []byte {
	b := rr.buf
	rr.buf = next[:0]
	return b
}
