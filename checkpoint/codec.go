package checkpoint

import (
	"errors"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// The codecs' side of batches: a batch encoder compresses its pages into
// one zstd frame or one S2 block, and a batch decoder checks what a frame
// or block declares against the batch and the limits before it expands it
// into a buffer capped at the batch's declared size.

// encoderWindowBytes is how far back a batch encoder looks for matches.
// Frames are single-segment: they always declare their content size, and
// a decoder needs no window beyond the batch it decodes into.
const encoderWindowBytes = 1 << 20

// newZstdEncoder returns a zstd encoder of a zstd level.
func newZstdEncoder(level Level) (*zstd.Encoder, error) {
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
	return enc, nil
}

// compress appends to dst the compressed frame of src, the pages to
// compress, at the encoder's level: nothing if src is empty, else a zstd
// frame or an S2 block. dst is grown first to the codec's worst case, so
// that the codec never reallocates it.
func (e *BatchEncoder) compress(dst, src []byte) []byte {
	if len(src) == 0 {
		return dst
	}
	if e.level == LevelS2 {
		// S2's block format: the uvarint of the decoded length, then
		// the block. No CRC: the record's check value covers the
		// block (FORMAT.md).
		dst = slices.Grow(dst, s2.MaxEncodedLen(len(src)))
		block := s2.Encode(dst[len(dst):cap(dst)], src)
		return dst[:len(dst)+len(block)]
	}
	// zstd's worst case: raw blocks, a few bytes a 128 KiB block.
	dst = slices.Grow(dst, len(src)+len(src)>>10+64)
	return e.zstds[e.level].EncodeAll(src, dst)
}

// decoder returns the batch decoder's zstd decoder, made when first
// needed.
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

// expand decodes frame, the compressed frame of a batch of codec c, which
// must hold exactly size bytes of pages, into *buf, grown if need be.
func (d *BatchDecoder) expand(c Codec, frame []byte, size int, buf *[]byte) ([]byte, error) {
	if c == CodecS2 {
		return d.decompressS2(frame, size, buf)
	}
	return d.decompress(frame, size, buf)
}

// decompressS2 decodes block, an S2 block that must hold exactly size
// bytes, into *buf. The length the block declares
// is checked first: s2.Decode allocates a buffer of that length when the
// one it is given is smaller, so a block that lies must be refused before
// it is called. It is then given a buffer capped at size, which it fills
// and does not pass (TestS2DecodeStaysInPlace).
func (d *BatchDecoder) decompressS2(block []byte, size int, buf *[]byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	switch {
	case err != nil:
		return nil, newError(ErrMalformed, 0, -1, "bad s2 block header").withCause(err)
	case n > d.lim.MaxBatchBytes:
		return nil, newError(ErrLimit, 0, -1, "s2 block of %d bytes, limit %d", n, d.lim.MaxBatchBytes)
	case n != size:
		return nil, newError(ErrMalformed, 0, -1, "s2 block of %d bytes for %d bytes of pages", n, size)
	}
	if cap(*buf) < size {
		// The slack is zstd's, should a later batch of the stream be
		// zstd's; S2 does not use it.
		*buf = make([]byte, size+zstdSlackBytes)
	}
	dst := (*buf)[:0:size]
	out, err := s2.Decode(dst, block)
	switch {
	case err != nil:
		return nil, newError(ErrMalformed, 0, -1, "s2 block").withCause(err)
	case len(out) != size || &out[0] != &(*buf)[0]:
		// s2.Decode checked the length it decoded against the one the
		// block declares, and decoded in place; this is defence.
		return nil, newError(ErrMalformed, 0, -1, "s2 block decodes to %d bytes, want %d", len(out), size)
	}
	return out, nil
}

// zstdSlackBytes is the spare capacity zstd wants past a frame's output to
// copy matches in whole words (its compressedBlockOverAlloc, 16 bytes, with
// room to spare).
const zstdSlackBytes = 64

// decompress decodes frame, which must hold exactly size bytes, into
// *buf. The frame header is checked first, so that a
// frame declaring too much is refused before any memory is set aside.
func (d *BatchDecoder) decompress(frame []byte, size int, buf *[]byte) ([]byte, error) {
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
	if cap(*buf) < size+zstdSlackBytes {
		*buf = make([]byte, size+zstdSlackBytes)
	}
	out, err := dec.DecodeAll(frame, (*buf)[:0:size+zstdSlackBytes])
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
