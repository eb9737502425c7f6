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
	// PageZstd: the page's bytes are in the batch's zstd frame.
	PageZstd PageKind = 2
)

// String returns the kind's name.
func (k PageKind) String() string {
	switch k {
	case PageZero:
		return "zero"
	case PageRaw:
		return "raw"
	case PageZstd:
		return "zstd"
	}
	return "PageKind(" + strconv.Itoa(int(k)) + ")"
}

// encoderWindowBytes is how far back a batch encoder looks for matches.
// Frames are single-segment: they always declare their content size, and
// a decoder needs no window beyond the batch it decodes into.
const encoderWindowBytes = 1 << 20

// BatchEncoder turns pages of one region into the payload of a page batch
// record: it elides zero pages, sends pages that look incompressible raw,
// and compresses the rest into one zstd frame. Its buffers and zstd
// encoder are reused from batch to batch, so that a batch allocates
// nothing once the buffers have grown.
//
// A BatchEncoder is meant to be owned by one goroutine: a parallel copy
// engine gives each worker its own, and hands the EncodedBatch results to
// one RecordWriter (or Writer.WriteBatch) in order. It is not safe for
// concurrent use.
type BatchEncoder struct {
	level    Level
	enc      *zstd.Encoder
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
	if level > LevelNone {
		return nil, invalid("unknown level %d", uint8(level))
	}
	e := &BatchEncoder{level: level}
	if level != LevelNone {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(level.zstdLevel()),
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(encoderWindowBytes),
			zstd.WithSingleSegment(true),
			// Each record has its own check value, computed over the
			// compressed bytes before they are decompressed, so the
			// frame's checksum would only cost time: about 1 % on the
			// pages this encoder compresses, far more on repetitive
			// data (FORMAT.md, BenchmarkFrameCRCPaired).
			zstd.WithEncoderCRC(false),
		)
		if err != nil {
			return nil, invalid("zstd: %v", err)
		}
		e.enc = enc
	}
	return e, nil
}

// Close releases the zstd encoder.
func (e *BatchEncoder) Close() error {
	if e.enc != nil {
		return e.enc.Close()
	}
	return nil
}

// Level returns the encoder's compression level.
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
	case PageZstd:
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
	case PageZstd:
		e.cmp = append(e.cmp, slot...)
	}
	e.push(index, st.Gen, kind)
	return nil
}

func (e *BatchEncoder) classify(page []byte) PageKind {
	switch {
	case memory.IsZero(page):
		return PageZero
	case e.enc == nil || looksIncompressible(page):
		return PageRaw
	}
	return PageZstd
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

// EncodedBatch is a finished batch: the payload of a page batch record and
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
	// Payload is the record payload in pieces to be written back to
	// back. It aliases the encoder's buffers and is valid until the
	// encoder's next Begin.
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
	e.frame = e.frame[:0]
	if len(e.cmp) > 0 {
		// Room for zstd's worst case (raw blocks: a few bytes a 128 KiB
		// block) so that EncodeAll never reallocates.
		e.frame = slices.Grow(e.frame, len(e.cmp)+len(e.cmp)>>10+64)
		e.frame = e.enc.EncodeAll(e.cmp, e.frame)
	}
	h = appendUvarint(h, uint64(len(e.frame)))
	e.head = h
	e.parts = [3][]byte{h, e.frame, e.raw}
	return EncodedBatch{
		Region:    e.region,
		Pages:     len(e.idx),
		ZeroPages: e.zero,
		RawBytes:  len(e.idx) * e.pageSize,
		Sum:       sum,
		Payload:   e.parts[:],
	}, nil
}
