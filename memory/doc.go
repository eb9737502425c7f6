// Package memory models the address spaces of a virtual machine and of a
// GPU's framebuffer: page-granular regions with dirty-page logging,
// per-page generations, zero-page detection and deterministic content.
//
// It knows nothing of GPUs, VMs or time; the packages above it give its
// regions those meanings.
//
// # Regions and windows
//
// New makes a root Region of a given size and page size (a power of two,
// 4 KiB by default; a framebuffer may use 64 KiB). Map carves a window out
// of a root: a Region of its own, bounds-checked against itself, with its
// own dirty log, sharing the root's storage. A vGPU's framebuffer is a
// window of its GPU's. Windows never overlap; Map hands out a window whose
// pages are scrubbed, and Unmap scrubs them again before another window can
// cover them, so nothing one tenant wrote is readable by the next.
//
// Every access is checked: an access that does not lie wholly inside its
// Region touches nothing and returns an error wrapping ErrOutOfRange.
//
// # Backings
//
// The bytes of a root are held by one of three backings, chosen by
// Config.Kind, and the same operations give the same bytes on all three:
//
//   - Dense: one allocation of the whole space.
//   - Sparse: a page is allocated on its first non-zero write; pages never
//     written read as zero and cost nothing. A page a sparse region frees
//     (Scrub, Unmap, a page zeroed) goes to a pool that every sparse region
//     of the process draws from, so a host reuses warm memory; it is
//     cleared before it goes there, so no byte one region wrote is ever
//     readable through another. Fresh pages are allocated in slabs of up
//     to 128, taken in turn whatever their addresses, so that storing a
//     whole guest costs an allocation per 64 pages, not two a page.
//   - Synthetic: no bytes are stored for generated content. A page filled
//     with a content class (Fill, FillMix, a Pattern) reads as
//     Generate(class, seed, page, generation); only bytes written
//     explicitly are kept, in a sparse overlay. Filling or rewriting a
//     run of pages costs time and metadata by the 512-page chunk, not by
//     the page (see Page metadata).
//
// A fourth, Image, is read-only: OpenImage makes a root of a raw memory
// image (a guest RAM or framebuffer dump) read through an io.ReaderAt and
// a small cache, never loaded, so that the copy engine and a migration's
// source run on real content; every change to it fails with ErrReadOnly.
// ClassifyPage tells which content class real bytes look like.
//
// # Content
//
// A page's content class (zero, model weights, activations, text, random,
// model weights under training, or explicit bytes) and its generation — how many times it was written —
// are kept beside it. Generated content is a pure function of the window's
// seed, the page's index in its window, its generation and its class, so
// a migration's destination that maps a window with the same seed can
// regenerate a page instead of receiving its bytes, and a result is the
// same on every machine. Mixes assign classes to pages by ratio; the
// standard mixes are those the copy engine is benchmarked on.
//
// # Page metadata
//
// Classes and generations are kept by chunks of 512 pages (2 MiB of 4 KiB
// pages). A chunk whose pages were filled together follows one rule — a
// class, or a mix keyed by the filling region's seed — at one generation,
// in 24 bytes; a fill that covers a chunk whole, as a training iteration
// rewriting gigabytes of weights does, sets the rule and bumps the
// generation of every page in one step, and a scrub returns it to its
// initial state in one. Pages set alone (a write, a store, a fill of part
// of the chunk) give the chunk a byte a page while their generations stay
// within 255 of the chunk's and their classes the rule's, as random
// dirtying leaves them, and up to six bytes a page otherwise; the next
// fill of the whole chunk gives that back where its pages then again share
// a generation. Chunks are made 64 at a time, by the first write among
// their pages, so memory never written costs eight bytes for 128 MiB. A
// 64 GiB guest filled in runs costs a few megabytes of metadata, its
// VM.Start and each rewrite microseconds to milliseconds;
// StoreGeneratedFrom moves a round of such chunks between regions in a
// step a chunk, as a Model-fidelity migration's destination stores it.
//
// # Runs
//
// AppendRuns describes a region as runs of pages, each a class or a mix
// at one generation, and of pages holding explicit bytes, reading the
// metadata a chunk at a time: a 64 GiB guest filled in large runs is a
// handful of runs, read in under a millisecond, which is how a suspended
// VM is written in kilobytes. StoreRuns restores them a chunk a step, and
// gives each page the rule of its run, so that the restored region's runs
// are the same wherever its chunks start: a chunk may then follow, besides
// its own rule, up to 249 others, each page naming its rule in the byte
// that otherwise holds a class of its own.
//
// # Dirty logging
//
// Every change to a page marks it in the dirty logs of its root and of its
// window, those that are on. CollectDirty takes the marked pages into a reusable PageSet and
// clears them; a write that races a collect is reported by that collect or
// the next, never lost. The log is a pair of bitmaps of 64-bit words:
// writers set bits in one with atomic OR, under their page's lock; a
// collect makes the other current while it holds every page lock for an
// instant, then copies and clears the old one without atomic operations.
// A PageSet is iterated by counting trailing zeros. Collecting a 24 GiB
// space of 4 KiB pages takes a fraction of a millisecond, whatever share
// of it is dirty, and allocates nothing.
//
// # Digests
//
// Region.Digest hashes a region's pages and generations into one value, the
// end-to-end check of a migration. Its definition (xxhash64 of the page size
// and count, then of each page's generation and xxhash64) is part of the
// stream format and never changes, but its cost follows what changed, not
// what exists: the first digest of a root or of any of its windows makes a
// cache of every page's 12-byte entry and a stale bit a page, every change
// to a page marks its bit after the change, and a digest recomputes only the
// stale entries, under their pages' locks, before hashing the entries of its
// range in one pass (about 0.3 ms for 2 GiB of 4 KiB pages). A page stored
// with StorePage (in a Sparse region, StoreGenerated too), or read whole
// with ReadPage, is hashed by the goroutine that stores or reads it and
// its sum recorded until the page changes, so that a migration's destination, which applies pages on
// many goroutines, and its source, which reads them on many, spread their
// digests' work over them and out of the stun. The cache takes one bit a
// page, and 12 bytes a page in runs of 512 pages of which one was out of
// its initial state at a digest — nothing before the first digest; a
// recorded sum takes about eight bytes a stored or read page.
//
// In a Sparse region a page is stored in a fresh page buffer, filled and
// hashed before the page's lock is taken and swapped in under it, so that
// the many goroutines of a destination storing pages of neighbouring
// batches, which share lock stripes, do not wait on one another.
//
// # Write patterns
//
// A Pattern writes a Region at a rate in bytes per second of simulated
// time — uniformly, to a hot set (a tenth of the range taking nine writes
// in ten), as a sweep, or as whole-buffer rewrites — carrying the
// fractional page from one step to the next, so that many small steps write
// exactly what one large step does. It is the one write generator of the
// project: package vgpu's workloads dirty guest RAM and framebuffers with
// it, and Move lets one follow its workload to another VM's region.
//
// # Absent pages
//
// In a post-copy migration the guest resumes at the destination before all
// its pages arrived. SetAbsent marks the pages of a region that are still
// missing absent, with a fault function that lands one (fetches it and
// stores it with StorePage, StoreGenerated or StoreGeneratedFrom). A guest
// access — ReadAt, WriteAt, Fill, FillMix, a Pattern's writes — calls it
// before it touches an absent page, marks the page present once it
// returned nil, and goes on; if it fails, the access stops at that page
// with an *AbsentError wrapping ErrAbsent and the fault's error, the pages
// before it accessed and the page still absent. Arrive marks a page
// present that the caller landed itself, as pages pushed by the source
// are. Landing and inspecting pages — the stores, ReadPage, PageState,
// digests, runs, dirty logs — neither fault nor change absence, and a fault
// marks nothing dirty. Absence belongs to the region it was set on: the
// root's accesses to a window's pages do not fault for the window's
// absent pages, nor a window's for the root's. Scrub and Unmap clear it.
//
// A fault function is called once for a page however many goroutines
// touch it meanwhile: they wait for it, and see the page only once it
// landed; pages of different accesses land at once, each on its access's
// goroutine, with no lock of the region held, so that the function may
// store into the region but must not make a guest access to it. A region
// with no absent page pays one atomic load an access for this, and a fill
// of many pages of a region with some looks at their bits 64 pages at a
// time.
//
// # Concurrency
//
// A Region is safe for concurrent use: each chunk of 512 pages is guarded
// by one of 256 striped locks, so a page is never seen half written. A Pattern is not
// safe for concurrent use.
package memory
