package memory

import (
	"bytes"
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Digest returns an xxhash64 of r's page size, page count, and every page's
// bytes and generation, in page order. Two regions with equal digests hold
// the same content; a migration's two ends compare digests instead of
// bytes. A Synthetic region's generated pages are produced to be hashed.
func (r *Region) Digest() (uint64, error) {
	h := xxhash.New()
	var hdr [16]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(r.sp.pageSize))
	binary.LittleEndian.PutUint64(hdr[8:], uint64(r.pages))
	h.Write(hdr[:])
	buf := make([]byte, r.sp.pageSize)
	for p := range r.pages {
		st, err := r.ReadPage(p, buf)
		if err != nil {
			return 0, err
		}
		binary.LittleEndian.PutUint32(hdr[:4], st.Gen)
		h.Write(hdr[:4])
		h.Write(buf)
	}
	return h.Sum64(), nil
}

// FirstDiff compares a and b page by page, bytes and generations, and
// returns the first page at which they differ, or -1 if they are equal.
// Regions of different page sizes differ at page 0; if one is a prefix of
// the other, they differ at the shorter one's page count.
func FirstDiff(a, b *Region) (int, error) {
	if a.PageSize() != b.PageSize() {
		return 0, nil
	}
	n := min(a.Pages(), b.Pages())
	pa, pb := make([]byte, a.PageSize()), make([]byte, b.PageSize())
	for p := range n {
		sa, err := a.ReadPage(p, pa)
		if err != nil {
			return 0, err
		}
		sb, err := b.ReadPage(p, pb)
		if err != nil {
			return 0, err
		}
		if sa.Gen != sb.Gen || !bytes.Equal(pa, pb) {
			return p, nil
		}
	}
	if a.Pages() != b.Pages() {
		return n, nil
	}
	return -1, nil
}
