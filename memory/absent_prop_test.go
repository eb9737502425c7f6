package memory

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// absentLanding is a landing a fault function made: a store to repeat on
// the reference region.
type absentLanding struct {
	p    int
	data []byte // nil: StoreGenerated of ClassText
	gen  uint32
}

// absentMachine drives a region with absent pages, and a reference region
// without, through random guest accesses, landings, SetAbsent and Arrive.
// A naive model of absence (a bool a page, a list of pages whose fault
// fails) says which pages each access must land, in which order, and
// where it must stop; the reference region gets, before each access, the
// stores the fault function made for it, then the access as far as the
// model says it goes. After every step both regions hold the same bytes,
// states and dirty pages, and the region's absence is the model's.
type absentMachine struct {
	r, ref  *Region
	absent  []bool
	failing []bool
	calls   []int           // the fault function's calls during the current step
	landed  []absentLanding // its landings during the current step
	lands   int             // landings so far, which key their content
}

func (m *absentMachine) fault(p int) error {
	m.calls = append(m.calls, p)
	if m.failing[p] {
		return errFetch
	}
	m.lands++
	l := absentLanding{p: p, gen: uint32(m.lands % 5)}
	var err error
	switch m.lands % 3 {
	case 0:
		err = m.r.StoreGenerated(p, ClassText, l.gen)
	case 1:
		l.data = make([]byte, m.r.PageSize())
		err = m.r.StorePage(p, l.data, l.gen)
	default:
		l.data = bytes.Repeat([]byte{byte(m.lands), byte(p)}, m.r.PageSize()/2)
		err = m.r.StorePage(p, l.data, l.gen)
	}
	m.landed = append(m.landed, l)
	return err
}

// touch runs the model over the pages an access touches, in order: it
// returns the calls of the fault function expected and how many of the
// pages the access gets to, and marks the pages landed present.
func (m *absentMachine) touch(pages []int) (calls []int, reached int) {
	for i, p := range pages {
		if !m.absent[p] {
			continue
		}
		calls = append(calls, p)
		if m.failing[p] {
			return calls, i
		}
		m.absent[p] = false
	}
	return calls, len(pages)
}

// check compares the fault function's calls with those expected, replays
// its landings on the reference, and checks the error of an access that
// reached `reached` of pages.
func (m *absentMachine) check(t *rapid.T, wantCalls, pages []int, reached int, err error) {
	t.Helper()
	if !slices.Equal(m.calls, wantCalls) {
		t.Fatalf("fault called for %v, want %v", m.calls, wantCalls)
	}
	for _, l := range m.landed {
		var err error
		if l.data == nil {
			err = m.ref.StoreGenerated(l.p, ClassText, l.gen)
		} else {
			err = m.ref.StorePage(l.p, l.data, l.gen)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	m.calls, m.landed = m.calls[:0], m.landed[:0]
	if reached == len(pages) {
		if err != nil {
			t.Fatalf("access = %v", err)
		}
		return
	}
	var ae *AbsentError
	if !errors.Is(err, ErrAbsent) || !errors.Is(err, errFetch) || !errors.As(err, &ae) || ae.Page != pages[reached] {
		t.Fatalf("access = %v, want an *AbsentError of page %d", err, pages[reached])
	}
}

func pageRange(first, n int) []int {
	ps := make([]int, n)
	for i := range ps {
		ps[i] = first + i
	}
	return ps
}

// bytePages returns the pages a byte access of n bytes at off touches.
func bytePages(off int64, n, pageSize int) []int {
	if n == 0 {
		return nil
	}
	first := int(off / int64(pageSize))
	return pageRange(first, int((off+int64(n)-1)/int64(pageSize))-first+1)
}

func TestAbsentMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ps := rapid.SampledFrom([]int{64, 256}).Draw(t, "pageSize")
		rootPages := rapid.IntRange(1, 200).Draw(t, "rootPages")
		kind := rapid.SampledFrom(allKinds).Draw(t, "kind")
		seed := rapid.Uint64().Draw(t, "seed")
		bulkFillMin := rapid.SampledFrom([]int{bulkFillMinPages, 1}).Draw(t, "bulkFillMin")
		metaShift := rapid.SampledFrom([]uint{metaChunkShift, 0, 2}).Draw(t, "metaShift")
		mk := func() *Region {
			r := mustNew(t, Config{SizeBytes: int64(ps * rootPages), PageSize: ps, Kind: kind, Seed: seed})
			r.sp.bulkFillMin = bulkFillMin
			r.sp.setMetaShift(metaShift)
			return r
		}
		m := &absentMachine{r: mk(), ref: mk()}
		if rapid.Bool().Draw(t, "window") {
			first := rapid.IntRange(0, rootPages-1).Draw(t, "windowFirst")
			n := rapid.IntRange(1, rootPages-first).Draw(t, "windowPages")
			wseed := rapid.Uint64().Draw(t, "windowSeed")
			var err error
			if m.r, err = m.r.Map(first, n, wseed); err != nil {
				t.Fatal(err)
			}
			if m.ref, err = m.ref.Map(first, n, wseed); err != nil {
				t.Fatal(err)
			}
		}
		pages := m.r.Pages()
		m.absent, m.failing = make([]bool, pages), make([]bool, pages)
		size := m.r.Size()
		pageOf := func(t *rapid.T, label string) int { return rapid.IntRange(0, pages-1).Draw(t, label) }
		span := func(t *rapid.T) (int, int) {
			first := pageOf(t, "first")
			return first, rapid.IntRange(0, pages-first).Draw(t, "n")
		}
		byteSpan := func(t *rapid.T) (int64, int) {
			off := rapid.Int64Range(0, size).Draw(t, "off")
			return off, rapid.IntRange(0, int(min(size-off, int64(3*ps)))).Draw(t, "len")
		}
		classes := []Class{ClassZero, ClassWeights, ClassText, ClassRandom}
		mixes := []Mix{MixRealistic(), MixText(), {Parts: []MixPart{{ClassRandom, 1}, {ClassWeights, 3}}}}
		a, b := make([]byte, ps), make([]byte, ps)
		var dirty, refDirty PageSet

		t.Repeat(map[string]func(*rapid.T){
			"": func(t *rapid.T) {
				count := 0
				for p := range pages {
					if m.r.Absent(p) != m.absent[p] {
						t.Fatalf("page %d absent %v, want %v", p, m.r.Absent(p), m.absent[p])
					}
					if m.absent[p] {
						count++
					}
					sa, err := m.r.ReadPage(p, a)
					if err != nil {
						t.Fatal(err)
					}
					sb, _ := m.ref.ReadPage(p, b)
					if sa != sb || !bytes.Equal(a, b) {
						t.Fatalf("page %d: %+v, reference %+v (bytes equal %v)", p, sa, sb, bytes.Equal(a, b))
					}
				}
				if m.r.AbsentPages() != count {
					t.Fatalf("%d pages absent, want %d", m.r.AbsentPages(), count)
				}
				if len(m.calls) != 0 {
					t.Fatalf("fault called for %v by landings or inspections", m.calls)
				}
				m.r.CollectDirty(&dirty)
				m.ref.CollectDirty(&refDirty)
				if !slices.Equal(dirty.words, refDirty.words) {
					t.Fatalf("dirty pages %v, reference %v", dirty.AppendTo(nil), refDirty.AppendTo(nil))
				}
			},
			"setAbsent": func(t *rapid.T) {
				set := NewPageSet(pages)
				for _, p := range rapid.SliceOfN(rapid.IntRange(0, pages-1), 0, 12).Draw(t, "pages") {
					set.Add(p)
				}
				if rapid.Bool().Draw(t, "range") {
					first, n := span(t)
					set.addRange(first, n)
				}
				for p := range pages {
					m.failing[p] = false
				}
				for _, p := range rapid.SliceOfN(rapid.IntRange(0, pages-1), 0, 4).Draw(t, "failing") {
					m.failing[p] = true
				}
				if err := m.r.SetAbsent(set, m.fault); err != nil {
					t.Fatal(err)
				}
				for p := range pages {
					m.absent[p] = set.Has(p)
				}
			},
			"clearAbsent": func(t *rapid.T) {
				set := NewPageSet(pages)
				if rapid.Bool().Draw(t, "nil") {
					set = nil
				}
				if err := m.r.SetAbsent(set, nil); err != nil {
					t.Fatal(err)
				}
				clear(m.absent)
			},
			"heal": func(t *rapid.T) {
				m.failing[pageOf(t, "page")] = false
			},
			"arrive": func(t *rapid.T) {
				p := rapid.IntRange(-1, pages).Draw(t, "page")
				want := p >= 0 && p < pages && m.absent[p]
				if got := m.r.Arrive(p); got != want {
					t.Fatalf("Arrive(%d) = %v, want %v", p, got, want)
				}
				if want {
					m.absent[p] = false
				}
			},
			"storePage": func(t *rapid.T) {
				p := pageOf(t, "page")
				data := bytes.Repeat([]byte{rapid.Byte().Draw(t, "byte")}, ps)
				gen := rapid.Uint32Range(0, 9).Draw(t, "gen")
				for _, r := range []*Region{m.r, m.ref} {
					if err := r.StorePage(p, data, gen); err != nil {
						t.Fatal(err)
					}
				}
			},
			"scrub": func(t *rapid.T) {
				for _, r := range []*Region{m.r, m.ref} {
					if err := r.Scrub(); err != nil {
						t.Fatal(err)
					}
				}
				clear(m.absent)
			},
			"fill": func(t *rapid.T) {
				first, n := span(t)
				c := rapid.SampledFrom(classes).Draw(t, "class")
				touched := pageRange(first, n)
				calls, reached := m.touch(touched)
				err := m.r.Fill(first, n, c)
				m.check(t, calls, touched, reached, err)
				if err := m.ref.Fill(first, reached, c); err != nil {
					t.Fatal(err)
				}
			},
			"fillMix": func(t *rapid.T) {
				first, n := span(t)
				mix := rapid.SampledFrom(mixes).Draw(t, "mix")
				touched := pageRange(first, n)
				calls, reached := m.touch(touched)
				err := m.r.FillMix(first, n, mix)
				m.check(t, calls, touched, reached, err)
				if err := m.ref.FillMix(first, reached, mix); err != nil {
					t.Fatal(err)
				}
			},
			"fillEach": func(t *rapid.T) {
				touched := rapid.SliceOfN(rapid.IntRange(0, pages-1), 1, 20).Draw(t, "pages")
				mix := rapid.SampledFrom(mixes).Draw(t, "mix")
				calls, reached := m.touch(touched)
				n, err := m.r.fillEach(touched, mix)
				m.check(t, calls, touched, reached, err)
				if n != reached {
					t.Fatalf("fillEach filled %d pages, want %d", n, reached)
				}
				if _, err := m.ref.fillEach(touched[:reached], mix); err != nil {
					t.Fatal(err)
				}
			},
			"write": func(t *rapid.T) {
				off, n := byteSpan(t)
				data := rapid.SliceOfN(rapid.SampledFrom([]byte{0, 1, 0xff}), n, n).Draw(t, "data")
				touched := bytePages(off, n, ps)
				calls, reached := m.touch(touched)
				got, err := m.r.WriteAt(data, off)
				m.check(t, calls, touched, reached, err)
				limit := n
				if reached < len(touched) {
					limit = int(max(int64(touched[reached]*ps)-off, 0))
				}
				if got != limit {
					t.Fatalf("WriteAt wrote %d bytes, want %d", got, limit)
				}
				if _, err := m.ref.WriteAt(data[:limit], off); err != nil {
					t.Fatal(err)
				}
			},
			"read": func(t *rapid.T) {
				off, n := byteSpan(t)
				touched := bytePages(off, n, ps)
				calls, reached := m.touch(touched)
				buf := make([]byte, n)
				got, err := m.r.ReadAt(buf, off)
				m.check(t, calls, touched, reached, err)
				limit := n
				if reached < len(touched) {
					limit = int(max(int64(touched[reached]*ps)-off, 0))
				}
				want := make([]byte, limit)
				if _, err := m.ref.ReadAt(want, off); err != nil {
					t.Fatal(err)
				}
				if got != limit || !bytes.Equal(buf[:got], want) {
					t.Fatalf("ReadAt read %d bytes, want %d (equal %v)", got, limit, bytes.Equal(buf[:min(got, limit)], want[:min(got, limit)]))
				}
			},
		})
	})
}
