package memory

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
)

// FaultFunc lands page p of the region whose guest access found it absent
// (see SetAbsent): it fetches the page's content and stores it with
// StorePage, StoreGenerated or StoreGeneratedFrom, as the destination of a
// post-copy migration fetches from the source a page that the resumed guest
// touched before it arrived. p is relative to that region. A nil return
// marks p present and lets the access go on; an error leaves p absent and
// stops the access with an *AbsentError wrapping it.
//
// It is called with no lock of the region held, once for a page however
// many accesses touch it meanwhile (they wait for it, and share its
// error; the next access after a failure calls it again), and may run on
// several goroutines at once for different pages, each on the goroutine of
// an access that touched one, so it must be safe for concurrent use. A
// panic of it fails the access as an error would. It
// must not make a guest access (ReadAt, WriteAt, Fill, FillMix, a Pattern's
// writes) to the region it lands in: an access to the page being landed
// waits for the landing, which waits for the access, forever. It may call
// Arrive, Absent and the stores and reads that land and inspect pages.
type FaultFunc func(p int) error

// AbsentError describes a guest access that stopped at an absent page
// because the page's fault function failed; the pages before it that the
// access covers were accessed, the page and those after it were not. It
// wraps ErrAbsent and the fault function's error.
type AbsentError struct {
	Page int   // the page left absent, relative to the region accessed
	Err  error // what the fault function returned
}

func (e *AbsentError) Error() string {
	return fmt.Sprintf("memory: page %d absent, fault failed: %v", e.Page, e.Err)
}

// Unwrap returns ErrAbsent and the fault function's error.
func (e *AbsentError) Unwrap() []error { return []error{ErrAbsent, e.Err} }

// absentState is the set of absent pages of a Region and the function that
// lands them. Its bits are only ever cleared: SetAbsent replaces the state
// whole, so an access that found a bit clear never finds it set again in
// the same state.
type absentState struct {
	words []atomic.Uint64 // bit p: page p of the region is absent
	count atomic.Int64    // bits set
	fault FaultFunc

	mu      sync.Mutex
	landing map[int]*landing // pages whose fault function is running; under mu
}

// landing is a call of the fault function in progress, which the accesses
// that touch its page meanwhile wait for.
type landing struct {
	done chan struct{}
	err  error // written before done is closed
}

// SetAbsent marks the pages of set absent, replacing any set of absent
// pages r had, as the destination of a post-copy migration marks the
// pages it resumed a guest without. set has r.Pages() capacity, its pages
// relative to r; SetAbsent keeps a copy. The first guest access to touch
// an absent page — ReadAt, WriteAt, Fill, FillMix, a Pattern's writes —
// calls fault with the page before it touches it, marks the page present
// once fault returned nil, then goes on. An access of many pages lands its
// absent pages one after the other, in the order it touches them
// (increasing, but for a Pattern's batch of random pages, in the order it
// chose them), before it writes or reads any. If fault fails, the access
// stops there with an *AbsentError: the pages before that page are
// accessed, it and those after it are not, and it stays absent, for the
// next access to fault again.
//
// Landing and inspecting pages neither faults nor changes absence:
// StorePage, StoreGenerated, StoreGeneratedFrom, StoreRuns, ReadPage,
// PageState, IsZeroPage, the digests, UsedPages, UsedBytes, UsedClasses,
// AppendRuns, DirtyClasses, CollectDirty. A fault marks nothing dirty; the
// store that lands the page marks it as any store does.
//
// Absence belongs to r: only r's own accesses fault. Where r is a window,
// the root's accesses to r's pages do not; where r is a root, the accesses
// of its windows to their pages do not (a window's absent set, if any, is
// its own). Scrub and Unmap clear r's absence; a root's Scrub leaves its
// windows' as it is.
//
// A nil set, or an empty one, clears absence; fault may then be nil.
// SetAbsent fails, changing nothing, with ErrUnmapped for a window that
// was unmapped, with an error wrapping ErrConfig for a set whose capacity
// is not r.Pages() or a nil fault with pages to land, and with one
// wrapping ErrReadOnly for pages to mark absent in a read-only region. An
// access already landing a page of the set it replaces finishes landing
// it with that set's fault function.
func (r *Region) SetAbsent(set *PageSet, fault FaultFunc) error {
	if r.unmapped.Load() {
		return ErrUnmapped
	}
	if set == nil {
		r.absent.Store(nil)
		return nil
	}
	if set.Cap() != r.pages {
		return configError("absent set of %d pages for a region of %d", set.Cap(), r.pages)
	}
	n := 0
	for i, w := range set.words {
		n += bits.OnesCount64(w & wordMask(i, 0, r.pages))
	}
	if n == 0 {
		r.absent.Store(nil)
		return nil
	}
	if fault == nil {
		return configError("absent pages without a fault function")
	}
	if err := r.writable("set absent"); err != nil {
		return err
	}
	a := &absentState{words: make([]atomic.Uint64, wordsFor(r.pages)), fault: fault}
	for i := range a.words {
		a.words[i].Store(set.words[i] & wordMask(i, 0, r.pages))
	}
	a.count.Store(int64(n))
	r.absent.Store(a)
	if r.unmapped.Load() {
		// An Unmap raced this call: the window keeps no absence.
		r.absent.CompareAndSwap(a, nil)
		return ErrUnmapped
	}
	return nil
}

// Arrive marks page p of r present without calling the fault function, as
// a post-copy destination does once it stored a page that the source
// pushed before the guest touched it, and reports whether p was absent. If
// an access is landing p meanwhile, Arrive leaves p to that landing, which
// marks it present once its fault function has stored the page: clearing
// it sooner would let an access write p and the landing's store then
// overwrite that write. It does not wait for the landing (a fault function
// may itself call Arrive). A page out of range is not absent.
func (r *Region) Arrive(p int) bool {
	a := r.absent.Load()
	if a == nil || uint(p) >= uint(r.pages) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.landing[p] != nil {
		return a.has(p)
	}
	return a.clear(r, p)
}

// Absent reports whether page p of r is absent: marked by SetAbsent, and
// neither landed by a fault nor marked present by Arrive since. A page out
// of range is not absent.
func (r *Region) Absent(p int) bool {
	a := r.absent.Load()
	return a != nil && uint(p) < uint(r.pages) && a.has(p)
}

// AbsentPages returns how many pages of r are absent.
func (r *Region) AbsentPages() int {
	if a := r.absent.Load(); a != nil {
		return int(a.count.Load())
	}
	return 0
}

// AddAbsent adds the absent pages of r to dst, whose capacity must be
// r.Pages(), leaving its other pages in it: a post-copy destination
// adds them to the pages it still has to ask for. It fails, changing
// nothing, with an error wrapping ErrConfig for a nil dst or one of another
// capacity, and with ErrUnmapped for a window that was unmapped.
func (r *Region) AddAbsent(dst *PageSet) error {
	if dst == nil {
		return configError("absent pages into a nil page set")
	}
	if dst.Cap() != r.pages {
		return configError("absent pages into a set of %d pages for a region of %d", dst.Cap(), r.pages)
	}
	if r.unmapped.Load() {
		return ErrUnmapped
	}
	if a := r.absent.Load(); a != nil {
		for i := range a.words {
			dst.words[i] |= a.words[i].Load()
		}
	}
	return nil
}

// landRange makes pages [first, first+n) of r, already checked, present
// before an access touches them, calling the fault function of each absent
// one in increasing order. It returns how many of the pages, from first,
// are present: n, or, with the error of the fault that failed, the offset
// from first of the page that fault left absent. With nothing absent it
// costs one atomic load; otherwise one a word of 64 pages, and a landing
// an absent page.
func (r *Region) landRange(first, n int) (int, error) {
	a := r.absent.Load()
	if a == nil || n <= 0 {
		return n, nil
	}
	end, w0 := first+n, first>>6
	for i := range a.words[w0 : (end-1)>>6+1] {
		w := w0 + i
		m := a.words[w].Load()
		if m == 0 {
			continue
		}
		for m &= wordMask(w, first, end); m != 0; {
			p := w<<6 + bits.TrailingZeros64(m)
			if err := a.land(r, p); err != nil {
				return p - first, err
			}
			m &= m - 1
		}
	}
	return n, nil
}

// landPages is landRange for pages of r (checked) listed in the order an
// access touches them, as fillEach takes them: it returns how many of
// them, from the first, are present.
func (r *Region) landPages(pages []int) (int, error) {
	a := r.absent.Load()
	if a == nil {
		return len(pages), nil
	}
	for i, p := range pages {
		if a.has(p) {
			if err := a.land(r, p); err != nil {
				return i, err
			}
		}
	}
	return len(pages), nil
}

// landBytes is landRange for the pages of a byte access of p at off
// (checked): it returns the part of p before the first page left absent,
// all of it unless a fault failed. Its callers call it only where r has
// absent pages, so that an access of a region with none makes no call.
func (r *Region) landBytes(p []byte, off int64) ([]byte, error) {
	if len(p) == 0 {
		return p, nil
	}
	first := int(off >> r.sp.shift)
	last := int((off + int64(len(p)) - 1) >> r.sp.shift)
	k, err := r.landRange(first, last-first+1)
	if err != nil {
		return p[:max(int64(first+k)<<r.sp.shift-off, 0)], err
	}
	return p, nil
}

func (a *absentState) has(p int) bool {
	return a.words[p>>6].Load()&(1<<(uint(p)&63)) != 0
}

// clear marks page p of r present and reports whether it was absent. The
// state is dropped once no page is absent, so that r's accesses take the
// fast path again.
func (a *absentState) clear(r *Region, p int) bool {
	bit := uint64(1) << (uint(p) & 63)
	if a.words[p>>6].And(^bit)&bit == 0 {
		return false
	}
	if a.count.Add(-1) == 0 {
		r.absent.CompareAndSwap(a, nil)
	}
	return true
}

// land makes page p of r present, calling the fault function unless
// another access is landing p, in which case it waits for that landing and
// shares its outcome. The bit is cleared only after the fault function
// returned nil, before the waiters wake, so that nothing reads the page
// before it landed.
func (a *absentState) land(r *Region, p int) error {
	for a.has(p) {
		a.mu.Lock()
		if !a.has(p) {
			a.mu.Unlock()
			return nil
		}
		if l := a.landing[p]; l != nil {
			a.mu.Unlock()
			<-l.done
			if l.err != nil {
				return l.err
			}
			continue
		}
		l := &landing{done: make(chan struct{})}
		if a.landing == nil {
			a.landing = make(map[int]*landing)
		}
		a.landing[p] = l
		a.mu.Unlock()

		if err := a.call(p); err != nil {
			l.err = &AbsentError{Page: p, Err: err}
		} else {
			a.clear(r, p)
		}
		a.mu.Lock()
		delete(a.landing, p)
		a.mu.Unlock()
		close(l.done)
		return l.err
	}
	return nil
}

// call calls the fault function for page p, turning a panic into an
// error.
func (a *absentState) call(p int) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("fault function panicked: %v", v)
		}
	}()
	return a.fault(p)
}
