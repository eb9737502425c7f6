package checkpoint

import (
	"errors"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
)

// BatchDecoder decodes the payloads of the page batch records of one
// stream, plain (RecordPageBatch) or coded (RecordCodedBatch), zstd, S2 or
// uncompressed. It checks every field against the stream's header and
// metadata and the reader's limits before it allocates or decompresses
// anything, and its buffers and zstd decoder are reused from batch to
// batch.
//
// A BatchDecoder is meant to be owned by one goroutine; a parallel
// decoder gives each worker its own. It is not safe for concurrent use.
type BatchDecoder struct {
	hdr     Header
	meta    *Metadata
	lim     Limits
	dec     *zstd.Decoder
	scratch []byte
	// shufScratch receives a shuffled frame and unshuf its pages in
	// element order.
	shufScratch, unshuf []byte
	// page is scratch for the base of a delta page its owner stores.
	page  []byte
	batch Batch
}

// NewBatchDecoder returns a decoder for the batches of a stream with
// header h and metadata meta, under limits lim (zero fields take their
// defaults). meta is retained, not copied.
func NewBatchDecoder(h Header, meta *Metadata, lim Limits) (*BatchDecoder, error) {
	d := &BatchDecoder{}
	if err := d.Reset(h, meta, lim); err != nil {
		return nil, err
	}
	return d, nil
}

// Reset points the decoder at another stream, keeping its buffers.
func (d *BatchDecoder) Reset(h Header, meta *Metadata, lim Limits) error {
	if meta == nil {
		return invalid("no metadata")
	}
	if h.Codec > CodecMixed {
		return invalid("unknown codec %v", h.Codec)
	}
	lim, err := lim.withDefaults()
	if err != nil {
		return err
	}
	if d.dec != nil && d.lim != lim {
		d.dec.Close()
		d.dec = nil
	}
	d.hdr, d.meta, d.lim = h, meta, lim
	return nil
}

// Close releases the zstd decoder.
func (d *BatchDecoder) Close() {
	if d.dec != nil {
		d.dec.Close()
		d.dec = nil
	}
}

// Batch is a decoded page batch. It aliases the decoder's buffers and the
// record's payload, and is valid until the next Decode (or the Reader's
// next Next).
type Batch struct {
	// Region is the id of the region the pages belong to.
	Region uint32
	// Sum is the xxhash64 of the batch's page table.
	Sum uint64
	// Codec is the codec of the batch's compressed pages: the one a
	// coded page batch record names, or the stream's for a page batch
	// record.
	Codec Codec

	region int // index in Metadata.Regions
	idx    []int
	gens   []uint32
	kinds  []PageKind
	bases  []uint64 // each page's base sum, zero but for delta pages
	data   [][]byte
	zero   int
	deltas int
}

// Page is one page of a batch.
type Page struct {
	// Index is the page's index in its region.
	Index int
	// Gen is the page's generation at the source.
	Gen uint32
	// Kind says how the page was sent. A delta page's kind has PageDelta
	// set: its Data is not the page but the XOR of the page with the
	// content the reader holds, nil if unchanged; Apply and
	// ParallelApply apply it (StoreDelta).
	Kind PageKind
	// Data is the page's bytes, nil for a zero page. It aliases the
	// batch's buffers.
	Data []byte
	// BaseSum is, for a delta page, the xxhash64 of the content the
	// sender knows the reader holds; zero otherwise.
	BaseSum uint64
}

// Len returns the number of pages of the batch.
func (b *Batch) Len() int { return len(b.idx) }

// ZeroPages returns the number of zero pages of the batch (not counting
// unchanged delta pages).
func (b *Batch) ZeroPages() int { return b.zero }

// DeltaPages returns the number of delta pages of the batch, unchanged
// ones included.
func (b *Batch) DeltaPages() int { return b.deltas }

// Page returns page i of the batch, in increasing index order.
func (b *Batch) Page(i int) Page {
	return Page{Index: b.idx[i], Gen: b.gens[i], Kind: b.kinds[i], Data: b.data[i], BaseSum: b.bases[i]}
}

// Decode decodes the payload of rec, a page batch or coded page batch
// record. The record's type must be the one the stream's header calls for:
// RecordCodedBatch in a stream of codec s2 or mixed, where a page batch
// record is malformed; RecordPageBatch in the others, where a coded page
// batch record is unknown (ErrUnknownRecord), as it is to a reader of
// version 1.0. A coded batch's codec must be one the header allows
// (Codec.Allows), or the record is malformed. Errors are *Error values at
// the record's offset.
func (d *BatchDecoder) Decode(rec Record) (*Batch, error) {
	fail := func(err error, format string, args ...any) (*Batch, error) {
		return nil, newError(err, rec.Offset, int64(rec.Seq), format, args...)
	}
	b := &d.batch
	payload, hc := rec.Payload, d.hdr.Codec
	// A stream of codec none or zstd is a version 1.0 stream, which has
	// no coded page batch record: refused as a 1.0 reader refuses it.
	if isBatch, err := batchRecord(rec, d.hdr); err != nil {
		return nil, err
	} else if !isBatch {
		return fail(ErrInvalid, "not a page batch but %v", rec.Type)
	}
	switch {
	case rec.Type == RecordPageBatch:
		b.Codec = hc
	case len(payload) == 0:
		return fail(ErrMalformed, "coded page batch without its codec")
	default:
		b.Codec, payload = Codec(payload[0]), payload[1:]
		if !hc.Allows(b.Codec) {
			return fail(ErrMalformed, "batch of codec %v in a stream of codec %v", b.Codec, hc)
		}
	}
	p := newDecoder(payload)
	b.Region = p.uint32("region id")
	if !p.ok {
		return fail(ErrMalformed, "%s", p.why)
	}
	b.region = d.meta.region(b.Region)
	if b.region < 0 {
		return fail(ErrMalformed, "undeclared region %d", b.Region)
	}
	ri := d.meta.Regions[b.region]
	pages, ps := ri.Pages(), ri.PageSize
	n := p.uvarint("page count")
	switch {
	case !p.ok:
		return fail(ErrMalformed, "%s", p.why)
	case n == 0:
		return fail(ErrMalformed, "empty batch")
	case n > uint64(d.lim.MaxPagesPerRecord):
		return fail(ErrLimit, "%d pages in a batch, limit %d", n, d.lim.MaxPagesPerRecord)
	case n > uint64(pages):
		return fail(ErrLimit, "%d pages in a batch of a region of %d", n, pages)
	}
	// n is bounded by a limit now; the tables may be sized by it.
	b.idx, b.gens, b.kinds, b.bases, b.data = b.idx[:0], b.gens[:0], b.kinds[:0], b.bases[:0], b.data[:0]
	next := uint64(0) // smallest index the next page may have
	for i := uint64(0); i < n; i++ {
		v := p.uvarint("page index")
		if !p.ok {
			return fail(ErrMalformed, "%s", p.why)
		}
		if v >= uint64(pages)-next {
			return fail(ErrLimit, "page index past the %d pages of region %d", pages, b.Region)
		}
		next += v
		b.idx = append(b.idx, int(next))
		next++
	}
	kinds := p.bytes("page kinds", n)
	filtered := d.hdr.Filters
	var raw, cmp, shuf, zero, deltas int
	for _, k := range kinds {
		kind := PageKind(k)
		if kind.Delta() && filtered {
			deltas++
			kind &^= PageDelta
		}
		switch {
		case kind == PageRaw:
			raw++
		case kind == PageCompressed:
			cmp++
		case kind == PageShuffled && filtered:
			shuf++
		case kind == PageZero:
			if k == byte(PageZero) {
				zero++
			}
		default:
			return fail(ErrMalformed, "unknown page kind %d", k)
		}
		b.kinds = append(b.kinds, PageKind(k))
	}
	b.zero, b.deltas = zero, deltas
	if (raw+cmp+shuf)*ps > d.lim.MaxBatchBytes {
		return fail(ErrLimit, "batch of %d bytes, limit %d", (raw+cmp+shuf)*ps, d.lim.MaxBatchBytes)
	}
	for i := uint64(0); i < n; i++ {
		b.gens = append(b.gens, p.uint32("generation"))
	}
	for _, k := range b.kinds {
		var sum uint64
		if k.Delta() {
			sum = p.uint64("base sum")
		}
		b.bases = append(b.bases, sum)
	}
	if !p.ok {
		return fail(ErrMalformed, "%s", p.why)
	}
	b.Sum = xxhash.Sum64(payload[:p.off])
	frame := p.lenBytes("compressed frame", len(payload))
	var shufFrame []byte
	if filtered {
		shufFrame = p.lenBytes("shuffled frame", len(payload))
	}
	rawBytes := p.bytes("raw pages", uint64(raw*ps))
	p.end(false)
	switch {
	case !p.ok:
		return fail(ErrMalformed, "%s", p.why)
	case (cmp == 0) != (len(frame) == 0):
		return fail(ErrMalformed, "%d compressed pages with a frame of %d bytes", cmp, len(frame))
	case (shuf == 0) != (len(shufFrame) == 0):
		return fail(ErrMalformed, "%d shuffled pages with a frame of %d bytes", shuf, len(shufFrame))
	case cmp+shuf > 0 && b.Codec == CodecNone:
		return fail(ErrMalformed, "compressed pages in a batch of codec %v", b.Codec)
	}
	out, err := d.expandAt(rec, b.Codec, frame, cmp*ps, &d.scratch)
	if err != nil {
		return nil, err
	}
	var shufOut []byte
	if shuf > 0 {
		grouped, err := d.expandAt(rec, b.Codec, shufFrame, shuf*ps, &d.shufScratch)
		if err != nil {
			return nil, err
		}
		if cap(d.unshuf) < len(grouped) {
			d.unshuf = make([]byte, len(grouped))
		}
		shufOut = d.unshuf[:len(grouped)]
		unshuffle(shufOut, grouped)
	}
	for _, k := range b.kinds {
		var data []byte
		switch k.Storage() {
		case PageRaw:
			data, rawBytes = rawBytes[:ps:ps], rawBytes[ps:]
		case PageCompressed:
			data, out = out[:ps:ps], out[ps:]
		case PageShuffled:
			data, shufOut = shufOut[:ps:ps], shufOut[ps:]
		}
		b.data = append(b.data, data)
	}
	return b, nil
}

// expandAt expands a frame of size bytes into *buf as expand does, an
// error placed at rec; nothing for an empty frame.
func (d *BatchDecoder) expandAt(rec Record, c Codec, frame []byte, size int, buf *[]byte) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	out, err := d.expand(c, frame, size, buf)
	if err != nil {
		var e *Error
		errors.As(err, &e)
		e.Offset, e.Seq = rec.Offset, int64(rec.Seq)
		return nil, e
	}
	return out, nil
}
