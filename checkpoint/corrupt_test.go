package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/vgpusim/vgpusim/memory"
)

// findRecord returns the index of the first record of type t after index
// from.
func findRecord(tb testing.TB, s rawStream, t RecordType, from int) int {
	tb.Helper()
	for i := from; i < len(s.recs); i++ {
		if s.recs[i].typ == t {
			return i
		}
	}
	tb.Fatalf("no %v record after %d", t, from)
	return -1
}

// TestCorruption damages a good stream in one way each and checks the
// reader's typed error, and where it says the damage is.
func TestCorruption(t *testing.T) {
	data, _ := testStream(t, WriterOptions{})
	base := splitStream(t, data)
	batch := findRecord(t, base, RecordPageBatch, 0)
	batch2 := findRecord(t, base, RecordPageBatch, batch+1)
	recOff := func(i int) int64 { return int64(base.recs[i].off) }

	cases := []struct {
		name    string
		mutate  func(b []byte, s rawStream) []byte
		want    error
		wantOff int64 // -1: do not check
	}{
		{"bad magic", func(b []byte, _ rawStream) []byte { b[1] ^= 0xff; return b }, ErrBadMagic, 0},
		{"newer major", func(_ []byte, s rawStream) []byte {
			binary.LittleEndian.PutUint16(s.header[offMajor:], VersionMajor+1)
			return s.join(true, false)
		}, ErrVersion, offMajor},
		{"older major", func(_ []byte, s rawStream) []byte {
			binary.LittleEndian.PutUint16(s.header[offMajor:], 0)
			return s.join(true, false)
		}, ErrVersion, offMajor},
		{"unknown critical header flag", func(_ []byte, s rawStream) []byte {
			s.header[offFlags] |= 0x80
			return s.join(true, false)
		}, ErrVersion, offFlags},
		{"unknown codec", func(_ []byte, s rawStream) []byte {
			s.header[offFlags] |= 0x07
			return s.join(true, false)
		}, ErrVersion, offFlags},
		{"header size too small", func(_ []byte, s rawStream) []byte {
			s.header[offHeaderSize] = 12
			return s.join(true, false)
		}, ErrMalformed, offHeaderSize},
		{"unknown critical record", func(_ []byte, s rawStream) []byte {
			s.recs[batch2].typ = 0x0042
			return s.join(true, false)
		}, ErrUnknownRecord, recOff(batch2)},
		{"reserved record type", func(_ []byte, s rawStream) []byte {
			s.recs[batch2].typ = optionalBit
			return s.join(true, false)
		}, ErrMalformed, recOff(batch2)},
		{"flipped bit in header", func(b []byte, _ rawStream) []byte { b[offStreamID+3] ^= 0x04; return b }, ErrChecksum, headerSizeV1 - checkSize},
		{"flipped bit in header check", func(b []byte, _ rawStream) []byte { b[headerSizeV1-1] ^= 0x01; return b }, ErrChecksum, headerSizeV1 - checkSize},
		{"flipped bit in record type", func(b []byte, _ rawStream) []byte { b[recOff(batch)] ^= 0x40; return b }, ErrChecksum, recOff(batch)},
		{"flipped bit in payload", func(b []byte, _ rawStream) []byte {
			b[recOff(batch)+recordHeaderSize+9] ^= 0x20
			return b
		}, ErrChecksum, recOff(batch)},
		{"flipped bit in check value", func(b []byte, _ rawStream) []byte {
			b[recOff(batch+1)-2] ^= 0x80
			return b
		}, ErrChecksum, recOff(batch)},
		{"flipped bit in sequence number", func(b []byte, _ rawStream) []byte { b[recOff(batch)+7] ^= 0x01; return b }, ErrSequence, recOff(batch)},
		{"dropped record", func(_ []byte, s rawStream) []byte {
			s.recs = append(s.recs[:batch], s.recs[batch+1:]...)
			return s.join(false, false)
		}, ErrSequence, recOff(batch)},
		{"dropped record, renumbered", func(_ []byte, s rawStream) []byte {
			s.recs = append(s.recs[:batch], s.recs[batch+1:]...)
			return s.join(false, true)
		}, ErrChecksum, recOff(batch)},
		{"dropped record, rechained", func(_ []byte, s rawStream) []byte {
			// Whoever can rewrite every check value defeats the chain;
			// the end-of-round counts still catch the loss.
			s.recs = append(s.recs[:batch], s.recs[batch+1:]...)
			return s.join(true, true)
		}, ErrMalformed, -1},
		{"duplicated record", func(_ []byte, s rawStream) []byte {
			s.recs = append(s.recs[:batch+1], s.recs[batch:]...)
			return s.join(false, false)
		}, ErrSequence, recOff(batch + 1)},
		{"swapped records", func(_ []byte, s rawStream) []byte {
			s.recs[batch], s.recs[batch+1] = s.recs[batch+1], s.recs[batch]
			return s.join(false, false)
		}, ErrSequence, recOff(batch)},
		{"swapped records, renumbered", func(_ []byte, s rawStream) []byte {
			s.recs[batch], s.recs[batch+1] = s.recs[batch+1], s.recs[batch]
			return s.join(false, true)
		}, ErrChecksum, recOff(batch)},
		{"replayed record", func(_ []byte, s rawStream) []byte {
			s.recs[batch2] = s.recs[batch]
			return s.join(false, false)
		}, ErrSequence, recOff(batch2)},
		{"oversized length field", func(b []byte, _ rawStream) []byte {
			binary.LittleEndian.PutUint32(b[recOff(batch)+2:], 0xffffffff)
			return b
		}, ErrLimit, recOff(batch)},
		{"length field past the end", func(b []byte, _ rawStream) []byte {
			binary.LittleEndian.PutUint32(b[recOff(batch)+2:], 1<<20)
			return b
		}, ErrTruncated, int64(len(data))},
		{"metadata not first", func(_ []byte, s rawStream) []byte {
			s.recs[0], s.recs[batch] = s.recs[batch], s.recs[0]
			return s.join(true, true)
		}, ErrMalformed, headerSizeV1},
		{"second metadata", func(_ []byte, s rawStream) []byte {
			s.recs[batch] = s.recs[0]
			return s.join(true, true)
		}, ErrMalformed, recOff(batch)},
		{"round digest", func(_ []byte, s rawStream) []byte {
			i := findRecord(t, s, RecordEndRound, 0)
			p := s.recs[i].payload
			p[len(p)-1] ^= 1
			return s.join(true, false)
		}, ErrChecksum, -1},
		{"stream digest", func(_ []byte, s rawStream) []byte {
			i := findRecord(t, s, RecordEndStream, 0)
			var e StreamEnd
			decodeStreamEnd(s.recs[i].payload, &e, 16, false)
			e.Digest++
			s.recs[i].payload = appendStreamEnd(nil, &e)
			return s.join(true, false)
		}, ErrChecksum, -1},
		{"stream totals", func(_ []byte, s rawStream) []byte {
			i := findRecord(t, s, RecordEndStream, 0)
			var e StreamEnd
			decodeStreamEnd(s.recs[i].payload, &e, 16, false)
			e.Pages++
			s.recs[i].payload = appendStreamEnd(nil, &e)
			return s.join(true, false)
		}, ErrMalformed, -1},
		{"trailing bytes in a record of the same minor", func(_ []byte, s rawStream) []byte {
			i := findRecord(t, s, RecordEndRound, 0)
			s.recs[i].payload = append(s.recs[i].payload, 0)
			return s.join(true, false)
		}, ErrMalformed, -1},
		{"second device state", func(_ []byte, s rawStream) []byte {
			i := findRecord(t, s, RecordDeviceState, 0)
			s.recs = append(s.recs[:i+1], s.recs[i:]...)
			return s.join(true, true)
		}, ErrMalformed, -1},
		{"device not declared", func(_ []byte, s rawStream) []byte {
			i := findRecord(t, s, RecordDeviceState, 0)
			s.recs[i].payload = appendDeviceState(nil, &DeviceState{Device: 1})
			return s.join(true, false)
		}, ErrMalformed, -1},
		{"end of stream missing", func(_ []byte, s rawStream) []byte {
			s.recs = s.recs[:len(s.recs)-1]
			return s.join(false, false)
		}, ErrTruncated, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.mutate(bytes.Clone(data), base.clone())
			err := readAll(b, ReaderOptions{})
			e := wantErr(t, err, c.want)
			if c.wantOff >= 0 && e.Offset != c.wantOff {
				t.Errorf("offset %d, want %d (%v)", e.Offset, c.wantOff, err)
			}
		})
	}
}

// TestTruncation cuts the stream at every byte: at a record boundary and
// inside a record alike, the reader reports a truncation where the input
// ended.
func TestTruncation(t *testing.T) {
	data, _ := testStream(t, WriterOptions{})
	s := splitStream(t, data)
	boundaries := map[int]bool{len(s.header): true}
	for _, r := range s.recs {
		boundaries[r.off] = true
	}
	atBoundary := 0
	rd := &Reader{}
	defer rd.Close()
	for n := 0; n < len(data); n++ {
		err := readAllWith(rd, data[:n], ReaderOptions{})
		e := wantErr(t, err, ErrTruncated)
		if e.Offset != int64(n) {
			t.Fatalf("cut at %d: offset %d", n, e.Offset)
		}
		if boundaries[n] {
			atBoundary++
		}
	}
	if atBoundary != len(s.recs) {
		t.Fatalf("cut at %d record boundaries, want %d", atBoundary, len(s.recs))
	}
	if err := readAll(data, ReaderOptions{}); err != nil {
		t.Fatalf("whole stream: %v", err)
	}
}

// TestLimits checks that each limit is enforced with ErrLimit.
func TestLimits(t *testing.T) {
	data, _ := testStream(t, WriterOptions{})
	cases := []struct {
		name string
		lim  Limits
	}{
		{"record size", Limits{MaxRecordBytes: 1 << 10}},
		{"batch size", Limits{MaxBatchBytes: 2 << 10}},
		{"pages per record", Limits{MaxPagesPerRecord: 2}},
		{"total size", Limits{MaxTotalBytes: int64(len(data)) - 1}},
		{"metadata size", Limits{MaxMetadataBytes: 32}},
		{"regions", Limits{MaxRegions: 1}},
		{"device state size", Limits{MaxDeviceStateBytes: 8}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := readAll(data, ReaderOptions{Limits: c.lim})
			wantErr(t, err, ErrLimit)
		})
	}
	t.Run("invalid limits", func(t *testing.T) {
		_, err := NewReader(bytes.NewReader(data), ReaderOptions{Limits: Limits{MaxWindowBytes: 10}})
		wantErr(t, err, ErrInvalid)
	})
}

// craftStream writes a stream whose records are given as raw payloads,
// with valid framing and check values, for damage the writer would never
// produce.
func craftStream(tb testing.TB, meta Metadata, codec Codec, payloads ...rawRecord) []byte {
	tb.Helper()
	var buf bytes.Buffer
	opts := WriterOptions{StreamID: testStreamID}
	switch codec {
	case CodecNone:
		opts.Level = LevelNone
	case CodecS2:
		opts.Level = LevelS2
	case CodecMixed:
		opts.Mixed = true
	}
	rw, err := NewRecordWriter(&buf, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := rw.WriteRecord(RecordMetadata, appendMetadata(nil, &meta)); err != nil {
		tb.Fatal(err)
	}
	for _, p := range payloads {
		if err := rw.WriteRecord(p.typ, p.payload); err != nil {
			tb.Fatal(err)
		}
	}
	return buf.Bytes()
}

// batchPayload encodes a page batch of region 0 by hand: the page table of
// the given pages, then frame and raw bytes as given.
func batchPayload(indices []int, kinds []PageKind, frame, raw []byte) []byte {
	b := appendUvarint(nil, 0)
	b = appendUvarint(b, uint64(len(indices)))
	for i, x := range indices {
		if i == 0 {
			b = appendUvarint(b, uint64(x))
		} else {
			b = appendUvarint(b, uint64(x-indices[i-1]-1))
		}
	}
	for _, k := range kinds {
		b = append(b, byte(k))
	}
	for range indices {
		b = appendUvarint(b, 1)
	}
	b = appendBytes(b, frame)
	return append(b, raw...)
}

// zstdFrame builds a zstd frame by hand: a header with the given content
// size and window, then blocks.
func zstdFrame(contentSize uint16, windowLog int, blocks ...[]byte) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd}
	if windowLog == 0 {
		f = append(f, 0x60) // single segment, 2-byte content size
	} else {
		f = append(f, 0x40, byte((windowLog-10)<<3)) // window descriptor, 2-byte content size
	}
	f = binary.LittleEndian.AppendUint16(f, contentSize-256)
	for _, b := range blocks {
		f = append(f, b...)
	}
	return f
}

// rleBlock is a zstd block repeating one byte n times.
func rleBlock(n int, last bool) []byte {
	h := uint32(n)<<3 | 1<<1
	if last {
		h |= 1
	}
	return []byte{byte(h), byte(h >> 8), byte(h >> 16), 'x'}
}

func rawBlock(p []byte, last bool) []byte {
	h := uint32(len(p)) << 3
	if last {
		h |= 1
	}
	return append([]byte{byte(h), byte(h >> 8), byte(h >> 16)}, p...)
}

// TestHostileBatches feeds batches with valid framing but hostile
// contents.
func TestHostileBatches(t *testing.T) {
	meta := Metadata{VMID: "vm", Regions: []RegionInfo{{ID: 0, SizeBytes: 16 * 4096, PageSize: 4096}}}
	page := bytes.Repeat([]byte("p"), 4096)
	var bomb [][]byte
	for i := range 2048 { // 8 MiB of 'x' from 8 KiB of frame
		bomb = append(bomb, rleBlock(4096, i == 2047))
	}
	cases := []struct {
		name  string
		codec Codec
		batch []byte
		want  error
	}{
		{"page index past its region", CodecZstd, batchPayload([]int{3, 16}, []PageKind{PageZero, PageZero}, nil, nil), ErrLimit},
		{"page index far past its region", CodecZstd, batchPayload([]int{1 << 40}, []PageKind{PageZero}, nil, nil), ErrLimit},
		{"more pages than the region", CodecZstd, append(appendUvarint(appendUvarint(nil, 0), 17), 0), ErrLimit},
		{"empty batch", CodecZstd, appendUvarint(appendUvarint(nil, 0), 0), ErrMalformed},
		{"undeclared region", CodecZstd, append([]byte{7}, batchPayload([]int{1}, []PageKind{PageZero}, nil, nil)[1:]...), ErrMalformed},
		{"unknown page kind", CodecZstd, batchPayload([]int{1}, []PageKind{7}, nil, nil), ErrMalformed},
		{"raw page missing", CodecZstd, batchPayload([]int{1}, []PageKind{PageRaw}, nil, page[:100]), ErrMalformed},
		{"bytes after the pages", CodecZstd, batchPayload([]int{1}, []PageKind{PageRaw}, nil, append(page, 0)), ErrMalformed},
		{"compressed page in an uncompressed stream", CodecNone,
			batchPayload([]int{1}, []PageKind{PageZstd}, zstdFrame(4096, 0, rawBlock(page, true)), nil), ErrMalformed},
		{"frame without compressed pages", CodecZstd, batchPayload([]int{1}, []PageKind{PageZero}, []byte{1}, nil), ErrMalformed},
		{"decompression bomb", CodecZstd, batchPayload([]int{1}, []PageKind{PageZstd}, zstdFrame(4096, 0, bomb...), nil), ErrLimit},
		{"frame declaring too much", CodecZstd,
			batchPayload([]int{1}, []PageKind{PageZstd}, append(zstdFrame(4096, 0)[:4], 0xa0, 0, 0, 0, 0x10, 0, 1, 0, 0), nil), ErrLimit},
		{"frame declaring another size", CodecZstd,
			batchPayload([]int{1}, []PageKind{PageZstd}, zstdFrame(8192, 0, rawBlock(page, false), rawBlock(page, true)), nil), ErrMalformed},
		{"frame without a size", CodecZstd,
			batchPayload([]int{1}, []PageKind{PageZstd}, append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x10}, rawBlock(page, true)...), nil), ErrMalformed},
		{"window larger than allowed", CodecZstd,
			batchPayload([]int{1}, []PageKind{PageZstd}, zstdFrame(4096, 26, rawBlock(page, true)), nil), ErrLimit},
		{"garbage frame", CodecZstd, batchPayload([]int{1}, []PageKind{PageZstd}, []byte("not a zstd frame"), nil), ErrMalformed},
		{"frame short of its size", CodecZstd,
			batchPayload([]int{1}, []PageKind{PageZstd}, zstdFrame(4096, 0, rawBlock(page[:1000], true)), nil), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := craftStream(t, meta, c.codec, rawRecord{typ: RecordPageBatch, payload: c.batch})
			wantErr(t, readAll(data, ReaderOptions{}), c.want)
		})
	}
	t.Run("well-formed", func(t *testing.T) {
		// The same construction, well formed, reads: the cases above fail
		// for the reason they name.
		frame := zstdFrame(4096, 0, rawBlock(page, true))
		data := craftStream(t, meta, CodecZstd, rawRecord{typ: RecordPageBatch, payload: batchPayload([]int{1, 2}, []PageKind{PageZstd, PageRaw}, frame, page)})
		firstPageReads(t, data, page, PageZstd)
	})
}

// TestNoPageFromBadRecord checks that a destination never receives a page
// of a record whose check failed: the damage is in the last batch, and
// the Applier, failing there, leaves every destination scrubbed.
func TestNoPageFromBadRecord(t *testing.T) {
	data, src := testStream(t, WriterOptions{})
	s := splitStream(t, data)
	last := len(s.recs) - 2 // the final framebuffer batch
	if s.recs[last].typ != RecordPageBatch {
		t.Fatalf("record %d is %v", last, s.recs[last].typ)
	}
	bad := bytes.Clone(data)
	bad[s.recs[last].off+recordHeaderSize+3] ^= 1
	rd, err := NewReader(bytes.NewReader(bad), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	dst := []*memory.Region{emptyLike(t, src[0], memory.Dense), emptyLike(t, src[1], memory.Dense)}
	a, err := NewApplier(rd, []RegionRef{{0, dst[0]}, {1, dst[1]}})
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for {
		typ, err := a.Step()
		if err != nil {
			wantErr(t, err, ErrChecksum)
			break
		}
		if typ == RecordPageBatch {
			applied++
		}
	}
	if applied == 0 {
		t.Fatal("no batch applied before the damaged one")
	}
	for i, r := range dst {
		zero := newRegion(t, memory.Dense, r.Pages(), r.PageSize(), r.Seed(), memory.Mix{})
		if p, _ := memory.FirstDiff(r, zero); p >= 0 {
			t.Errorf("destination %d not scrubbed at page %d", i, p)
		}
	}
	wantErr(t, a.Commit(), ErrState)
	if a.DeviceStates() != nil {
		t.Error("device states of a failed stream")
	}
}

// TestErrorsAreSticky checks that a Reader keeps returning its first
// error.
func TestErrorsAreSticky(t *testing.T) {
	data, _ := testStream(t, WriterOptions{})
	s := splitStream(t, data)
	i := findRecord(t, s, RecordEndRound, 0)
	data[s.recs[i].off+recordHeaderSize] ^= 1
	rd, err := NewReader(bytes.NewReader(data), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var first error
	for range len(s.recs) + 3 {
		if _, err := rd.Next(); err != nil {
			if first == nil {
				first = err
			} else if err != first {
				t.Fatalf("second error %v differs from first %v", err, first)
			}
		}
	}
	e := wantErr(t, first, ErrChecksum)
	if e.Offset != int64(s.recs[i].off) || e.Seq != int64(i) {
		t.Fatalf("error at %d record %d, want %d record %d", e.Offset, e.Seq, s.recs[i].off, i)
	}
	if !errors.Is(rd.Err(), ErrChecksum) {
		t.Fatal("Err does not report the error")
	}
	if msg := first.Error(); !bytes.Contains([]byte(msg), []byte(fmt.Sprintf("offset %d", e.Offset))) {
		t.Fatalf("message %q does not name the offset", msg)
	}
}

var _ = xxhash.Sum64
