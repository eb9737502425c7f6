package memory

import "bytes"

// FirstDiff compares a and b page by page, bytes and generations, and
// returns the first page at which they differ, or -1 if they are equal.
// Regions of different page sizes differ at page 0; if one is a prefix of
// the other, they differ at the shorter one's page count. A nil region is
// an error wrapping ErrConfig.
func FirstDiff(a, b *Region) (int, error) {
	if a == nil || b == nil {
		return 0, configError("compare with a nil region")
	}
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
