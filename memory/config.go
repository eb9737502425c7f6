package memory

import "fmt"

// Kind selects how a Region stores the bytes of its pages.
type Kind uint8

const (
	// Dense holds every page in one allocation made up front.
	Dense Kind = iota + 1
	// Sparse allocates a page on its first non-zero write; pages never
	// written read as zero and cost no memory. Pages it frees (a scrub, a
	// page rewritten with zeros) go to a process-wide pool, a sync.Pool by
	// page size, from which any Sparse region allocates before it asks
	// for fresh memory.
	Sparse
	// Synthetic stores no bytes for generated content: a page filled with
	// a content class is produced on read from (seed, page, generation,
	// class). Bytes written explicitly with WriteAt or StorePage are kept
	// in a sparse overlay, so results equal those of Dense and Sparse.
	Synthetic
	// Image is a read-only root whose bytes are read, when they are read,
	// from a raw memory image: a guest RAM or framebuffer dump. Only
	// OpenImage makes one; New refuses it.
	Image
)

func (k Kind) String() string {
	switch k {
	case Dense:
		return "dense"
	case Sparse:
		return "sparse"
	case Synthetic:
		return "synthetic"
	case Image:
		return "image"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Limits of a Region. They bound the metadata a Region allocates (at most
// about six bytes a page) whatever a caller asks for.
const (
	// DefaultPageSize is the page size used when Config.PageSize is zero.
	DefaultPageSize = 4096
	// MinPageSize and MaxPageSize bound Config.PageSize.
	MinPageSize = 64
	MaxPageSize = 2 << 20
	// MaxPages bounds the number of pages of a root Region (512 GiB of
	// 4 KiB pages).
	MaxPages = 1 << 27
)

// Config describes a root Region.
type Config struct {
	// SizeBytes is the size of the address space. It must be a positive
	// multiple of PageSize.
	SizeBytes int64
	// PageSize is a power of two between MinPageSize and MaxPageSize;
	// zero means DefaultPageSize.
	PageSize int
	// Kind is the backing; zero means Sparse.
	Kind Kind
	// Seed keys the generated content of pages not inside a mapped window.
	Seed uint64
	// DirtyLogOff makes the root's dirty log start off, holding no memory
	// until StartDirtyLog, for a region nobody collects from yet (a
	// guest's memory outside migrations). Zero means on, from the start.
	DirtyLogOff bool
}

// withDefaults returns c with zero fields set to their defaults and
// validated.
func (c Config) withDefaults() (Config, error) {
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.Kind == 0 {
		c.Kind = Sparse
	}
	if c.PageSize < MinPageSize || c.PageSize > MaxPageSize || c.PageSize&(c.PageSize-1) != 0 {
		return c, configError("page size %d is not a power of two in [%d, %d]", c.PageSize, MinPageSize, MaxPageSize)
	}
	if c.Kind == Image {
		return c, configError("an image region is made by OpenImage, not New")
	}
	if c.Kind != Dense && c.Kind != Sparse && c.Kind != Synthetic {
		return c, configError("unknown backing %v", c.Kind)
	}
	if c.SizeBytes <= 0 || c.SizeBytes%int64(c.PageSize) != 0 {
		return c, configError("size %d is not a positive multiple of the page size %d", c.SizeBytes, c.PageSize)
	}
	if pages := c.SizeBytes / int64(c.PageSize); pages > MaxPages {
		return c, configError("%d pages exceed the limit of %d", pages, MaxPages)
	}
	return c, nil
}
