package memory

import (
	"bytes"
	"fmt"
	"slices"
)

// refSpace is the naive reference the Region is checked against: a map of
// page bytes, a map of generations and a set of dirty pages a log, with no
// bitmap, no lock, no backing and no laziness.
type refSpace struct {
	pageSize int
	pages    int
	seed     uint64
	data     map[int][]byte
	gens     map[int]uint32
	// classed holds the pages whose class is not ClassZero: a page of
	// bytes of its own is in use whatever they are (a write whose
	// generation wraps around to 0 may leave one all zero); a zero page
	// that zeros are written over stays of ClassZero.
	classed map[int]bool
	windows []refWindow    // mapped, any order
	dirty   map[int][]bool // log id (0 root, else window id) -> page bits
	logOn   map[int]bool
	nextID  int
}

type refWindow struct {
	id, first, pages int
	seed             uint64
}

func newRefSpace(pageSize, pages int, seed uint64) *refSpace {
	return &refSpace{
		pageSize: pageSize, pages: pages, seed: seed,
		data: map[int][]byte{}, gens: map[int]uint32{}, classed: map[int]bool{},
		dirty: map[int][]bool{0: make([]bool, pages)}, logOn: map[int]bool{0: true}, nextID: 1,
	}
}

func (s *refSpace) page(abs int) []byte {
	if b, ok := s.data[abs]; ok {
		return b
	}
	return make([]byte, s.pageSize)
}

// key returns the content key of an absolute page and the window holding it.
func (s *refSpace) key(abs int) (seed, key uint64, win int) {
	for _, w := range s.windows {
		if abs >= w.first && abs < w.first+w.pages {
			return w.seed, uint64(abs - w.first), w.id
		}
	}
	return s.seed, uint64(abs), 0
}

func (s *refSpace) mark(abs int) {
	if s.logOn[0] {
		s.dirty[0][abs] = true
	}
	if _, _, id := s.key(abs); id != 0 && s.logOn[id] {
		w := s.window(id)
		s.dirty[id][abs-w.first] = true
	}
}

func (s *refSpace) window(id int) refWindow {
	for _, w := range s.windows {
		if w.id == id {
			return w
		}
	}
	panic(fmt.Sprintf("no window %d", id))
}

func (s *refSpace) write(abs int, p []byte, off int) {
	b := slices.Clone(s.page(abs))
	copy(b[off:], p)
	s.data[abs] = b
	s.gens[abs]++
	s.classed[abs] = s.classed[abs] || !IsZero(p)
	s.mark(abs)
}

func (s *refSpace) set(abs int, c Class, gen uint32) {
	seed, key, _ := s.key(abs)
	b := make([]byte, s.pageSize)
	Generate(b, c, seed, key, gen)
	s.data[abs] = b
	s.gens[abs] = gen
	s.classed[abs] = c != ClassZero
	s.mark(abs)
}

func (s *refSpace) scrub(first, n int) {
	for p := first; p < first+n; p++ {
		delete(s.data, p)
		delete(s.gens, p)
		delete(s.classed, p)
	}
}

func (s *refSpace) mapWindow(first, pages int, seed uint64) (int, bool) {
	for _, w := range s.windows {
		if first < w.first+w.pages && w.first < first+pages {
			return 0, false
		}
	}
	s.scrub(first, pages)
	id := s.nextID
	s.nextID++
	s.windows = append(s.windows, refWindow{id: id, first: first, pages: pages, seed: seed})
	s.dirty[id] = make([]bool, pages)
	s.logOn[id] = true
	return id, true
}

func (s *refSpace) unmap(id int) {
	w := s.window(id)
	s.windows = slices.DeleteFunc(s.windows, func(x refWindow) bool { return x.id == id })
	s.scrub(w.first, w.pages)
	delete(s.dirty, id)
}

// collect returns and clears the dirty pages of log id.
func (s *refSpace) collect(id int) []int {
	var out []int
	for p, d := range s.dirty[id] {
		if d {
			out = append(out, p)
			s.dirty[id][p] = false
		}
	}
	return out
}

// checkEqual compares every page of r (a root) with the reference.
func (s *refSpace) checkEqual(r *Region) error {
	buf := make([]byte, s.pageSize)
	for p := range s.pages {
		st, err := r.ReadPage(p, buf)
		if err != nil {
			return err
		}
		if want := s.page(p); !bytes.Equal(buf, want) {
			return fmt.Errorf("page %d: bytes differ (got %x..., want %x...)", p, buf[:8], want[:8])
		}
		if st.Gen != s.gens[p] {
			return fmt.Errorf("page %d: gen %d, want %d", p, st.Gen, s.gens[p])
		}
		zero, err := r.IsZeroPage(p)
		if err != nil {
			return err
		}
		if zero != IsZero(s.page(p)) {
			return fmt.Errorf("page %d: IsZeroPage %v", p, zero)
		}
	}
	return s.checkUsed(r)
}

// checkUsed compares the pages r reports in use with the reference's.
func (s *refSpace) checkUsed(r *Region) error {
	var want []int
	for p := range s.pages {
		// A page of a class but zero holds bytes that are not all zero.
		if s.gens[p] != 0 || !IsZero(s.page(p)) || s.classed[p] {
			want = append(want, p)
		}
	}
	var set PageSet
	if err := r.UsedPages(&set); err != nil {
		return err
	}
	if got := set.AppendTo(nil); !slices.Equal(got, want) {
		return fmt.Errorf("used pages %v, want %v", got, want)
	}
	n, err := r.UsedBytes()
	if err != nil {
		return err
	}
	if n != int64(len(want)*s.pageSize) {
		return fmt.Errorf("used bytes %d, want %d", n, len(want)*s.pageSize)
	}
	return nil
}
