package memory

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// lockStripes is the number of page locks of an address space. Page p is
// guarded by lock p mod lockStripes: enough stripes that writers of
// different pages rarely meet, few enough that a region's locks fit in 16 KiB.
const lockStripes = 256

// scrubMinWorkerPages is the pages a scrub gives each of its goroutines at
// least: 64 MiB of 4 KiB pages, so that a small region is scrubbed on the
// caller's goroutine alone.
const scrubMinWorkerPages = 16384

type paddedRWMutex struct {
	sync.RWMutex
	_ [64 - 24]byte // one lock a cache line, so stripes do not share lines
}

// space is the state a root Region and its windows share: the backing and
// the per-page metadata. classes and gens of page p are read and written
// only under p's lock. Every change to a page ends with changed (or, for a
// scrub, changedRange): that is what keeps the digest cache and the sums
// StorePage records true.
type space struct {
	pageSize int
	shift    uint
	pages    int
	kind     Kind
	seed     uint64
	back     backing
	classes  []Class
	gens     []uint32
	locks    []paddedRWMutex
	root     *Region

	mapMu   sync.Mutex                // serializes Map and Unmap
	windows atomic.Pointer[[]*Region] // mapped windows sorted by first page; never mutated in place

	scratch sync.Pool // *[]byte of one page, for partial reads and writes of generated pages

	bulkFillMin int // bulkFillMinPages, but lowered by tests so that small regions take the bulk path

	digest atomic.Pointer[digestCache]  // made by the first digest: see digestcache.go
	known  []atomic.Pointer[knownChunk] // sums StorePage and ReadPage recorded, by 128 pages: see knownsum.go
}

func newSpace(cfg Config) *space {
	pages := int(cfg.SizeBytes / int64(cfg.PageSize))
	shift := uint(0)
	for 1<<shift < cfg.PageSize {
		shift++
	}
	sp := &space{
		pageSize: cfg.PageSize,
		shift:    shift,
		pages:    pages,
		kind:     cfg.Kind,
		seed:     cfg.Seed,
		classes:  make([]Class, pages),
		gens:     make([]uint32, pages),
		locks:    make([]paddedRWMutex, lockStripes),
		known:    newKnownSums(pages),

		bulkFillMin: bulkFillMinPages,
	}
	if cfg.Kind == Dense {
		sp.back = newDense(pages, shift)
	} else {
		sp.back = newSparse(pages, cfg.PageSize)
	}
	sp.scratch.New = func() any { b := make([]byte, sp.pageSize); return &b }
	return sp
}

func (sp *space) lock(p int) *sync.RWMutex { return &sp.locks[p&(lockStripes-1)].RWMutex }

// windowAt returns the mapped window holding absolute page p, or nil.
func (sp *space) windowAt(p int) *Region {
	ws := sp.windows.Load()
	if ws == nil {
		return nil
	}
	list := *ws
	i := sort.Search(len(list), func(i int) bool { return list[i].first+list[i].pages > p })
	if i < len(list) && list[i].first <= p {
		return list[i]
	}
	return nil
}

// target is one page of an access resolved to the address space: its
// absolute index, the key of its generated content, and the window whose
// dirty log it also marks.
type target struct {
	abs  int
	seed uint64
	key  uint64
	win  *Region
}

// sparse returns sp's backing if it is sparse, else nil.
func (sp *space) sparse() *sparseBacking {
	sb, _ := sp.back.(*sparseBacking)
	return sb
}

// storesGenerated reports whether generated content is materialized into
// the backing (Dense, Sparse) or produced on read (Synthetic).
func (sp *space) storesGenerated() bool { return sp.kind != Synthetic }

// readLocked copies bytes [off, off+len(dst)) of page t into dst. The page
// lock is held.
func (sp *space) readLocked(t target, off int, dst []byte) {
	if buf := sp.back.page(t.abs); buf != nil {
		copy(dst, buf[off:])
		return
	}
	c := sp.classes[t.abs]
	if c == ClassZero {
		clear(dst)
		return
	}
	gen := sp.gens[t.abs]
	if off == 0 && len(dst) == sp.pageSize {
		Generate(dst, c, t.seed, t.key, gen)
		return
	}
	bp := sp.scratch.Get().(*[]byte)
	Generate(*bp, c, t.seed, t.key, gen)
	copy(dst, (*bp)[off:])
	sp.scratch.Put(bp)
}

// writeLocked stores src at offset off of page t and bumps its generation.
// The page lock is held.
func (sp *space) writeLocked(t target, off int, src []byte) {
	c := sp.classes[t.abs]
	buf := sp.back.page(t.abs)
	switch {
	case buf == nil && c == ClassZero && IsZero(src):
		// Zeros over a zero page change nothing but the generation, and
		// a sparse backing must not allocate for them.
	case buf == nil:
		buf = sp.back.alloc(t.abs)
		if c != ClassZero && len(src) < sp.pageSize {
			Generate(buf, c, t.seed, t.key, sp.gens[t.abs])
		}
		copy(buf[off:], src)
		c = ClassExplicit
	case c == ClassZero && IsZero(src):
	default:
		copy(buf[off:], src)
		c = ClassExplicit
	}
	sp.classes[t.abs] = c
	sp.gens[t.abs]++
	sp.changed(t.abs)
}

// setLocked gives page t class c at generation gen: generated content, or
// zero. The page lock is held.
func (sp *space) setLocked(t target, c Class, gen uint32) {
	if c == ClassZero || !sp.storesGenerated() {
		sp.back.release(t.abs)
	} else {
		Generate(sp.back.alloc(t.abs), c, t.seed, t.key, gen)
	}
	sp.classes[t.abs] = c
	sp.gens[t.abs] = gen
	sp.changed(t.abs)
}

// storeLocked stores a whole page of bytes at generation gen. The page
// lock is held. It records the page's sum for the digest, hashing the bytes
// as stored rather than data, so that a caller that changed data during the
// call could not make the record differ from the page.
func (sp *space) storeLocked(t target, data []byte, gen uint32) {
	if IsZero(data) {
		sp.setLocked(t, ClassZero, gen)
		return
	}
	buf := sp.back.alloc(t.abs)
	copy(buf, data)
	sp.classes[t.abs] = ClassExplicit
	sp.gens[t.abs] = gen
	sp.changed(t.abs)
	sp.recordSum(t.abs, xxhash.Sum64(buf))
}

// scrubLocked returns page p to its initial state: zero, generation 0.
func (sp *space) scrubLocked(p int) {
	if sp.classes[p] != ClassZero || sp.back.page(p) != nil {
		sp.back.release(p)
	}
	sp.classes[p] = ClassZero
	sp.gens[p] = 0
}

// scrub scrubs pages [first, first+n). It takes each lock stripe once and
// scrubs that stripe's pages of the range under it, rather than locking
// each page in turn: a 1 GiB window of 4 KiB pages is 262,144 pages, and a
// lock per page was most of the cost of creating and destroying a vGPU.
// A large range is scrubbed by up to GOMAXPROCS goroutines, each taking
// stripes in turn: clearing the pages a VM leaves behind is most of what
// a migration's source does after the destination resumed it, and one
// core clears a few GB a second where the machine's memory takes more.
func (sp *space) scrub(first, n int) {
	stripes := min(n, lockStripes)
	scrubStripes := func(from, step int) {
		for s := from; s < stripes; s += step {
			p0 := first + s
			l := sp.lock(p0)
			l.Lock()
			for p := p0; p < first+n; p += lockStripes {
				sp.scrubLocked(p)
			}
			l.Unlock()
		}
	}
	workers := min(runtime.GOMAXPROCS(0), n/scrubMinWorkerPages, stripes)
	if workers <= 1 {
		scrubStripes(0, 1)
	} else {
		var wg sync.WaitGroup
		for w := 1; w < workers; w++ {
			wg.Go(func() { scrubStripes(w, workers) })
		}
		scrubStripes(0, workers)
		wg.Wait()
	}
	sp.changedRange(first, n)
}
