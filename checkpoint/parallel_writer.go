package checkpoint

import (
	"errors"
	"io"
)

// ParallelOut is one of the streams of a ParallelWriter: where it goes,
// and what sets it apart from the others.
type ParallelOut struct {
	// W receives the stream.
	W io.Writer
	// StreamID is the stream's id; no two streams of a migration should
	// share one.
	StreamID [StreamIDSize]byte
	// Key is the stream's key when the streams are encrypted: each
	// stream needs its own, since the nonces are the streams' sequence
	// numbers, which repeat from stream to stream.
	Key []byte
}

// ParallelWriter writes one VM's stream as several streams side by side,
// for a ParallelApplier to read (see parallel.go): page batches are dealt
// to the streams in turn, batch n to stream n mod K, so that the bytes of
// every stream depend only on the batches and their order; an end of
// round ends the round on every stream; the device states and the
// regions' digests go on stream 0. Each stream is a whole stream of this
// format, with its own header, metadata, check values and tally.
//
// A ParallelWriter is not safe for concurrent use; it writes to each
// stream's io.Writer on the caller's goroutine. A caller that wants the
// streams written in parallel deals the batches itself (Deal), in batch
// order, and writes each on its stream's own goroutine with
// Stream(i).WriteBatch; the streams' other records it writes once every
// batch dealt has been written.
type ParallelWriter struct {
	ws   []*Writer
	next int // the stream of the next batch
}

// NewParallelWriter writes the header and the metadata record of every
// stream of outs. opts applies to every stream, its StreamID and Key
// replaced by each out's.
func NewParallelWriter(meta Metadata, opts WriterOptions, outs []ParallelOut) (*ParallelWriter, error) {
	if len(outs) == 0 {
		return nil, invalid("no streams")
	}
	p := &ParallelWriter{}
	for _, o := range outs {
		so := opts
		so.StreamID, so.Key = o.StreamID, o.Key
		w, err := NewWriter(o.W, meta, so)
		if err != nil {
			_ = p.Release()
			return nil, err
		}
		p.ws = append(p.ws, w)
	}
	return p, nil
}

// Streams returns the number of streams.
func (p *ParallelWriter) Streams() int { return len(p.ws) }

// Stream returns the writer of stream i.
func (p *ParallelWriter) Stream(i int) *Writer { return p.ws[i] }

// Offset returns the bytes written to all the streams so far.
func (p *ParallelWriter) Offset() int64 {
	var n int64
	for _, w := range p.ws {
		n += w.Offset()
	}
	return n
}

// WriteBatch writes b to the next stream in turn: Stream(Deal()).
func (p *ParallelWriter) WriteBatch(b EncodedBatch) error {
	return p.ws[p.Deal()].WriteBatch(b)
}

// Deal returns the stream the next batch goes to, and moves on to the one
// after it.
func (p *ParallelWriter) Deal() int {
	i := p.next
	p.next = (p.next + 1) % len(p.ws)
	return i
}

// WriteDeviceState writes the state of one vGPU to stream 0.
func (p *ParallelWriter) WriteDeviceState(ds DeviceState) error {
	return p.ws[0].WriteDeviceState(ds)
}

// EndRound closes the round on every stream. The next round's first batch
// goes to stream 0, so that where a batch goes depends on its place in
// its round only.
func (p *ParallelWriter) EndRound() error {
	for _, w := range p.ws {
		if _, err := w.EndRound(); err != nil {
			return err
		}
	}
	p.next = 0
	return nil
}

// CloseWithDigests writes the end of every stream, the regions' content
// digests on stream 0's.
func (p *ParallelWriter) CloseWithDigests(digests []RegionDigest) error {
	for i, w := range p.ws {
		var d []RegionDigest
		if i == 0 {
			d = digests
		}
		if err := w.CloseWithDigests(d); err != nil {
			return err
		}
	}
	return nil
}

// Release frees the streams' encoders. The ParallelWriter must not be
// used after.
func (p *ParallelWriter) Release() error {
	var errs []error
	for _, w := range p.ws {
		errs = append(errs, w.Release())
	}
	return errors.Join(errs...)
}
