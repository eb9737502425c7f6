package migrate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// PageEncoding is what a page's wire size depends on besides its
// content: its size, the batch it goes in, the level it is encoded at, and
// whether its records are encrypted.
type PageEncoding struct {
	PageSize, BatchBytes int
	Level                checkpoint.Level
	Encrypted            bool
}

// classCosts are the wire sizes of generated pages, measured by encoding a
// full batch of each class with the real encoder. Sizes are kept as the
// bytes of samplePages pages, so that scaling to a count stays in integers
// and gives the same result on every machine.
type classCosts struct {
	samplePages int64
	// classBytes[c] is the wire size of samplePages pages of class c,
	// without the batch's own overhead.
	classBytes [memory.ClassExplicit]int64
	// perBatch is a page batch record's overhead: record framing, the
	// batch's header and, for compressed batches, the zstd frame's.
	perBatch int64
}

// WireModel gives the wire size of pages of generated content from their
// classes alone: each class's size under a PageEncoding is measured once a
// process, by encoding a full batch of it with the real encoder
// (MeasureWireSizes), and kept. The simulator's Model fidelity sends pages
// at these sizes, and every driver predicts with them what the pages left
// dirty will take on the wire when a pre-copy round arrives
// (Source.Dirty). The sizes are the same on every machine. The zero
// WireModel is ready to use; it is not safe for concurrent use (it keeps
// the sizes it used in a map of its own, to look them up without a lock).
type WireModel struct{ m map[PageEncoding]*classCosts }

// measured holds the class sizes of every PageEncoding measured in this
// process. They are a pure function of the encoding, so one measurement
// serves every Sim and every live migration; a live sender measures
// before its first round arrives, off the path the switchover waits on.
var measured struct {
	mu sync.Mutex
	m  map[PageEncoding]*measurement
}

// measurement is one encoding's class sizes, measured once.
type measurement struct {
	once sync.Once
	cc   *classCosts
	err  error
}

// MeasureWireSizes measures, once a process, the class sizes of each
// encoding that WireModel uses: the encoding of a full batch of each
// generated class, a few milliseconds each. A live sender calls it on a
// goroutine of its own when a migration starts, so that the prediction at
// the end of the first round finds the sizes ready. It is safe for
// concurrent use.
func MeasureWireSizes(encs ...PageEncoding) error {
	for _, k := range encs {
		if _, err := measuredCosts(k); err != nil {
			return err
		}
	}
	return nil
}

func measuredCosts(k PageEncoding) (*classCosts, error) {
	if k.PageSize <= 0 || k.BatchBytes <= 0 {
		return nil, fmt.Errorf("%w: pages of %d bytes in batches of %d", ErrConfig, k.PageSize, k.BatchBytes)
	}
	measured.mu.Lock()
	if measured.m == nil {
		measured.m = make(map[PageEncoding]*measurement)
	}
	e := measured.m[k]
	if e == nil {
		e = &measurement{}
		measured.m[k] = e
	}
	measured.mu.Unlock()
	e.once.Do(func() { e.cc, e.err = measureCosts(k) })
	return e.cc, e.err
}

// Wire is the wire bytes of counts[c] pages of each generated class c,
// encoded as enc says, in batches of enc.BatchBytes with their records'
// framing.
func (w *WireModel) Wire(enc PageEncoding, counts *[memory.ClassExplicit]int64) (int64, error) {
	cc, err := w.get(enc)
	if err != nil {
		return 0, err
	}
	return cc.wire(counts, enc), nil
}

// wire is the wire bytes of counts pages of each class at costs cc.
func (cc *classCosts) wire(counts *[memory.ClassExplicit]int64, enc PageEncoding) int64 {
	wire, pages := int64(0), int64(0)
	for cl, n := range counts {
		pages += n
		wire += scaleBytes(n, cc.classBytes[cl], cc.samplePages)
	}
	return wire + checkpoint.Batches(pages, enc.BatchBytes, enc.PageSize)*cc.perBatch
}

// sampleSeed keys the pages measured; any fixed value gives reproducible
// sizes.
const sampleSeed = 0x5eed_c1a55

func (w *WireModel) get(k PageEncoding) (*classCosts, error) {
	if c, ok := w.m[k]; ok {
		return c, nil
	}
	c, err := measuredCosts(k)
	if err != nil {
		return nil, err
	}
	if w.m == nil {
		w.m = make(map[PageEncoding]*classCosts)
	}
	w.m[k] = c
	return c, nil
}

func measureCosts(k PageEncoding) (*classCosts, error) {
	enc, err := checkpoint.NewBatchEncoder(k.Level)
	if err != nil {
		return nil, wrap(ErrConfig, err)
	}
	defer enc.Close()
	page := make([]byte, k.PageSize)
	encode := func(c memory.Class, n int) (int64, error) {
		if err := enc.Begin(0, k.PageSize); err != nil {
			return 0, err
		}
		for j := range n {
			memory.Generate(page, c, sampleSeed, uint64(j), 1)
			if err := enc.Add(j, 1, page); err != nil {
				return 0, err
			}
		}
		b, err := enc.Finish()
		if err != nil {
			return 0, err
		}
		size := int64(0)
		for _, p := range b.Payload {
			size += int64(len(p))
		}
		return size, nil
	}
	n := max(1, k.BatchBytes/k.PageSize)
	c := &classCosts{samplePages: int64(n)}
	// A batch of one zero page and one of two tell the header from a page
	// table entry.
	one, err := encode(memory.ClassZero, 1)
	if err != nil {
		return nil, wrap(ErrConfig, err)
	}
	two, err := encode(memory.ClassZero, 2)
	if err != nil {
		return nil, wrap(ErrConfig, err)
	}
	header := one - (two - one)
	for cl := memory.ClassZero; cl < memory.ClassExplicit; cl++ {
		size, err := encode(cl, n)
		if err != nil {
			return nil, wrap(ErrConfig, err)
		}
		// A compressed batch's zstd frame header is counted with its
		// pages; it is a few bytes in a megabyte.
		c.classBytes[cl] = max(size-header, 0)
	}
	framing, err := recordFraming(k)
	if err != nil {
		return nil, err
	}
	c.perBatch = header + framing
	return c, nil
}

// recordFraming measures what a record adds around its payload, by writing
// one.
func recordFraming(k PageEncoding) (int64, error) {
	var cw countingWriter
	o := checkpoint.WriterOptions{Level: k.Level, BatchBytes: k.BatchBytes}
	if k.Encrypted {
		o.Encryption, o.Key = checkpoint.EncryptionRequired, make([]byte, checkpoint.KeySize)
	}
	rw, err := checkpoint.NewRecordWriter(&cw, o)
	if err != nil {
		return 0, wrap(ErrConfig, err)
	}
	before := rw.Offset()
	if err := rw.WriteRecord(checkpoint.RecordPageBatch, make([]byte, 100)); err != nil {
		return 0, wrap(ErrConfig, err)
	}
	return rw.Offset() - before - 100, nil
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// modelTransport counts generated pages by class and sizes them from the
// measured classCosts; the destination stores each page as its class and
// generation, which regenerates the same bytes. Everything else — the
// header, metadata, ends of rounds, device states, and pages whose bytes
// were written explicitly — is really encoded, into a writer that only
// counts.
type modelTransport struct {
	m        *Migration
	costs    *WireModel
	w        *checkpoint.Writer
	cw       countingWriter
	eng      *Engine        // the explicit pages' encoder: one worker
	pinned   *pinnedChooser // its level, chosen region by region under CodecAuto; nil otherwise
	modelled int64          // wire bytes of generated pages, not in the writer
	sent     int64
	page     []byte
	explicit *memory.PageSet
	scratch  *memory.PageSet
	received [][]byte
}

func newModelTransport(m *Migration, costs *WireModel) (*modelTransport, error) {
	t := &modelTransport{m: m, costs: costs, explicit: memory.NewPageSet(0), scratch: memory.NewPageSet(0)}
	var err error
	if t.w, err = checkpoint.NewWriter(&t.cw, streamMetadata(m), writerOptions(m)); err != nil {
		return nil, wrap(ErrConfig, err)
	}
	ec := EngineConfig{Workers: 1, BatchBytes: m.cfg.BatchBytes, Level: m.cfg.level()}
	if m.cfg.Codec == CodecAuto {
		t.pinned = &pinnedChooser{level: m.cfg.level()}
		ec.Chooser = t.pinned
	}
	if t.eng, err = NewEngine(ec); err != nil {
		return nil, err
	}
	return t, nil
}

// encoding is how the migration encodes pages of ps bytes at level.
func (m *Migration) encoding(level checkpoint.Level, ps int) PageEncoding {
	return PageEncoding{PageSize: ps, BatchBytes: m.cfg.BatchBytes, Level: level, Encrypted: m.cfg.EncryptionKey != nil}
}

// chooseLevel is CodecAuto's level for a region's pages of counts, by
// ChooseLevel: the link's goodput, the published encode rates, and the
// wire sizes each level's class costs give.
func (t *modelTransport) chooseLevel(counts *[memory.ClassExplicit]int64, ps int) (checkpoint.Level, error) {
	raw := int64(0)
	for _, n := range counts {
		raw += n * int64(ps)
	}
	var costs []CodecCost
	for _, l := range autoLevels {
		wire, err := t.costs.Wire(t.m.encoding(l, ps), counts)
		if err != nil {
			return 0, err
		}
		c := CodecCost{Level: l, EncodeBytesPerSec: PublishedEncodeBytesPerSec(l)}
		if raw > 0 {
			c.WirePerRaw = float64(wire) / float64(raw)
		}
		costs = append(costs, c)
	}
	return ChooseLevel(float64(t.m.cfg.goodput()), t.m.cfg.EncodeWorkers, costs), nil
}

func (t *modelTransport) send(i int, set *memory.PageSet) (Traffic, error) {
	src, dst := t.m.srcRegs[i], t.m.dstRegs[i]
	if set == nil {
		var err error
		if set, err = t.scratch, src.UsedPages(t.scratch); err != nil {
			return Traffic{}, wrap(ErrSource, err)
		}
	}
	ps := src.PageSize()
	var counts [memory.ClassExplicit]int64
	t.explicit.Reset(src.Pages())
	if err := dst.StoreGeneratedFrom(src, set, &counts, t.explicit); err != nil {
		// Only the source can be unreadable, or the destination refuse.
		if errors.Is(err, memory.ErrUnmapped) && src.Unmapped() {
			return Traffic{}, wrap(ErrSource, err)
		}
		return Traffic{}, wrap(ErrDestination, err)
	}
	level, err := t.level(&counts, ps)
	if err != nil {
		return Traffic{}, err
	}
	if t.pinned != nil {
		t.pinned.level = level
	}
	var tr Traffic
	generated := int64(0)
	for _, n := range counts {
		generated += n
	}
	tr.Pages, tr.ZeroPages, tr.RawBytes = generated, counts[memory.ClassZero], generated*int64(ps)
	if tr.WireBytes, err = t.costs.Wire(t.m.encoding(level, ps), &counts); err != nil {
		return Traffic{}, err
	}
	t.modelled += tr.WireBytes
	if t.explicit.Len() > 0 {
		// Explicit pages have no class to regenerate from: copy them and
		// encode them for real.
		before := t.w.Offset()
		et, err := t.eng.Copy(context.Background(), t.w, src, uint32(i), t.explicit)
		if err != nil {
			return tr, err
		}
		if err := t.copyExplicit(src, dst); err != nil {
			return tr, err
		}
		et.WireBytes = t.w.Offset() - before
		tr.Add(et)
	}
	return tr, nil
}

// level is the level pages of counts are sent at: the configured codec's,
// or CodecAuto's choice for them.
func (t *modelTransport) level(counts *[memory.ClassExplicit]int64, ps int) (checkpoint.Level, error) {
	if t.pinned == nil {
		return t.m.cfg.level(), nil
	}
	return t.chooseLevel(counts, ps)
}

// predictWire is the wire size of counts pages as send would size them.
func (t *modelTransport) predictWire(counts *[memory.ClassExplicit]int64, ps int) (int64, error) {
	level, err := t.level(counts, ps)
	if err != nil {
		return 0, err
	}
	return t.costs.Wire(t.m.encoding(level, ps), counts)
}

func (t *modelTransport) copyExplicit(src, dst *memory.Region) error {
	if len(t.page) != src.PageSize() {
		t.page = make([]byte, src.PageSize())
	}
	for p := t.explicit.Next(0); p >= 0; p = t.explicit.Next(p + 1) {
		st, err := src.ReadPage(p, t.page)
		if err != nil {
			return wrap(ErrSource, err)
		}
		if err := dst.StorePage(p, t.page, st.Gen); err != nil {
			return wrap(ErrDestination, err)
		}
	}
	return nil
}

func (t *modelTransport) endRound() error {
	_, err := t.w.EndRound()
	return wrap0(ErrStream, err)
}

func (t *modelTransport) finish(states [][]byte) error {
	for i, s := range states {
		ds := checkpoint.DeviceState{Device: uint32(i), Version: vgpu.StateVersion, Data: s}
		if err := t.w.WriteDeviceState(ds); err != nil {
			return wrap(ErrStream, err)
		}
	}
	t.received = make([][]byte, len(states))
	for i, s := range states {
		t.received[i] = append([]byte(nil), s...)
	}
	return wrap0(ErrStream, t.w.Close())
}

func (t *modelTransport) pending() int64 { return t.w.Offset() + t.modelled - t.sent }
func (t *modelTransport) markSent()      { t.sent = t.w.Offset() + t.modelled }
func (t *modelTransport) total() int64   { return t.w.Offset() + t.modelled }
func (t *modelTransport) deliver() error { return nil }

func (t *modelTransport) states() ([][]byte, error) {
	if t.received == nil {
		return nil, fmt.Errorf("%w: device states not received", ErrStream)
	}
	return t.received, nil
}

// abort scrubs the destination's regions, as an Applier does.
func (t *modelTransport) abort() {
	for _, r := range t.m.dstRegs {
		_ = r.Scrub()
	}
}

func (t *modelTransport) close() {
	_ = t.eng.Close()
	_ = t.w.Release()
}
