package memory

// InUse reports whether a page in state s is not in its initial state:
// written or stored since its region was made or last scrubbed, or holding
// content other than zeros. It is the one test of "a page in use" — what a
// migration's first round sends, what a checkpoint of a whole region
// holds, and what a Legacy stun moves of a framebuffer.
func (s PageState) InUse() bool { return s.Gen != 0 || s.Class != ClassZero }

// UsedPages resets dst to r's size and adds every page of r that is in use
// (PageState.InUse). It fails, with dst partly filled, only if r cannot be
// read (a window whose parent was unmapped), or, changing nothing, if dst
// is nil.
func (r *Region) UsedPages(dst *PageSet) error {
	if dst == nil {
		return configError("used pages into a nil page set")
	}
	dst.Reset(r.Pages())
	return r.eachUsed(func(p int) { dst.Add(p) })
}

// UsedBytes is the size of r's pages in use. It counts them without
// building a set: a Legacy migration asks it of every framebuffer after
// each round.
func (r *Region) UsedBytes() (int64, error) {
	n := int64(0)
	if err := r.eachUsed(func(int) { n++ }); err != nil {
		return 0, err
	}
	return n * int64(r.PageSize()), nil
}

// eachUsed calls f with each page of r in use, in order.
func (r *Region) eachUsed(f func(p int)) error {
	for p := range r.Pages() {
		st, err := r.PageState(p)
		if err != nil {
			return err
		}
		if st.InUse() {
			f(p)
		}
	}
	return nil
}
