package memory

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// TestImagePropertyMatchesDense: an image of any pages — zero, generated,
// random bytes, mostly zero with a few bytes — with any tail and cache
// shape reads, page by page and at any offset, digests and lists its used
// pages as a Dense region holding the same bytes.
func TestImagePropertyMatchesDense(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		pageSize := rapid.SampledFrom([]int{64, 256, 4096}).Draw(rt, "pageSize")
		pages := rapid.IntRange(1, 24).Draw(rt, "pages")
		data := make([]byte, pages*pageSize)
		for p := range pages {
			page := data[p*pageSize : (p+1)*pageSize]
			switch rapid.IntRange(0, 3).Draw(rt, "kind") {
			case 1:
				Generate(page, rapid.SampledFrom([]Class{ClassWeights, ClassText, ClassRandom}).Draw(rt, "class"), 1, uint64(p), 1)
			case 2:
				copy(page, rapid.SliceOfN(rapid.Byte(), 1, pageSize).Draw(rt, "bytes"))
			case 3:
				page[rapid.IntRange(0, pageSize-1).Draw(rt, "at")] = rapid.ByteRange(1, 255).Draw(rt, "byte")
			}
		}
		data = data[:len(data)-rapid.IntRange(0, pageSize-1).Draw(rt, "cut")]
		cfg := ImageConfig{
			PageSize:   pageSize,
			PadTail:    true,
			BlockBytes: pageSize << rapid.IntRange(0, 3).Draw(rt, "blockShift"),
			CacheBytes: rapid.SampledFrom([]int{-1, 0, 1, 8 * pageSize}).Draw(rt, "cache"),
		}
		r, err := OpenImage(bytes.NewReader(data), int64(len(data)), cfg)
		if err != nil {
			rt.Fatal(err)
		}
		want := denseOf(rt, data, pageSize)
		checkSameRegion(rt, r, want)
		for range 8 {
			off := rapid.Int64Range(-10, r.Size()+10).Draw(rt, "off")
			n := rapid.IntRange(0, 3*pageSize).Draw(rt, "n")
			a, b := make([]byte, n), make([]byte, n)
			na, errA := r.ReadAt(a, off)
			nb, errB := want.ReadAt(b, off)
			if na != nb || (errA == nil) != (errB == nil) || !bytes.Equal(a, b) {
				rt.Fatalf("ReadAt(%d bytes at %d): %d %v, want %d %v", n, off, na, errA, nb, errB)
			}
			if errA != nil && !errors.Is(errA, ErrOutOfRange) {
				rt.Fatalf("ReadAt out of range: %v", errA)
			}
		}
	})
}

// FuzzImage opens any bytes as an image of any page size and cache, and
// checks it against a Dense region of the same bytes, and ClassifyPage on
// each of its pages: no panic, zero exactly for zero pages.
func FuzzImage(f *testing.F) {
	f.Add([]byte("hello, world"), uint8(0), uint8(0))
	f.Add(imageBytes(64, 6, ClassZero, ClassWeights, ClassText), uint8(0), uint8(1))
	f.Add(imageBytes(256, 5, ClassActivations, ClassRandom, ClassZero), uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, shift, cache uint8) {
		pageSize := MinPageSize << (shift % 4)
		cfg := ImageConfig{PageSize: pageSize, PadTail: true, BlockBytes: pageSize << (cache % 3),
			CacheBytes: []int{-1, 0, pageSize}[cache/3%3]}
		r, err := OpenImage(bytes.NewReader(data), int64(len(data)), cfg)
		if len(data) == 0 {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("empty image: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		checkSameRegion(t, r, denseOf(t, data, pageSize))
		page := make([]byte, pageSize)
		for p := range r.Pages() {
			if _, err := r.ReadPage(p, page); err != nil {
				t.Fatal(err)
			}
			if c := ClassifyPage(page); (c == ClassZero) != IsZero(page) || c != ClassifyPage(page) {
				t.Fatalf("page %d classified %v", p, c)
			}
		}
	})
}
