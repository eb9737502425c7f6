package checkpoint

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
	"pgregory.net/rapid"
)

var (
	testKey      = bytes.Repeat([]byte{0x42}, KeySize)
	otherKey     = bytes.Repeat([]byte{0x24}, KeySize)
	testStreamID = [StreamIDSize]byte{'s', 't', 'r', 'e', 'a', 'm', '-', '1'}
)

// newRegion returns a region of pages pages of ps bytes, filled with mix
// m (unless m has no parts), with some pages rewritten so that
// generations differ.
func newRegion(tb testing.TB, kind memory.Kind, pages, ps int, seed uint64, m memory.Mix) *memory.Region {
	tb.Helper()
	r, err := memory.New(memory.Config{SizeBytes: int64(pages * ps), PageSize: ps, Kind: kind, Seed: seed})
	if err != nil {
		tb.Fatal(err)
	}
	if len(m.Parts) > 0 {
		if err := r.FillMix(0, pages, m); err != nil {
			tb.Fatal(err)
		}
		if err := r.FillMix(0, pages/3, m); err != nil {
			tb.Fatal(err)
		}
		// A few explicit writes, so that not every page is generated.
		for p := 1; p < pages; p += 7 {
			if _, err := r.WriteAt([]byte("explicit bytes"), int64(p*ps+5)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return r
}

// emptyLike returns a zero region shaped like r.
func emptyLike(tb testing.TB, r *memory.Region, kind memory.Kind) *memory.Region {
	tb.Helper()
	d, err := memory.New(memory.Config{SizeBytes: r.Size(), PageSize: r.PageSize(), Kind: kind, Seed: r.Seed()})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// sameRegion fails the test unless a and b hold the same bytes and
// generations.
func sameRegion(tb testing.TB, a, b *memory.Region) {
	tb.Helper()
	p, err := memory.FirstDiff(a, b)
	if err != nil {
		tb.Fatal(err)
	}
	if p >= 0 {
		tb.Fatalf("regions differ at page %d", p)
	}
}

// wantErr fails the test unless err is an *Error wrapping sentinel.
func wantErr(tb testing.TB, err, sentinel error) *Error {
	tb.Helper()
	if err == nil {
		tb.Fatalf("no error, want %v", sentinel)
	}
	var e *Error
	if !errors.As(err, &e) {
		tb.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if !errors.Is(err, sentinel) {
		tb.Fatalf("error %v, want %v", err, sentinel)
	}
	return e
}

// readAll reads a whole stream, returning the first error.
func readAll(data []byte, opts ReaderOptions) error {
	rd := &Reader{}
	defer rd.Close()
	return readAllWith(rd, data, opts)
}

// readAllWith is readAll reusing rd.
func readAllWith(rd *Reader, data []byte, opts ReaderOptions) error {
	if err := rd.Reset(bytes.NewReader(data), opts); err != nil {
		return err
	}
	for {
		if _, err := rd.Next(); err != nil {
			if rd.Done() {
				return nil
			}
			return err
		}
	}
}

// eachBatch reads rd to the end of its stream and hands each page batch to
// f; any other error fails t.
func eachBatch(t fataler, rd *Reader, f func(*Batch)) {
	t.Helper()
	for {
		typ, err := rd.Next()
		if err != nil {
			if rd.Done() {
				return
			}
			t.Fatal(err)
		}
		if typ == RecordPageBatch {
			f(rd.Batch())
		}
	}
}

// drawEncryption draws whether a property test's stream is encrypted, and
// if so sets wopts to encrypt it with testKey; it returns the options that
// read it.
func drawEncryption(t *rapid.T, wopts *WriterOptions) ReaderOptions {
	if !rapid.Bool().Draw(t, "encrypt") {
		return ReaderOptions{}
	}
	wopts.Encryption, wopts.Key = EncryptionRequired, testKey
	return ReaderOptions{Encryption: EncryptionRequired, Key: testKey}
}

// firstPageReads checks that data, a crafted stream whose first batch
// stores page at index 1 as kind, reads as that: the well-formed twin of a
// table of malformed streams, so that each of those fails for the reason
// it names.
func firstPageReads(t *testing.T, data, page []byte, kind PageKind) {
	t.Helper()
	rd, err := NewReader(bytes.NewReader(data), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if typ, err := rd.Next(); err != nil || typ != RecordPageBatch {
		t.Fatalf("%v %v", typ, err)
	}
	if p := rd.Batch().Page(0); !bytes.Equal(p.Data, page) || p.Index != 1 || p.Kind != kind {
		t.Fatalf("page %+v", p)
	}
}

var sentinels = []error{
	ErrBadMagic, ErrVersion, ErrChecksum, ErrSequence, ErrTruncated, ErrLimit,
	ErrMalformed, ErrUnknownRecord, ErrAuth, ErrEncryptionMode, ErrWrite, ErrInvalid, ErrState, ErrDeltaBase,
}

// typedError reports whether err is an *Error wrapping exactly one
// sentinel.
func typedError(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	n := 0
	for _, s := range sentinels {
		if errors.Is(e.Err, s) {
			n++
		}
	}
	return n == 1
}

// decodeCheckingNeighbours reads rd, whose decoder's scratch buffer the
// caller filled with the marker 0xa5, to its end, and fails unless every
// page equals src's and no decoded page reaches past its own bytes: its
// slice is capped, and the scratch past the batch's decoded bytes (and
// zstd's slack) still holds the marker. It returns the compressed pages
// by codec.
func decodeCheckingNeighbours(t *testing.T, rd *Reader, src *memory.Region) map[Codec]int {
	t.Helper()
	page := make([]byte, src.PageSize())
	compressed := map[Codec]int{}
	for {
		typ, err := rd.Next()
		if err == io.EOF {
			return compressed
		}
		if err != nil {
			t.Fatal(err)
		}
		if typ != RecordPageBatch {
			continue
		}
		b := rd.Batch()
		used := 0
		for i := range b.Len() {
			p := b.Page(i)
			if p.Data != nil && cap(p.Data) != len(p.Data) {
				t.Fatalf("page %d: capacity %d past its %d bytes", p.Index, cap(p.Data), len(p.Data))
			}
			if p.Kind == PageCompressed {
				used += len(page)
				compressed[b.Codec]++
			}
			if _, err := src.ReadPage(p.Index, page); err != nil {
				t.Fatal(err)
			}
			if p.Data != nil && !bytes.Equal(p.Data, page) || p.Data == nil && !memory.IsZero(page) {
				t.Fatalf("page %d differs", p.Index)
			}
		}
		lent := used
		if b.Codec == CodecZstd {
			lent += zstdSlackBytes
		}
		for i, c := range rd.bd.scratch[lent:cap(rd.bd.scratch)] {
			if c != 0xa5 {
				t.Fatalf("%v batch: byte %d past its %d decoded bytes was written", b.Codec, lent+i, used)
			}
		}
		// The next batch may write less; restore the marker.
		s := rd.bd.scratch[:cap(rd.bd.scratch)]
		for i := range s {
			s[i] = 0xa5
		}
	}
}
