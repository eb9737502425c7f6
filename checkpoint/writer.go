package checkpoint

import (
	"io"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/vgpusim/vgpusim/memory"
)

// Writer writes a whole stream: the header and metadata, then rounds of
// page batches and device states, each closed by EndRound, then the
// end-of-stream record. It batches the pages it is given with one
// BatchEncoder and writes the records with one RecordWriter; a parallel
// copy engine runs its own encoders and hands the batches to WriteBatch.
//
// Errors from the io.Writer are sticky. A Writer is not safe for
// concurrent use.
type Writer struct {
	rw    *RecordWriter
	enc   *BatchEncoder
	level Level // of the batches begun from now on
	meta  Metadata
	opts  WriterOptions
	tally tally
	buf   []byte         // payloads of the small records
	used  memory.PageSet // WriteRegion's pages in use, reused
	state writerState
}

type writerState uint8

const (
	writerOpen writerState = iota
	writerClosed
)

// NewWriter writes the header and the metadata record of a stream to w.
// meta is copied.
func NewWriter(w io.Writer, meta Metadata, opts WriterOptions) (*Writer, error) {
	wr := &Writer{}
	if err := wr.Reset(w, meta, opts); err != nil {
		return nil, err
	}
	return wr, nil
}

// Reset starts a new stream on w, keeping the Writer's buffers and its
// zstd encoders.
func (w *Writer) Reset(dst io.Writer, meta Metadata, opts WriterOptions) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if why := meta.validate(ceilingRegions); why != "" {
		return invalid("metadata: %s", why)
	}
	meta.Profiles = append([]string(nil), meta.Profiles...)
	meta.Regions = append([]RegionInfo(nil), meta.Regions...)
	if w.enc == nil {
		if w.enc, err = NewBatchEncoder(opts.Level); err != nil {
			return err
		}
	} else if err := w.enc.SetLevel(opts.Level); err != nil { // forgets a pending batch
		return err
	}
	w.enc.SetFilters(PageFilters{Shuffle: opts.Filters})
	if w.rw == nil {
		w.rw = &RecordWriter{}
	}
	if err := w.rw.reset(dst, opts); err != nil {
		return err
	}
	w.meta, w.opts, w.level, w.state = meta, opts, opts.Level, writerOpen
	w.tally.reset(len(meta.Profiles), len(meta.Regions))
	w.buf = appendMetadata(w.buf[:0], &w.meta)
	return w.rw.WriteRecord(RecordMetadata, w.buf)
}

// Offset returns the number of bytes written so far.
func (w *Writer) Offset() int64 { return w.rw.Offset() }

func (w *Writer) check() error {
	if err := w.rw.Err(); err != nil {
		return err
	}
	if w.state != writerOpen {
		return newError(ErrState, w.rw.Offset(), -1, "writer is closed")
	}
	return nil
}

func (w *Writer) invalid(format string, args ...any) error {
	e := invalid(format, args...)
	e.Offset = w.rw.Offset()
	return e
}

// regionInfo returns the declaration of region id.
func (w *Writer) regionInfo(id uint32) (RegionInfo, error) {
	i := w.meta.region(id)
	if i < 0 {
		return RegionInfo{}, w.invalid("undeclared region %d", id)
	}
	return w.meta.Regions[i], nil
}

// begin makes sure the pending batch can take page index of region id,
// flushing it first if it is full, of another region, or past index.
func (w *Writer) begin(id uint32, index int) (RegionInfo, error) {
	ri, err := w.regionInfo(id)
	if err != nil {
		return ri, err
	}
	if index < 0 || index >= ri.Pages() {
		return ri, w.invalid("page %d outside the %d pages of region %d", index, ri.Pages(), id)
	}
	e := w.enc
	if e.open && (e.Region() != id || index <= e.LastIndex() || e.Len() >= PagesPerBatch(w.opts.BatchBytes, ri.PageSize)) {
		if err := w.Flush(); err != nil {
			return ri, err
		}
	}
	if !e.open {
		if err := e.SetLevel(w.level); err != nil {
			return ri, err
		}
		if err := e.Begin(id, ri.PageSize); err != nil {
			return ri, err
		}
	}
	return ri, nil
}

// SetLevel sets the level of the batches begun after it; the pending
// batch, if any, keeps its own. The stream's header must allow the
// level's codec (Codec.Allows): a mixed stream allows every level, every
// stream allows LevelNone, and a stream of codec zstd or s2 allows its own
// codec's levels.
func (w *Writer) SetLevel(l Level) error {
	if err := w.check(); err != nil {
		return err
	}
	if h := w.rw.Header(); !h.Codec.Allows(l.Codec()) {
		return w.invalid("level %v (codec %v) in a stream of codec %v", l, l.Codec(), h.Codec)
	}
	w.level = l
	return nil
}

// WritePage adds page index of region id, at generation gen, to the
// pending batch; data is copied. The batch is written when it is full, or
// when a page of another region or a lower index comes.
func (w *Writer) WritePage(id uint32, index int, gen uint32, data []byte) error {
	if err := w.check(); err != nil {
		return err
	}
	if _, err := w.begin(id, index); err != nil {
		return err
	}
	return w.enc.Add(index, gen, data)
}

// source returns the declaration of region id, after checking that src,
// whose pages are to be written as it, has as many pages of its size.
func (w *Writer) source(id uint32, src *memory.Region) (RegionInfo, error) {
	ri, err := w.regionInfo(id)
	if err != nil {
		return ri, err
	}
	if src.PageSize() != ri.PageSize || src.Pages() != ri.Pages() {
		return ri, w.invalid("region %d has %d pages of %d bytes, declared %d of %d",
			id, src.Pages(), src.PageSize(), ri.Pages(), ri.PageSize)
	}
	return ri, nil
}

// WriteRegion writes pages of src as region id: the pages in set, or, if
// set is nil, every page that is not in its initial state (zero at
// generation 0). src must match the region's declaration.
func (w *Writer) WriteRegion(id uint32, src *memory.Region, set *memory.PageSet) error {
	if err := w.check(); err != nil {
		return err
	}
	if _, err := w.source(id, src); err != nil {
		return err
	}
	if set == nil {
		if err := src.UsedPages(&w.used); err != nil {
			return err
		}
		set = &w.used
	}
	for p := set.Next(0); p >= 0; p = set.Next(p + 1) {
		if _, err := w.begin(id, p); err != nil {
			return err
		}
		if err := w.enc.AddFrom(src, p); err != nil {
			return err
		}
	}
	return nil
}

// Flush writes the pending batch, if any.
func (w *Writer) Flush() error {
	if err := w.check(); err != nil {
		return err
	}
	if !w.enc.open || w.enc.Len() == 0 {
		w.enc.open = false
		return nil
	}
	b, err := w.enc.Finish()
	if err != nil {
		return err
	}
	return w.writeBatch(b)
}

// WriteBatch writes a batch encoded elsewhere (by a worker's
// BatchEncoder), after flushing the pending one. The batch's region must
// be declared, and its codec allowed by the stream's header
// (RecordWriter.WriteBatch); its pages were checked against the
// declaration by whoever encoded it, and are checked again by the reader.
func (w *Writer) WriteBatch(b EncodedBatch) error {
	if err := w.Flush(); err != nil {
		return err
	}
	if _, err := w.regionInfo(b.Region); err != nil {
		return err
	}
	return w.writeBatch(b)
}

func (w *Writer) writeBatch(b EncodedBatch) error {
	if err := w.rw.WriteBatch(b); err != nil {
		return err
	}
	w.tally.add(b.Sum, b.Pages, b.ZeroPages)
	return nil
}

// WriteDeviceState writes the state of one vGPU, after flushing the
// pending batch. A stream carries at most one state per device.
func (w *Writer) WriteDeviceState(ds DeviceState) error {
	if err := w.Flush(); err != nil {
		return err
	}
	if int(ds.Device) >= len(w.meta.Profiles) || w.tally.deviceSeen[ds.Device] {
		return w.invalid("device %d: not declared, or its state already written", ds.Device)
	}
	w.buf = appendDeviceState(w.buf[:0], &ds)
	if err := w.rw.WriteRecord(RecordDeviceState, w.buf); err != nil {
		return err
	}
	w.tally.addDevice(ds.Device, xxhashSum(w.buf))
	return nil
}

// EndRound flushes the pending batch and closes the round, returning what
// it sent.
func (w *Writer) EndRound() (RoundEnd, error) {
	if err := w.Flush(); err != nil {
		return RoundEnd{}, err
	}
	r := w.tally.endRound()
	w.buf = appendRoundEnd(w.buf[:0], &r)
	return r, w.rw.WriteRecord(RecordEndRound, w.buf)
}

// Close flushes the pending batch and writes the end-of-stream record.
// Records after the last EndRound count in the stream's totals but in no
// round. Closing does not close the io.Writer.
func (w *Writer) Close() error { return w.CloseWithDigests(nil) }

// CloseWithDigests is Close with the regions' content digests
// (memory.Region.Digest, taken when they could no longer change), which
// an Applier checks after applying the whole stream.
func (w *Writer) CloseWithDigests(digests []RegionDigest) error {
	if err := w.Flush(); err != nil {
		return err
	}
	for i, d := range digests {
		if w.meta.region(d.Region) < 0 {
			return w.invalid("digest of undeclared region %d", d.Region)
		}
		for _, o := range digests[:i] {
			if o.Region == d.Region {
				return w.invalid("two digests of region %d", d.Region)
			}
		}
	}
	s := w.tally.end()
	s.RegionDigests = digests
	w.buf = appendStreamEnd(w.buf[:0], &s)
	if err := w.rw.WriteRecord(RecordEndStream, w.buf); err != nil {
		return err
	}
	w.state = writerClosed
	return nil
}

// Release frees the zstd encoders. The Writer must not be used after.
func (w *Writer) Release() error { return w.enc.Close() }

// snapshotOnly refuses the records of version 1.2 in a stream that did
// not declare them.
func (w *Writer) snapshotOnly(what string) error {
	if err := w.check(); err != nil {
		return err
	}
	if !w.opts.Snapshot {
		return w.invalid("%s in a stream not declared a snapshot (WriterOptions.Snapshot)", what)
	}
	return w.Flush()
}

// WriteAttachment writes a, in parts of at most a megabyte, after
// flushing the pending batch. The stream must be declared a snapshot
// (WriterOptions.Snapshot); names are unique in a stream.
func (w *Writer) WriteAttachment(a Attachment) error {
	if err := w.snapshotOnly("attachment"); err != nil {
		return err
	}
	if len(a.Name) > MaxNameBytes || !utf8.ValidString(a.Name) {
		return w.invalid("attachment name %s is not UTF-8 of at most %d bytes", quoteShort(a.Name), MaxNameBytes)
	}
	if slices.Contains(w.tally.attached.names, a.Name) {
		return w.invalid("attachment %s written twice", quoteShort(a.Name))
	}
	for off := 0; off == 0 || off < len(a.Data); {
		n := min(len(a.Data)-off, attachmentPartBytes)
		p := AttachmentPart{Name: a.Name, TotalBytes: int64(len(a.Data)), Offset: int64(off), Data: a.Data[off : off+n]}
		if why, _ := w.tally.attached.add(&p, math.MaxInt64); why != "" {
			return w.invalid("%s", why)
		}
		w.buf = appendAttachmentPart(w.buf[:0], &p)
		if err := w.rw.WriteRecord(RecordAttachment, w.buf); err != nil {
			return err
		}
		w.tally.add(xxhashSum(w.buf), 0, 0)
		if off += n; n == 0 {
			break
		}
	}
	return nil
}

// WriteRuns writes runs of pages of region id as one page runs record,
// after flushing the pending batch. The runs are in increasing page
// order, none overlapping, none of class memory.ClassExplicit, at most
// the reader's MaxPagesPerRecord of them (65536 by default). The stream
// must be declared a snapshot.
func (w *Writer) WriteRuns(id uint32, runs []memory.Run) error {
	if err := w.snapshotOnly("page runs"); err != nil {
		return err
	}
	ri, err := w.regionInfo(id)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return nil
	}
	if why := checkRuns(runs, ri.Pages()); why != "" {
		return w.invalid("region %d: %s", id, why)
	}
	pr := PageRuns{Runs: runs}
	pages, zero := pr.Pages()
	if i := w.meta.region(id); !w.tally.addRuns(i, pages, ri.Pages()) {
		w.tally.runPages[i] -= int64(pages)
		return w.invalid("page runs cover more pages of region %d than it has", id)
	}
	w.buf = appendPageRuns(w.buf[:0], id, runs)
	if err := w.rw.WriteRecord(RecordPageRuns, w.buf); err != nil {
		return err
	}
	w.tally.add(xxhashSum(w.buf), pages, zero)
	return nil
}

// runsSegmentPages is the pages of src WriteRegionRuns reads at a time:
// a segment gives at most as many runs, within a reader's default
// MaxPagesPerRecord, and a few megabytes of them at most.
const runsSegmentPages = 1 << 16

// WriteRegionRuns writes src as region id in compact form: its generated
// content as page runs (memory.Region.AppendRuns), a record for each
// 65536 pages that hold any, and its pages holding bytes of their own as
// page batches. Pages in their initial state (zero at generation 0) are
// not sent. The stream must be declared a snapshot; src must match the
// region's declaration and not change while it is written.
func (w *Writer) WriteRegionRuns(id uint32, src *memory.Region) error {
	if err := w.snapshotOnly("page runs"); err != nil {
		return err
	}
	ri, err := w.source(id, src)
	if err != nil {
		return err
	}
	if src.Seed() != ri.Seed {
		// Runs are regenerated with the declared seed.
		return w.invalid("region %d has seed %#x, declared %#x", id, src.Seed(), ri.Seed)
	}
	w.used.Reset(src.Pages())
	var runs, sent []memory.Run
	for first := 0; first < src.Pages(); first += runsSegmentPages {
		if runs, err = src.AppendRuns(runs[:0], first, min(runsSegmentPages, src.Pages()-first)); err != nil {
			return err
		}
		sent = sent[:0]
		for _, r := range runs {
			switch {
			case r.Mix.Parts == nil && r.Class == memory.ClassExplicit:
				for q := r.First; q < r.First+r.Pages; q++ {
					w.used.Add(q)
				}
			case r.Mix.Parts != nil || r.Class != memory.ClassZero || r.Gen != 0:
				sent = append(sent, r)
			}
		}
		if err := w.WriteRuns(id, sent); err != nil {
			return err
		}
	}
	if w.used.Len() == 0 {
		return nil
	}
	// WriteRegion reads w.used only when given no set.
	return w.WriteRegion(id, src, &w.used)
}
