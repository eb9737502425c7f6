package memory

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of them; check
// with errors.Is.
var (
	// ErrOutOfRange reports an access that does not lie wholly inside a
	// Region. Nothing is read or written by such an access.
	ErrOutOfRange = errors.New("memory: access out of range")
	// ErrConfig reports an invalid Config, PatternConfig, Mix or Run (runs
	// out of order or overlapping), a nil region or page set given where
	// one is needed, or a page set whose capacity is not the region's.
	ErrConfig = errors.New("memory: invalid configuration")
	// ErrOverlap reports a Map whose pages overlap a window already mapped.
	ErrOverlap = errors.New("memory: window overlaps a mapped window")
	// ErrUnmapped reports use of a window after Unmap.
	ErrUnmapped = errors.New("memory: window is unmapped")
	// ErrNotRoot reports an operation that only a root Region supports,
	// such as Map, called on a window.
	ErrNotRoot = errors.New("memory: operation needs a root region")
	// ErrPageSize reports a page buffer whose length is not the page size.
	ErrPageSize = errors.New("memory: buffer is not one page long")
	// ErrClass reports a content class that cannot be used where it was
	// given (an unknown class, or ClassExplicit where generated content is
	// needed).
	ErrClass = errors.New("memory: unusable content class")
	// ErrRate reports a write rate or interval that would overflow the
	// page arithmetic of a Pattern.
	ErrRate = errors.New("memory: rate or interval out of range")
	// ErrReadOnly reports a write, fill, store, scrub or map refused by a
	// read-only region: one backed by an image (OpenImage). Nothing is
	// changed by such a call.
	ErrReadOnly = errors.New("memory: region is read-only")
	// ErrImage reports an image that could not be read: its reader
	// failed, returned fewer bytes than asked without an error, claimed
	// more than it was given, or panicked. It is wrapped by an
	// *ImageError, which also wraps the reader's own error.
	ErrImage = errors.New("memory: image read failed")
	// ErrAbsent reports a guest access that stopped at an absent page
	// (Region.SetAbsent) whose fault function failed; the page stays
	// absent. It is wrapped by an *AbsentError, which also wraps the fault
	// function's error.
	ErrAbsent = errors.New("memory: page absent")
)

// AccessError describes an out-of-range access. It wraps ErrOutOfRange.
type AccessError struct {
	Op   string // "read", "write", "page", ...
	Off  int64  // first byte, or first page for page operations
	Len  int64  // bytes, or pages for page operations
	Size int64  // size of the region in the same unit
}

func (e *AccessError) Error() string {
	return fmt.Sprintf("memory: %s [%d, +%d) outside region of %d", e.Op, e.Off, e.Len, e.Size)
}

// Unwrap returns ErrOutOfRange.
func (e *AccessError) Unwrap() error { return ErrOutOfRange }

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// ImageError describes a failed read of an image (OpenImage). It wraps
// ErrImage and the reader's error, if it gave one.
type ImageError struct {
	Off int64 // first byte of the read in the image
	Len int   // bytes asked for
	Err error // what went wrong
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("memory: image read [%d, +%d): %v", e.Off, e.Len, e.Err)
}

// Unwrap returns ErrImage and the cause.
func (e *ImageError) Unwrap() []error { return []error{ErrImage, e.Err} }

// readOnlyError returns the error of operation op refused by a read-only
// region.
func readOnlyError(op string) error { return fmt.Errorf("%w: %s refused", ErrReadOnly, op) }
