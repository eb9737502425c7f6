package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cespare/xxhash/v2"
	"github.com/vgpusim/vgpusim/memory"
)

// RegionRef binds a region id of a stream to a memory.Region: the source
// a Writer reads, or the destination an Applier writes.
type RegionRef struct {
	// ID is the region's id in the stream.
	ID uint32
	// Region is the memory it stands for.
	Region *memory.Region
}

// Applier applies a stream to destination regions. The regions belong to
// the Applier from NewApplier until Commit: no VM may run on them. Each
// page is applied only after its record's check value (and
// authentication) verified. If the stream fails — a bad record, a
// truncation, a digest that does not match — or the caller aborts, every
// destination region is scrubbed: nothing of a failed stream is left
// behind. Commit succeeds only after the end-of-stream record has been
// read and verified, including the regions' content digests if the writer
// sent them.
//
// An Applier is not safe for concurrent use.
type Applier struct {
	rd      *Reader
	dst     []*memory.Region // by index in Metadata.Regions; nil until prepare gives them
	prepare Prepare          // gives dst at the first record that is not an attachment
	digests []RegionDigest   // computed from dst when the stream ended
	devices []DeviceState
	attachs []Attachment
	state   applierState
	err     error
	// digestWorkers hash each region at the end of the stream.
	digestWorkers int
	// page is scratch for a delta page's base.
	page []byte
}

type applierState uint8

const (
	applying applierState = iota
	verified
	committed
	failed
)

// succeeded reports whether the stream was applied whole and verified:
// what the applier's results and a commit wait for.
func (s applierState) succeeded() bool { return s == verified || s == committed }

// NewApplier returns an Applier of the stream rd, which must not have
// returned any record yet, into dst: exactly one destination for each
// region the metadata declares, with the declared page size, page count
// and seed. The destinations are scrubbed first, so that what they hold
// after Commit is exactly what the stream sent.
func NewApplier(rd *Reader, dst []RegionRef) (*Applier, error) { return newApplier(rd, dst, true) }

// NewContinuingApplier is NewApplier for a stream that continues another
// into the same regions: they are not scrubbed, and keep what the first
// stream left in them beside what this one sends. A post-copy migration's
// pages follow so, in a stream of their own, the one that carried the
// device states. Abort still scrubs them.
func NewContinuingApplier(rd *Reader, dst []RegionRef) (*Applier, error) {
	return newApplier(rd, dst, false)
}

func newApplier(rd *Reader, dst []RegionRef, scrub bool) (*Applier, error) {
	if rd.err != nil {
		return nil, rd.err
	}
	if rd.cur != 0 || rd.done {
		return nil, newError(ErrState, rd.Offset(), -1, "reader has already returned records")
	}
	regs, err := bindRegions(rd.Metadata(), dst, scrub)
	if err != nil {
		return nil, err
	}
	return &Applier{rd: rd, dst: regs}, nil
}

// Prepare gives the destination regions of a stream, once its metadata
// and the attachments at its start have been read: what a suspended VM's
// resume needs to know before it can make the VM whose memory the stream
// fills. The attachments are copies the function may keep.
type Prepare func(meta Metadata, attachments []Attachment) ([]RegionRef, error)

// NewPreparedApplier returns an Applier of the stream rd, which must not
// have returned any record yet, whose destinations prepare gives when the
// first record that is not an attachment arrives (or the end of the
// stream): each as NewApplier takes them, scrubbed first. Such a stream
// carries its attachments first, each whole before that record, and none
// after it (ErrMalformed otherwise), so that prepare sees them all. An
// error from prepare fails the Applier with ErrInvalid, wrapping it; so
// do destinations that do not match the metadata.
func NewPreparedApplier(rd *Reader, prepare Prepare) (*Applier, error) {
	if rd.err != nil {
		return nil, rd.err
	}
	if rd.cur != 0 || rd.done {
		return nil, newError(ErrState, rd.Offset(), -1, "reader has already returned records")
	}
	if prepare == nil {
		return nil, invalid("nil prepare")
	}
	return &Applier{rd: rd, prepare: prepare}, nil
}

// bind asks prepare for the destinations, once every attachment before
// the first other record has come whole.
func (a *Applier) bind() error {
	if name, ok := a.rd.tally.attached.incomplete(); ok {
		return newError(ErrMalformed, a.rd.Offset(), -1, "attachment %s incomplete at the first record that is not one", quoteShort(name))
	}
	meta := *a.rd.Metadata()
	meta.Profiles = slices.Clone(meta.Profiles)
	meta.Regions = slices.Clone(meta.Regions)
	var atts []Attachment
	for _, at := range a.attachs {
		atts = append(atts, Attachment{Name: at.Name, Data: slices.Clone(at.Data)})
	}
	dst, err := a.prepare(meta, atts)
	if err != nil {
		e := invalid("preparing the destination")
		e.Offset = a.rd.Offset()
		return e.withCause(err)
	}
	regs, err := bindRegions(a.rd.Metadata(), dst, true)
	if err != nil {
		return err
	}
	a.dst = regs
	return nil
}

// attach adds an attachment part, which the reader checked comes in order.
func (a *Applier) attach(p AttachmentPart) {
	if p.Offset == 0 {
		a.attachs = append(a.attachs, Attachment{Name: p.Name, Data: []byte{}})
	}
	for i := len(a.attachs) - 1; i >= 0; i-- {
		if a.attachs[i].Name == p.Name {
			a.attachs[i].Data = append(a.attachs[i].Data, p.Data...)
			return
		}
	}
}

// bindRegions returns the destination of each region meta declares, by
// index, after checking that dst names exactly one for each, with the
// declared page size, page count and seed; if scrub, it scrubs them, so
// that what they hold after the stream is exactly what the stream sent.
func bindRegions(meta *Metadata, dst []RegionRef, scrub bool) ([]*memory.Region, error) {
	regs := make([]*memory.Region, len(meta.Regions))
	for _, d := range dst {
		i := meta.region(d.ID)
		if i < 0 {
			return nil, invalid("destination for undeclared region %d", d.ID)
		}
		if regs[i] != nil {
			return nil, invalid("two destinations for region %d", d.ID)
		}
		ri, r := meta.Regions[i], d.Region
		if r == nil || r.PageSize() != ri.PageSize || r.Pages() != ri.Pages() || r.Seed() != ri.Seed {
			return nil, invalid("destination for region %d does not match its declaration (%d pages of %d bytes, seed %#x)",
				d.ID, ri.Pages(), ri.PageSize, ri.Seed)
		}
		regs[i] = r
	}
	for i, r := range regs {
		if r == nil {
			return nil, invalid("no destination for region %d", meta.Regions[i].ID)
		}
	}
	for _, r := range regs {
		if !scrub {
			break
		}
		if err := r.Scrub(); err != nil {
			return nil, invalid("destination").withCause(err)
		}
	}
	return regs, nil
}

// Step reads and applies the next record and returns its type; after the
// end of the stream it returns io.EOF. A migration's destination calls it
// until RecordEndRound to apply one round as it arrives.
func (a *Applier) Step() (RecordType, error) {
	switch a.state {
	case failed:
		return 0, a.err
	case verified, committed:
		return 0, io.EOF
	}
	t, err := a.rd.Next()
	if err != nil {
		return 0, a.fail(err)
	}
	if a.dst == nil && t != RecordAttachment {
		if err := a.bind(); err != nil {
			return 0, a.fail(err)
		}
	}
	switch t {
	case RecordAttachment:
		if a.prepare != nil && a.dst != nil {
			// What prepare was given must be all there is.
			return 0, a.fail(newError(ErrMalformed, a.rd.Offset(), -1, "attachment after the first record that is not one"))
		}
		a.attach(a.rd.AttachmentPart())
	case RecordPageRuns:
		pr := a.rd.PageRuns()
		if err := a.dst[a.rd.Metadata().region(pr.Region)].StoreRuns(pr.Runs); err != nil {
			return 0, a.fail(newError(ErrState, a.rd.Offset(), -1, "destination region %d", pr.Region).withCause(err))
		}
	case RecordPageBatch:
		b := a.rd.Batch()
		if err := storeBatch(b, a.dst[b.region], &a.page); err != nil {
			return 0, a.fail(storeError(err, a.rd.Offset(), -1, b.Region))
		}
	case RecordDeviceState:
		ds := a.rd.DeviceState()
		ds.Data = append([]byte(nil), ds.Data...)
		a.devices = append(a.devices, ds)
	case RecordEndStream:
		if err := a.verifyDigests(); err != nil {
			return 0, a.fail(err)
		}
		a.state = verified
	}
	return t, nil
}

// SetDigestWorkers sets how many goroutines hash each destination region
// when the end of the stream is verified (memory.Region.DigestParallel).
// The default, 1, hashes on the caller's goroutine; a live migration's
// destination, whose VM is stopped until the check passes, uses more.
func (a *Applier) SetDigestWorkers(n int) { a.digestWorkers = n }

func (a *Applier) verifyDigests() error {
	var err error
	a.digests, err = verifyRegionDigests(a.rd.Metadata(), a.dst, a.rd.StreamEnd().RegionDigests, a.digestWorkers, a.rd.Offset())
	return err
}

// verifyRegionDigests hashes the destination of each region the stream
// sent a digest of, and compares; it returns the digests it computed, in
// the stream's order. off is the stream's offset, for the errors.
func verifyRegionDigests(meta *Metadata, dst []*memory.Region, sent []RegionDigest, workers int, off int64) ([]RegionDigest, error) {
	var got []RegionDigest
	for _, d := range sent {
		sum, err := dst[meta.region(d.Region)].DigestParallel(workers)
		if err != nil {
			return nil, newError(ErrState, off, -1, "destination region %d", d.Region).withCause(err)
		}
		got = append(got, RegionDigest{Region: d.Region, Digest: sum})
		if sum != d.Digest {
			return nil, newError(ErrChecksum, off, -1, "region %d content digest computed %#016x, stream says %#016x", d.Region, sum, d.Digest)
		}
	}
	return got, nil
}

// Run applies records until the end of the stream has been verified.
func (a *Applier) Run() error {
	for {
		if _, err := a.Step(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// Commit hands the destination regions back to the caller, to run the VM
// on. It fails with ErrState unless the end of the stream was verified.
func (a *Applier) Commit() error {
	switch a.state {
	case verified:
		a.state = committed
		return nil
	case committed:
		return nil
	case failed:
		return newError(ErrState, a.rd.Offset(), -1, "stream failed").withCause(a.err)
	}
	return newError(ErrState, a.rd.Offset(), -1, "end of stream not verified")
}

// Abort gives up the stream: the destination regions are scrubbed. It does
// nothing after Commit, and is harmless after a failure.
func (a *Applier) Abort() {
	if a.state != committed && a.state != failed {
		a.fail(newError(ErrState, a.rd.Offset(), -1, "aborted"))
	}
}

// RegionDigests returns the digests of the destination's regions, hashed
// from their contents when the end of the stream was verified — not
// copied from the stream — in the stream's order; nil before then or
// after a failure.
func (a *Applier) RegionDigests() []RegionDigest {
	if !a.state.succeeded() {
		return nil
	}
	return append([]RegionDigest(nil), a.digests...)
}

// Err returns the error that stopped the Applier, if any.
func (a *Applier) Err() error { return a.err }

// DeviceStates returns the device states the stream carried, in stream
// order, once the end of the stream has been verified; before that, or
// after a failure, it returns nil. The blobs are copies the caller owns.
func (a *Applier) DeviceStates() []DeviceState {
	if !a.state.succeeded() {
		return nil
	}
	return a.devices
}

// Attachments returns the attachments the stream carried, in stream
// order, once the end of the stream has been verified; before that, or
// after a failure, it returns nil. The slice is the caller's; the bytes
// are shared with later calls.
func (a *Applier) Attachments() []Attachment {
	if !a.state.succeeded() {
		return nil
	}
	return slices.Clone(a.attachs)
}

// fail scrubs every destination and makes err sticky.
func (a *Applier) fail(err error) error {
	if a.state == failed {
		return a.err
	}
	a.state, a.err, a.devices, a.attachs = failed, err, nil, nil
	for _, r := range a.dst {
		// A region unmapped under us has nothing left to scrub.
		_ = r.Scrub()
	}
	return err
}

// storeBatch stores the pages of b into r, the destination of its region;
// *page is scratch for a delta page's base, grown if need be.
func storeBatch(b *Batch, r *memory.Region, page *[]byte) error {
	for i := range b.Len() {
		p := b.Page(i)
		var err error
		switch {
		case p.Kind.Delta():
			err = StoreDelta(r, p, page)
		case p.Kind == PageZero:
			err = r.StoreGenerated(p.Index, memory.ClassZero, p.Gen)
		default:
			err = r.StorePage(p.Index, p.Data, p.Gen)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// StoreDelta stores delta page p into r: it reads the page r holds, checks
// it against the base the sender XORed with, applies the XOR and stores
// the result at p's generation. *page is scratch of r's page size, grown
// if need be. Apply and ParallelApply call it for every delta page; a
// caller storing a Reader's batches itself must too. Its errors are not
// *Error values, which carry a stream offset it does not know: one that
// wraps ErrDeltaBase says the page held is not the delta's base (the page
// is left as it was), any other is r's (memory's sentinels) or ErrInvalid
// for a page that is no delta.
func StoreDelta(r *memory.Region, p Page, page *[]byte) error {
	if !p.Kind.Delta() {
		return invalid("page %d of kind %v is no delta", p.Index, p.Kind)
	}
	if cap(*page) < r.PageSize() {
		*page = make([]byte, r.PageSize())
	}
	held := (*page)[:r.PageSize()]
	if _, err := r.ReadPage(p.Index, held); err != nil {
		return err
	}
	if sum := xxhash.Sum64(held); sum != p.BaseSum {
		return &deltaBaseError{page: p.Index, held: sum, base: p.BaseSum}
	}
	if p.Data != nil {
		if len(p.Data) != len(held) {
			return invalid("delta of %d bytes for a page of %d", len(p.Data), len(held))
		}
		xorInPlace(held, p.Data)
	}
	return r.StorePage(p.Index, held, p.Gen)
}

// deltaBaseError is StoreDelta's error for a page whose content is not the
// delta's base.
type deltaBaseError struct {
	page       int
	held, base uint64
}

func (e *deltaBaseError) Error() string {
	return fmt.Sprintf("%v: %s", ErrDeltaBase, e.detail())
}

func (e *deltaBaseError) detail() string {
	return fmt.Sprintf("page %d holds content of sum %#016x, the delta's base is %#016x", e.page, e.held, e.base)
}

func (e *deltaBaseError) Unwrap() error { return ErrDeltaBase }

// storeError is the error of a batch that storeBatch could not store at
// offset off of record seq: ErrDeltaBase for a delta whose base is not
// what the destination holds, ErrState for the destination's own failure.
func storeError(err error, off, seq int64, region uint32) *Error {
	if de, ok := errors.AsType[*deltaBaseError](err); ok {
		return newError(ErrDeltaBase, off, seq, "destination region %d, %s", region, de.detail())
	}
	return newError(ErrState, off, seq, "destination region %d", region).withCause(err)
}
