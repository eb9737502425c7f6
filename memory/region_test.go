package memory

import (
	"bytes"
	"errors"
	"testing"
)

// fataler is what mustNew needs of a *testing.T or *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

func mustNew(t fataler, cfg Config) *Region {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"default page size is 4 KiB", Config{SizeBytes: 8192}, true},
		{"64 KiB framebuffer pages", Config{SizeBytes: 1 << 20, PageSize: 64 << 10}, true},
		{"page size not a power of two", Config{SizeBytes: 3000, PageSize: 3000}, false},
		{"page size below minimum", Config{SizeBytes: 64, PageSize: 32}, false},
		{"page size above maximum", Config{SizeBytes: 4 << 20, PageSize: 4 << 20}, false},
		{"size not a multiple of the page", Config{SizeBytes: 5000}, false},
		{"zero size", Config{}, false},
		{"negative size", Config{SizeBytes: -4096}, false},
		{"unknown backing", Config{SizeBytes: 4096, Kind: 9}, false},
		{"too many pages", Config{SizeBytes: (MaxPages + 1) * 4096, Kind: Synthetic}, false},
		{"the page limit itself", Config{SizeBytes: MaxPages * 64, PageSize: 64, Kind: Synthetic}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("New(%+v) = %v, want ok=%v", tc.cfg, err, tc.ok)
			}
		})
	}
}

func TestAccessEdges(t *testing.T) {
	const ps = 4096
	for _, k := range allKinds {
		t.Run(k.String(), func(t *testing.T) {
			r := mustNew(t, Config{SizeBytes: 4 * ps, Kind: k, Seed: 1})
			for _, tc := range []struct {
				name string
				off  int64
				n    int
				ok   bool
			}{
				{"zero length at start", 0, 0, true},
				{"zero length at end", 4 * ps, 0, true},
				{"zero length past end", 4*ps + 1, 0, false},
				{"last byte", 4*ps - 1, 1, true},
				{"one past the last byte", 4 * ps, 1, false},
				{"straddles a page boundary", ps - 3, 7, true},
				{"straddles three pages", ps - 1, ps + 2, true},
				{"whole region", 0, 4 * ps, true},
				{"runs past the end", 3 * ps, ps + 1, false},
				{"negative offset", -1, 2, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					before, _ := r.Digest()
					data := bytes.Repeat([]byte{0xa5}, tc.n)
					n, err := r.WriteAt(data, tc.off)
					if !tc.ok {
						var ae *AccessError
						if err == nil || !errors.As(err, &ae) || !errors.Is(err, ErrOutOfRange) || n != 0 {
							t.Fatalf("WriteAt = %d, %v; want an AccessError", n, err)
						}
						if after, _ := r.Digest(); after != before {
							t.Fatal("a refused write changed the region")
						}
						if _, err := r.ReadAt(data, tc.off); !errors.Is(err, ErrOutOfRange) {
							t.Fatalf("ReadAt = %v", err)
						}
						return
					}
					if err != nil || n != tc.n {
						t.Fatalf("WriteAt = %d, %v", n, err)
					}
					got := make([]byte, tc.n)
					if _, err := r.ReadAt(got, tc.off); err != nil || !bytes.Equal(got, data) {
						t.Fatalf("ReadAt = %v, equal %v", err, bytes.Equal(got, data))
					}
				})
			}
		})
	}
}

func TestPageOpsRejectBadArguments(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 2 * 4096})
	page := make([]byte, 4096)
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"ReadPage past the end", second(r.ReadPage(2, page)), ErrOutOfRange},
		{"ReadPage with a short buffer", second(r.ReadPage(0, page[:100])), ErrPageSize},
		{"StorePage with a long buffer", r.StorePage(0, make([]byte, 4097), 1), ErrPageSize},
		{"StorePage at a negative page", r.StorePage(-1, page, 1), ErrOutOfRange},
		{"StoreGenerated of explicit content", r.StoreGenerated(0, ClassExplicit, 1), ErrClass},
		{"Fill past the end", r.Fill(1, 2, ClassText), ErrOutOfRange},
		{"Fill with explicit content", r.Fill(0, 1, ClassExplicit), ErrClass},
		{"FillMix with an empty mix", r.FillMix(0, 1, Mix{Name: "empty"}), ErrConfig},
		{"Map on a window", second(must(r.Map(0, 1, 0)).Map(0, 1, 0)), ErrNotRoot},
		{"Unmap of a root", r.Unmap(), ErrNotRoot},
		{"Map past the end", second(r.Map(1, 2, 0)), ErrOutOfRange},
		{"Map over a window", second(r.Map(0, 2, 0)), ErrOverlap},
	}
	for _, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestWindowIsolation writes a secret at every boundary of a window and
// checks that no neighbour sees it, that the window refuses to reach out,
// and that the next window mapped over the same pages reads zero.
func TestWindowIsolation(t *testing.T) {
	for _, k := range allKinds {
		t.Run(k.String(), func(t *testing.T) {
			const ps, pages = 256, 12
			root := mustNew(t, Config{SizeBytes: ps * pages, PageSize: ps, Kind: k})
			left := must(root.Map(0, 4, 1))
			mid := must(root.Map(4, 4, 2))
			right := must(root.Map(8, 4, 3))
			secret := bytes.Repeat([]byte{0x5e}, 9)
			for _, off := range []int64{0, 1, ps - 5, ps * 2, mid.Size() - 9} {
				if _, err := mid.WriteAt(secret, off); err != nil {
					t.Fatal(err)
				}
			}
			for _, off := range []int64{-1, mid.Size() - 8, mid.Size()} {
				if _, err := mid.WriteAt(secret, off); !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("write at %d: %v", off, err)
				}
				if _, err := mid.ReadAt(make([]byte, 9), off); !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("read at %d: %v", off, err)
				}
			}
			for _, w := range []*Region{left, right} {
				buf := make([]byte, w.Size())
				if _, err := w.ReadAt(buf, 0); err != nil || !IsZero(buf) {
					t.Fatalf("neighbour at page %d holds data (%v)", w.FirstPage(), err)
				}
			}
			if err := mid.Unmap(); err != nil {
				t.Fatal(err)
			}
			next := must(root.Map(4, 4, 4))
			buf := make([]byte, next.Size())
			if _, err := next.ReadAt(buf, 0); err != nil || !IsZero(buf) {
				t.Fatal("a window mapped after Unmap reads the previous tenant's data")
			}
			if _, err := root.ReadAt(buf, 4*ps); err != nil || !IsZero(buf) {
				t.Fatal("the root reads a scrubbed window's data")
			}
			if k != Dense && root.ResidentBytes() != 0 {
				t.Fatalf("scrubbed pages still hold %d bytes", root.ResidentBytes())
			}
		})
	}
}

// TestWindowContentFollowsItsSeed maps windows with the same seed in two
// roots at different offsets and checks they hold the same bytes: what a
// migration's destination relies on to regenerate a framebuffer.
func TestWindowContentFollowsItsSeed(t *testing.T) {
	a := mustNew(t, Config{SizeBytes: 64 * 4096, Kind: Synthetic, Seed: 1})
	b := mustNew(t, Config{SizeBytes: 64 * 4096, Kind: Dense, Seed: 2})
	wa := must(a.Map(3, 16, 77))
	wb := must(b.Map(40, 16, 77))
	for _, w := range []*Region{wa, wb} {
		if err := w.FillMix(0, 16, MixRealistic()); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := FirstDiff(wa, wb); err != nil || d != -1 {
		t.Fatalf("windows differ at page %d (%v)", d, err)
	}
	other := must(b.Map(0, 16, 78))
	if err := other.FillMix(0, 16, MixRealistic()); err != nil {
		t.Fatal(err)
	}
	if d, _ := FirstDiff(wa, other); d == -1 {
		t.Fatal("windows with different seeds hold the same content")
	}
}

func TestSparseAllocatesOnlyForNonZeroWrites(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 1 << 20, Kind: Sparse})
	if _, err := r.WriteAt(make([]byte, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	if got := r.ResidentBytes(); got != 0 {
		t.Fatalf("zero writes allocated %d bytes", got)
	}
	if _, err := r.WriteAt([]byte{1}, 5*4096+7); err != nil {
		t.Fatal(err)
	}
	if got := r.ResidentBytes(); got != 4096 {
		t.Fatalf("one non-zero byte allocated %d bytes, want one page", got)
	}
	if err := r.Fill(5, 1, ClassZero); err != nil {
		t.Fatal(err)
	}
	if got := r.ResidentBytes(); got != 0 {
		t.Fatalf("zero fill kept %d bytes", got)
	}

	// A migration's destination stores zero pages as ClassZero, and
	// stores over a page it holds in the page's place.
	page := make([]byte, 4096)
	for _, c := range []struct {
		what  string
		store func() error
		pages int64
	}{
		{"zero page stored", func() error { return r.StorePage(3, page, 1) }, 0},
		{"zero class stored", func() error { return r.StoreGenerated(4, ClassZero, 1) }, 0},
		{"page stored", func() error { page[9] = 1; return r.StorePage(3, page, 2) }, 1},
		{"page stored again", func() error { page[9] = 2; return r.StorePage(3, page, 3) }, 1},
		{"class stored", func() error { return r.StoreGenerated(4, ClassText, 2) }, 2},
		{"class stored over a page", func() error { return r.StoreGenerated(3, ClassWeights, 4) }, 2},
		{"zero class stored over a page", func() error { return r.StoreGenerated(4, ClassZero, 3) }, 1},
		{"zero page stored over a page", func() error { clear(page); return r.StorePage(3, page, 5) }, 0},
	} {
		if err := c.store(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if got := r.ResidentBytes(); got != c.pages*4096 {
			t.Fatalf("%s: %d bytes held, want %d pages", c.what, got, c.pages)
		}
	}
}

func TestGenerationsCountWrites(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 4 * 4096})
	if _, err := r.WriteAt(make([]byte, 4096+2), 4095); err != nil { // pages 0, 1, 2
		t.Fatal(err)
	}
	if err := r.Fill(2, 2, ClassWeights); err != nil {
		t.Fatal(err)
	}
	want := []uint32{1, 1, 2, 1}
	for p, w := range want {
		if st, _ := r.PageState(p); st.Gen != w {
			t.Errorf("page %d: gen %d, want %d", p, st.Gen, w)
		}
	}
	if err := r.StorePage(0, make([]byte, 4096), 41); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.PageState(0); st.Gen != 41 || st.Class != ClassZero {
		t.Errorf("stored page state %+v, want gen 41 zero", st)
	}
}

func TestUnmapIsIdempotentAndStopsUse(t *testing.T) {
	root := mustNew(t, Config{SizeBytes: 8 * 4096})
	w := must(root.Map(2, 2, 9))
	if err := w.Unmap(); err != nil {
		t.Fatal(err)
	}
	if err := w.Unmap(); err != nil {
		t.Fatalf("second Unmap: %v", err)
	}
	for name, err := range map[string]error{
		"WriteAt":  second(w.WriteAt([]byte{1}, 0)),
		"Fill":     w.Fill(0, 1, ClassText),
		"Store":    w.StorePage(0, make([]byte, 4096), 1),
		"ReadPage": second(w.ReadPage(0, make([]byte, 4096))),
		"Scrub":    w.Scrub(),
	} {
		if !errors.Is(err, ErrUnmapped) {
			t.Errorf("%s after Unmap: %v", name, err)
		}
	}
	if len(root.Windows()) != 0 {
		t.Fatal("root still lists the window")
	}
}
