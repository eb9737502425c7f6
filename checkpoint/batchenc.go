package checkpoint

import (
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
)

// String returns the kind's name.
func (k PageKind) String() string {
	switch k {
	case PageZero:
		return "zero"
	case PageRaw:
		return "raw"
	case PageCompressed:
		return "compressed"
	}
	return "PageKind(" + strconv.Itoa(int(k)) + ")"
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
	parts [3][]byte
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

// Begin starts a batch of pages of region, whose pages are pageSize bytes.
// It forgets any batch not finished.
func (e *BatchEncoder) Begin(region uint32, pageSize int) error {
	if pageSize < memory.MinPageSize || pageSize > memory.MaxPageSize || pageSize&(pageSize-1) != 0 {
		return invalid("page size %d", pageSize)
	}
	e.open, e.region, e.pageSize, e.last = true, region, pageSize, -1
	e.idx, e.gens, e.kinds, e.zero = e.idx[:0], e.gens[:0], e.kinds[:0], 0
	e.raw, e.cmp = e.raw[:0], e.cmp[:0]
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
	// Payload is the page batch layout in pieces to be written back to
	// back: the whole payload of a page batch record, and all of a coded
	// page batch record's but its leading codec byte. It aliases the
	// encoder's buffers and is valid until the encoder's next Begin.
	Payload [][]byte
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
	sum := xxhash.Sum64(h)
	e.frame = e.compress(e.frame[:0], e.cmp)
	h = appendUvarint(h, uint64(len(e.frame)))
	e.head = h
	e.parts = [3][]byte{h, e.frame, e.raw}
	return EncodedBatch{
		Region:    e.region,
		Pages:     len(e.idx),
		ZeroPages: e.zero,
		RawBytes:  len(e.idx) * e.pageSize,
		Sum:       sum,
		Level:     e.level,
		Payload:   e.parts[:],
	}, nil
}
