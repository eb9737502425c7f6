package checkpoint

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/vgpusim/vgpusim/memory"
)

// s2Literal is an S2 literal element of p (at most 60 bytes).
func s2Literal(p []byte) []byte { return append([]byte{byte(len(p)-1) << 2}, p...) }

// s2Block is an S2 block by hand: the decoded length it declares, then
// elements.
func s2Block(declared uint64, elems ...[]byte) []byte {
	b := binary.AppendUvarint(nil, declared)
	for _, e := range elems {
		b = append(b, e...)
	}
	return b
}

// TestHostileS2Batches feeds coded batches whose S2 block lies, in s2 and
// mixed streams: each is refused with a typed error before the decoder
// sets aside memory for what the block claims.
func TestHostileS2Batches(t *testing.T) {
	const ps = 4096
	meta := Metadata{VMID: "vm", Regions: []RegionInfo{{ID: 0, SizeBytes: 16 * ps, PageSize: ps}}}
	page := textPage(ps)
	one := func(block []byte) []byte {
		return batchPayload([]int{1}, []PageKind{PageCompressed}, block, nil)
	}
	copyBeforeStart := []byte{0x02 | 3<<2, 100, 0} // copy2 of 4 bytes from 100 bytes back, at the start
	cases := []struct {
		name   string
		layout []byte
		want   error
	}{
		{"block declaring past the batch limit", one(s2Block(1<<30, s2Literal([]byte("x")))), ErrLimit},
		{"block declaring the largest length", one(s2Block(0xffffffff, s2Literal([]byte("x")))), ErrLimit},
		{"length past 32 bits", one(s2Block(1<<32, s2Literal([]byte("x")))), ErrMalformed},
		{"length that is no varint", one(bytes.Repeat([]byte{0xff}, 11)), ErrMalformed},
		{"block declaring another size", one(s2.Encode(nil, append(page, page...))), ErrMalformed},
		{"block declaring less", one(s2.Encode(nil, page[:1000])), ErrMalformed},
		{"block short of its size", one(s2Block(ps, s2Literal(page[:10]))), ErrMalformed},
		{"block past its size", one(append(s2.Encode(nil, page), s2Literal([]byte("more"))...)), ErrMalformed},
		{"copy before the start", one(s2Block(ps, copyBeforeStart)), ErrMalformed},
		{"garbage", one(s2Block(ps, []byte("not an s2 block at all"))), ErrMalformed},
		{"compressed pages without a block", batchPayload([]int{1}, []PageKind{PageCompressed}, nil, nil), ErrMalformed},
		{"block without compressed pages", batchPayload([]int{1}, []PageKind{PageZero}, s2.Encode(nil, page), nil), ErrMalformed},
		{"zstd frame where the block goes", layoutOf(t, CodecZstd, page), ErrMalformed},
	}
	for _, header := range []Codec{CodecS2, CodecMixed} {
		for _, c := range cases {
			t.Run(header.String()+"/"+c.name, func(t *testing.T) {
				data := craftStream(t, meta, header, rawRecord{typ: RecordCodedBatch, payload: codedPayload(byte(CodecS2), c.layout)})
				rd, err := NewReader(bytes.NewReader(data), ReaderOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer rd.Close()
				_, err = rd.Next()
				wantErr(t, err, c.want)
				if n := cap(rd.bd.scratch); n > ps+zstdSlackBytes {
					t.Fatalf("decoder holds %d bytes for a batch of one page", n)
				}
			})
		}
	}
	t.Run("well-formed", func(t *testing.T) {
		// The same construction, well formed, reads.
		layout := batchPayload([]int{1, 2}, []PageKind{PageCompressed, PageRaw}, s2.Encode(nil, page), page)
		data := craftStream(t, meta, CodecS2, rawRecord{typ: RecordCodedBatch, payload: codedPayload(byte(CodecS2), layout)})
		firstPageReads(t, data, page, PageCompressed)
	})
	t.Run("a lying block allocates nothing", func(t *testing.T) {
		data := craftStream(t, meta, CodecS2, rawRecord{typ: RecordCodedBatch,
			payload: codedPayload(byte(CodecS2), one(s2Block(0xffffffff, s2Literal([]byte("x")))))})
		rd := &Reader{}
		defer rd.Close()
		read := func() {
			if err := rd.Reset(bytes.NewReader(data), ReaderOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := rd.Next(); err == nil {
				t.Fatal("read")
			}
		}
		read()
		// The error itself is a few small allocations; a buffer the
		// size the block declares would show as far more bytes.
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			read()
		}
		runtime.ReadMemStats(&after)
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<10 {
			t.Fatalf("ten refused blocks allocated %d bytes", grown)
		}
	})
}

// TestS2DecodeStaysInPlace checks what s2.Decode does with the capacity
// of the slice it is given: decoding blocks of a mixed corpus straight
// into a page of a larger buffer, uncapped, it writes the decoded bytes
// and not one byte past them. (zstd's DecodeAll does not keep to that;
// PITFALLS.md.) The batch decoder caps the slice all the same.
func TestS2DecodeStaysInPlace(t *testing.T) {
	const ps = 4096
	src := newRegion(t, memory.Dense, 64, ps, 17, memory.Mix{Name: "mixed", Parts: []memory.MixPart{
		{Class: memory.ClassText, Weight: 3}, {Class: memory.ClassActivations, Weight: 2},
		{Class: memory.ClassWeights, Weight: 1}, {Class: memory.ClassRandom, Weight: 1}}})
	all := make([]byte, 64*ps)
	if _, err := src.ReadAt(all, 0); err != nil {
		t.Fatal(err)
	}
	const marker = 0xa5
	buf := make([]byte, len(all)+ps)
	for n := 1; n <= 16; n++ {
		for first := 0; first+n <= 64; first += 3 {
			want := all[first*ps : (first+n)*ps]
			block := s2.Encode(nil, want)
			for i := range buf {
				buf[i] = marker
			}
			off := (first % 7) * 64
			out, err := s2.Decode(buf[off:off], block)
			if err != nil || !bytes.Equal(out, want) || &out[0] != &buf[off] {
				t.Fatalf("pages %d+%d: decoded %d bytes in place %v: %v", first, n, len(out), len(out) > 0 && &out[0] == &buf[off], err)
			}
			for i, c := range buf[off+len(want):] {
				if c != marker {
					t.Fatalf("pages %d+%d: byte %d past the decoded bytes was written", first, n, i)
				}
			}
			for i, c := range buf[:off] {
				if c != marker {
					t.Fatalf("pages %d+%d: byte %d before the decoded bytes was written", first, n, i)
				}
			}
		}
	}
}

// TestS2DecodedPagesAreCapped reads an S2 stream and a mixed one with a
// decode buffer larger than any batch, filled with a marker: every page's
// capacity ends at the page, and the buffer is not written past the
// batch's decoded bytes (nor, for a zstd batch, past the slack zstd is
// lent).
func TestS2DecodedPagesAreCapped(t *testing.T) {
	src := newRegion(t, memory.Dense, 256, 4096, 8, memory.Mix{Name: "mixed", Parts: []memory.MixPart{
		{Class: memory.ClassText, Weight: 3}, {Class: memory.ClassActivations, Weight: 2}, {Class: memory.ClassZero, Weight: 1}, {Class: memory.ClassRandom, Weight: 1}}})
	for _, mixed := range []bool{false, true} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, Metadata{Regions: []RegionInfo{RegionInfoOf(0, src)}}, WriterOptions{Level: LevelS2, Mixed: mixed, BatchBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		for first := 0; first < src.Pages(); first += 16 {
			if mixed {
				if err := w.SetLevel([]Level{LevelS2, LevelFastest, LevelNone}[first/16%3]); err != nil {
					t.Fatal(err)
				}
			}
			set := memory.NewPageSet(src.Pages())
			for p := first; p < first+16; p++ {
				set.Add(p)
			}
			if err := w.WriteRegion(0, src, set); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		w.Release()
		rd, err := NewReader(&buf, ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rd.bd.scratch = bytes.Repeat([]byte{0xa5}, 2*(64<<10))
		compressed := decodeCheckingNeighbours(t, rd, src)
		rd.Close()
		if compressed[CodecS2] < 50 || mixed && compressed[CodecZstd] < 20 {
			t.Fatalf("mixed=%v: compressed pages by codec %v: the test proves little", mixed, compressed)
		}
	}
}

// TestSamplerFitsS2 checks that the incompressible-page sampler, tuned on
// zstd, serves S2 as well: the content classes it sends raw do not
// shrink under S2 either, and those it compresses do.
func TestSamplerFitsS2(t *testing.T) {
	page := make([]byte, 4096)
	for _, c := range []memory.Class{memory.ClassWeights, memory.ClassRandom, memory.ClassText, memory.ClassActivations} {
		raw, packed := 0, 0
		for p := range 500 {
			memory.Generate(page, c, 78, uint64(p), uint32(p%5))
			raw += len(page)
			packed += len(s2.Encode(nil, page))
		}
		ratio := float64(raw) / float64(packed)
		memory.Generate(page, c, 78, 0, 0)
		if incompressible := looksIncompressible(page); incompressible && ratio > 1.02 || !incompressible && ratio < 1.2 {
			t.Errorf("%v: sent raw %v, S2 ratio %.3f", c, incompressible, ratio)
		}
		t.Logf("%v: S2 ratio %.3f", c, ratio)
	}
}
