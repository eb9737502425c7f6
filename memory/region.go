package memory

import (
	"sort"
	"sync/atomic"
)

// Region is a page-granular address space: a root made by New, or a window
// of a root made by Map. Every access is bounds-checked against the Region;
// a window can neither read nor write a page outside itself.
//
// A Region is safe for concurrent use. Each page is read and written under
// its own lock, so a page is never seen half written; an access spanning
// pages is atomic page by page, not as a whole, as with real memory.
type Region struct {
	sp       *space
	first    int // first page in the root
	pages    int
	seed     uint64
	log      *dirtyLog
	window   bool
	unmapped atomic.Bool
	lastRule atomic.Pointer[pageRule]    // see ruleFor
	absent   atomic.Pointer[absentState] // nil while no page is absent: see SetAbsent
}

// New returns a root Region, all zero, with dirty logging on unless
// cfg.DirtyLogOff.
func New(cfg Config) (*Region, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	sp := newSpace(cfg)
	r := &Region{sp: sp, pages: sp.pages, seed: cfg.Seed, log: newDirtyLog(sp.pages, sp.locks, !cfg.DirtyLogOff)}
	sp.root = r
	return r, nil
}

// Map returns a window over pages [firstPage, firstPage+pages) of the root
// r. The window's pages read as zero: whatever the root held there is
// scrubbed first. seed keys the window's generated content together with
// page indices relative to the window, so a window mapped elsewhere, in
// another root, with the same seed holds the same bytes for the same
// operations; this is what lets a migration's destination regenerate a
// synthetic framebuffer. The window has its own dirty log, on.
func (r *Region) Map(firstPage, pages int, seed uint64) (*Region, error) {
	if r.window {
		return nil, ErrNotRoot
	}
	if err := r.writable("map"); err != nil {
		return nil, err
	}
	if firstPage < 0 || pages <= 0 || firstPage > r.pages-pages {
		return nil, &AccessError{Op: "map", Off: int64(firstPage), Len: int64(pages), Size: int64(r.pages)}
	}
	sp := r.sp
	sp.mapMu.Lock()
	defer sp.mapMu.Unlock()
	var list []*Region
	if ws := sp.windows.Load(); ws != nil {
		list = *ws
	}
	i := sort.Search(len(list), func(i int) bool { return list[i].first >= firstPage })
	if i > 0 && list[i-1].first+list[i-1].pages > firstPage || i < len(list) && list[i].first < firstPage+pages {
		return nil, ErrOverlap
	}
	sp.scrub(firstPage, pages)
	w := &Region{sp: sp, first: firstPage, pages: pages, seed: seed, log: newDirtyLog(pages, sp.locks, true), window: true}
	next := make([]*Region, 0, len(list)+1)
	next = append(append(append(next, list[:i]...), w), list[i:]...)
	sp.windows.Store(&next)
	// A Synthetic page reads with its window's seed from now on: a page
	// the root wrote while the window was being mapped must be digested
	// again.
	sp.changedRange(firstPage, pages)
	return w, nil
}

// Unmap scrubs the window's pages, clears its absent pages (SetAbsent)
// and releases them to the root. Every later use of the window fails with
// ErrUnmapped. Unmapping twice is harmless.
func (r *Region) Unmap() error {
	if !r.window {
		return ErrNotRoot
	}
	sp := r.sp
	sp.mapMu.Lock()
	defer sp.mapMu.Unlock()
	if r.unmapped.Swap(true) {
		return nil
	}
	list := *sp.windows.Load()
	next := make([]*Region, 0, len(list)-1)
	for _, w := range list {
		if w != r {
			next = append(next, w)
		}
	}
	sp.windows.Store(&next)
	// The flag is set before the scrub, and writers through the window
	// check it under the page lock, so no write can land after its page
	// was scrubbed.
	sp.scrub(r.first, r.pages)
	r.log.clear()
	r.absent.Store(nil)
	return nil
}

// Unmapped reports whether r is a window that was unmapped: every use of
// it fails with ErrUnmapped.
func (r *Region) Unmapped() bool { return r.unmapped.Load() }

// Windows returns the windows mapped on the root r, in address order.
func (r *Region) Windows() []*Region {
	ws := r.sp.windows.Load()
	if ws == nil || r.window {
		return nil
	}
	return append([]*Region(nil), (*ws)...)
}

// FirstPage returns the index in the root of r's first page.
func (r *Region) FirstPage() int { return r.first }

// Pages returns the number of pages of r.
func (r *Region) Pages() int { return r.pages }

// PageSize returns the page size in bytes.
func (r *Region) PageSize() int { return r.sp.pageSize }

// Size returns the size of r in bytes.
func (r *Region) Size() int64 { return int64(r.pages) << r.sp.shift }

// Kind returns the backing of r's root.
func (r *Region) Kind() Kind { return r.sp.kind }

// Seed returns the seed that keys r's generated content.
func (r *Region) Seed() uint64 { return r.seed }

// ResidentBytes returns the page memory the root's backing holds, for r
// and every window of its root alike: the whole space for Dense, the pages
// that hold bytes for Sparse and Synthetic, the blocks its cache holds for
// an Image. Not counted: metadata (24
// bytes a chunk of 512 pages, made 64 chunks at a time by the first write
// among their pages, and a byte to six bytes a page more for pages set one
// by one: see the package documentation), the dirty logs,
// the digest cache (see Digest), freed pages waiting
// in the Sparse pool, and the fresh pages of a Sparse backing's last slab
// not handed out yet (fewer than 128, all zero); a slab's memory is
// returned to the garbage collector only once none of its pages is held,
// so a region that freed most of its pages but keeps a few of each slab
// holds more memory than it counts: at most 128 times as much.
func (r *Region) ResidentBytes() int64 { return r.sp.back.resident() }

// resolve maps page p of r (already bounds-checked) to its target.
func (r *Region) resolve(p int) target {
	if r.window {
		return target{abs: r.first + p, seed: r.seed, key: uint64(p), win: r}
	}
	if w := r.sp.windowAt(p); w != nil {
		return target{abs: p, seed: w.seed, key: uint64(p - w.first), win: w}
	}
	return target{abs: p, seed: r.seed, key: uint64(p)}
}

// markLocked records a change of page t in every dirty log that covers it:
// the root's and its window's.
func (r *Region) markLocked(t target) {
	r.sp.root.log.mark(t.abs)
	if t.win != nil {
		t.win.log.mark(t.abs - t.win.first)
	}
}

// lockPage locks page p of r for writing, after checking that r is still
// mapped; it returns the target and false if r is unmapped.
func (r *Region) lockPage(p int) (target, bool) {
	t := r.resolve(p)
	return t, r.lockTarget(t)
}

// lockTarget is lockPage for page t of r, already resolved.
func (r *Region) lockTarget(t target) bool {
	r.sp.lock(t.abs).Lock()
	if r.unmapped.Load() {
		r.sp.lock(t.abs).Unlock()
		return false
	}
	return true
}

func (r *Region) unlockPage(t target) { r.sp.lock(t.abs).Unlock() }

func (r *Region) checkPages(op string, first, n int) error {
	if r.unmapped.Load() {
		return ErrUnmapped
	}
	if first < 0 || n < 0 || first > r.pages-n {
		return &AccessError{Op: op, Off: int64(first), Len: int64(n), Size: int64(r.pages)}
	}
	return nil
}

func (r *Region) checkBytes(op string, off int64, n int) error {
	if r.unmapped.Load() {
		return ErrUnmapped
	}
	if off < 0 || off > r.Size()-int64(n) {
		return &AccessError{Op: op, Off: off, Len: int64(n), Size: r.Size()}
	}
	return nil
}
