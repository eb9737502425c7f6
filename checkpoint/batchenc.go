package checkpoint

import (
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/vgpusim/vgpusim/memory"
)

// PageKind says how a page of a batch is sent.
type PageKind uint8

// The page kinds.
const (
	// PageZero: the page is all zeros; no bytes are sent.
	PageZero PageKind = 0
	// PageRaw: the page's bytes are sent as they are.
	PageRaw PageKind = 1
	// PageCompressed: the page's bytes are in the batch's compressed
	// frame, a zstd frame or an S2 block as the batch's codec says.
	PageCompressed PageKind = 2
	// PageZstd is PageCompressed's name from version 1.0, when zstd was
	// the only codec.
	PageZstd = PageCompressed
	// PageShuffled: the page's bytes are in the batch's shuffled frame,
	// grouped by significance with the batch's other shuffled pages.
	// Since version 1.3, in a stream with page filters.
	PageShuffled PageKind = 3
	// PageDelta marks a delta page: what the kind's other bits say is sent
	// is the XOR of the page's content with the content the reader holds
	// for it, whose xxhash64 the batch gives (Page.BaseSum). PageDelta
	// alone (the zero kind, marked) is a page the reader holds unchanged.
	// Since version 1.3, in a stream with page filters.
	PageDelta PageKind = 0x10
	// PageUnchanged is a delta page whose XOR is zero: no bytes are sent.
	PageUnchanged = PageDelta | PageZero
)

// pageStorageMask selects the bits of a kind that say where its bytes
// are.
const pageStorageMask PageKind = 0x0f

// Delta reports whether k is a delta page's kind.
func (k PageKind) Delta() bool { return k&PageDelta != 0 }

// Storage returns where the bytes of a page of kind k are: PageZero (none),
// PageRaw, PageCompressed or PageShuffled.
func (k PageKind) Storage() PageKind { return k & pageStorageMask }

// String returns the kind's name.
func (k PageKind) String() string {
	name := ""
	switch k.Storage() {
	case PageZero:
		name = "zero"
	case PageRaw:
		name = "raw"
	case PageCompressed:
		name = "compressed"
	case PageShuffled:
		name = "shuffled"
	}
	switch {
	case k&^(PageDelta|pageStorageMask) != 0 || name == "":
		return "PageKind(" + strconv.Itoa(int(k)) + ")"
	case k == PageUnchanged:
		return "unchanged"
	case k.Delta():
		return "delta-" + name
	}
	return name
}

// BatchEncoder turns pages of one region into the payload of a page batch
// record: it elides zero pages, sends pages that look incompressible raw,
// and compresses the rest into one zstd frame or S2 block, as its level
// says. Its level may change from batch to batch (SetLevel). Its buffers
// and codec state are reused from batch to batch, so that a batch
// allocates nothing once the buffers have grown.
//
// A BatchEncoder is meant to be owned by one goroutine: a parallel copy
// engine gives each worker its own, and hands the EncodedBatch results to
// one RecordWriter (or Writer.WriteBatch) in order. It is not safe for
// concurrent use.
type BatchEncoder struct {
	level Level
	// zstds holds an encoder for each zstd level used so far, made when
	// the level is first set.
	zstds    [LevelBest + 1]*zstd.Encoder
	open     bool
	region   uint32
	pageSize int
	last     int // last index added, -1 if none

	idx   []int
	gens  []uint32
	kinds []PageKind
	zero  int
	raw   []byte // raw pages, in index order
	cmp   []byte // pages to compress, in index order
	frame []byte
	head  []byte
	parts [5][]byte

	// The page filters' state: the filters, the pages to shuffle and
	// compress (in index order, not yet shuffled), the shuffled frame and
	// its length field, the base sums of the delta pages, and scratch for
	// an XOR and a shuffle.
	filters   PageFilters
	shuf      []byte
	shufFrame []byte
	shufLen   []byte
	baseSums  []uint64
	xor, tmp  []byte
	// deltas and unchanged count the batch's delta pages, and those of
	// them unchanged.
	deltas, unchanged int
}

// NewBatchEncoder returns an encoder compressing at level.
func NewBatchEncoder(level Level) (*BatchEncoder, error) {
	e := &BatchEncoder{}
	if err := e.SetLevel(level); err != nil {
		return nil, err
	}
	return e, nil
}

// SetLevel sets the level of the batches begun after it, and forgets a
// batch not finished, as Begin does. The encoder of a zstd level is made
// the first time the level is set and kept until Close, so that changing
// levels from batch to batch allocates nothing once each level has been
// used.
func (e *BatchEncoder) SetLevel(level Level) error {
	if !level.valid() {
		return invalid("unknown level %d", uint8(level))
	}
	e.open = false
	if level.isZstd() && e.zstds[level] == nil {
		enc, err := newZstdEncoder(level)
		if err != nil {
			return err
		}
		e.zstds[level] = enc
	}
	e.level = level
	return nil
}

// Close releases the zstd encoders.
func (e *BatchEncoder) Close() error {
	var first error
	for i, enc := range e.zstds {
		if enc != nil {
			if err := enc.Close(); err != nil && first == nil {
				first = err
			}
			e.zstds[i] = nil
		}
	}
	return first
}

// Level returns the encoder's compression level: that of the batch being
// built, or of the next one.
func (e *BatchEncoder) Level() Level { return e.level }

// SetFilters sets the page filters of the batches begun after it, and
// forgets a batch not finished, as Begin does.
func (e *BatchEncoder) SetFilters(f PageFilters) {
	e.open, e.filters = false, f
}

// Begin starts a batch of pages of region, whose pages are pageSize bytes.
// It forgets any batch not finished.
func (e *BatchEncoder) Begin(region uint32, pageSize int) error {
	if pageSize < memory.MinPageSize || pageSize > memory.MaxPageSize || pageSize&(pageSize-1) != 0 {
		return invalid("page size %d", pageSize)
	}
	e.open, e.region, e.pageSize, e.last = true, region, pageSize, -1
	e.idx, e.gens, e.kinds, e.zero, e.deltas, e.unchanged = e.idx[:0], e.gens[:0], e.kinds[:0], 0, 0, 0
	e.raw, e.cmp, e.shuf, e.baseSums = e.raw[:0], e.cmp[:0], e.shuf[:0], e.baseSums[:0]
	return nil
}

// Len returns the number of pages in the batch.
func (e *BatchEncoder) Len() int { return len(e.idx) }

// RawBytes returns the pages' size in bytes, zero pages included: what a
// batch size limit counts.
func (e *BatchEncoder) RawBytes() int { return len(e.idx) * e.pageSize }

// Region returns the region of the batch.
func (e *BatchEncoder) Region() uint32 { return e.region }

// LastIndex returns the index of the last page added, or -1.
func (e *BatchEncoder) LastIndex() int { return e.last }

func (e *BatchEncoder) checkAdd(index int) error {
	if !e.open {
		return newError(ErrState, 0, -1, "batch not begun")
	}
	if index <= e.last {
		return invalid("page %d after page %d: indices must increase within a batch", index, e.last)
	}
	return nil
}

// Add adds page index of the batch's region at generation gen. page is
// copied. Indices must increase within a batch.
func (e *BatchEncoder) Add(index int, gen uint32, page []byte) error {
	if err := e.checkAdd(index); err != nil {
		return err
	}
	if len(page) != e.pageSize {
		return invalid("page of %d bytes, want %d", len(page), e.pageSize)
	}
	if e.filters.Enabled() {
		n := len(e.raw)
		e.raw = append(e.raw, page...)
		e.place(index, gen, n, memory.IsZero(page))
		return nil
	}
	kind := e.classify(page)
	switch kind {
	case PageRaw:
		e.raw = append(e.raw, page...)
	case PageCompressed:
		e.cmp = append(e.cmp, page...)
	}
	e.push(index, gen, kind)
	return nil
}

// AddFrom adds page index of r, reading it straight into the batch: a page
// sent raw is copied once, from the region to the payload.
func (e *BatchEncoder) AddFrom(r *memory.Region, index int) error {
	if err := e.checkAdd(index); err != nil {
		return err
	}
	if r.PageSize() != e.pageSize {
		return invalid("region page size %d, batch page size %d", r.PageSize(), e.pageSize)
	}
	n := len(e.raw)
	e.raw = slices.Grow(e.raw, e.pageSize)
	slot := e.raw[n : n+e.pageSize : n+e.pageSize]
	st, err := r.ReadPage(index, slot)
	if err != nil {
		return invalid("page %d", index).withCause(err)
	}
	if e.filters.Enabled() {
		e.raw = e.raw[:n+e.pageSize]
		e.place(index, st.Gen, n, st.Class == memory.ClassZero || memory.IsZero(slot))
		return nil
	}
	kind := PageZero
	if st.Class != memory.ClassZero {
		kind = e.classify(slot)
	}
	switch kind {
	case PageRaw:
		e.raw = e.raw[:n+e.pageSize]
	case PageCompressed:
		e.cmp = append(e.cmp, slot...)
	}
	e.push(index, st.Gen, kind)
	return nil
}

// place decides how page index, the page at e.raw[n:], is sent in a batch
// with page filters, and moves its bytes (or its delta's) where that kind
// keeps them. zero says the page is all zeros.
func (e *BatchEncoder) place(index int, gen uint32, n int, zero bool) {
	page := e.raw[n : n+e.pageSize]
	kind := PageZero
	var base []byte
	var sum uint64
	known := false
	if d := e.filters.Delta; d != nil {
		base, sum, known = d.lookup(e.region, index)
		if zero {
			d.add(e.region, index, nil)
		} else {
			d.add(e.region, index, page)
		}
	}
	data := page
	switch {
	case zero:
	case known:
		if cap(e.xor) < e.pageSize {
			e.xor = make([]byte, e.pageSize)
		}
		x := e.xor[:e.pageSize]
		zeros := xorInto(x, page, base)
		switch {
		case zeros == len(x):
			kind = PageUnchanged
		case zeros*deltaMinZeroDivisor >= len(x):
			kind, data = PageDelta|e.storage(x, true), x
		default:
			kind = e.storage(page, false)
		}
	default:
		kind = e.storage(page, false)
	}
	if kind.Delta() {
		e.baseSums = append(e.baseSums, sum)
	}
	switch kind.Storage() {
	case PageRaw:
		copy(page, data) // the delta's bytes over the page's, if a delta
	case PageCompressed:
		e.cmp = append(e.cmp, data...)
	case PageShuffled:
		e.shuf = append(e.shuf, data...)
	}
	if kind.Storage() != PageRaw {
		e.raw = e.raw[:n]
	}
	e.push(index, gen, kind)
}

// storage returns how a page (or, if delta, a delta) p, not all zeros, is
// kept in a batch with page filters.
func (e *BatchEncoder) storage(p []byte, delta bool) PageKind {
	switch {
	case e.level == LevelNone:
		return PageRaw
	case e.filters.Shuffle && (delta || e.level != LevelS2) && looksFloat32(p):
		return PageShuffled
	case looksIncompressible(p):
		return PageRaw
	}
	return PageCompressed
}

func (e *BatchEncoder) classify(page []byte) PageKind {
	switch {
	case memory.IsZero(page):
		return PageZero
	case e.level == LevelNone || looksIncompressible(page):
		return PageRaw
	}
	return PageCompressed
}

func (e *BatchEncoder) push(index int, gen uint32, kind PageKind) {
	e.idx = append(e.idx, index)
	e.gens = append(e.gens, gen)
	e.kinds = append(e.kinds, kind)
	if kind.Delta() {
		e.deltas++
	}
	if kind == PageUnchanged {
		e.unchanged++
	}
	if kind == PageZero {
		e.zero++
	}
	e.last = index
}

// EncodedBatch is a finished batch: the payload of a page batch record (or
// of a coded one, but for the codec byte RecordWriter.WriteBatch adds) and
// what the stream's tally needs to know of it.
type EncodedBatch struct {
	// Region is the region the pages belong to.
	Region uint32
	// Pages and ZeroPages count the batch's pages, and the zero ones.
	Pages, ZeroPages int
	// RawBytes is the size of the pages, zero pages included.
	RawBytes int
	// Sum is the xxhash64 of the batch's page table, its contribution to
	// the round and stream digests.
	Sum uint64
	// Level is the level the batch was encoded at. Its codec
	// (Level.Codec) is the batch's: the one a coded page batch record
	// names, and one the stream's header must allow.
	Level Level
	// Filtered reports that the batch has the layout of version 1.3
	// (PageFilters), which a stream must declare (WriterOptions.Filters).
	Filtered bool
	// DeltaPages counts the batch's delta pages, unchanged ones included;
	// UnchangedPages those of them sent without bytes. ZeroPages counts
	// neither.
	DeltaPages, UnchangedPages int
	// Payload is the page batch layout in pieces to be written back to
	// back: the whole payload of a page batch record, and all of a coded
	// page batch record's but its leading codec byte. It aliases the
	// encoder's buffers and is valid until the encoder's next Begin.
	Payload [][]byte
}

// PayloadBytes returns the size of b's payload: what its record carries,
// but for the framing and, in a coded page batch record, the codec byte.
func (b EncodedBatch) PayloadBytes() int64 {
	n := 0
	for _, p := range b.Payload {
		n += len(p)
	}
	return int64(n)
}

// Finish compresses the batch and returns its payload. The batch must
// hold at least one page.
func (e *BatchEncoder) Finish() (EncodedBatch, error) {
	if !e.open {
		return EncodedBatch{}, newError(ErrState, 0, -1, "batch not begun")
	}
	if len(e.idx) == 0 {
		return EncodedBatch{}, invalid("empty batch")
	}
	e.open = false
	h := e.head[:0]
	h = appendUvarint(h, uint64(e.region))
	h = appendUvarint(h, uint64(len(e.idx)))
	h = appendUvarint(h, uint64(e.idx[0]))
	for i := 1; i < len(e.idx); i++ {
		h = appendUvarint(h, uint64(e.idx[i]-e.idx[i-1]-1))
	}
	for _, k := range e.kinds {
		h = append(h, byte(k))
	}
	for _, g := range e.gens {
		h = appendUvarint(h, uint64(g))
	}
	filtered := e.filters.Enabled()
	for _, s := range e.baseSums {
		h = binary.LittleEndian.AppendUint64(h, s)
	}
	sum := xxhash.Sum64(h)
	e.frame = e.compress(e.frame[:0], e.cmp)
	h = appendUvarint(h, uint64(len(e.frame)))
	e.head = h
	e.parts = [5][]byte{h, e.frame, e.raw}
	n := 3
	if filtered {
		e.shufFrame = e.shufFrame[:0]
		if len(e.shuf) > 0 {
			if cap(e.tmp) < len(e.shuf) {
				e.tmp = make([]byte, len(e.shuf))
			}
			shuffle(e.tmp[:len(e.shuf)], e.shuf)
			e.shufFrame = e.compress(e.shufFrame, e.tmp[:len(e.shuf)])
		}
		e.shufLen = appendUvarint(e.shufLen[:0], uint64(len(e.shufFrame)))
		e.parts = [5][]byte{h, e.frame, e.shufLen, e.shufFrame, e.raw}
		n = 5
	}
	return EncodedBatch{
		Region:         e.region,
		Pages:          len(e.idx),
		ZeroPages:      e.zero,
		RawBytes:       len(e.idx) * e.pageSize,
		Sum:            sum,
		Level:          e.level,
		Filtered:       filtered,
		DeltaPages:     e.deltas,
		UnchangedPages: e.unchanged,
		Payload:        e.parts[:n],
	}, nil
}
