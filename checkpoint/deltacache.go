package checkpoint

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// DefaultDeltaCacheBytes is a DeltaCache's size when none is given: 64
// MiB, the default of QEMU's xbzrle-cache-size (QEMU documentation,
// "Migration features: XBZRLE", and the migrate-set-parameters command).
const DefaultDeltaCacheBytes = 64 << 20

// DeltaCache is a sender's record of what the reader holds of the pages it
// sent: for as many pages as its memory allows, the content last sent. A
// BatchEncoder given one (PageFilters.Delta) looks each page up, sends the
// XOR with the cached content when that pays, and tells the cache the
// page's new content.
//
// Its memory is bounded: Reset lays it out for a stream's regions, giving
// each a share of the bytes in proportion to its size. A region's pages
// map to its slots by index, modulo the number of slots, so a region that
// fits has a slot for every page, and one that does not shares them. Each
// slot holds two pages' worth: the content the reader holds, which a
// lookup reads, and the content sent since the last Commit, which becomes
// what the reader holds at the Commit. So lookups never see a change made
// during the same pass, and which page keeps a shared slot (the one of
// highest index sent during the pass) does not depend on the order in
// which the pages were encoded: encoders on several goroutines encode the
// same bytes as one.
//
// A page must be added at most once between two Commits, and every page
// the reader receives must go through an encoder with this cache, or the
// cache be Reset: the cache otherwise claims content the reader no longer
// holds. The reader checks each delta's base against what it holds
// (ErrDeltaBase), so such a mistake fails the stream rather than
// corrupting a page.
//
// Lookups and additions are safe for concurrent use by the encoders of one
// pass; Reset and Commit are not, and are called between passes.
type DeltaCache struct {
	capacity int64
	regions  map[uint32]*deltaRegion
	held     atomic.Int64 // bytes of page buffers allocated
}

// deltaRegion is the cache of one region. Its slots share
// deltaLockStripes locks, slot i the lock i%deltaLockStripes, and each
// lock guards, beside its slots' staged entries, the list of those staged
// since the last Commit, so that an encoder adding a page takes one lock
// that encoders adding other pages rarely want.
type deltaRegion struct {
	slots  []deltaSlot
	locks  [deltaLockStripes]sync.Mutex
	staged [deltaLockStripes][]int
}

// deltaLockStripes is the number of locks a region's slots share.
const deltaLockStripes = 64

// deltaSlot is one slot: the content the reader holds for page key (cur,
// none when key is -1), and the content staged for page nkey since the
// last Commit (next, when staged). A slot of a page known by an id alone
// (AddID) holds the id in sum and no content.
type deltaSlot struct {
	key, nkey       int
	sum, nsum       uint64
	cur, next       []byte
	idOnly, nidOnly bool
	nzero           bool // staged as a zero page, which leaves the cache
	staged          bool
}

// NewDeltaCache returns a cache of at most capacityBytes of page
// content (DefaultDeltaCacheBytes if zero; negative is an error). It holds
// nothing until Reset lays it out.
func NewDeltaCache(capacityBytes int64) (*DeltaCache, error) {
	if capacityBytes < 0 {
		return nil, invalid("delta cache of %d bytes", capacityBytes)
	}
	if capacityBytes == 0 {
		capacityBytes = DefaultDeltaCacheBytes
	}
	return &DeltaCache{capacity: capacityBytes}, nil
}

// Capacity returns the most bytes of page content the cache holds.
func (c *DeltaCache) Capacity() int64 { return c.capacity }

// HeldBytes returns the bytes of page content the cache has allocated, at
// most its Capacity.
func (c *DeltaCache) HeldBytes() int64 { return c.held.Load() }

// Reset forgets every page and lays the cache out for regions: the reader
// of the next stream holds nothing the cache knows of. Each region gets
// slots in proportion to its size, two pages of its size each, and at
// most one a page; a region whose share is under two pages gets none, and
// its pages are always sent whole. Buffers are allocated as pages arrive,
// so a cache larger than what is sent costs only what is sent.
func (c *DeltaCache) Reset(regions []RegionInfo) error {
	var total int64
	ids := make(map[uint32]bool, len(regions))
	for _, ri := range regions {
		switch {
		case ri.PageSize <= 0 || ri.SizeBytes < 0:
			return invalid("region %d of %d bytes in pages of %d", ri.ID, ri.SizeBytes, ri.PageSize)
		case ids[ri.ID]:
			return invalid("region %d declared twice", ri.ID)
		}
		ids[ri.ID] = true
		total += ri.SizeBytes
	}
	c.regions = make(map[uint32]*deltaRegion, len(regions))
	c.held.Store(0)
	for _, ri := range regions {
		// In proportion to size, so that the shares add up to the
		// capacity at most, exactly: the product in 128 bits, the
		// quotient no more than the capacity.
		hi, lo := bits.Mul64(uint64(c.capacity), uint64(ri.SizeBytes))
		q, _ := bits.Div64(hi, lo, uint64(max(total, 1)))
		share := int64(q)
		n := min(share/int64(2*ri.PageSize), int64(ri.Pages()))
		r := &deltaRegion{slots: make([]deltaSlot, n)}
		for i := range r.slots {
			r.slots[i].key = -1
		}
		c.regions[ri.ID] = r
	}
	return nil
}

// slot returns the slot of page index of region that holds it, or nil
// when the cache does not know the page.
func (c *DeltaCache) slot(region uint32, index int) *deltaSlot {
	r := c.regions[region]
	if r == nil || len(r.slots) == 0 {
		return nil
	}
	s := &r.slots[index%len(r.slots)]
	if s.key != index {
		return nil
	}
	return s
}

// lookup returns the content the reader holds for page index of region
// and its xxhash64, or false when the cache does not hold it.
func (c *DeltaCache) lookup(region uint32, index int) ([]byte, uint64, bool) {
	if s := c.slot(region, index); s != nil && !s.idOnly {
		return s.cur, s.sum, true
	}
	return nil, 0, false
}

// LookupID returns the id the page index of region was last sent with
// (AddID), or false when the cache does not know the page by an id: it
// never sent it, the page lost its slot, or it was sent with its bytes.
func (c *DeltaCache) LookupID(region uint32, index int) (uint64, bool) {
	if s := c.slot(region, index); s != nil && s.idOnly {
		return s.sum, true
	}
	return 0, false
}

// AddID tells the cache that page index of region was sent with content
// known by id alone, as a simulator that sends generated pages by their
// class and generation knows it, or as a zero page if zero. It takes a
// slot by the rule of the pages sent with their bytes and holds no
// content, so that a simulated sender's cache keeps the pages a real one
// of the same size would.
func (c *DeltaCache) AddID(region uint32, index int, id uint64, zero bool) {
	c.stage(region, index, func(s *deltaSlot) int {
		s.nsum, s.nidOnly, s.nzero = id, true, zero
		return 0
	})
}

// add tells the cache that page index of region was sent with content
// page, or as a zero page if page is nil.
func (c *DeltaCache) add(region uint32, index int, page []byte) {
	c.stage(region, index, func(s *deltaSlot) int {
		s.nidOnly, s.nzero = false, page == nil
		if page == nil {
			// A zero page leaves the cache: it costs nothing to send
			// again.
			return 0
		}
		grown := 0
		if cap(s.next) < len(page) {
			grown = len(page) - cap(s.next)
			s.next = make([]byte, len(page))
		}
		s.next = append(s.next[:0], page...)
		s.nsum = xxhash.Sum64(page)
		return grown
	})
}

// stage gives page index of region its slot's staged entry, filled by
// fill (which returns the bytes of buffer it allocated), unless a page of
// higher index took the slot during this pass.
func (c *DeltaCache) stage(region uint32, index int, fill func(*deltaSlot) int) {
	r := c.regions[region]
	if r == nil || len(r.slots) == 0 {
		return
	}
	i := index % len(r.slots)
	k := i % deltaLockStripes
	r.locks[k].Lock()
	defer r.locks[k].Unlock()
	s := &r.slots[i]
	if s.staged && s.nkey > index {
		return
	}
	if !s.staged {
		r.staged[k] = append(r.staged[k], i)
	}
	s.staged, s.nkey = true, index
	if grown := fill(s); grown > 0 {
		c.held.Add(int64(grown))
	}
}

// Commit makes the content sent since the last Commit what the reader
// holds: call it once every page added since has reached the reader's
// stream. A slot whose page was last sent as a zero page becomes empty.
func (c *DeltaCache) Commit() {
	c.eachStaged(func(s *deltaSlot) {
		if s.nzero {
			s.key = -1
			return
		}
		s.key, s.sum, s.idOnly = s.nkey, s.nsum, s.nidOnly
		if !s.idOnly {
			s.cur, s.next = s.next, s.cur
		}
	})
}

// Discard forgets the content sent since the last Commit and every page
// it touched: after a pass that failed part way, the reader may or may not
// hold what was sent, so the cache claims nothing of those pages.
func (c *DeltaCache) Discard() {
	c.eachStaged(func(s *deltaSlot) { s.key = -1 })
}

// eachStaged calls f on every slot staged since the last Commit or
// Discard, which it unstages. Each slot's outcome is its own, so the order
// of the regions and stripes does not matter.
func (c *DeltaCache) eachStaged(f func(*deltaSlot)) {
	for _, r := range c.regions {
		for k, staged := range r.staged {
			for _, i := range staged {
				s := &r.slots[i]
				s.staged = false
				f(s)
			}
			r.staged[k] = staged[:0]
		}
	}
}
