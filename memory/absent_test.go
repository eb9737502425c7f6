package memory

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultRecorder is a fault function that lands a page as a post-copy
// destination does, with StorePage of landedPage's bytes at generation 7,
// and records the pages it was called with; it fails for the pages in
// fail, landing nothing.
type faultRecorder struct {
	r     *Region
	mu    sync.Mutex
	calls []int
	fail  map[int]error
}

var errFetch = errors.New("fetch failed")

const landedGen = 7

func landedPage(p, pageSize int) []byte {
	return bytes.Repeat([]byte{byte(0xa0 + p)}, pageSize)
}

func (f *faultRecorder) fault(p int) error {
	f.mu.Lock()
	f.calls = append(f.calls, p)
	err := f.fail[p]
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.r.StorePage(p, landedPage(p, f.r.PageSize()), landedGen)
}

func (f *faultRecorder) called() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// setAbsent marks pages of r absent with a new recorder's fault function.
func setAbsent(t testing.TB, r *Region, pages ...int) *faultRecorder {
	t.Helper()
	f := &faultRecorder{r: r, fail: map[int]error{}}
	set := NewPageSet(r.Pages())
	for _, p := range pages {
		set.Add(p)
	}
	if err := r.SetAbsent(set, f.fault); err != nil {
		t.Fatal(err)
	}
	return f
}

// guestAccesses are the accesses that land absent pages, each touching
// pages [first, first+n) of r.
var guestAccesses = []struct {
	name  string
	setup func(r *Region) // before the pages are marked absent
	do    func(r *Region, first, n int) error
}{
	{"ReadAt", nil, func(r *Region, first, n int) error {
		_, err := r.ReadAt(make([]byte, n*r.PageSize()-3), int64(first*r.PageSize())+1)
		return err
	}},
	{"WriteAt", nil, func(r *Region, first, n int) error {
		_, err := r.WriteAt(bytes.Repeat([]byte{1}, n*r.PageSize()-3), int64(first*r.PageSize())+1)
		return err
	}},
	{"Fill", nil, func(r *Region, first, n int) error { return r.Fill(first, n, ClassText) }},
	{"FillMix", nil, func(r *Region, first, n int) error { return r.FillMix(first, n, MixRealistic()) }},
	{"Fill/bulk", func(r *Region) { r.sp.bulkFillMin = 1 }, func(r *Region, first, n int) error {
		return r.Fill(first, n, ClassWeights)
	}},
	{"Pattern/sweep", nil, func(r *Region, first, n int) error {
		p, err := NewPattern(r, PatternConfig{Kind: Sweep, RateBytesPerSec: int64(n * r.PageSize()), FirstPage: first, Pages: n})
		if err == nil {
			_, err = p.Advance(time.Second)
		}
		return err
	}},
	{"Pattern/each", nil, func(r *Region, first, n int) error {
		pages := make([]int, 0, n)
		for p := first; p < first+n; p++ {
			pages = append(pages, p)
		}
		_, err := r.fillEach(pages, MixText())
		return err
	}},
}

// TestAbsentGuestAccessesFault checks that every guest access calls the
// fault function of each absent page it touches, once, in page order,
// before it touches the page, which it then finds present: a read returns
// the landed bytes, a write is made over them.
func TestAbsentGuestAccessesFault(t *testing.T) {
	const ps, pages = 256, 16
	for _, k := range allKinds {
		for _, acc := range guestAccesses {
			t.Run(fmt.Sprintf("kind=%v/access=%s", k, acc.name), func(t *testing.T) {
				r := mustNew(t, Config{SizeBytes: ps * pages, PageSize: ps, Kind: k, Seed: 3})
				if acc.setup != nil {
					acc.setup(r)
				}
				f := setAbsent(t, r, 2, 5, 6, 12)
				if err := acc.do(r, 4, 4); err != nil {
					t.Fatal(err)
				}
				if got := f.called(); !slices.Equal(got, []int{5, 6}) {
					t.Fatalf("fault called for %v, want [5 6]", got)
				}
				if r.Absent(5) || r.Absent(6) || !r.Absent(2) || !r.Absent(12) || r.AbsentPages() != 2 {
					t.Fatalf("absent after the access: 2 %v 5 %v 6 %v 12 %v, %d pages", r.Absent(2), r.Absent(5), r.Absent(6), r.Absent(12), r.AbsentPages())
				}
				// The page landed before the access touched it.
				buf := make([]byte, ps)
				st, err := r.ReadPage(5, buf)
				if err != nil {
					t.Fatal(err)
				}
				if acc.name == "ReadAt" {
					if st.Gen != landedGen || !bytes.Equal(buf, landedPage(5, ps)) {
						t.Fatalf("page 5 read as %+v, not as landed", st)
					}
				} else if st.Gen != landedGen+1 {
					t.Fatalf("page 5 written at generation %d, want %d: the write is not over the landed page", st.Gen, landedGen+1)
				}
				// A second access touches present pages only.
				if err := acc.do(r, 4, 4); err != nil {
					t.Fatal(err)
				}
				if got := f.called(); len(got) != 2 {
					t.Fatalf("fault called again: %v", got)
				}
			})
		}
	}
}

// TestAbsentReadSeesLandedBytes checks a read spanning absent pages
// byte for byte.
func TestAbsentReadSeesLandedBytes(t *testing.T) {
	const ps = 128
	r := mustNew(t, Config{SizeBytes: ps * 4, PageSize: ps, Kind: Sparse})
	setAbsent(t, r, 1, 2)
	buf := make([]byte, 2*ps)
	if n, err := r.ReadAt(buf, ps/2); n != len(buf) || err != nil {
		t.Fatal(n, err)
	}
	want := append(append(make([]byte, ps/2), landedPage(1, ps)...), landedPage(2, ps)[:ps/2]...)
	if !bytes.Equal(buf, want) {
		t.Fatal("read does not see the landed bytes")
	}
}

// TestAbsentLandingDoesNotFault checks that the stores that land pages and
// every inspection of a region neither call the fault function nor change
// absence.
func TestAbsentLandingDoesNotFault(t *testing.T) {
	const ps, pages = 256, 8
	ops := []struct {
		name string
		do   func(r *Region) error
	}{
		{"StorePage", func(r *Region) error { return r.StorePage(3, bytes.Repeat([]byte{9}, ps), 2) }},
		{"StoreGenerated", func(r *Region) error { return r.StoreGenerated(3, ClassText, 2) }},
		{"StoreRuns", func(r *Region) error { return r.StoreRuns([]Run{{First: 0, Pages: pages, Class: ClassRandom, Gen: 4}}) }},
		{"StoreGeneratedFrom", func(r *Region) error {
			src := mustNew(t, Config{SizeBytes: ps * pages, PageSize: ps, Kind: r.Kind(), Seed: r.Seed()})
			if err := src.Fill(0, pages, ClassText); err != nil {
				return err
			}
			set := NewPageSet(pages)
			set.addRange(0, pages)
			var counts [ClassExplicit]int64
			return r.StoreGeneratedFrom(src, set, &counts, NewPageSet(pages))
		}},
		{"ReadPage", func(r *Region) error { _, err := r.ReadPage(3, make([]byte, ps)); return err }},
		{"PageState", func(r *Region) error { _, err := r.PageState(3); return err }},
		{"IsZeroPage", func(r *Region) error { _, err := r.IsZeroPage(3); return err }},
		{"Digest", func(r *Region) error { _, err := r.Digest(); return err }},
		{"DigestParallel", func(r *Region) error { _, err := r.DigestParallel(4); return err }},
		{"UsedPages", func(r *Region) error { return r.UsedPages(&PageSet{}) }},
		{"UsedBytes", func(r *Region) error { _, err := r.UsedBytes(); return err }},
		{"UsedClasses", func(r *Region) error { var c [ClassExplicit + 1]int64; return r.UsedClasses(&c) }},
		{"AppendRuns", func(r *Region) error { _, err := r.AppendRuns(nil, 0, pages); return err }},
		{"DirtyClasses", func(r *Region) error { var c [ClassExplicit + 1]int64; _, err := r.DirtyClasses(&c); return err }},
		{"CollectDirty", func(r *Region) error { r.CollectDirty(&PageSet{}); return nil }},
		{"AddAbsent", func(r *Region) error { return r.AddAbsent(NewPageSet(pages)) }},
	}
	for _, k := range allKinds {
		for _, op := range ops {
			t.Run(fmt.Sprintf("kind=%v/op=%s", k, op.name), func(t *testing.T) {
				r := mustNew(t, Config{SizeBytes: ps * pages, PageSize: ps, Kind: k, Seed: 5})
				if _, err := r.WriteAt([]byte{1}, 3*ps); err != nil {
					t.Fatal(err)
				}
				f := setAbsent(t, r, 1, 3)
				if err := op.do(r); err != nil {
					t.Fatal(err)
				}
				if got := f.called(); len(got) != 0 {
					t.Fatalf("fault called for %v", got)
				}
				if !r.Absent(1) || !r.Absent(3) || r.AbsentPages() != 2 {
					t.Fatalf("absence changed: 1 %v, 3 %v, %d pages", r.Absent(1), r.Absent(3), r.AbsentPages())
				}
			})
		}
	}
}

// TestAbsentArrive checks Arrive: it marks a page present without a fault,
// reports whether the page was absent, and ignores pages out of range.
func TestAbsentArrive(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 4096 * 130, Kind: Dense})
	if r.Arrive(0) || r.Absent(0) || r.AbsentPages() != 0 {
		t.Fatal("a page of a region with no absence is absent")
	}
	f := setAbsent(t, r, 0, 64, 129)
	for _, tc := range []struct {
		p       int
		want    bool
		present int
	}{
		{-1, false, 3}, {130, false, 3}, {1 << 40, false, 3}, {1, false, 3},
		{64, true, 2}, {64, false, 2}, {129, true, 1}, {0, true, 0}, {0, false, 0},
	} {
		if got := r.Arrive(tc.p); got != tc.want || r.AbsentPages() != tc.present {
			t.Fatalf("Arrive(%d) = %v with %d absent, want %v with %d", tc.p, got, r.AbsentPages(), tc.want, tc.present)
		}
		if r.Absent(tc.p) {
			t.Fatalf("page %d absent after Arrive", tc.p)
		}
	}
	if r.absent.Load() != nil {
		t.Fatal("the state of absence is kept with no page absent: accesses do not take the fast path")
	}
	if _, err := r.WriteAt([]byte{1}, 64*4096); err != nil {
		t.Fatal(err)
	}
	if got := f.called(); len(got) != 0 {
		t.Fatalf("fault called for %v after the pages arrived", got)
	}
}

// TestAbsentLastLandingDropsState checks that the fast path comes back
// once the last absent page was landed by a fault.
func TestAbsentLastLandingDropsState(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 4096 * 4, Kind: Synthetic})
	setAbsent(t, r, 1, 2)
	if err := r.Fill(0, 4, ClassText); err != nil {
		t.Fatal(err)
	}
	if r.absent.Load() != nil || r.AbsentPages() != 0 {
		t.Fatal("the state of absence is kept with no page absent")
	}
}

// TestSetAbsentReplacesAndClears checks that SetAbsent replaces the absent
// set and its fault function, that a nil or empty set clears absence, and
// that the set is copied.
func TestSetAbsentReplacesAndClears(t *testing.T) {
	const pages = 8
	r := mustNew(t, Config{SizeBytes: 4096 * pages, Kind: Sparse})
	set := NewPageSet(pages)
	set.Add(1)
	set.Add(2)
	old := &faultRecorder{r: r}
	if err := r.SetAbsent(set, old.fault); err != nil {
		t.Fatal(err)
	}
	set.Add(5) // the region keeps its own copy
	if r.Absent(5) || r.AbsentPages() != 2 {
		t.Fatal("SetAbsent does not copy its set")
	}
	f := setAbsent(t, r, 2, 3)
	if r.Absent(1) || !r.Absent(2) || !r.Absent(3) || r.AbsentPages() != 2 {
		t.Fatal("SetAbsent does not replace the absent set")
	}
	if err := r.Fill(0, pages, ClassText); err != nil {
		t.Fatal(err)
	}
	if len(old.called()) != 0 || !slices.Equal(f.called(), []int{2, 3}) {
		t.Fatalf("faults: replaced %v, current %v", old.called(), f.called())
	}
	for _, clear := range []struct {
		name string
		set  *PageSet
	}{{"nil", nil}, {"empty", NewPageSet(pages)}} {
		f := setAbsent(t, r, 4)
		if err := r.SetAbsent(clear.set, nil); err != nil {
			t.Fatalf("%s set: %v", clear.name, err)
		}
		if r.Absent(4) || r.AbsentPages() != 0 || r.absent.Load() != nil {
			t.Fatalf("%s set does not clear absence", clear.name)
		}
		if err := r.Fill(0, pages, ClassText); err != nil || len(f.called()) != 0 {
			t.Fatalf("%s set: fill %v, faults %v", clear.name, err, f.called())
		}
	}
}

// TestSetAbsentErrors checks that wrong arguments give typed errors and
// change nothing.
func TestSetAbsentErrors(t *testing.T) {
	const pages = 8
	nop := func(int) error { return nil }
	one := func(n int) *PageSet { s := NewPageSet(n); s.Add(0); return s }
	for _, tc := range []struct {
		name  string
		set   *PageSet
		fault FaultFunc
		want  error
	}{
		{"smaller set", one(pages - 1), nop, ErrConfig},
		{"larger set", one(pages + 1), nop, ErrConfig},
		{"larger set, empty", NewPageSet(pages + 64), nop, ErrConfig},
		{"zero set", &PageSet{}, nil, ErrConfig},
		{"nil fault", one(pages), nil, ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustNew(t, Config{SizeBytes: 4096 * pages})
			prev := setAbsent(t, r, 3)
			if err := r.SetAbsent(tc.set, tc.fault); !errors.Is(err, tc.want) {
				t.Fatalf("SetAbsent = %v, want %v", err, tc.want)
			}
			if !r.Absent(3) || r.AbsentPages() != 1 {
				t.Fatal("a failed SetAbsent changed absence")
			}
			if err := r.Fill(3, 1, ClassText); err != nil || !slices.Equal(prev.called(), []int{3}) {
				t.Fatalf("a failed SetAbsent changed the fault function: %v, %v", err, prev.called())
			}
		})
	}
	t.Run("unmapped", func(t *testing.T) {
		root := mustNew(t, Config{SizeBytes: 4096 * pages})
		w, err := root.Map(0, 4, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Unmap(); err != nil {
			t.Fatal(err)
		}
		if err := w.SetAbsent(one(4), nop); !errors.Is(err, ErrUnmapped) {
			t.Fatalf("SetAbsent on an unmapped window = %v", err)
		}
		if err := w.AddAbsent(NewPageSet(4)); !errors.Is(err, ErrUnmapped) {
			t.Fatalf("AddAbsent on an unmapped window = %v", err)
		}
	})
	t.Run("read-only", func(t *testing.T) {
		r, err := OpenImage(bytes.NewReader(make([]byte, 4096*pages)), 4096*pages, ImageConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.SetAbsent(one(pages), nop); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("SetAbsent on an image = %v", err)
		}
		if err := r.SetAbsent(nil, nil); err != nil {
			t.Fatalf("clearing an image's absence = %v", err)
		}
	})
	t.Run("AddAbsent", func(t *testing.T) {
		r := mustNew(t, Config{SizeBytes: 4096 * pages})
		setAbsent(t, r, 3)
		if err := r.AddAbsent(nil); !errors.Is(err, ErrConfig) {
			t.Fatalf("AddAbsent(nil) = %v", err)
		}
		small := one(pages - 1)
		if err := r.AddAbsent(small); !errors.Is(err, ErrConfig) || small.Len() != 1 {
			t.Fatalf("AddAbsent of a smaller set = %v, set %v", err, small.AppendTo(nil))
		}
	})
}

// TestAddAbsent checks that AddAbsent adds the absent pages to what dst
// holds.
func TestAddAbsent(t *testing.T) {
	const pages = 200
	r := mustNew(t, Config{SizeBytes: 4096 * pages, Kind: Synthetic})
	dst := NewPageSet(pages)
	dst.Add(7)
	if err := r.AddAbsent(dst); err != nil || !slices.Equal(dst.AppendTo(nil), []int{7}) {
		t.Fatalf("no absence: %v, %v", err, dst.AppendTo(nil))
	}
	setAbsent(t, r, 0, 63, 64, 199)
	r.Arrive(63)
	if err := r.AddAbsent(dst); err != nil || !slices.Equal(dst.AppendTo(nil), []int{0, 7, 64, 199}) {
		t.Fatalf("AddAbsent: %v, %v", err, dst.AppendTo(nil))
	}
}

// TestAbsentFaultError checks an access whose fault fails: it stops at the
// page, having accessed the pages before it; it returns an *AbsentError
// wrapping ErrAbsent and the fault's error; the page stays absent, and the
// next access calls the fault again.
func TestAbsentFaultError(t *testing.T) {
	const ps, pages = 256, 8
	for _, k := range allKinds {
		for _, acc := range guestAccesses {
			t.Run(fmt.Sprintf("kind=%v/access=%s", k, acc.name), func(t *testing.T) {
				r := mustNew(t, Config{SizeBytes: ps * pages, PageSize: ps, Kind: k, Seed: 3})
				if acc.setup != nil {
					acc.setup(r)
				}
				f := setAbsent(t, r, 2, 4, 5)
				f.fail[4] = errFetch
				err := acc.do(r, 1, 5) // pages 1 to 5
				var ae *AbsentError
				if !errors.Is(err, ErrAbsent) || !errors.Is(err, errFetch) || !errors.As(err, &ae) || ae.Page != 4 {
					t.Fatalf("access = %v, want an *AbsentError of page 4 wrapping ErrAbsent and the fault's error", err)
				}
				if got := f.called(); !slices.Equal(got, []int{2, 4}) {
					t.Fatalf("fault called for %v, want [2 4]", got)
				}
				if r.Absent(2) || !r.Absent(4) || !r.Absent(5) || r.AbsentPages() != 2 {
					t.Fatal("absence after the failed access is wrong")
				}
				wantGen := map[int]uint32{1: 1, 2: landedGen + 1, 3: 1, 4: 0, 5: 0}
				if acc.name == "ReadAt" {
					wantGen = map[int]uint32{1: 0, 2: landedGen, 3: 0, 4: 0, 5: 0}
				}
				for p, g := range wantGen {
					if st, _ := r.PageState(p); st.Gen != g {
						t.Fatalf("page %d at generation %d, want %d: the access did not stop at page 4", p, st.Gen, g)
					}
				}
				delete(f.fail, 4)
				if err := acc.do(r, 1, 5); err != nil {
					t.Fatal(err)
				}
				if got := f.called(); !slices.Equal(got, []int{2, 4, 4, 5}) || r.AbsentPages() != 0 {
					t.Fatalf("retry: fault called for %v, %d absent", got, r.AbsentPages())
				}
			})
		}
	}
}

// TestAbsentByteCounts checks the counts ReadAt and WriteAt return when
// they stop at a page whose fault failed: the bytes before it.
func TestAbsentByteCounts(t *testing.T) {
	const ps = 128
	r := mustNew(t, Config{SizeBytes: ps * 4, PageSize: ps, Kind: Dense})
	f := setAbsent(t, r, 0, 2)
	f.fail[0] = errFetch
	f.fail[2] = errFetch
	buf := bytes.Repeat([]byte{0xee}, 2*ps)
	for _, off := range []int64{ps, ps + 1, ps + ps/2} {
		want := 2*ps - int(off)
		if n, err := r.ReadAt(buf[:2*ps], off); n != want || !errors.Is(err, ErrAbsent) {
			t.Fatalf("ReadAt at %d = %d, %v; want %d", off, n, err, want)
		}
		if n, err := r.WriteAt(buf[:2*ps], off); n != want || !errors.Is(err, ErrAbsent) {
			t.Fatalf("WriteAt at %d = %d, %v; want %d", off, n, err, want)
		}
	}
	if n, err := r.ReadAt(buf[:10], 3); n != 0 || !errors.Is(err, ErrAbsent) {
		t.Fatalf("ReadAt inside page 0 = %d, %v", n, err)
	}
	if n, err := r.ReadAt(nil, 0); n != 0 || err != nil {
		t.Fatalf("empty ReadAt at an absent page = %d, %v", n, err)
	}
	if st, _ := r.PageState(2); st.Gen != 0 {
		t.Fatal("page 2 written past its failed fault")
	}
}

// TestAbsentFaultPanics checks that a fault function that panics fails the
// access with an *AbsentError, and that an access waiting for it is not
// left waiting.
func TestAbsentFaultPanics(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 4096 * 2, Kind: Dense})
	set := NewPageSet(2)
	set.Add(1)
	if err := r.SetAbsent(set, func(int) error { panic("lost connection") }); err != nil {
		t.Fatal(err)
	}
	_, err := r.WriteAt([]byte{1}, 4096)
	if !errors.Is(err, ErrAbsent) || !strings.Contains(err.Error(), "lost connection") || !r.Absent(1) {
		t.Fatalf("access = %v, absent %v", err, r.Absent(1))
	}
}

// TestAbsentFaultMayArriveAndStore checks that a fault function may land
// its page with any store and call Arrive, Absent and the inspections
// without deadlock.
func TestAbsentFaultMayArriveAndStore(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 4096 * 4, Kind: Synthetic, Seed: 2})
	set := NewPageSet(4)
	set.addRange(0, 4)
	var err error
	fault := func(p int) error {
		if !r.Absent(p) {
			return errors.New("page not absent while landed")
		}
		if err := r.StoreGenerated(p, ClassText, 3); err != nil {
			return err
		}
		if _, err := r.ReadPage(p, make([]byte, 4096)); err != nil {
			return err
		}
		if _, err := r.Digest(); err != nil {
			return err
		}
		if !r.Arrive(p) {
			return errors.New("Arrive from the fault: page not absent")
		}
		return nil
	}
	if err = r.SetAbsent(set, fault); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Fill(0, 4, ClassWeights) }()
	select {
	case err := <-done:
		if err != nil || r.AbsentPages() != 0 {
			t.Fatal(err, r.AbsentPages())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a fault function that stores and calls Arrive deadlocks")
	}
	if st, _ := r.PageState(2); st != (PageState{Gen: 4, Class: ClassWeights}) {
		t.Fatalf("page 2 = %+v, want the fill over the landed page", st)
	}
}

// TestAbsentFaultDoesNotDirty checks that a fault marks nothing dirty;
// the store that lands the page does, as any store does.
func TestAbsentFaultDoesNotDirty(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 4096 * 4, Kind: Sparse})
	set := NewPageSet(4)
	set.Add(1)
	set.Add(2)
	if err := r.SetAbsent(set, func(p int) error {
		if p == 2 {
			return r.StorePage(p, landedPage(p, 4096), 1)
		}
		return nil // page 1: its content is already there
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(make([]byte, 3*4096), 0); err != nil {
		t.Fatal(err)
	}
	var dirty PageSet
	if r.CollectDirty(&dirty); !slices.Equal(dirty.AppendTo(nil), []int{2}) {
		t.Fatalf("dirty after faults: %v, want [2], the landing store's", dirty.AppendTo(nil))
	}
}

// TestAbsentWindowsAndRoot checks that absence belongs to the region it
// was set on: a window's accesses fault with pages relative to it, the
// root's accesses to the same pages do not; and the root's absence does
// not make its windows fault.
func TestAbsentWindowsAndRoot(t *testing.T) {
	const pages = 16
	root := mustNew(t, Config{SizeBytes: 4096 * pages, Kind: Synthetic})
	w, err := root.Map(8, 4, 9)
	if err != nil {
		t.Fatal(err)
	}
	fw := setAbsent(t, w, 1)
	fr := setAbsent(t, root, 10, 3)
	if !w.Absent(1) || w.Absent(2) || !root.Absent(10) || root.Absent(9) {
		t.Fatal("absence not kept by region")
	}
	// The root reads and writes the window's page 1 (its page 9) and the
	// window its page 2 (the root's absent page 10): neither faults.
	if _, err := root.WriteAt([]byte{1}, 9*4096); err != nil {
		t.Fatal(err)
	}
	if err := w.Fill(2, 1, ClassText); err != nil {
		t.Fatal(err)
	}
	if len(fw.called()) != 0 || len(fr.called()) != 0 {
		t.Fatalf("faults through the other region: window %v, root %v", fw.called(), fr.called())
	}
	if err := w.Fill(0, 4, ClassText); err != nil {
		t.Fatal(err)
	}
	if err := root.Fill(0, pages, ClassText); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fw.called(), []int{1}) || !slices.Equal(fr.called(), []int{3, 10}) {
		t.Fatalf("faults: window %v, want [1]; root %v, want [3 10]", fw.called(), fr.called())
	}
}

// TestAbsentScrubAndUnmapClear checks that Scrub and Unmap clear a
// region's absence, and that a root's scrub leaves its windows' absence.
func TestAbsentScrubAndUnmapClear(t *testing.T) {
	const pages = 16
	root := mustNew(t, Config{SizeBytes: 4096 * pages, Kind: Dense})
	w, err := root.Map(8, 4, 9)
	if err != nil {
		t.Fatal(err)
	}
	fw0 := setAbsent(t, w, 0, 3)
	fr := setAbsent(t, root, 1, 2)
	if err := root.Scrub(); err != nil {
		t.Fatal(err)
	}
	if root.AbsentPages() != 0 || root.Absent(1) || w.AbsentPages() != 2 {
		t.Fatalf("after the root's scrub: root %d absent, window %d", root.AbsentPages(), w.AbsentPages())
	}
	if err := w.Scrub(); err != nil {
		t.Fatal(err)
	}
	if w.AbsentPages() != 0 {
		t.Fatal("a window's scrub leaves its absence")
	}
	fw := setAbsent(t, w, 2)
	if err := w.Unmap(); err != nil {
		t.Fatal(err)
	}
	if w.AbsentPages() != 0 || w.Absent(2) {
		t.Fatal("Unmap leaves absence")
	}
	if err := root.Fill(0, pages, ClassText); err != nil {
		t.Fatal(err)
	}
	if len(fw0.called()) != 0 || len(fw.called()) != 0 || len(fr.called()) != 0 {
		t.Fatalf("faults after clearing: window %v %v, root %v", fw0.called(), fw.called(), fr.called())
	}
}

// TestAbsentConcurrentAccesses has many goroutines read and write the same
// absent pages at once: each page's fault function is called once, and no
// reader sees a page before it landed.
func TestAbsentConcurrentAccesses(t *testing.T) {
	const ps, pages, workers = 512, 300, 16
	for _, k := range allKinds {
		t.Run("kind="+k.String(), func(t *testing.T) {
			r := mustNew(t, Config{SizeBytes: ps * pages, PageSize: ps, Kind: k})
			set := NewPageSet(pages)
			set.addRange(0, pages)
			var calls [pages]int32
			var mu sync.Mutex
			if err := r.SetAbsent(set, func(p int) error {
				mu.Lock()
				calls[p]++
				mu.Unlock()
				time.Sleep(10 * time.Microsecond) // a fetch: let others pile up
				return r.StorePage(p, bytes.Repeat([]byte{0xa5}, ps), 1)
			}); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for g := range workers {
				wg.Go(func() {
					buf := make([]byte, 3*ps)
					for i := range pages {
						// Each goroutine goes through the pages from its
						// own start, three pages at a time.
						p := (i + g*pages/workers) % (pages - 2)
						if g%2 == 0 {
							if _, err := r.WriteAt([]byte{0x5a, 0x5a}, int64(p*ps)); err != nil {
								errs <- err
								return
							}
							continue
						}
						if _, err := r.ReadAt(buf, int64(p*ps)); err != nil {
							errs <- err
							return
						}
						for j, b := range buf {
							if j%ps >= 2 && b != 0xa5 {
								errs <- fmt.Errorf("page %d read before it landed: byte %d is %#x", p+j/ps, j%ps, b)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if err := r.Fill(0, pages, ClassText); err != nil {
				t.Fatal(err)
			}
			for p, n := range calls {
				if n != 1 {
					t.Fatalf("page %d: fault called %d times", p, n)
				}
			}
			if r.AbsentPages() != 0 || r.absent.Load() != nil {
				t.Fatalf("%d pages absent after every page was touched", r.AbsentPages())
			}
		})
	}
}

// TestAbsentFaultsOfDifferentPagesOverlap checks that accesses landing
// different pages do not wait for one another: page 0's fault waits until
// page 1's has started.
func TestAbsentFaultsOfDifferentPagesOverlap(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 4096 * 2, Kind: Dense})
	set := NewPageSet(2)
	set.addRange(0, 2)
	started := make(chan struct{})
	if err := r.SetAbsent(set, func(p int) error {
		if p == 1 {
			close(started)
			return nil
		}
		select {
		case <-started:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("page 1's fault did not start while page 0's ran")
		}
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := r.ReadAt(make([]byte, 1), 0); done <- err }()
	time.Sleep(time.Millisecond)
	if _, err := r.WriteAt([]byte{1}, 4096); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAbsentWaitersShareAFailure checks that the accesses that wait for a
// page's fault share its failure, the fault being called once, and that
// the page stays absent.
func TestAbsentWaitersShareAFailure(t *testing.T) {
	const waiters = 8
	r := mustNew(t, Config{SizeBytes: 4096, Kind: Dense})
	set := NewPageSet(1)
	set.Add(0)
	release, entered := make(chan struct{}), make(chan struct{}, waiters)
	var calls int32
	var mu sync.Mutex
	if err := r.SetAbsent(set, func(int) error {
		mu.Lock()
		calls++
		mu.Unlock()
		entered <- struct{}{}
		<-release
		return errFetch
	}); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, waiters)
	for range waiters {
		go func() { _, err := r.ReadAt(make([]byte, 8), 0); errs <- err }()
	}
	<-entered
	time.Sleep(5 * time.Millisecond) // the other accesses meet the landing
	mu.Lock()
	if calls != 1 {
		t.Errorf("fault called %d times at once for one page", calls)
	}
	mu.Unlock()
	close(release)
	for range waiters {
		if err := <-errs; !errors.Is(err, errFetch) || !errors.Is(err, ErrAbsent) {
			t.Fatalf("waiter = %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls < 1 || calls > waiters || !r.Absent(0) {
		t.Fatalf("fault called %d times; absent %v", calls, r.Absent(0))
	}
}

// BenchmarkFillAbsent measures what absence costs accesses that land
// nothing, against the same accesses of a region with no absent page
// (absent=none, one atomic load an access): absent=some has one absent
// page, outside the pages accessed, so that the accesses look at the
// absent bits of their pages without landing any. op=fill fills a
// P40-8Q-sized Synthetic window (8 GiB of 64 KiB pages, but its last
// page) with a mix as one operation, looking at the bits a word of 64
// pages at a time; op=pattern advances a Uniform pattern by 4096 pages of
// a 1 GiB Synthetic guest, looking at each page's bit; op=write writes
// one 4 KiB page of a Dense region. SetBytes is the bytes accessed.
func BenchmarkFillAbsent(b *testing.B) {
	type bench struct {
		bytes int64
		r     *Region
		last  int // the page made absent for absent=some
		do    func() error
	}
	ops := []struct {
		name string
		make func(b *testing.B) bench
	}{
		{"fill", func(b *testing.B) bench {
			const pageSize, pages = 64 << 10, 131072
			root := mustNew(b, Config{SizeBytes: 3 * pages * pageSize, PageSize: pageSize, Kind: Synthetic})
			win, err := root.Map(pages, pages, 7)
			if err != nil {
				b.Fatal(err)
			}
			return bench{(pages - 1) * pageSize, win, pages - 1, func() error { return win.FillMix(0, pages-1, MixWeights()) }}
		}},
		{"pattern", func(b *testing.B) bench {
			const pages = 4096
			r := mustNew(b, Config{SizeBytes: 1 << 30, Kind: Synthetic, Seed: 1})
			if err := r.FillMix(0, r.Pages(), MixRealistic()); err != nil {
				b.Fatal(err)
			}
			p, err := NewPattern(r, PatternConfig{Kind: Uniform, RateBytesPerSec: 4096 * pages, Pages: r.Pages() - 1, Seed: 2})
			if err != nil {
				b.Fatal(err)
			}
			return bench{4096 * pages, r, r.Pages() - 1, func() error { _, err := p.Advance(time.Second); return err }}
		}},
		{"write", func(b *testing.B) bench {
			const pages = 1024
			r := mustNew(b, Config{SizeBytes: pages * 4096, Kind: Dense})
			data := make([]byte, 4096)
			Generate(data, ClassRandom, 1, 1, 1)
			i := 0
			return bench{4096, r, pages - 1, func() error {
				i = (i + 1) % (pages - 1)
				_, err := r.WriteAt(data, int64(i)*4096)
				return err
			}}
		}},
	}
	for _, op := range ops {
		for _, absent := range []string{"none", "some"} {
			b.Run("op="+op.name+"/absent="+absent, func(b *testing.B) {
				bn := op.make(b)
				if absent == "some" {
					setAbsent(b, bn.r, bn.last)
				}
				b.SetBytes(bn.bytes)
				b.ReportAllocs()
				for b.Loop() {
					if err := bn.do(); err != nil {
						b.Fatal(err)
					}
				}
				if absent == "some" && bn.r.AbsentPages() != 1 {
					b.Fatal("the absent page was landed")
				}
			})
		}
	}
}

// TestAbsentArriveDuringLanding: a page that arrives (a push) while an
// access is landing it stays absent until that landing has stored it, so
// that a later access cannot write the page before the landing's store
// and lose the write under it.
func TestAbsentArriveDuringLanding(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 4096 * 4, Kind: Dense})
	set := NewPageSet(r.Pages())
	set.Add(1)
	entered, release := make(chan struct{}), make(chan struct{})
	landed := bytes.Repeat([]byte{0xaa}, 4096)
	if err := r.SetAbsent(set, func(p int) error {
		close(entered)
		<-release
		return r.StorePage(p, landed, 1)
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := r.WriteAt([]byte{0x55}, 4096)
		done <- err
	}()
	<-entered
	if !r.Arrive(1) || !r.Absent(1) {
		t.Fatal("a page arriving while it lands was marked present before it landed")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.Absent(1) {
		t.Fatal("the landing left the page absent")
	}
	if _, err := r.WriteAt([]byte{0x66}, 4097); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if _, err := r.ReadAt(got, 4096); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(landed)
	want[0], want[1] = 0x55, 0x66
	if !bytes.Equal(got, want) {
		t.Fatalf("page starts %x, want %x", got[:4], want[:4])
	}
}
