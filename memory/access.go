package memory

import "github.com/cespare/xxhash/v2"

// PageState is what a Region knows of a page besides its bytes.
type PageState struct {
	// Gen counts the writes to the page since it was last scrubbed, or is
	// the generation a migration stored with it.
	Gen uint32
	// Class is the content class of the page; ClassExplicit once bytes
	// were written with WriteAt or StorePage (unless a Synthetic region
	// recognized them as a class's generated content).
	Class Class
}

// ReadAt reads len(p) bytes at byte offset off. An access that is not
// wholly inside r reads nothing and returns an error wrapping
// ErrOutOfRange. The absent pages it covers are landed first (see
// SetAbsent); if one cannot be, it reads the bytes before that page and
// returns an *AbsentError. It implements io.ReaderAt.
func (r *Region) ReadAt(p []byte, off int64) (int, error) {
	if err := r.checkBytes("read", off, len(p)); err != nil {
		return 0, err
	}
	var absentErr error
	if r.absent.Load() != nil {
		p, absentErr = r.landBytes(p, off)
	}
	n := 0
	for n < len(p) {
		page, in := int((off+int64(n))>>r.sp.shift), int((off+int64(n))&int64(r.sp.pageSize-1))
		chunk := min(len(p)-n, r.sp.pageSize-in)
		t := r.resolve(page)
		l := r.sp.lock(t.abs)
		l.RLock()
		if r.unmapped.Load() {
			l.RUnlock()
			return n, ErrUnmapped
		}
		err := r.sp.readLocked(t, in, p[n:n+chunk])
		l.RUnlock()
		if err != nil {
			return n, err
		}
		n += chunk
	}
	return n, absentErr
}

// WriteAt writes p at byte offset off, marking every page it touches dirty
// and bumping its generation. An access that is not wholly inside r writes
// nothing and returns an error wrapping ErrOutOfRange. The absent pages it
// covers are landed first (see SetAbsent); if one cannot be, it writes the
// bytes before that page and returns an *AbsentError. It implements
// io.WriterAt.
func (r *Region) WriteAt(p []byte, off int64) (int, error) {
	if err := r.writable("write"); err != nil {
		return 0, err
	}
	if err := r.checkBytes("write", off, len(p)); err != nil {
		return 0, err
	}
	var absentErr error
	if r.absent.Load() != nil {
		p, absentErr = r.landBytes(p, off)
	}
	n := 0
	for n < len(p) {
		page, in := int((off+int64(n))>>r.sp.shift), int((off+int64(n))&int64(r.sp.pageSize-1))
		chunk := min(len(p)-n, r.sp.pageSize-in)
		t, ok := r.lockPage(page)
		if !ok {
			return n, ErrUnmapped
		}
		r.sp.writeLocked(t, in, p[n:n+chunk])
		r.markLocked(t)
		r.unlockPage(t)
		n += chunk
	}
	return n, absentErr
}

// ReadPage copies page p into dst, which must be one page long, and returns
// the page's state as of the same instant. It records the sum of a page
// whose bytes are stored, as StorePage does, so that the next Digest of a
// range whose pages were read since they changed, as a migration reads the
// pages it sends, hashes none of their bytes again.
func (r *Region) ReadPage(p int, dst []byte) (PageState, error) {
	if len(dst) != r.sp.pageSize {
		return PageState{}, ErrPageSize
	}
	if err := r.checkPages("read page", p, 1); err != nil {
		return PageState{}, err
	}
	t := r.resolve(p)
	l := r.sp.lock(t.abs)
	l.RLock()
	defer l.RUnlock()
	if r.unmapped.Load() {
		return PageState{}, ErrUnmapped
	}
	if err := r.sp.readLocked(t, 0, dst); err != nil {
		return PageState{}, err
	}
	if r.sp.img == nil { // an image's digest needs no sums: see imageSource.digest
		r.sp.learnSum(t.abs, dst)
	}
	c, gen := r.sp.state(t.abs)
	return PageState{Gen: gen, Class: c}, nil
}

// PageState returns the state of page p.
func (r *Region) PageState(p int) (PageState, error) {
	if err := r.checkPages("page state", p, 1); err != nil {
		return PageState{}, err
	}
	t := r.resolve(p)
	l := r.sp.lock(t.abs)
	l.RLock()
	defer l.RUnlock()
	c, gen := r.sp.state(t.abs)
	return PageState{Gen: gen, Class: c}, nil
}

// IsZeroPage reports whether page p reads as all zeros. It looks at the
// bytes only when the page's class does not already say.
func (r *Region) IsZeroPage(p int) (bool, error) {
	if err := r.checkPages("zero check", p, 1); err != nil {
		return false, err
	}
	t := r.resolve(p)
	l := r.sp.lock(t.abs)
	l.RLock()
	defer l.RUnlock()
	switch c, _ := r.sp.state(t.abs); {
	case c == ClassZero:
		return true, nil
	case c.Generated(), r.sp.img != nil:
		// Every generator but zero's yields a non-zero page; an image's
		// page is explicit only if OpenImage found a byte that is not.
		return false, nil
	}
	return IsZero(r.sp.back.page(t.abs)), nil
}

// Fill writes generated content of class c into pages [first, first+n):
// each page's generation is bumped and the page then holds
// Generate(c, seed, page, generation) for its window's seed and relative
// index. A Synthetic region stores nothing for it; Dense and Sparse store
// the bytes, so all three read alike. ClassZero zeroes the pages. The
// absent pages of the range are landed first (see SetAbsent); if one cannot
// be, the pages before it are filled and Fill returns an *AbsentError.
func (r *Region) Fill(first, n int, c Class) error {
	if err := r.writable("fill"); err != nil {
		return err
	}
	if !c.Generated() {
		return ErrClass
	}
	if err := r.checkPages("fill", first, n); err != nil {
		return err
	}
	_, err := r.fill(first, n, c, Mix{})
	return err
}

// FillMix is Fill with each page's class chosen by m for r's seed,
// landing absent pages as Fill does.
func (r *Region) FillMix(first, n int, m Mix) error {
	if err := r.writable("fill"); err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if err := r.checkPages("fill", first, n); err != nil {
		return err
	}
	_, err := r.fill(first, n, 0, m)
	return err
}

func (r *Region) fillPage(p int, c Class) error {
	t, ok := r.lockPage(p)
	if !ok {
		return ErrUnmapped
	}
	r.sp.setLocked(t, c, r.sp.gen(t.abs)+1)
	r.markLocked(t)
	r.unlockPage(t)
	return nil
}

// StorePage sets page p to data (one page) at generation gen, as a
// migration's destination applies a page it received. An all-zero page is
// stored as ClassZero, taking no memory in a Sparse or Synthetic region. In
// a Synthetic region, a page whose bytes are the generated content of a
// class for this page and generation is stored as that class, taking no
// memory either: a destination that receives a synthetic VM's bytes holds
// it as compactly as the source.
func (r *Region) StorePage(p int, data []byte, gen uint32) error {
	if err := r.writable("store"); err != nil {
		return err
	}
	if len(data) != r.sp.pageSize {
		return ErrPageSize
	}
	if err := r.checkPages("store", p, 1); err != nil {
		return err
	}
	if !r.sp.storesGenerated() && !IsZero(data) {
		if ok, err := r.storeRecognized(p, data, gen); ok || err != nil {
			return err
		}
	}
	if sb := r.sp.sparse(); sb != nil && !IsZero(data) {
		bp := sb.newPage()
		copy(*bp, data)
		return r.install(r.resolve(p), sb, bp, ClassExplicit, gen)
	}
	t, ok := r.lockPage(p)
	if !ok {
		return ErrUnmapped
	}
	r.sp.storeLocked(t, data, gen)
	r.markLocked(t)
	r.unlockPage(t)
	return nil
}

// storeRecognized stores page p of a Synthetic region as the generated
// class whose content data is, if there is one, and reports whether it
// did. The class is found outside every lock, as install fills a page.
func (r *Region) storeRecognized(p int, data []byte, gen uint32) (bool, error) {
	t := r.resolve(p)
	bp := r.sp.scratch.Get().(*[]byte)
	defer r.sp.scratch.Put(bp)
	c, ok := classOf(data, t.seed, t.key, gen, *bp)
	if !ok {
		return false, nil
	}
	// The sum is of the bytes generated, which are the page's, whatever
	// the caller does with data meanwhile.
	sum := xxhash.Sum64(*bp)
	if !r.lockTarget(t) {
		return false, ErrUnmapped
	}
	r.sp.setLocked(t, c, gen)
	r.sp.recordSum(t.abs, sum)
	r.markLocked(t)
	r.unlockPage(t)
	return true, nil
}

// StoreGenerated sets page p to the generated content of class c at
// generation gen, as a destination applies a page whose bytes it can
// regenerate.
func (r *Region) StoreGenerated(p int, c Class, gen uint32) error {
	if err := r.writable("store"); err != nil {
		return err
	}
	if !c.Generated() {
		return ErrClass
	}
	if err := r.checkPages("store", p, 1); err != nil {
		return err
	}
	if sb := r.sp.sparse(); sb != nil && c != ClassZero && r.sp.storesGenerated() {
		bp := sb.newPage()
		t := r.resolve(p)
		Generate(*bp, c, t.seed, t.key, gen)
		return r.install(t, sb, bp, c, gen)
	}
	t, ok := r.lockPage(p)
	if !ok {
		return ErrUnmapped
	}
	r.sp.setLocked(t, c, gen)
	r.markLocked(t)
	r.unlockPage(t)
	return nil
}

// install makes bp, a page of a sparse backing filled outside every lock
// by StorePage or StoreGenerated, page t's bytes, of class c at generation
// gen, and records their sum. Only the swap is made under p's lock: the
// workers of a migration's destination each store the pages of a batch in
// turn, whose neighbours share a lock stripe (a stripe a chunk of 512
// pages), and a worker that held a lock while it copied, generated or
// hashed a page held up the others behind it. bp is the caller's alone until the swap, so the sum recorded
// is that of the bytes stored, whatever the caller does with its data.
func (r *Region) install(t target, sb *sparseBacking, bp *[]byte, c Class, gen uint32) error {
	sum := xxhash.Sum64(*bp)
	if !r.lockTarget(t) {
		sb.free(bp)
		return ErrUnmapped
	}
	old := sb.install(t.abs, bp)
	r.sp.setState(t.abs, c, gen)
	r.sp.changed(t.abs)
	r.sp.recordSum(t.abs, sum)
	r.markLocked(t)
	r.unlockPage(t)
	if old != nil {
		sb.free(old)
	}
	return nil
}

// Scrub returns every page of r to its initial state — zero, generation 0
// — frees what the backing can, and clears r's dirty log and r's absent
// pages (SetAbsent; not those of a window of r).
func (r *Region) Scrub() error {
	if err := r.writable("scrub"); err != nil {
		return err
	}
	if r.unmapped.Load() {
		return ErrUnmapped
	}
	r.absent.Store(nil)
	r.sp.scrub(r.first, r.pages)
	r.log.clear()
	return nil
}
