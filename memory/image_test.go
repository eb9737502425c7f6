package memory

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// imageBytes returns pages pages of pageSize bytes, page p of the class
// classes[p%len(classes)], generated.
func imageBytes(pageSize, pages int, classes ...Class) []byte {
	b := make([]byte, pageSize*pages)
	for p := range pages {
		Generate(b[p*pageSize:(p+1)*pageSize], classes[p%len(classes)], 5, uint64(p), 1)
	}
	return b
}

// denseOf returns a Dense region holding data, padded to whole pages,
// stored at generation 0 as OpenImage presents an image.
func denseOf(t fataler, data []byte, pageSize int) *Region {
	t.Helper()
	pages := (len(data) + pageSize - 1) / pageSize
	r, err := New(Config{SizeBytes: int64(pages * pageSize), PageSize: pageSize, Kind: Dense})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, pageSize)
	for p := range pages {
		clear(buf)
		copy(buf, data[p*pageSize:])
		if err := r.StorePage(p, buf, 0); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestOpenImageConfig(t *testing.T) {
	data := imageBytes(4096, 4, ClassText)
	rd := bytes.NewReader(data)
	for _, tc := range []struct {
		name string
		r    io.ReaderAt
		size int64
		cfg  ImageConfig
		err  error // nil: opens, with pages pages
		pgs  int
	}{
		{"defaults", rd, 4 * 4096, ImageConfig{}, nil, 4},
		{"small pages", rd, 4 * 4096, ImageConfig{PageSize: 64}, nil, 256},
		{"one-page block, no cache", rd, 4 * 4096, ImageConfig{BlockBytes: 4096, CacheBytes: -1}, nil, 4},
		{"prefix", rd, 2 * 4096, ImageConfig{}, nil, 2},
		{"tail padded", rd, 4*4096 - 100, ImageConfig{PadTail: true}, nil, 4},
		{"tail refused", rd, 4*4096 - 100, ImageConfig{}, ErrConfig, 0},
		{"nil reader", nil, 4096, ImageConfig{}, ErrConfig, 0},
		{"empty", rd, 0, ImageConfig{}, ErrConfig, 0},
		{"negative", rd, -4096, ImageConfig{PadTail: true}, ErrConfig, 0},
		{"odd page size", rd, 4 * 4096, ImageConfig{PageSize: 3000}, ErrConfig, 0},
		{"block below a page", rd, 4 * 4096, ImageConfig{BlockBytes: 1024}, ErrConfig, 0},
		{"block not a power of two", rd, 4 * 4096, ImageConfig{BlockBytes: 3 * 4096}, ErrConfig, 0},
		{"too many pages", rd, int64(MaxPages+1) * 4096, ImageConfig{}, ErrConfig, 0},
		{"longer than the reader", rd, 8 * 4096, ImageConfig{}, ErrImage, 0},
	} {
		r, err := OpenImage(tc.r, tc.size, tc.cfg)
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		case tc.err != nil && !strings.HasPrefix(err.Error(), "memory: "):
			t.Errorf("%s: message %q", tc.name, err)
		case tc.err == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == nil && (r.Pages() != tc.pgs || r.Kind() != Image || !r.ReadOnly() || r.DirtyLogging()):
			t.Errorf("%s: %d pages, kind %v, read-only %v, dirty log %v", tc.name, r.Pages(), r.Kind(), r.ReadOnly(), r.DirtyLogging())
		}
	}
	if _, err := New(Config{SizeBytes: 4096, Kind: Image}); !errors.Is(err, ErrConfig) {
		t.Errorf("New of an image: %v", err)
	}
}

// TestImageMatchesDense reads an image of every class and zero pages,
// with a padded tail, through each cache shape, and compares it with a
// Dense region holding the same bytes.
func TestImageMatchesDense(t *testing.T) {
	data := imageBytes(4096, 40, ClassZero, ClassWeights, ClassText, ClassZero, ClassRandom, ClassActivations)
	data = data[:len(data)-1000]
	want := denseOf(t, data, 4096)
	for _, cfg := range []ImageConfig{
		{PadTail: true},
		{PadTail: true, CacheBytes: -1},
		{PadTail: true, BlockBytes: 8192, CacheBytes: 8192},
		{PadTail: true, BlockBytes: 1 << 20},
	} {
		r, err := OpenImage(bytes.NewReader(data), int64(len(data)), cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkSameRegion(t, r, want)
		if r.ResidentBytes() > max(int64(cfg.CacheBytes), DefaultImageCacheBytes) {
			t.Errorf("%+v: %d bytes resident", cfg, r.ResidentBytes())
		}
	}
}

// imageFataler is what checkSameRegion needs of a *testing.T or *rapid.T.
type imageFataler interface {
	fataler
	Fatalf(format string, args ...any)
}

// checkSameRegion fails unless got and want read alike, page by page and
// as a whole, and have the same states, used pages and digest.
func checkSameRegion(t imageFataler, got, want *Region) {
	t.Helper()
	if got.Pages() != want.Pages() || got.PageSize() != want.PageSize() {
		t.Fatalf("%d pages of %d, want %d of %d", got.Pages(), got.PageSize(), want.Pages(), want.PageSize())
	}
	if p, err := FirstDiff(got, want); err != nil || p >= 0 {
		t.Fatalf("first difference at page %d (%v)", p, err)
	}
	a, b := make([]byte, got.Size()), make([]byte, want.Size())
	if _, err := got.ReadAt(a, 0); err != nil {
		t.Fatal(err)
	}
	_, _ = want.ReadAt(b, 0)
	if !bytes.Equal(a, b) {
		t.Fatal("ReadAt differs")
	}
	for p := range got.Pages() {
		gs, err := got.PageState(p)
		ws, _ := want.PageState(p)
		gz, err2 := got.IsZeroPage(p)
		wz, _ := want.IsZeroPage(p)
		if err != nil || err2 != nil || gs != ws || gz != wz {
			t.Fatalf("page %d: state %+v zero %v, want %+v %v (%v, %v)", p, gs, gz, ws, wz, err, err2)
		}
	}
	gu, wu := NewPageSet(0), NewPageSet(0)
	if err := got.UsedPages(gu); err != nil {
		t.Fatal(err)
	}
	_ = want.UsedPages(wu)
	if !slices.Equal(gu.AppendTo(nil), wu.AppendTo(nil)) {
		t.Fatalf("used pages: %d, want %d", gu.Len(), wu.Len())
	}
	var gc, wc [ClassExplicit + 1]int64
	if err := got.UsedClasses(&gc); err != nil || gc != func() [ClassExplicit + 1]int64 { _ = want.UsedClasses(&wc); return wc }() {
		t.Fatalf("used classes %v, want %v (%v)", gc, wc, err)
	}
	for range 2 { // the second from the image's kept digest
		gd, err := got.Digest()
		wd, _ := want.Digest()
		if err != nil || gd != wd {
			t.Fatalf("digest %x, want %x (%v)", gd, wd, err)
		}
	}
}

// TestImageReadOnly: every change is refused, with an error wrapping
// ErrReadOnly, and changes nothing.
func TestImageReadOnly(t *testing.T) {
	data := imageBytes(4096, 8, ClassText, ClassZero)
	r, err := OpenImage(bytes.NewReader(data), int64(len(data)), ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	page := make([]byte, 4096)
	set := NewPageSet(8)
	set.Add(1)
	src := denseOf(t, data, 4096)
	var counts [ClassExplicit]int64
	for name, f := range map[string]func() error{
		"WriteAt":            func() error { _, err := r.WriteAt([]byte{1}, 0); return err },
		"Fill":               func() error { return r.Fill(0, 1, ClassText) },
		"FillMix":            func() error { return r.FillMix(0, 8, MixRealistic()) },
		"StorePage":          func() error { return r.StorePage(0, page, 1) },
		"StoreGenerated":     func() error { return r.StoreGenerated(1, ClassRandom, 1) },
		"Scrub":              r.Scrub,
		"Map":                func() error { _, err := r.Map(0, 1, 1); return err },
		"StoreRuns":          func() error { return r.StoreRuns([]Run{{First: 0, Pages: 1, Class: ClassZero}}) },
		"StoreGeneratedFrom": func() error { return r.StoreGeneratedFrom(src, set, &counts, NewPageSet(8)) },
		"Pattern": func() error {
			w, err := NewPattern(r, PatternConfig{Kind: Uniform, RateBytesPerSec: 1 << 30, Mix: MixText(), Seed: 1})
			if err != nil {
				return err
			}
			_, err = w.Advance(1e9)
			return err
		},
	} {
		if err := f(); !errors.Is(err, ErrReadOnly) || !strings.HasPrefix(err.Error(), "memory: ") {
			t.Errorf("%s: %v, want ErrReadOnly", name, err)
		}
	}
	if r.DirtyCount() != 0 {
		t.Errorf("%d pages dirty", r.DirtyCount())
	}
	checkSameRegion(t, r, src)
}

// flakyReader serves data, but fails every read once reads reads have
// been made (never while reads is negative), as mode says.
type flakyReader struct {
	data  []byte
	reads atomic.Int64
	mode  string
}

var errFlaky = errors.New("device went away")

func (f *flakyReader) ReadAt(p []byte, off int64) (int, error) {
	if f.reads.Add(-1) >= 0 {
		return bytes.NewReader(f.data).ReadAt(p, off)
	}
	switch f.mode {
	case "error":
		return 0, errFlaky
	case "short":
		return len(p) / 2, nil
	case "eof":
		return len(p) / 2, io.EOF
	case "too many":
		return len(p) + 1, nil
	case "negative":
		return -1, nil
	}
	panic("flaky reader")
}

func TestImageFailingReader(t *testing.T) {
	data := imageBytes(4096, 64, ClassText, ClassRandom)
	for _, mode := range []string{"error", "short", "eof", "too many", "negative", "panic"} {
		// At open: the scan fails.
		f := &flakyReader{data: data, mode: mode}
		if _, err := OpenImage(f, int64(len(data)), ImageConfig{}); !errors.Is(err, ErrImage) {
			t.Errorf("%s at open: %v", mode, err)
		} else if mode == "error" && !errors.Is(err, errFlaky) {
			t.Errorf("%s at open: %v does not wrap the cause", mode, err)
		}
		// After: every read fails, and so does the first digest.
		for _, cfg := range []ImageConfig{{}, {CacheBytes: -1}} {
			f := &flakyReader{data: data, mode: mode}
			f.reads.Store(1 << 40)
			r, err := OpenImage(f, int64(len(data)), cfg)
			if err != nil {
				t.Fatal(err)
			}
			f.reads.Store(0)
			var ie *ImageError
			if _, err := r.ReadPage(3, make([]byte, 4096)); !errors.As(err, &ie) || !errors.Is(err, ErrImage) {
				t.Errorf("%s: ReadPage: %v", mode, err)
			}
			if n, err := r.ReadAt(make([]byte, 3*4096), 100); !errors.Is(err, ErrImage) || n != 0 {
				t.Errorf("%s: ReadAt: %d, %v", mode, n, err)
			}
			if _, err := r.Digest(); !errors.Is(err, ErrImage) {
				t.Errorf("%s: Digest: %v", mode, err)
			}
			// Recovered, the reads and the digest are right.
			f.reads.Store(1 << 40)
			checkSameRegion(t, r, denseOf(t, data, 4096))
		}
	}
}

func TestOpenImageFile(t *testing.T) {
	data := imageBytes(4096, 16, ClassWeights, ClassZero, ClassText)
	path := filepath.Join(t.TempDir(), "ram.img")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenImageFile(path, ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	checkSameRegion(t, f.Region, denseOf(t, data, 4096))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The region was read whole already; a block not in the cache fails.
	r, err := OpenImageFile(path, ImageConfig{CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	if _, err := r.Region.ReadPage(0, make([]byte, 4096)); !errors.Is(err, ErrImage) || !errors.Is(err, os.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	if _, err := OpenImageFile(filepath.Join(t.TempDir(), "none"), ImageConfig{}); !errors.Is(err, os.ErrNotExist) || !errors.Is(err, ErrImage) {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(path, data[:100], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenImageFile(path, ImageConfig{}); !errors.Is(err, ErrConfig) {
		t.Errorf("short file: %v", err)
	}
}

// TestImageConcurrentReads reads an image on several goroutines through
// a cache of two small blocks, which they take from one another.
func TestImageConcurrentReads(t *testing.T) {
	data := imageBytes(1024, 64, ClassText, ClassRandom, ClassZero)
	r, err := OpenImage(bytes.NewReader(data), int64(len(data)), ImageConfig{PageSize: 1024, BlockBytes: 2048, CacheBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			buf := make([]byte, 1024)
			for i := range 500 {
				p := (g*17 + i*7) % 64
				if _, err := r.ReadPage(p, buf); err != nil || !bytes.Equal(buf, data[p*1024:(p+1)*1024]) {
					t.Errorf("page %d differs (%v)", p, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
