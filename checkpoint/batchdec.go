package checkpoint

import (
	"errors"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
)

// BatchDecoder decodes the payloads of page batch records of one stream.
// It checks every field against the stream's metadata and the reader's
// limits before it allocates or decompresses anything, and its buffers
// and zstd decoder are reused from batch to batch.
//
// A BatchDecoder is meant to be owned by one goroutine; a parallel
// decoder gives each worker its own. It is not safe for concurrent use.
type BatchDecoder struct {
	hdr     Header
	meta    *Metadata
	lim     Limits
	dec     *zstd.Decoder
	scratch []byte
	batch   Batch
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

func (d *BatchDecoder) decoder() (*zstd.Decoder, error) {
	if d.dec != nil {
		return d.dec, nil
	}
	// Every limit is set explicitly: the zstd defaults (64 GiB of
	// memory, a 512 MiB window, up to four goroutines) are for trusted
	// input. The cap limit makes DecodeAll stop at the capacity of the
	// buffer it is given, the batch's declared size and a little slack. A
	// single-segment frame's window is its content, already bounded by
	// MaxBatchBytes; decompress checks other frames' windows against
	// MaxWindowBytes before zstd sees them.
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(uint64(d.lim.MaxBatchBytes)),
		zstd.WithDecoderMaxWindow(uint64(max(d.lim.MaxWindowBytes, d.lim.MaxBatchBytes))),
		zstd.WithDecodeAllCapLimit(true),
	)
	if err != nil {
		return nil, invalid("zstd: %v", err)
	}
	d.dec = dec
	return dec, nil
}

// Batch is a decoded page batch. It aliases the decoder's buffers and the
// record's payload, and is valid until the next Decode (or the Reader's
// next Next).
type Batch struct {
	// Region is the id of the region the pages belong to.
	Region uint32
	// Sum is the xxhash64 of the batch's page table.
	Sum uint64

	region int // index in Metadata.Regions
	idx    []int
	gens   []uint32
	kinds  []PageKind
	data   [][]byte
	zero   int
}

// Page is one page of a batch.
type Page struct {
	// Index is the page's index in its region.
	Index int
	// Gen is the page's generation at the source.
	Gen uint32
	// Kind says how the page was sent.
	Kind PageKind
	// Data is the page's bytes, nil for a zero page. It aliases the
	// batch's buffers.
	Data []byte
}

// Len returns the number of pages of the batch.
func (b *Batch) Len() int { return len(b.idx) }

// ZeroPages returns the number of zero pages of the batch.
func (b *Batch) ZeroPages() int { return b.zero }

// Page returns page i of the batch, in increasing index order.
func (b *Batch) Page(i int) Page {
	return Page{Index: b.idx[i], Gen: b.gens[i], Kind: b.kinds[i], Data: b.data[i]}
}

// Decode decodes the payload of page batch record rec. Errors are *Error
// values at the record's offset.
func (d *BatchDecoder) Decode(rec Record) (*Batch, error) {
	fail := func(err error, format string, args ...any) (*Batch, error) {
		return nil, newError(err, rec.Offset, int64(rec.Seq), format, args...)
	}
	if rec.Type != RecordPageBatch {
		return fail(ErrInvalid, "not a page batch but %v", rec.Type)
	}
	b := &d.batch
	p := newDecoder(rec.Payload)
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
	b.idx, b.gens, b.kinds, b.data = b.idx[:0], b.gens[:0], b.kinds[:0], b.data[:0]
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
	var raw, cmp int
	for _, k := range kinds {
		switch PageKind(k) {
		case PageRaw:
			raw++
		case PageZstd:
			cmp++
		case PageZero:
		default:
			return fail(ErrMalformed, "unknown page kind %d", k)
		}
		b.kinds = append(b.kinds, PageKind(k))
	}
	b.zero = int(n) - raw - cmp
	if (raw+cmp)*ps > d.lim.MaxBatchBytes {
		return fail(ErrLimit, "batch of %d bytes, limit %d", (raw+cmp)*ps, d.lim.MaxBatchBytes)
	}
	for i := uint64(0); i < n; i++ {
		b.gens = append(b.gens, p.uint32("generation"))
	}
	if !p.ok {
		return fail(ErrMalformed, "%s", p.why)
	}
	b.Sum = xxhash.Sum64(rec.Payload[:p.off])
	frame := p.lenBytes("zstd frame", len(rec.Payload))
	rawBytes := p.bytes("raw pages", uint64(raw*ps))
	p.end(false)
	switch {
	case !p.ok:
		return fail(ErrMalformed, "%s", p.why)
	case (cmp == 0) != (len(frame) == 0):
		return fail(ErrMalformed, "%d compressed pages with a frame of %d bytes", cmp, len(frame))
	case cmp > 0 && d.hdr.Codec != CodecZstd:
		return fail(ErrMalformed, "compressed pages in a stream with codec %v", d.hdr.Codec)
	}
	var out []byte
	if cmp > 0 {
		var err error
		if out, err = d.decompress(frame, cmp*ps); err != nil {
			var e *Error
			errors.As(err, &e)
			e.Offset, e.Seq = rec.Offset, int64(rec.Seq)
			return nil, e
		}
	}
	for _, k := range b.kinds {
		var data []byte
		switch k {
		case PageRaw:
			data, rawBytes = rawBytes[:ps:ps], rawBytes[ps:]
		case PageZstd:
			data, out = out[:ps:ps], out[ps:]
		}
		b.data = append(b.data, data)
	}
	return b, nil
}

// zstdSlackBytes is the spare capacity zstd wants past a frame's output to
// copy matches in whole words (its compressedBlockOverAlloc, 16 bytes, with
// room to spare).
const zstdSlackBytes = 64

// decompress decodes frame, which must hold exactly size bytes, into the
// decoder's scratch buffer. The frame header is checked first, so that a
// frame declaring too much is refused before any memory is set aside.
func (d *BatchDecoder) decompress(frame []byte, size int) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(frame); err != nil || h.Skippable {
		return nil, newError(ErrMalformed, 0, -1, "bad zstd frame header")
	}
	switch {
	case !h.HasFCS:
		return nil, newError(ErrMalformed, 0, -1, "zstd frame does not declare its size")
	case h.FrameContentSize > uint64(d.lim.MaxBatchBytes):
		return nil, newError(ErrLimit, 0, -1, "zstd frame of %d bytes, limit %d", h.FrameContentSize, d.lim.MaxBatchBytes)
	case h.FrameContentSize != uint64(size):
		return nil, newError(ErrMalformed, 0, -1, "zstd frame of %d bytes for %d bytes of pages", h.FrameContentSize, size)
	case !h.SingleSegment && h.WindowSize > uint64(d.lim.MaxWindowBytes):
		return nil, newError(ErrLimit, 0, -1, "zstd window of %d bytes, limit %d", h.WindowSize, d.lim.MaxWindowBytes)
	}
	dec, err := d.decoder()
	if err != nil {
		return nil, err
	}
	// The buffer holds the declared size and zstdSlackBytes more. Without
	// the slack zstd decodes the last 128 KiB block of a frame with its
	// slower bounds-checked copies, which for a batch of a few compressible
	// pages is most of the frame. The slack is the decoder's own scratch:
	// no page view reaches into it, and output is still bounded — by the
	// frame's content size, which zstd enforces block by block and which
	// was checked above, and by DecodeAllCapLimit at the capacity — and
	// checked below to be exactly size bytes.
	if cap(d.scratch) < size+zstdSlackBytes {
		d.scratch = make([]byte, size+zstdSlackBytes)
	}
	out, err := dec.DecodeAll(frame, d.scratch[:0:size+zstdSlackBytes])
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded),
		errors.Is(err, zstd.ErrFrameSizeExceeded):
		return nil, newError(ErrLimit, 0, -1, "zstd frame expands past its declared size").withCause(err)
	case err != nil:
		return nil, newError(ErrMalformed, 0, -1, "zstd").withCause(err)
	case len(out) != size:
		return nil, newError(ErrMalformed, 0, -1, "zstd frame decodes to %d bytes, want %d", len(out), size)
	}
	return out, nil
}
