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
// content: its size, the batch it goes in, the level it is encoded at,
// whether its records are encrypted, and the page filters of its stream
// (Filtering): shuffled pages, and delta pages against a cache of what was
// sent.
type PageEncoding struct {
	PageSize, BatchBytes int
	Level                checkpoint.Level
	Encrypted            bool
	Shuffle, Delta       bool
}

// filters are the page filters of encoders measuring pages encoded as k
// says, with cache as the delta cache where k has delta pages.
func (k PageEncoding) filters(cache *checkpoint.DeltaCache) checkpoint.PageFilters {
	f := checkpoint.PageFilters{Shuffle: k.Shuffle}
	if k.Delta {
		f.Delta = cache
	}
	return f
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
	// With delta pages, resentBytes[c] is the wire size of samplePages
	// pages of class c sent again at their next generation, the content
	// sent before held by the destination (delta pages where the encoder
	// finds that pays), and unchangedBytes that of samplePages pages sent
	// again unchanged.
	resentBytes    [memory.ClassExplicit]int64
	unchangedBytes int64
	// resentDeltas[c] is how many of those samplePages pages of class c
	// sent again the encoder sent as deltas: all, where a new generation
	// changes little (ClassTrainingWeights), none where it is a fresh
	// draw.
	resentDeltas [memory.ClassExplicit]int64
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
	wire, _, err := w.WireOf(enc, &PageCounts{Whole: *counts})
	return wire, err
}

// PageCounts are generated pages to size, by content class: sent whole,
// and sent again at a new generation or unchanged, their content sent
// before held by the destination. Pages sent again cost what they cost
// whole unless the encoding has delta pages; only with delta pages are
// pages counted unchanged.
type PageCounts struct {
	Whole, Resent [memory.ClassExplicit]int64
	Unchanged     int64
}

// pages returns the number of pages c counts.
func (c *PageCounts) pages() int64 {
	n := c.Unchanged
	for cl := range c.Whole {
		n += c.Whole[cl] + c.Resent[cl]
	}
	return n
}

// WireOf is the wire bytes of the pages c counts, encoded as enc says, in
// batches of enc.BatchBytes with their records' framing, and how many of
// them go as delta pages, the unchanged ones included.
func (w *WireModel) WireOf(enc PageEncoding, c *PageCounts) (wire, deltaPages int64, err error) {
	cc, err := w.get(enc)
	if err != nil {
		return 0, 0, err
	}
	wire, deltaPages = cc.wire(c, enc)
	return wire, deltaPages, nil
}

// wire is the wire bytes of the pages c counts at costs cc, and how many
// go as delta pages.
func (cc *classCosts) wire(c *PageCounts, enc PageEncoding) (wire, deltaPages int64) {
	if !enc.Delta {
		// Every page goes whole.
		var whole [memory.ClassExplicit]int64
		for cl := range whole {
			whole[cl] = c.Whole[cl] + c.Resent[cl]
		}
		c = &PageCounts{Whole: whole}
	}
	wire = scaleBytes(c.Unchanged, cc.unchangedBytes, cc.samplePages)
	deltaPages = c.Unchanged
	for cl := range c.Whole {
		wire += scaleBytes(c.Whole[cl], cc.classBytes[cl], cc.samplePages)
		wire += scaleBytes(c.Resent[cl], cc.resentBytes[cl], cc.samplePages)
		deltaPages += scaleBytes(c.Resent[cl], cc.resentDeltas[cl], cc.samplePages)
	}
	return wire + checkpoint.Batches(c.pages(), enc.BatchBytes, enc.PageSize)*cc.perBatch, deltaPages
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
	n := max(1, k.BatchBytes/k.PageSize)
	// A cache of every page measured: a page sent again finds what it was
	// sent as before.
	cache, err := checkpoint.NewDeltaCache(int64(2 * n * k.PageSize))
	if err != nil {
		return nil, wrap(ErrConfig, err)
	}
	enc.SetFilters(k.filters(cache))
	page := make([]byte, k.PageSize)
	// encode encodes n pages of class c at generation gen, the cache
	// holding what the encodes since the last reset sent.
	encode := func(c memory.Class, n int, gen uint32) (checkpoint.EncodedBatch, int64, error) {
		if err := enc.Begin(0, k.PageSize); err != nil {
			return checkpoint.EncodedBatch{}, 0, err
		}
		for j := range n {
			memory.Generate(page, c, sampleSeed, uint64(j), gen)
			if err := enc.Add(j, gen, page); err != nil {
				return checkpoint.EncodedBatch{}, 0, err
			}
		}
		b, err := enc.Finish()
		if err != nil {
			return checkpoint.EncodedBatch{}, 0, err
		}
		cache.Commit()
		return b, b.PayloadBytes(), nil
	}
	reset := func() error {
		return cache.Reset([]checkpoint.RegionInfo{{ID: 0, SizeBytes: int64(n * k.PageSize), PageSize: k.PageSize}})
	}
	c := &classCosts{samplePages: int64(n)}
	// A batch of one zero page and one of two tell the header from a page
	// table entry.
	_, one, err := encode(memory.ClassZero, 1, 1)
	if err != nil {
		return nil, wrap(ErrConfig, err)
	}
	_, two, err := encode(memory.ClassZero, 2, 1)
	if err != nil {
		return nil, wrap(ErrConfig, err)
	}
	header := one - (two - one)
	for cl := memory.ClassZero; cl < memory.ClassExplicit; cl++ {
		// The class sent, then sent again at its next generation, then
		// unchanged: the last two find the first's content held.
		var sizes [3]int64
		if err := reset(); err != nil {
			return nil, wrap(ErrConfig, err)
		}
		for i, gen := range []uint32{1, 2, 2} {
			b, size, err := encode(cl, n, gen)
			if err != nil {
				return nil, wrap(ErrConfig, err)
			}
			sizes[i] = size
			if i == 1 {
				c.resentDeltas[cl] = int64(b.DeltaPages)
			}
		}
		// A compressed batch's zstd frame header is counted with its
		// pages; it is a few bytes in a megabyte.
		c.classBytes[cl] = max(sizes[0]-header, 0)
		c.resentBytes[cl] = max(sizes[1]-header, 0)
		if cl == memory.ClassTrainingWeights {
			c.unchangedBytes = max(sizes[2]-header, 0)
		}
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
	// delta is the delta cache, with delta pages: the explicit pages'
	// encoder keeps their content in it, and send the generated pages'
	// class and generation, so that it holds what the Bytes fidelity's
	// cache would.
	delta *checkpoint.DeltaCache
}

// newModelTransport returns m's model transport; continued, for the
// post-copy stream that follows the first.
func newModelTransport(m *Migration, costs *WireModel, continued bool) (*modelTransport, error) {
	t := &modelTransport{m: m, costs: costs, explicit: memory.NewPageSet(0), scratch: memory.NewPageSet(0)}
	wo, err := writerOptions(m, continued)
	if err != nil {
		return nil, err
	}
	if t.w, err = checkpoint.NewWriter(&t.cw, streamMetadata(m), wo); err != nil {
		return nil, wrap(ErrConfig, err)
	}
	ec := EngineConfig{Workers: 1, BatchBytes: m.cfg.BatchBytes, Level: m.cfg.level()}
	if ec.Filters, err = m.cfg.Filtering.PageFilters(streamMetadata(m).Regions); err != nil {
		return nil, err
	}
	t.delta = ec.Filters.Delta
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
	return m.cfg.encoding(level, ps)
}

// encoding is how a migration configured by c encodes pages of ps bytes
// at level.
func (c Config) encoding(level checkpoint.Level, ps int) PageEncoding {
	return c.Filtering.Encoding(PageEncoding{PageSize: ps, BatchBytes: c.BatchBytes, Level: level, Encrypted: c.EncryptionKey != nil})
}

// Encoding returns enc with f's page filters.
func (f Filtering) Encoding(enc PageEncoding) PageEncoding {
	enc.Shuffle, enc.Delta = f.Shuffle, f.DeltaCacheBytes > 0
	return enc
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
	pc := PageCounts{Whole: counts}
	if t.delta != nil {
		if err := t.resent(i, src, set, &pc); err != nil {
			t.delta.Discard()
			return Traffic{}, err
		}
		tr.UnchangedPages = pc.Unchanged
	}
	if tr.WireBytes, tr.DeltaPages, err = t.costs.WireOf(t.m.encoding(level, ps), &pc); err != nil {
		if t.delta != nil {
			t.delta.Discard()
		}
		return Traffic{}, err
	}
	t.modelled += tr.WireBytes
	if t.explicit.Len() > 0 {
		// Explicit pages have no class to regenerate from: copy them and
		// encode them for real. The engine commits the delta cache, the
		// generated pages' entries with its own.
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
	} else if t.delta != nil {
		t.delta.Commit()
	}
	return tr, nil
}

// resent moves from pc.Whole to pc.Resent and pc.Unchanged the generated
// pages of set, of region i of src, that the delta cache knows the
// destination holds, changed or not, and tells the cache what each
// generated page is now: its class and generation, which determine its
// content. A page the cache holds may be counted as a delta only if it
// was sent with its class and generation; the encoder, which sees the
// bytes, decides for each class whether a delta pays (classCosts).
func (t *modelTransport) resent(i int, src *memory.Region, set *memory.PageSet, pc *PageCounts) error {
	id := uint32(i)
	for p := set.Next(0); p >= 0; p = set.Next(p + 1) {
		if t.explicit.Has(p) {
			continue
		}
		st, err := src.PageState(p)
		if err != nil {
			return wrap(ErrSource, err)
		}
		now := uint64(st.Class)<<32 | uint64(st.Gen)
		if held, ok := t.delta.LookupID(id, p); ok && st.Class != memory.ClassZero {
			pc.Whole[st.Class]--
			if held == now {
				pc.Unchanged++
			} else {
				pc.Resent[st.Class]++
			}
		}
		t.delta.AddID(id, p, now, st.Class == memory.ClassZero)
	}
	return nil
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

// copyExplicit stores at dst the pages of explicit bytes of src that
// StoreGeneratedFrom left to it (t.explicit).
func (t *modelTransport) copyExplicit(src, dst *memory.Region) error {
	for p := t.explicit.Next(0); p >= 0; p = t.explicit.Next(p + 1) {
		if err := copyBytes(dst, src, p, &t.page); err != nil {
			return err
		}
	}
	return nil
}

// copyBytes stores page p of src at dst by its bytes, read into buf,
// which it sizes.
func copyBytes(dst, src *memory.Region, p int, buf *[]byte) error {
	if len(*buf) != src.PageSize() {
		*buf = make([]byte, src.PageSize())
	}
	st, err := src.ReadPage(p, *buf)
	if err != nil {
		return wrap(ErrSource, err)
	}
	return wrap0(ErrDestination, dst.StorePage(p, *buf, st.Gen))
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
func (t *modelTransport) commit() error  { return nil }

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
