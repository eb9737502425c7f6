package memory

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// Defaults of ImageConfig.
const (
	// DefaultImageBlockBytes is the bytes the cache reads from an image at
	// once, when ImageConfig.BlockBytes is zero (at least a page).
	DefaultImageBlockBytes = 256 << 10
	// DefaultImageCacheBytes is the cache's size when
	// ImageConfig.CacheBytes is zero: enough that the 28 batches of 1 MiB
	// that an engine of 14 workers has in flight fall in blocks of their
	// own.
	DefaultImageCacheBytes = 32 << 20
	// imageScanBytes is what OpenImage reads at once to find zero pages.
	imageScanBytes = 1 << 20
)

// ImageConfig describes how OpenImage reads an image.
type ImageConfig struct {
	// PageSize is the region's page size, a power of two between
	// MinPageSize and MaxPageSize; zero means DefaultPageSize.
	PageSize int
	// PadTail accepts an image whose size is not a multiple of the page
	// size: its last page reads as the image's last bytes followed by
	// zeros. Without it such an image is refused (ErrConfig).
	PadTail bool
	// BlockBytes is what the cache reads from the image at once: a power
	// of two, at least the page size; zero means the larger of
	// DefaultImageBlockBytes and the page size.
	BlockBytes int
	// CacheBytes bounds the cache: it holds CacheBytes/BlockBytes blocks
	// (at least one), each block in the slot of its index modulo their
	// number, allocated when first used. Zero means
	// DefaultImageCacheBytes; negative, no cache: each read is a ReadAt of
	// just the bytes asked for.
	CacheBytes int
}

// OpenImage returns a read-only root Region, of kind Image, of the
// sizeBytes bytes of the raw memory image r: a guest RAM dump (QEMU's
// dump-guest-memory in raw form, a hypervisor's snapshot of memory) or a
// framebuffer dump, so that the copy engine and a migration's source run
// on real content.
//
// The image is read through r, never loaded: OpenImage reads it once, a
// megabyte at a time, to find its zero pages, and after that a page is
// read when it is read, through a cache of blocks (ImageConfig). Besides
// the cache the region holds its metadata: about two bytes a page in each
// run of 512 pages that holds a page that is not zero.
//
// A page of the image that is all zero is of class ClassZero, any other of
// ClassExplicit, and every page is at generation 0: the region reads,
// digests (Digest, computed once and kept) and lists its used pages
// (UsedPages: the non-zero pages) as a Dense region holding the same bytes
// stored with StorePage at generation 0, and a copy engine makes the same
// batches of both. Writes, fills, stores, scrubs, Map and a Pattern's
// writes fail with an error wrapping ErrReadOnly and change nothing; the
// dirty log is off, and nothing writes it.
//
// A read that r fails, returns short or panics in is an *ImageError (at
// open, or from ReadAt, ReadPage or the first Digest); an invalid cfg or
// size is an error wrapping ErrConfig. r must give the same bytes every
// time and allow parallel ReadAt calls, as io.ReaderAt promises; the
// region reads it for as long as it is used.
func OpenImage(r io.ReaderAt, sizeBytes int64, cfg ImageConfig) (*Region, error) {
	if r == nil {
		return nil, configError("image with a nil reader")
	}
	rc := Config{SizeBytes: sizeBytes, PageSize: cfg.PageSize, Kind: Sparse, DirtyLogOff: true}
	if rc.PageSize == 0 {
		rc.PageSize = DefaultPageSize
	}
	if tail := sizeBytes % int64(max(rc.PageSize, 1)); sizeBytes > 0 && tail != 0 {
		if !cfg.PadTail {
			return nil, configError("image of %d bytes is not a multiple of the page size %d (ImageConfig.PadTail pads it)",
				sizeBytes, rc.PageSize)
		}
		rc.SizeBytes += int64(rc.PageSize) - tail
	}
	rc, err := rc.withDefaults()
	if err != nil {
		return nil, err
	}
	img, err := newImageSource(r, sizeBytes, rc.PageSize, cfg)
	if err != nil {
		return nil, err
	}
	rc.Kind = Image
	sp := newSpace(rc)
	sp.img, sp.back = img, img
	if err := img.scan(sp); err != nil {
		return nil, err
	}
	reg := &Region{sp: sp, pages: sp.pages, log: newDirtyLog(sp.pages, sp.locks, false)}
	sp.root = reg
	return reg, nil
}

// ReadOnly reports whether r refuses every change: a region of an image.
func (r *Region) ReadOnly() bool { return r.sp.img != nil }

// writable returns nil if r may be changed, else the error of op refused.
func (r *Region) writable(op string) error {
	if r.sp.img != nil {
		return readOnlyError(op)
	}
	return nil
}

// ImageFile is a raw image file opened as a read-only region. Region reads
// the file until Close; after it, a read of a page that is not zero and
// not in the cache fails with an *ImageError.
type ImageFile struct {
	// Region is the image's region.
	Region *Region
	f      *os.File
}

// OpenImageFile opens the file at path and returns its region, as
// OpenImage makes it of the file's size; a file that cannot be opened is
// an error wrapping ErrImage and the os package's. The caller owns the
// file through the result, and closes it with Close.
func OpenImageFile(path string, cfg ImageConfig) (*ImageFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImage, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %w", ErrImage, err)
	}
	r, err := OpenImage(f, st.Size(), cfg)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w (image %s)", err, path)
	}
	return &ImageFile{Region: r, f: f}, nil
}

// Close closes the file. Closing twice returns the second close's error.
func (f *ImageFile) Close() error { return f.f.Close() }

// imageSource reads an image's pages, through its cache. It is the
// backing of the image's space too, one that stores no page, so that the
// space reads every page of ClassExplicit from the image (readLocked).
// Nothing writes an image: every change is refused before it reaches the
// backing, and alloc, which only a change calls, has no page to give.
type imageSource struct {
	r          io.ReaderAt
	size       int64 // the image's bytes; the region may end with a padded page beyond
	pageSize   int
	blockShift uint
	slots      []imageSlot  // nil: no cache
	cached     atomic.Int64 // bytes of the slots' buffers

	digestMu sync.Mutex
	digested bool
	sum      uint64
}

// imageSlot holds one block of the image, or none (buf nil or block -1).
type imageSlot struct {
	mu    sync.Mutex
	block int64
	buf   []byte
	_     [24]byte // a slot a cache line
}

func newImageSource(r io.ReaderAt, size int64, pageSize int, cfg ImageConfig) (*imageSource, error) {
	block := cfg.BlockBytes
	if block == 0 {
		block = max(DefaultImageBlockBytes, pageSize)
	}
	if block < pageSize || block > 1<<30 || block&(block-1) != 0 {
		return nil, configError("image block of %d bytes is not a power of two in [%d, 1 GiB]", block, pageSize)
	}
	img := &imageSource{r: r, size: size, pageSize: pageSize, blockShift: uint(bits.TrailingZeros(uint(block)))}
	if cfg.CacheBytes >= 0 {
		cache := cfg.CacheBytes
		if cache == 0 {
			cache = DefaultImageCacheBytes
		}
		blocks := (size + int64(block) - 1) / int64(block)
		img.slots = make([]imageSlot, max(1, min(int64(cache/block), blocks)))
		for i := range img.slots {
			img.slots[i].block = -1
		}
	}
	return img, nil
}

func (img *imageSource) page(int) []byte       { return nil }
func (img *imageSource) alloc(int) []byte      { panic("memory: write reached a read-only region") }
func (img *imageSource) release(int)           {}
func (img *imageSource) releaseRange(int, int) {}

// resident returns the bytes of the cache's blocks.
func (img *imageSource) resident() int64 { return img.cached.Load() }

// read copies bytes [off, off+len(dst)) of absolute page p into dst.
func (img *imageSource) read(p, off int, dst []byte) error {
	at := int64(p)*int64(img.pageSize) + int64(off)
	if img.slots == nil {
		return img.readAt(dst, at)
	}
	b := at >> img.blockShift
	s := &img.slots[b%int64(len(img.slots))]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.block != b || s.buf == nil {
		if s.buf == nil {
			s.buf = make([]byte, 1<<img.blockShift)
			img.cached.Add(int64(len(s.buf)))
		}
		s.block = -1
		if err := img.readAt(s.buf, b<<img.blockShift); err != nil {
			return err
		}
		s.block = b
	}
	copy(dst, s.buf[at-b<<img.blockShift:])
	return nil
}

// readAt fills dst with the image's bytes from off, zeros past its end.
func (img *imageSource) readAt(dst []byte, off int64) error {
	n := int(min(int64(len(dst)), max(0, img.size-off)))
	clear(dst[n:])
	if n == 0 {
		return nil
	}
	if err := readFull(img.r, dst[:n], off); err != nil {
		return &ImageError{Off: off, Len: n, Err: err}
	}
	return nil
}

// readFull reads len(p) bytes at off from r, which io.ReaderAt says it
// gives with a nil error or io.EOF, or fails: fewer bytes, a count out of
// range, or a panic of r, is an error, never a panic or a loop.
func readFull(r io.ReaderAt, p []byte, off int64) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("reader panicked: %v", v)
		}
	}()
	n, err := r.ReadAt(p, off)
	switch {
	case n < 0 || n > len(p):
		return fmt.Errorf("reader returned %d bytes for a buffer of %d", n, len(p))
	case n == len(p):
		return nil // with io.EOF too, which a read ending at the end may give
	case err == nil:
		return fmt.Errorf("reader returned %d bytes of %d without an error: %w", n, len(p), io.ErrUnexpectedEOF)
	case err == io.EOF:
		return fmt.Errorf("image ends after %d bytes of %d: %w", n, len(p), io.ErrUnexpectedEOF)
	}
	return err
}

// scan reads the whole image once and gives each page that is not all
// zero ClassExplicit at generation 0 in sp, whose pages are all still zero
// and which nobody else holds yet.
func (img *imageSource) scan(sp *space) error {
	buf := make([]byte, max(imageScanBytes, sp.pageSize))
	per := len(buf) / sp.pageSize
	for first := 0; first < sp.pages; first += per {
		n := min(per, sp.pages-first)
		chunk := buf[:n*sp.pageSize]
		if err := img.readAt(chunk, int64(first)*int64(sp.pageSize)); err != nil {
			return err
		}
		for i := range n {
			if !IsZero(chunk[i*sp.pageSize : (i+1)*sp.pageSize]) {
				sp.setState(first+i, ClassExplicit, 0)
			}
		}
	}
	return nil
}

// digest returns the digest of the whole image (Region.Digest), as a Dense
// region holding its bytes at generation 0 gives it. The image does not
// change, so it is computed once, reading the image's non-zero pages a
// megabyte at a time outside the cache; a failed read is returned and
// nothing kept.
func (img *imageSource) digest(sp *space) (uint64, error) {
	img.digestMu.Lock()
	defer img.digestMu.Unlock()
	if img.digested {
		return img.sum, nil
	}
	var h xxhash.Digest
	h.Reset()
	var e [16]byte
	binary.LittleEndian.PutUint64(e[:8], uint64(sp.pageSize))
	binary.LittleEndian.PutUint64(e[8:], uint64(sp.pages))
	h.Write(e[:])
	zeroSum := xxhash.Sum64(make([]byte, sp.pageSize))
	buf := make([]byte, max(imageScanBytes, sp.pageSize))
	per := len(buf) / sp.pageSize
	for first := 0; first < sp.pages; first += per {
		n := min(per, sp.pages-first)
		read := false
		for i := range n {
			// The states were set by scan and never change.
			sum := zeroSum
			if c, _ := sp.state(first + i); c != ClassZero {
				if !read {
					if err := img.readAt(buf[:n*sp.pageSize], int64(first)*int64(sp.pageSize)); err != nil {
						return 0, err
					}
					read = true
				}
				sum = xxhash.Sum64(buf[i*sp.pageSize : (i+1)*sp.pageSize])
			}
			binary.LittleEndian.PutUint32(e[:4], 0) // the generation
			binary.LittleEndian.PutUint64(e[4:12], sum)
			h.Write(e[:12])
		}
	}
	img.sum, img.digested = h.Sum64(), true
	return img.sum, nil
}
