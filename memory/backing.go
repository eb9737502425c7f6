package memory

import (
	"sync"
	"sync/atomic"
)

// backing stores the bytes of the pages that hold bytes. The Region keeps
// every page's class and generation and decides what a page without bytes
// reads as (zero, or generated content for Synthetic), so a backing only
// stores, hands out and drops page buffers. Calls for one page are
// serialized by the Region's page locks; calls for different pages may run
// at once.
type backing interface {
	// page returns the stored bytes of page p (one page long, capacity
	// capped), or nil if the backing stores none for it.
	page(p int) []byte
	// alloc returns the stored bytes of page p, allocating a page of
	// zeros if there are none.
	alloc(p int) []byte
	// release makes page p read as zero, freeing its memory where the
	// backing can.
	release(p int)
	// releaseRange is release for pages [first, end).
	releaseRange(first, end int)
	// resident returns the bytes of page memory held.
	resident() int64
}

// denseBacking is one allocation of the whole address space. The operating
// system backs it lazily, so an untouched dense region costs address space
// rather than memory until it is written.
type denseBacking struct {
	buf   []byte
	shift uint
}

func newDense(pages int, shift uint) *denseBacking {
	return &denseBacking{buf: make([]byte, pages<<shift), shift: shift}
}

func (d *denseBacking) page(p int) []byte {
	lo, hi := p<<d.shift, (p+1)<<d.shift
	// The capacity is capped so that no caller can reach the next page
	// through append or a decoder writing into spare capacity.
	return d.buf[lo:hi:hi]
}

func (d *denseBacking) alloc(p int) []byte { return d.page(p) }
func (d *denseBacking) release(p int)      { clear(d.page(p)) }
func (d *denseBacking) resident() int64    { return int64(len(d.buf)) }

func (d *denseBacking) releaseRange(first, end int) { clear(d.buf[first<<d.shift : end<<d.shift]) }

// sparseChunkPages is the number of page slots a sparse chunk holds; the
// chunk table then costs eight bytes for every 2 MiB of 4 KiB pages.
const sparseChunkShift = 9

type sparseChunk [1 << sparseChunkShift]*[]byte

// sparseBacking allocates pages on demand in a two-level table. Chunks are
// installed with compare-and-swap because writers of different pages in one
// chunk hold different page locks.
//
// A page comes from the pool of freed pages if it has one, else from the
// backing's current slab (see newPage).
type sparseBacking struct {
	chunks   []atomic.Pointer[sparseChunk]
	pageSize int
	shift    uint
	bytes    atomic.Int64

	slabMu sync.Mutex
	// slab is the pages of the last slab (or slabs) not handed out yet,
	// all zero.
	slab [][]byte
	// slabPages is the size of the next slab: it doubles from
	// slabMinPages up to slabLimit(pageSize).
	slabPages int
}

// A slab is one allocation of several pages' bytes and one of their slice
// headers, so that a region that stores a guest's worth of fresh pages
// allocates twice a slab instead of twice a page: 300,000 allocations
// for 2 GiB become fewer than 10,000.
//
// Slabs grow from 8 pages to 128 pages (512 KiB of 4 KiB pages) for each
// backing, and a backing takes its fresh pages from its own last slab in
// turn, whatever their addresses; a page freed goes to the pool alone. So:
//   - the memory a backing holds beyond the pages it stores is the rest of
//     its last slab (of the last slabs, where goroutines that found it
//     empty at once each made one): fewer than 128 pages a slab, and,
//     stored one goroutine at a time, never more than 8 beyond the pages
//     it took from slabs so far — a region that touches one page in 2 MiB
//     packs those pages into slabs, it does not pin a slab for each;
//   - the garbage collector frees a slab only once none of its pages is
//     stored by a region, pooled or waiting in a slab: a region that frees
//     most of its pages but keeps one page of each slab keeps the slabs'
//     memory (at most 128 times the pages kept) until it frees those too.
//     The freed pages are not lost meanwhile: they go to the pool, which
//     any sparse backing takes from before it makes a slab, as long as the
//     pool keeps them (it drops them when the garbage collector runs).
const (
	slabMinPages = 8
	slabMaxPages = 128
	slabMaxBytes = 512 << 10
)

// slabLimit returns the pages of the largest slab of pageSize pages:
// 128 pages, fewer when they would exceed 512 KiB, at least one.
func slabLimit(pageSize int) int {
	return max(1, min(slabMaxPages, slabMaxBytes/pageSize))
}

// freePages holds the pages sparse backings released, by page-size shift,
// for any sparse backing to reuse: a host that sends one VM away and takes
// another in reuses warm memory instead of allocating, and faulting in,
// fresh pages, which costs a migration's destination more than storing the
// bytes does. A sync.Pool empties itself as the garbage collector runs, so
// memory no region wants is not held for long.
//
// The pool is shared by every region of the process, so a page in it may
// go to another tenant next: release clears a page before putting it here,
// and every page in the pool is all zero. Clearing on the way in rather
// than on the way out means the correctness of the next owner's reads
// depends on no caller's promise to overwrite the whole page, and a freed
// tenant's bytes do not outlive its page in memory.
var freePages [maxPageShift + 1]sync.Pool // of *[]byte

// maxPageShift is log2(MaxPageSize).
const maxPageShift = 21

// The pool's table must have a slot for every page size.
var _ [0]struct{} = [MaxPageSize >> maxPageShift >> 1]struct{}{}

func newSparse(pages, pageSize int) *sparseBacking {
	n := (pages + 1<<sparseChunkShift - 1) >> sparseChunkShift
	s := &sparseBacking{chunks: make([]atomic.Pointer[sparseChunk], n), pageSize: pageSize,
		slabPages: min(slabMinPages, slabLimit(pageSize))}
	for 1<<s.shift < pageSize {
		s.shift++
	}
	return s
}

func (s *sparseBacking) page(p int) []byte {
	c := s.chunks[p>>sparseChunkShift].Load()
	if c == nil {
		return nil
	}
	if bp := c[p&(1<<sparseChunkShift-1)]; bp != nil {
		return *bp
	}
	return nil
}

func (s *sparseBacking) alloc(p int) []byte {
	slot := s.slot(p)
	if *slot == nil {
		*slot = s.newPage()
		s.bytes.Add(int64(s.pageSize))
	}
	return **slot
}

// slot returns page p's slot in its chunk, making the chunk if it has none.
// The caller holds p's lock for writing.
func (s *sparseBacking) slot(p int) **[]byte {
	chunk := &s.chunks[p>>sparseChunkShift]
	c := chunk.Load()
	if c == nil {
		c = new(sparseChunk)
		if !chunk.CompareAndSwap(nil, c) {
			c = chunk.Load()
		}
	}
	return &c[p&(1<<sparseChunkShift-1)]
}

// newPage returns a page of zeros, a freed one if the pool has one, else
// the next page of the backing's slab, making a slab when it has none. A
// page keeps its slice header from its first allocation on, in the slab,
// the chunk and the pool alike, so that freeing and reusing it allocates
// nothing.
func (s *sparseBacking) newPage() *[]byte {
	if bp, ok := freePages[s.shift].Get().(*[]byte); ok {
		return bp
	}
	s.slabMu.Lock()
	if len(s.slab) > 0 {
		bp := &s.slab[0]
		s.slab = s.slab[1:]
		s.slabMu.Unlock()
		return bp
	}
	n := s.slabPages
	s.slabPages = min(2*s.slabPages, slabLimit(s.pageSize))
	s.slabMu.Unlock()
	// The slab is made outside the lock, so that the workers of a
	// destination storing fresh pages do not queue behind an allocation;
	// two that run out at once each make one, and both go to the slab.
	slab := newSlab(n, s.pageSize)
	s.slabMu.Lock()
	if len(s.slab) == 0 {
		s.slab = slab[1:]
	} else {
		s.slab = append(s.slab, slab[1:]...)
	}
	s.slabMu.Unlock()
	return &slab[0]
}

// newSlab returns n fresh pages of pageSize zero bytes, in one allocation,
// and their slice headers, in another. Each page's capacity is capped, so
// that nothing that writes through a page — append, a decoder writing
// into spare capacity — can reach the next page of its slab.
func newSlab(n, pageSize int) [][]byte {
	buf := make([]byte, n*pageSize)
	pages := make([][]byte, n)
	for i := range pages {
		lo, hi := i*pageSize, (i+1)*pageSize
		pages[i] = buf[lo:hi:hi]
	}
	return pages
}

func (s *sparseBacking) release(p int) {
	c := s.chunks[p>>sparseChunkShift].Load()
	if c == nil {
		return
	}
	i := p & (1<<sparseChunkShift - 1)
	if bp := c[i]; bp != nil {
		c[i] = nil
		s.bytes.Add(-int64(s.pageSize))
		s.free(bp)
	}
}

// releaseRange releases pages [first, end), passing over the chunks that
// hold no page without looking at their slots.
func (s *sparseBacking) releaseRange(first, end int) {
	for a := first; a < end; {
		next := min(end, (a>>sparseChunkShift+1)<<sparseChunkShift)
		if s.chunks[a>>sparseChunkShift].Load() != nil {
			for q := a; q < next; q++ {
				s.release(q)
			}
		}
		a = next
	}
}

// install makes bp, a page from newPage that no page holds, page p's
// bytes, and returns the buffer p held before, or nil. The caller holds
// p's lock for writing, and frees the old buffer (free) once it let go of
// the lock: a page is filled and freed outside its lock and only swapped
// under it.
func (s *sparseBacking) install(p int, bp *[]byte) (old *[]byte) {
	slot := s.slot(p)
	old, *slot = *slot, bp
	if old == nil {
		s.bytes.Add(int64(s.pageSize))
	}
	return old
}

// free clears bp, a buffer no page holds, and pools it.
func (s *sparseBacking) free(bp *[]byte) {
	clear(*bp) // before any other region can take it: see freePages
	freePages[s.shift].Put(bp)
}

func (s *sparseBacking) resident() int64 { return s.bytes.Load() }
