package checkpoint

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
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

var sentinels = []error{
	ErrBadMagic, ErrVersion, ErrChecksum, ErrSequence, ErrTruncated, ErrLimit,
	ErrMalformed, ErrUnknownRecord, ErrAuth, ErrEncryptionMode, ErrWrite, ErrInvalid, ErrState,
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
