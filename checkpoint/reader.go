package checkpoint

import (
	"io"
)

// Reader reads a whole stream: it checks the header, reads the metadata,
// then hands over the records one by one, decoded and checked against the
// metadata, the limits and the running counts and digests. It skips
// optional records it does not know and rejects unknown critical ones.
//
// Next returns the type of the next record; Batch, DeviceState, RoundEnd
// and StreamEnd return its contents, valid until the next call to Next.
// After the end-of-stream record has been checked, Next returns io.EOF
// without reading further, so a Reader can sit on a connection that stays
// open. Errors are sticky *Error values. A Reader is not safe for
// concurrent use.
type Reader struct {
	rr    *RecordReader
	bd    *BatchDecoder
	opts  ReaderOptions
	meta  Metadata
	newer bool // the stream's minor version is newer than this package's
	tally tally
	done  bool
	err   error

	cur    RecordType
	batch  *Batch
	device DeviceState
	runs   PageRuns
	part   AttachmentPart
	round  RoundEnd
	end    StreamEnd
}

// NewReader reads the header and the metadata record of a stream from r.
// A source without its own buffering is best wrapped in a bufio.Reader:
// the Reader reads each record header and each payload with one call.
func NewReader(r io.Reader, opts ReaderOptions) (*Reader, error) {
	rd := &Reader{}
	if err := rd.Reset(r, opts); err != nil {
		return nil, err
	}
	return rd, nil
}

// Reset starts reading a new stream from r, keeping the Reader's buffers
// and, when the limits are unchanged, its zstd decoder.
func (rd *Reader) Reset(r io.Reader, opts ReaderOptions) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if rd.rr == nil {
		rd.rr = &RecordReader{}
	}
	rd.opts, rd.done, rd.err, rd.cur = opts, false, nil, 0
	if err := rd.rr.Reset(r, opts); err != nil {
		return rd.fail(err)
	}
	hdr := rd.rr.Header()
	rd.newer = hdr.Minor > VersionMinor
	rec, err := rd.rr.Next()
	switch {
	case err == io.EOF:
		return rd.fail(newError(ErrTruncated, rd.rr.Offset(), -1, "no metadata record"))
	case err != nil:
		return rd.fail(err)
	case rec.Type != RecordMetadata:
		return rd.fail(newError(ErrMalformed, rec.Offset, int64(rec.Seq), "first record is %v, not metadata", rec.Type))
	case len(rec.Payload) > opts.Limits.MaxMetadataBytes:
		return rd.fail(newError(ErrLimit, rec.Offset, int64(rec.Seq), "metadata of %d bytes, limit %d", len(rec.Payload), opts.Limits.MaxMetadataBytes))
	}
	if why, overLimit := decodeMetadata(rec.Payload, &rd.meta, &opts.Limits, rd.newer); why != "" {
		return rd.fail(newError(malformedOrLimit(overLimit), rec.Offset, int64(rec.Seq), "metadata: %s", why))
	}
	rd.tally.reset(len(rd.meta.Profiles), len(rd.meta.Regions))
	if rd.bd == nil {
		rd.bd = &BatchDecoder{}
	}
	return rd.bd.Reset(hdr, &rd.meta, opts.Limits)
}

// Close releases the zstd decoder. It does not close the io.Reader.
func (rd *Reader) Close() error {
	if rd.bd != nil {
		rd.bd.Close()
	}
	return nil
}

// Header returns the stream's header.
func (rd *Reader) Header() Header { return rd.rr.Header() }

// Metadata returns the stream's metadata. It stays valid until Reset; the
// caller must not change it.
func (rd *Reader) Metadata() *Metadata { return &rd.meta }

// Offset returns the number of bytes consumed so far.
func (rd *Reader) Offset() int64 { return rd.rr.Offset() }

// Err returns the error that stopped the reader, if any.
func (rd *Reader) Err() error { return rd.err }

// Done reports whether the end-of-stream record has been read and
// checked.
func (rd *Reader) Done() bool { return rd.done }

func (rd *Reader) fail(err error) error {
	rd.err = err
	return err
}

// Next reads the next record and returns its type: RecordPageBatch,
// RecordPageRuns, RecordAttachment, RecordDeviceState, RecordEndRound or
// RecordEndStream. A coded page batch
// record (RecordCodedBatch) is returned as RecordPageBatch: both carry a
// Batch, whose Codec says how it was compressed. After the end-of-stream
// record it returns io.EOF.
func (rd *Reader) Next() (RecordType, error) {
	if rd.err != nil {
		return 0, rd.err
	}
	if rd.done {
		return 0, io.EOF
	}
	for {
		rec, err := rd.rr.Next()
		if err == io.EOF {
			return 0, rd.fail(newError(ErrTruncated, rd.rr.Offset(), -1, "stream ends before its end-of-stream record"))
		}
		if err != nil {
			return 0, rd.fail(err)
		}
		rd.cur = rec.Type
		isBatch, err := batchRecord(rec, rd.rr.Header())
		if err != nil {
			return 0, rd.fail(err)
		}
		if isBatch {
			b, err := rd.bd.Decode(rec)
			if err != nil {
				return 0, rd.fail(err)
			}
			rd.batch = b
			rd.tally.add(b.Sum, b.Len(), b.ZeroPages())
			// Both carry a Batch; its Codec tells them apart.
			rd.cur = RecordPageBatch
			return rd.cur, nil
		}
		skip, err := rd.control(rec)
		if err != nil {
			return 0, rd.fail(err)
		}
		if !skip {
			return rec.Type, nil
		}
	}
}

// control checks a record that is not a page batch against the running
// counts and digests, every page batch before it already counted; it
// reports an optional record of an unknown type, to be skipped. A
// ParallelApplier's streams share it with Next.
func (rd *Reader) control(rec Record) (skip bool, err error) {
	malformed := func(format string, args ...any) (bool, error) {
		return false, newError(ErrMalformed, rec.Offset, int64(rec.Seq), format, args...)
	}
	switch rec.Type {
	case RecordDeviceState:
		if why, overLimit := decodeDeviceState(rec.Payload, &rd.device, rd.opts.Limits.MaxDeviceStateBytes, rd.newer); why != "" {
			return false, newError(malformedOrLimit(overLimit), rec.Offset, int64(rec.Seq), "device state: %s", why)
		}
		if !rd.tally.addDevice(rd.device.Device, xxhashSum(rec.Payload)) {
			return malformed("device %d: not declared, or its state sent twice", rd.device.Device)
		}
	case RecordEndRound:
		if why := decodeRoundEnd(rec.Payload, &rd.round, rd.newer); why != "" {
			return malformed("end of round: %s", why)
		}
		want := rd.tally.endRound()
		if err := compareRound(&rd.round, &want); err != "" {
			return malformed("end of round %d: %s", want.Round, err)
		}
		if rd.round.Digest != want.Digest {
			return false, newError(ErrChecksum, rec.Offset, int64(rec.Seq), "round %d digest computed %#016x, stream says %#016x", want.Round, want.Digest, rd.round.Digest)
		}
	case RecordEndStream:
		if why := decodeStreamEnd(rec.Payload, &rd.end, rd.opts.Limits.MaxRegions, rd.newer); why != "" {
			return malformed("end of stream: %s", why)
		}
		if name, ok := rd.tally.attached.incomplete(); ok {
			return malformed("end of stream: attachment %s incomplete", quoteShort(name))
		}
		want := rd.tally.end()
		if err := compareStream(&rd.end, &want, &rd.meta); err != "" {
			return malformed("end of stream: %s", err)
		}
		if rd.end.Digest != want.Digest {
			return false, newError(ErrChecksum, rec.Offset, int64(rec.Seq), "stream digest computed %#016x, stream says %#016x", want.Digest, rd.end.Digest)
		}
		rd.done = true
	case RecordPageRuns, RecordAttachment:
		if rd.rr.Header().Minor < minorSnapshot {
			// Read, and refused, as a reader of that version would.
			return false, newError(ErrUnknownRecord, rec.Offset, int64(rec.Seq), "record type %v in a version %d.%d stream", rec.Type, VersionMajor, rd.rr.Header().Minor)
		}
		if rec.Type == RecordPageRuns {
			if why, overLimit := decodePageRuns(rec.Payload, &rd.runs, &rd.meta, rd.opts.Limits.MaxPagesPerRecord, rd.rr.Header().Minor, rd.newer); why != "" {
				return false, newError(malformedOrLimit(overLimit), rec.Offset, int64(rec.Seq), "page runs: %s", why)
			}
			pages, zero := rd.runs.Pages()
			i := rd.meta.region(rd.runs.Region)
			if !rd.tally.addRuns(i, pages, rd.meta.Regions[i].Pages()) {
				return malformed("page runs cover more pages of region %d than it has", rd.runs.Region)
			}
			rd.tally.add(rd.runs.Sum, pages, zero)
			break
		}
		if why, overLimit := decodeAttachmentPart(rec.Payload, &rd.part, rd.opts.Limits.MaxAttachmentBytes, rd.newer); why != "" {
			return false, newError(malformedOrLimit(overLimit), rec.Offset, int64(rec.Seq), "attachment: %s", why)
		}
		if why, overLimit := rd.tally.attached.add(&rd.part, rd.opts.Limits.MaxAttachmentBytes); why != "" {
			return false, newError(malformedOrLimit(overLimit), rec.Offset, int64(rec.Seq), "attachment: %s", why)
		}
		rd.tally.add(xxhashSum(rec.Payload), 0, 0)
	case RecordMetadata:
		return malformed("second metadata record")
	default:
		if rec.Type.Optional() {
			return true, nil
		}
		return false, newError(ErrUnknownRecord, rec.Offset, int64(rec.Seq), "record type %v", rec.Type)
	}
	return false, nil
}

// malformedOrLimit is the sentinel of a payload that did not decode:
// ErrLimit if a field was beyond the reader's limits, ErrMalformed
// otherwise.
func malformedOrLimit(overLimit bool) error {
	if overLimit {
		return ErrLimit
	}
	return ErrMalformed
}

func compareRound(got, want *RoundEnd) string {
	switch {
	case got.Round != want.Round:
		return "round number " + utoa(got.Round)
	case got.Records != want.Records:
		return "record count " + utoa(got.Records) + ", counted " + utoa(want.Records)
	case got.Pages != want.Pages || got.ZeroPages != want.ZeroPages:
		return "page counts " + utoa(got.Pages) + "/" + utoa(got.ZeroPages) + ", counted " + utoa(want.Pages) + "/" + utoa(want.ZeroPages)
	}
	return ""
}

func compareStream(got, want *StreamEnd, meta *Metadata) string {
	switch {
	case got.Rounds != want.Rounds:
		return "round count " + utoa(got.Rounds) + ", counted " + utoa(want.Rounds)
	case got.Records != want.Records || got.DeviceStates != want.DeviceStates:
		return "record counts " + utoa(got.Records) + "/" + utoa(got.DeviceStates) + ", counted " + utoa(want.Records) + "/" + utoa(want.DeviceStates)
	case got.Pages != want.Pages || got.ZeroPages != want.ZeroPages:
		return "page counts " + utoa(got.Pages) + "/" + utoa(got.ZeroPages) + ", counted " + utoa(want.Pages) + "/" + utoa(want.ZeroPages)
	}
	for i, d := range got.RegionDigests {
		if meta.region(d.Region) < 0 {
			return "digest of undeclared region " + utoa(uint64(d.Region))
		}
		for _, o := range got.RegionDigests[:i] {
			if o.Region == d.Region {
				return "two digests of region " + utoa(uint64(d.Region))
			}
		}
	}
	return ""
}

// PageRuns returns the page runs record just read. Its Runs are reused
// by the next record.
func (rd *Reader) PageRuns() *PageRuns {
	if rd.cur != RecordPageRuns {
		return nil
	}
	return &rd.runs
}

// AttachmentPart returns the attachment part just read, or the zero part
// if the record just read is not one. Its Data aliases the reader's
// buffer.
func (rd *Reader) AttachmentPart() AttachmentPart {
	if rd.cur != RecordAttachment {
		return AttachmentPart{}
	}
	return rd.part
}

// Batch returns the page batch just read.
func (rd *Reader) Batch() *Batch {
	if rd.cur != RecordPageBatch {
		return nil
	}
	return rd.batch
}

// DeviceState returns the device state just read. Its Data aliases the
// reader's buffer.
func (rd *Reader) DeviceState() DeviceState { return rd.device }

// RoundEnd returns the end-of-round record just read.
func (rd *Reader) RoundEnd() RoundEnd { return rd.round }

// StreamEnd returns the end-of-stream record, once read.
func (rd *Reader) StreamEnd() StreamEnd { return rd.end }
