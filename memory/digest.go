package memory

// Digest returns r's content digest: the xxhash64 of r's page size and
// page count (u64 each), then, for every page in order, its generation
// (u32) and the xxhash64 of its bytes (u64), all little-endian. Two regions
// with equal digests hold the same content; a migration's two ends compare
// digests instead of bytes.
//
// Hashing each page on its own, rather than the region's bytes in one run,
// lets the page entries be kept: the first digest of a root or of any of
// its windows makes a cache of every page's entry (see below), and each
// later digest recomputes only the entries of pages that changed since,
// then hashes the entries of r's range, 12 bytes a page. A digest costs
// what changed, not what exists: with 1 % of a 2 GiB guest written since
// the last digest, it reads 1 % of the pages. A zero page costs nothing
// even when it changed: its hash is the same for every zero page and the
// page is never read. A page a migration's destination stored with
// StorePage was hashed by the goroutine that stored it, and costs nothing
// either.
//
// The cache costs memory only once a digest was asked for: one bit a page,
// plus 12 bytes a page for each run of 512 pages of which one was out of
// its initial state (zero, generation 0) at a digest, so about 3 MiB per
// GiB of 4 KiB pages in use; and it cannot go stale, because every change
// to a page, whatever made it (WriteAt, Fill, FillMix, StorePage,
// StoreGenerated, Scrub, Map, Unmap, through a window or the root), marks
// the page's entry stale after the change, and a digest takes the mark
// away before it reads the page (digestCache has the details).
//
// Digests of one root and its windows are serialized. A digest racing
// writes sees each page as it was at some instant during the call, as
// before: atomic page by page, not as a whole.
func (r *Region) Digest() (uint64, error) { return r.DigestParallel(1) }

// DigestParallel returns Digest, the pages that changed since the last
// digest hashed on up to workers goroutines (1 or less: the caller's
// only). The value does not depend on workers. A migration's stun waits
// for both ends' digests, so the live mode hashes with GOMAXPROCS workers
// unless told otherwise.
func (r *Region) DigestParallel(workers int) (uint64, error) {
	if r.unmapped.Load() {
		return 0, ErrUnmapped
	}
	if r.sp.img != nil {
		return r.sp.img.digest(r.sp)
	}
	c := r.sp.digestCache()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh(r.sp, r.first, r.pages, workers)
	sum := c.sum(r.sp.pageSize, r.first, r.pages)
	// A window unmapped during the digest may have been hashed partly
	// scrubbed, or partly as the next tenant's: report it as the per-page
	// digest did, which read the flag with every page.
	if r.unmapped.Load() {
		return 0, ErrUnmapped
	}
	return sum, nil
}

const (
	digestEntryBytes = 12 // a page's generation and bytes' hash
	// digestMinWorkerPages keeps a worker's share of the stale pages
	// worth a goroutine.
	digestMinWorkerPages = 256
)
