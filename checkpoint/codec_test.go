package checkpoint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/vgpusim/vgpusim/memory"
)

// The format facts of version 1.1: which header codecs exist, which record
// carries the page batches of a stream of each, and which batch codecs
// each allows.

// textPage is a compressible page of ps bytes.
func textPage(ps int) []byte {
	return bytes.Repeat([]byte("the quick vgpu page "), ps/20+1)[:ps]
}

// layoutOf is the page batch layout of one page of region 0, index 1,
// compressed with codec c (raw if c is CodecNone).
func layoutOf(tb testing.TB, c Codec, page []byte) []byte {
	tb.Helper()
	switch c {
	case CodecNone:
		return batchPayload([]int{1}, []PageKind{PageRaw}, nil, page)
	case CodecZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithSingleSegment(true))
		if err != nil {
			tb.Fatal(err)
		}
		defer enc.Close()
		return batchPayload([]int{1}, []PageKind{PageCompressed}, enc.EncodeAll(page, nil), nil)
	case CodecS2:
		return batchPayload([]int{1}, []PageKind{PageCompressed}, s2.Encode(nil, page), nil)
	}
	tb.Fatalf("no layout for codec %v", c)
	return nil
}

// codedPayload is the payload of a coded page batch record: codec byte c,
// then layout.
func codedPayload(c byte, layout []byte) []byte { return append([]byte{c}, layout...) }

func TestCodecAllows(t *testing.T) {
	// The table of FORMAT.md: rows are header codecs, columns batch
	// codecs none, zstd, s2, mixed (no batch's), 7 (unknown).
	want := map[Codec][5]bool{
		CodecNone:  {true, false, false, false, false},
		CodecZstd:  {true, true, false, false, false},
		CodecS2:    {true, false, true, false, false},
		CodecMixed: {true, true, true, false, false},
		7:          {false, false, false, false, false},
	}
	for h, row := range want {
		for i, b := range []Codec{CodecNone, CodecZstd, CodecS2, CodecMixed, 7} {
			if got := h.Allows(b); got != row[i] {
				t.Errorf("%v.Allows(%v) = %v, want %v", h, b, got, row[i])
			}
		}
	}
}

// TestBatchRecordCombinations decodes every pairing of header codec,
// record type and batch codec, and a few damaged coded batches: each is
// read, or refused as malformed.
func TestBatchRecordCombinations(t *testing.T) {
	const ps = 4096
	meta := Metadata{VMID: "vm", Regions: []RegionInfo{{ID: 0, SizeBytes: 16 * ps, PageSize: ps}}}
	page := textPage(ps)
	layout := map[Codec][]byte{}
	for _, c := range []Codec{CodecNone, CodecZstd, CodecS2} {
		layout[c] = layoutOf(t, c, page)
	}
	type rec struct {
		typ     RecordType
		payload []byte
	}
	plain := func(c Codec) rec { return rec{RecordPageBatch, layout[c]} }
	coded := func(c Codec) rec { return rec{RecordCodedBatch, codedPayload(byte(c), layout[c])} }
	cases := []struct {
		header Codec
		name   string
		rec    rec
		want   error // nil: read
	}{
		{CodecNone, "plain, none", plain(CodecNone), nil},
		{CodecNone, "plain, zstd frame", plain(CodecZstd), ErrMalformed},
		{CodecNone, "plain, s2 block", plain(CodecS2), ErrMalformed},
		{CodecNone, "coded, none", coded(CodecNone), ErrUnknownRecord},
		{CodecNone, "coded, zstd", coded(CodecZstd), ErrUnknownRecord},
		{CodecNone, "coded, s2", coded(CodecS2), ErrUnknownRecord},

		{CodecZstd, "plain, none", plain(CodecNone), nil},
		{CodecZstd, "plain, zstd frame", plain(CodecZstd), nil},
		{CodecZstd, "plain, s2 block", plain(CodecS2), ErrMalformed},
		{CodecZstd, "coded, none", coded(CodecNone), ErrUnknownRecord},
		{CodecZstd, "coded, zstd", coded(CodecZstd), ErrUnknownRecord},
		{CodecZstd, "coded, s2", coded(CodecS2), ErrUnknownRecord},

		{CodecS2, "plain, none", plain(CodecNone), ErrMalformed},
		{CodecS2, "plain, zstd frame", plain(CodecZstd), ErrMalformed},
		{CodecS2, "plain, s2 block", plain(CodecS2), ErrMalformed},
		{CodecS2, "coded, none", coded(CodecNone), nil},
		{CodecS2, "coded, zstd", coded(CodecZstd), ErrMalformed},
		{CodecS2, "coded, s2", coded(CodecS2), nil},

		{CodecMixed, "plain, none", plain(CodecNone), ErrMalformed},
		{CodecMixed, "plain, zstd frame", plain(CodecZstd), ErrMalformed},
		{CodecMixed, "plain, s2 block", plain(CodecS2), ErrMalformed},
		{CodecMixed, "coded, none", coded(CodecNone), nil},
		{CodecMixed, "coded, zstd", coded(CodecZstd), nil},
		{CodecMixed, "coded, s2", coded(CodecS2), nil},

		{CodecMixed, "coded, zstd named s2", rec{RecordCodedBatch, codedPayload(byte(CodecS2), layout[CodecZstd])}, ErrMalformed},
		{CodecMixed, "coded, s2 named zstd", rec{RecordCodedBatch, codedPayload(byte(CodecZstd), layout[CodecS2])}, ErrMalformed},
		{CodecMixed, "coded, s2 named none", rec{RecordCodedBatch, codedPayload(byte(CodecNone), layout[CodecS2])}, ErrMalformed},
		{CodecMixed, "coded, codec mixed", rec{RecordCodedBatch, codedPayload(byte(CodecMixed), layout[CodecS2])}, ErrMalformed},
		{CodecMixed, "coded, unknown codec", rec{RecordCodedBatch, codedPayload(0x42, layout[CodecS2])}, ErrMalformed},
		{CodecS2, "coded, no codec byte", rec{RecordCodedBatch, nil}, ErrMalformed},
		{CodecS2, "coded, codec byte only", rec{RecordCodedBatch, []byte{byte(CodecS2)}}, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("header=%v/%s", c.header, c.name), func(t *testing.T) {
			data := craftStream(t, meta, c.header, rawRecord{typ: c.rec.typ, payload: c.rec.payload})
			rd, err := NewReader(bytes.NewReader(data), ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			typ, err := rd.Next()
			if c.want != nil {
				e := wantErr(t, err, c.want)
				if e.Seq != 1 {
					t.Fatalf("error in record %d, want 1", e.Seq)
				}
				return
			}
			if err != nil || typ != RecordPageBatch {
				t.Fatalf("%v %v", typ, err)
			}
			b := rd.Batch()
			wantCodec := c.header
			if c.rec.typ == RecordCodedBatch {
				wantCodec = Codec(c.rec.payload[0])
			}
			if p := b.Page(0); b.Len() != 1 || p.Index != 1 || !bytes.Equal(p.Data, page) || b.Codec != wantCodec {
				t.Fatalf("batch of %d pages, codec %v, page %d", b.Len(), b.Codec, p.Index)
			}
			// The page table's sum leaves the codec byte out, as the
			// encoder computes it: region, count, index, kind and
			// generation of the one page are five bytes.
			table := c.rec.payload
			if c.rec.typ == RecordCodedBatch {
				table = table[1:]
			}
			if want := xxhashSum(table[:5]); b.Sum != want {
				t.Fatalf("sum %#x, want %#x", b.Sum, want)
			}
		})
	}
}

// TestHeaderCodecs checks the header of a stream written with each codec:
// the codec it declares, the minor version (1.0 unless the codec needs
// 1.1), and that a reader accepts it; and that a reader refuses a codec it
// does not know.
func TestHeaderCodecs(t *testing.T) {
	cases := []struct {
		opts      WriterOptions
		codec     Codec
		minor     uint16
		batchType RecordType
	}{
		{WriterOptions{Level: LevelNone}, CodecNone, 0, RecordPageBatch},
		{WriterOptions{Level: LevelFastest}, CodecZstd, 0, RecordPageBatch},
		{WriterOptions{Level: LevelBest}, CodecZstd, 0, RecordPageBatch},
		{WriterOptions{Level: LevelS2}, CodecS2, 1, RecordCodedBatch},
		{WriterOptions{Mixed: true}, CodecMixed, 1, RecordCodedBatch},
		{WriterOptions{Level: LevelNone, Mixed: true}, CodecMixed, 1, RecordCodedBatch},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("level=%v/mixed=%v", c.opts.Level, c.opts.Mixed), func(t *testing.T) {
			data, _ := testStream(t, c.opts)
			if minor := binary.LittleEndian.Uint16(data[offMinor:]); minor != c.minor {
				t.Errorf("minor version %d, want %d", minor, c.minor)
			}
			if codec := Codec(data[offFlags] & flagCodecMask); codec != c.codec {
				t.Errorf("codec %v, want %v", codec, c.codec)
			}
			for _, r := range splitStream(t, data).recs {
				if r.typ == RecordPageBatch || r.typ == RecordCodedBatch {
					if r.typ != c.batchType {
						t.Fatalf("batch carried as %v, want %v", r.typ, c.batchType)
					}
				}
			}
			if err := readAll(data, ReaderOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, codec := range []Codec{4, 15} {
		data, _ := testStream(t, WriterOptions{Level: LevelS2})
		s := splitStream(t, data)
		s.header[offFlags] = s.header[offFlags]&^flagCodecMask | byte(codec)
		wantErr(t, readAll(s.join(true, false), ReaderOptions{}), ErrVersion)
	}
	// A version 1.0 header naming a codec of 1.1 is refused, as a 1.0
	// reader refuses it.
	for _, o := range []WriterOptions{{Level: LevelS2}, {Mixed: true}} {
		data, _ := testStream(t, o)
		s := splitStream(t, data)
		binary.LittleEndian.PutUint16(s.header[offMinor:], 0)
		e := wantErr(t, readAll(s.join(true, false), ReaderOptions{}), ErrVersion)
		if e.Offset != offFlags {
			t.Errorf("error at offset %d, want the flags'", e.Offset)
		}
	}
}

// TestWriteBatchCodecs hands batches of every level to writers of every
// codec: each is written as the record its stream carries, naming its
// codec, or refused with ErrInvalid and nothing written; and Writer.SetLevel
// follows the same rule.
func TestWriteBatchCodecs(t *testing.T) {
	const ps = 1024
	meta := Metadata{Regions: []RegionInfo{{ID: 0, SizeBytes: 8 * ps, PageSize: ps}}}
	page := textPage(ps)
	streams := []WriterOptions{{Level: LevelNone}, {Level: LevelFastest}, {Level: LevelS2}, {Mixed: true}}
	levels := []Level{LevelFastest, LevelDefault, LevelBetter, LevelBest, LevelNone, LevelS2}
	for _, o := range streams {
		for _, l := range levels {
			hc := o.codec()
			t.Run(fmt.Sprintf("stream=%v/batch=%v", hc, l), func(t *testing.T) {
				enc, err := NewBatchEncoder(l)
				if err != nil {
					t.Fatal(err)
				}
				defer enc.Close()
				if err := enc.Begin(0, ps); err != nil {
					t.Fatal(err)
				}
				if err := enc.Add(2, 5, page); err != nil {
					t.Fatal(err)
				}
				b, err := enc.Finish()
				if err != nil {
					t.Fatal(err)
				}
				if b.Level != l {
					t.Fatalf("batch level %v, want %v", b.Level, l)
				}
				var buf bytes.Buffer
				w, err := NewWriter(&buf, meta, o)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Release()
				before := buf.Len()
				err = w.WriteBatch(b)
				serr := w.SetLevel(l)
				if !hc.Allows(l.Codec()) {
					wantErr(t, err, ErrInvalid)
					wantErr(t, serr, ErrInvalid)
					if buf.Len() != before {
						t.Fatal("a refused batch was written")
					}
					return
				}
				if err != nil || serr != nil {
					t.Fatal(err, serr)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				s := splitStream(t, buf.Bytes())
				r := s.recs[1]
				if !hc.coded() {
					if r.typ != RecordPageBatch {
						t.Fatalf("record %v", r.typ)
					}
				} else if r.typ != RecordCodedBatch || Codec(r.payload[0]) != l.Codec() {
					t.Fatalf("record %v naming codec %d, want %v", r.typ, r.payload[0], l.Codec())
				}
				rd, err := NewReader(bytes.NewReader(buf.Bytes()), ReaderOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer rd.Close()
				if _, err := rd.Next(); err != nil {
					t.Fatal(err)
				}
				if p := rd.Batch().Page(0); !bytes.Equal(p.Data, page) || p.Gen != 5 || p.Index != 2 {
					t.Fatalf("page %+v", p)
				}
				if err := drain(rd); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	t.Run("unknown level", func(t *testing.T) {
		w, err := NewWriter(io.Discard, meta, WriterOptions{Mixed: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Release()
		wantErr(t, w.SetLevel(maxLevel+1), ErrInvalid)
		_, err = NewBatchEncoder(maxLevel + 1)
		wantErr(t, err, ErrInvalid)
		_, err = NewWriter(io.Discard, meta, WriterOptions{Level: maxLevel + 1, Mixed: true})
		wantErr(t, err, ErrInvalid)
	})
}

// TestEncoderSetLevel switches one encoder between every level, batch by
// batch, and checks that each batch is what a fresh encoder of its level
// makes: no state leaks from one level to the next.
func TestEncoderSetLevel(t *testing.T) {
	src := newRegion(t, memory.Dense, 40, 4096, 3, memory.MixRealistic())
	levels := []Level{LevelS2, LevelFastest, LevelNone, LevelS2, LevelBest, LevelFastest, LevelNone}
	enc, err := NewBatchEncoder(LevelNone)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	for i, l := range levels {
		got := encodeRange(t, enc, l, src, i*5, 5)
		fresh, err := NewBatchEncoder(l)
		if err != nil {
			t.Fatal(err)
		}
		want := encodeRange(t, fresh, l, src, i*5, 5)
		fresh.Close()
		if !bytes.Equal(got, want) {
			t.Fatalf("batch %d at %v differs from a fresh encoder's", i, l)
		}
	}
	// A batch left open is forgotten by SetLevel, as by Begin.
	if err := enc.Begin(0, 4096); err != nil {
		t.Fatal(err)
	}
	if err := enc.SetLevel(LevelS2); err != nil {
		t.Fatal(err)
	}
	_, err = enc.Finish()
	wantErr(t, err, ErrState)
}

// encodeRange encodes pages [first, first+n) of src as one batch at
// level l with enc, and returns the payload in one piece.
func encodeRange(tb testing.TB, enc *BatchEncoder, l Level, src *memory.Region, first, n int) []byte {
	tb.Helper()
	if err := enc.SetLevel(l); err != nil {
		tb.Fatal(err)
	}
	if err := enc.Begin(0, src.PageSize()); err != nil {
		tb.Fatal(err)
	}
	for p := first; p < first+n; p++ {
		if err := enc.AddFrom(src, p); err != nil {
			tb.Fatal(err)
		}
	}
	b, err := enc.Finish()
	if err != nil {
		tb.Fatal(err)
	}
	if b.Level != l {
		tb.Fatalf("batch at %v, want %v", b.Level, l)
	}
	return bytes.Join(b.Payload, nil)
}
