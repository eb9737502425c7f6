package memory

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// lockStripes is the number of page locks of an address space. The pages of
// metadata chunk k (see meta.go) are guarded by lock k mod lockStripes:
// a chunk's pages share their metadata, so they share a lock; there are
// enough stripes that writers of different chunks rarely meet, few enough
// that a region's locks fit in 16 KiB.
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
// the page metadata. The class and generation of page p (meta, see
// meta.go) are read and written only under p's lock. Every change to a page ends with changed (or, for a
// scrub, changedRange): that is what keeps the digest cache and the sums
// StorePage records true.
type space struct {
	pageSize  int
	shift     uint
	pages     int
	kind      Kind
	seed      uint64
	back      backing
	img       *imageSource // the image of a read-only region (OpenImage), else nil
	meta      []atomic.Pointer[metaGroup]
	metaShift uint // log2 of a metaChunk's pages: metaChunkShift, lowered by tests
	locks     []paddedRWMutex
	root      *Region

	mapMu   sync.Mutex                // serializes Map and Unmap
	windows atomic.Pointer[[]*Region] // mapped windows sorted by first page; never mutated in place

	scratch sync.Pool // *[]byte of one page, for partial reads and writes of generated pages

	bulkFillMin int // bulkFillMinPages, but lowered by tests so that small regions take the bulk path

	digest atomic.Pointer[digestCache] // made by the first digest: see digestcache.go
	known  atomic.Pointer[knownTable]  // sums StorePage and ReadPage recorded, by 128 pages: see knownsum.go
	// knownChunks counts the chunks of known that are not nil.
	knownChunks atomic.Int64
}

func newSpace(cfg Config) *space {
	pages := int(cfg.SizeBytes / int64(cfg.PageSize))
	shift := uint(0)
	for 1<<shift < cfg.PageSize {
		shift++
	}
	sp := &space{
		pageSize:  cfg.PageSize,
		shift:     shift,
		pages:     pages,
		kind:      cfg.Kind,
		seed:      cfg.Seed,
		meta:      newMeta(pages, metaChunkShift),
		metaShift: metaChunkShift,
		locks:     make([]paddedRWMutex, lockStripes),

		bulkFillMin: bulkFillMinPages,
	}
	switch cfg.Kind {
	case Dense:
		sp.back = newDense(pages, shift)
	case Image:
		// OpenImage sets the backing: the image.
	default:
		sp.back = newSparse(pages, cfg.PageSize)
	}
	sp.scratch.New = func() any { b := make([]byte, sp.pageSize); return &b }
	return sp
}

func (sp *space) lock(p int) *sync.RWMutex {
	return &sp.locks[p>>sp.metaShift&(lockStripes-1)].RWMutex
}

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
// lock is held. It fails only for a page of an image, whose reader failed.
func (sp *space) readLocked(t target, off int, dst []byte) error {
	if buf := sp.back.page(t.abs); buf != nil {
		copy(dst, buf[off:])
		return nil
	}
	c, gen := sp.state(t.abs)
	switch {
	case c == ClassZero:
		clear(dst)
	case sp.img != nil:
		return sp.img.read(t.abs, off, dst)
	case off == 0 && len(dst) == sp.pageSize:
		Generate(dst, c, t.seed, t.key, gen)
	default:
		bp := sp.scratch.Get().(*[]byte)
		Generate(*bp, c, t.seed, t.key, gen)
		copy(dst, (*bp)[off:])
		sp.scratch.Put(bp)
	}
	return nil
}

// writeLocked stores src at offset off of page t and bumps its generation.
// The page lock is held.
func (sp *space) writeLocked(t target, off int, src []byte) {
	c, gen := sp.state(t.abs)
	buf := sp.back.page(t.abs)
	switch {
	case buf == nil && c == ClassZero && IsZero(src):
		// Zeros over a zero page change nothing but the generation, and
		// a sparse backing must not allocate for them.
	case buf == nil:
		buf = sp.back.alloc(t.abs)
		if c != ClassZero && len(src) < sp.pageSize {
			Generate(buf, c, t.seed, t.key, gen)
		}
		copy(buf[off:], src)
		c = ClassExplicit
	case c == ClassZero && IsZero(src):
	default:
		copy(buf[off:], src)
		c = ClassExplicit
	}
	sp.setState(t.abs, c, gen+1)
	sp.changed(t.abs)
}

// setLocked gives page t class c at generation gen: generated content, or
// zero. The page lock is held.
func (sp *space) setLocked(t target, c Class, gen uint32) {
	sp.putGenerated(t, c, gen)
	sp.setState(t.abs, c, gen)
	sp.changed(t.abs)
}

// putGenerated makes the backing hold what page t holds as generated
// content of class c at generation gen: nothing where the content is
// produced on read or is zero, else its bytes. The page lock is held.
func (sp *space) putGenerated(t target, c Class, gen uint32) {
	if c == ClassZero || !sp.storesGenerated() {
		sp.back.release(t.abs)
	} else {
		Generate(sp.back.alloc(t.abs), c, t.seed, t.key, gen)
	}
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
	sp.setState(t.abs, ClassExplicit, gen)
	sp.changed(t.abs)
	sp.recordSum(t.abs, xxhash.Sum64(buf))
}

// scrub returns pages [first, first+n) to their initial state, zero at
// generation 0, a metadata chunk at a time under the chunk's lock: a chunk
// still in its initial state is skipped, one the range covers whole is
// reset in one step. The bytes the backing holds for the range are
// dropped, and a range of many pages is scrubbed by up to GOMAXPROCS
// goroutines, each taking chunks in turn: clearing the pages a VM leaves
// behind is most of what a migration's source does after the destination
// resumed it, and one core clears a few GB a second where the machine's
// memory takes more.
func (sp *space) scrub(first, n int) {
	if n <= 0 {
		return
	}
	k0, k1 := first>>sp.metaShift, (first+n-1)>>sp.metaShift
	scrubChunks := func(from, step int) {
		for k := k0 + from; k <= k1; k += step {
			a, end := max(first, k<<sp.metaShift), min(first+n, (k+1)<<sp.metaShift)
			l := sp.lock(a)
			l.Lock()
			// A page of class zero holds no bytes, or zeros where the
			// backing is dense, so a chunk in its initial state holds
			// nothing to drop.
			if !sp.pristine(k) {
				sp.back.releaseRange(a, end)
				sp.resetMeta(a, end-a)
			}
			l.Unlock()
		}
	}
	workers := min(runtime.GOMAXPROCS(0), n/scrubMinWorkerPages, k1-k0+1)
	if workers <= 1 {
		scrubChunks(0, 1)
	} else {
		var wg sync.WaitGroup
		for w := 1; w < workers; w++ {
			wg.Go(func() { scrubChunks(w, workers) })
		}
		scrubChunks(0, workers)
		wg.Wait()
	}
	sp.changedRange(first, n)
}
