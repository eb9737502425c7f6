package migrate

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// transport moves a migration's pages and device states from the source's
// regions to the destination's, and says how many bytes that put on the
// wire. The byte transport really encodes, sends and applies a checkpoint
// stream; the model transport counts, and regenerates pages at the
// destination from their content class.
type transport interface {
	// send queues region i's pages: those in set, or, if set is nil, every
	// page not in its initial state.
	send(i int, set *memory.PageSet) (Traffic, error)
	// endRound closes a pre-copy round.
	endRound() error
	// finish queues the device states and the end of the stream.
	finish(states [][]byte) error
	// predictWire is the wire size counts pages of each generated class,
	// of ps bytes, would have if send sent them now.
	predictWire(counts *[memory.ClassExplicit]int64, ps int) (int64, error)
	// pending returns the wire bytes queued since the last markSent.
	pending() int64
	markSent()
	// total returns every wire byte queued so far.
	total() int64
	// deliver has the destination take in everything sent.
	deliver() error
	// states returns the device states the destination received, once
	// the whole stream has been delivered and verified.
	states() ([][]byte, error)
	// commit verifies the whole stream, delivered, for a stream that
	// carries no device state (post-copy's).
	commit() error
	// abort scrubs whatever the destination received.
	abort()
	// close frees the codecs; it is called once, at the end.
	close()
}

// streamMetadata declares the migration's regions.
func streamMetadata(m *Migration) checkpoint.Metadata { return m.src.Metadata() }

// writerOptions are the options of m's stream: the first, or, if
// continued, the post-copy stream that follows it.
func writerOptions(m *Migration, continued bool) (checkpoint.WriterOptions, error) {
	o := checkpoint.WriterOptions{Level: m.cfg.level(), BatchBytes: m.cfg.BatchBytes, Mixed: m.cfg.Codec == CodecAuto, Filters: m.cfg.Filtering.Enabled()}
	var err error
	o.StreamID, o.Key, err = streamIdentity(m, continued)
	if o.Key != nil {
		o.Encryption = checkpoint.EncryptionRequired
	}
	return o, err
}

// streamIdentity is the id and key of m's stream. The id names the
// migration: the caller's id, then the Sim's number for it, so that two
// migrations' streams differ; a post-copy stream's has the top bit of the
// Sim's number set. The first stream is encrypted with Config's key; the
// post-copy stream with a key of its own, expanded from it and the
// stream's id (HKDF, RFC 5869), since both number their records from zero
// and a record's nonce is its number.
func streamIdentity(m *Migration, continued bool) (id [16]byte, key []byte, err error) {
	n := uint64(m.id) + 1
	if continued {
		n |= 1 << 63
	}
	id = StreamID(m.cfg.StreamID, n)
	key = m.cfg.EncryptionKey
	if key != nil && continued {
		key, err = hkdf.Key(sha256.New, key, id[:], "vgpusim post-copy stream", checkpoint.KeySize)
	}
	return id, key, wrap0(ErrConfig, err)
}

// byteTransport encodes pages with the checkpoint package into an
// in-memory wire and applies them at the destination with an Applier, so
// the destination holds exactly the bytes the stream carried.
//
// The destination applies each batch as soon as it is written, so the wire
// holds one batch, not a round: a round of gigabytes costs the memory of
// a batch. The link still carries the round's bytes for the simulated time
// they take; only the incoming VM's memory, which nothing runs or reads
// before the stream has arrived and been verified, is ahead of it. A
// failure to apply is held until the bytes arrive (deliver), so that a
// migration fails when the destination would have found it.
type byteTransport struct {
	m        *Migration
	w        *checkpoint.Writer
	eng      *Engine
	chooser  *AdaptiveChooser // CodecAuto's; nil otherwise
	wire     bytes.Buffer
	rd       *checkpoint.Reader
	ap       *checkpoint.Applier
	sent     int64 // writer offset at the last markSent
	applyErr error // the first failure to apply, told by deliver
}

// newByteTransport returns m's byte transport; continued, for the
// post-copy stream, which continues the first into the destination's
// regions rather than scrubbing them.
func newByteTransport(m *Migration, continued bool) (*byteTransport, error) {
	t := &byteTransport{m: m}
	wo, err := writerOptions(m, continued)
	if err != nil {
		return nil, err
	}
	if t.w, err = checkpoint.NewWriter(&t.wire, streamMetadata(m), wo); err != nil {
		return nil, wrap(ErrConfig, err)
	}
	// One worker: the simulated mode encodes on the caller's goroutine,
	// deterministic and without goroutines.
	ec := EngineConfig{Workers: 1, BatchBytes: m.cfg.BatchBytes, Level: m.cfg.level()}
	if ec.Filters, err = m.cfg.Filtering.PageFilters(streamMetadata(m).Regions); err != nil {
		return nil, err
	}
	if m.cfg.Codec == CodecAuto {
		t.chooser = modelledChooser(m)
		ec.Chooser = t.chooser
	}
	if t.eng, err = NewEngine(ec); err != nil {
		return nil, err
	}
	ro := checkpoint.ReaderOptions{Limits: checkpoint.LimitsForBatch(m.cfg.BatchBytes)}
	if wo.Key != nil {
		ro.Encryption, ro.Key = checkpoint.EncryptionRequired, wo.Key
	}
	if t.rd, err = checkpoint.NewReader(&t.wire, ro); err != nil {
		return nil, wrap(ErrStream, err)
	}
	refs := make([]checkpoint.RegionRef, len(m.dstRegs))
	for i, r := range m.dstRegs {
		refs[i] = checkpoint.RegionRef{ID: uint32(i), Region: r}
	}
	newApplier := checkpoint.NewApplier
	if continued {
		newApplier = checkpoint.NewContinuingApplier
	}
	if t.ap, err = newApplier(t.rd, refs); err != nil {
		return nil, wrap(ErrStream, err)
	}
	return t, nil
}

func (t *byteTransport) send(i int, set *memory.PageSet) (Traffic, error) {
	r := t.m.srcRegs[i]
	before := t.w.Offset() // a nil set is every page in use: Copy finds them
	tr, err := t.eng.Copy(context.Background(), applyingWriter{t}, r, uint32(i), set)
	if err != nil {
		return tr, err
	}
	tr.WireBytes = t.w.Offset() - before
	return tr, nil
}

// predictWire sizes counts pages by the Sim's measured class sizes, at the
// level CodecAuto's chooser would pick now or the configured one.
func (t *byteTransport) predictWire(counts *[memory.ClassExplicit]int64, ps int) (int64, error) {
	level := t.m.cfg.level()
	if t.chooser != nil {
		level = t.chooser.Choice()
	}
	return t.m.sim.costs.Wire(t.m.encoding(level, ps), counts)
}

// wrap0 is wrap that keeps nil nil.
func wrap0(sentinel, err error) error {
	if err == nil {
		return nil
	}
	return wrap(sentinel, err)
}

func (t *byteTransport) endRound() error {
	_, err := t.w.EndRound()
	return wrap0(ErrStream, err)
}

func (t *byteTransport) finish(states [][]byte) error {
	for i, s := range states {
		ds := checkpoint.DeviceState{Device: uint32(i), Version: vgpu.StateVersion, Data: s}
		if err := t.w.WriteDeviceState(ds); err != nil {
			return wrap(ErrStream, err)
		}
	}
	if t.m.post != nil {
		// Post-copy: the destination's memory moves on before the last
		// page arrives, so no digest taken here could match it.
		return wrap0(ErrStream, t.w.Close())
	}
	// The regions' digests, taken now that the VM is stunned, let the
	// destination check every byte it applied.
	digests := make([]checkpoint.RegionDigest, len(t.m.srcRegs))
	for i, r := range t.m.srcRegs {
		d, err := r.Digest()
		if err != nil {
			return wrap(ErrSource, err)
		}
		digests[i] = checkpoint.RegionDigest{Region: uint32(i), Digest: d}
	}
	return wrap0(ErrStream, t.w.CloseWithDigests(digests))
}

func (t *byteTransport) pending() int64 { return t.w.Offset() - t.sent }
func (t *byteTransport) markSent()      { t.sent = t.w.Offset() }
func (t *byteTransport) total() int64   { return t.w.Offset() }

// applyingWriter writes a batch to the wire and has the destination apply
// it at once.
type applyingWriter struct{ t *byteTransport }

func (a applyingWriter) WriteBatch(b checkpoint.EncodedBatch) error {
	if err := a.t.w.WriteBatch(b); err != nil {
		return err
	}
	a.t.apply(a.t.w.Offset())
	return nil
}

// apply has the destination take in the stream up to offset, or what of
// it the writer has put on the wire, unless an earlier failure stopped it.
func (t *byteTransport) apply(offset int64) {
	for t.applyErr == nil && t.rd.Offset() < offset {
		if _, err := t.ap.Step(); err == io.EOF {
			break
		} else if err != nil {
			t.applyErr = err
		}
	}
}

func (t *byteTransport) deliver() error {
	t.apply(t.sent)
	return t.applyErr
}

func (t *byteTransport) commit() error { return wrap0(ErrStream, t.ap.Commit()) }

func (t *byteTransport) states() ([][]byte, error) {
	if err := t.commit(); err != nil {
		return nil, err
	}
	return DeviceStates(t.ap.DeviceStates(), len(t.m.srcRegs)-1)
}

// DeviceStates orders the device states a stream carried by device, one
// for each of devices vGPUs; a stream that carried another set fails with
// ErrStream.
func DeviceStates(ds []checkpoint.DeviceState, devices int) ([][]byte, error) {
	out := make([][]byte, devices)
	for _, d := range ds {
		if int(d.Device) >= devices || out[d.Device] != nil {
			return nil, fmt.Errorf("%w: device state for vGPU %d of %d", ErrStream, d.Device, devices)
		}
		out[d.Device] = d.Data
	}
	if i := slices.IndexFunc(out, func(b []byte) bool { return b == nil }); i >= 0 {
		return nil, fmt.Errorf("%w: no device state for vGPU %d", ErrStream, i)
	}
	return out, nil
}

func (t *byteTransport) abort() { t.ap.Abort() }

func (t *byteTransport) close() {
	_ = t.eng.Close()
	_ = t.w.Release()
	_ = t.rd.Close()
	t.wire = bytes.Buffer{}
}

// StreamID is a migration's stream id, the same rule in both modes: the
// caller's id in the first half, and in the second the driver's number for
// the migration (a Sim's count of its migrations, from 1), so that two
// migrations' streams differ; zero where the driver has none.
func StreamID(caller, migration uint64) [16]byte {
	var id [16]byte
	binary.LittleEndian.PutUint64(id[:8], caller)
	binary.LittleEndian.PutUint64(id[8:], migration)
	return id
}
