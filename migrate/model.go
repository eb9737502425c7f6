package migrate

import (
	"context"
	"errors"
	"fmt"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// costKey is what a class's wire size depends on.
type costKey struct {
	pageSize, batchBytes int
	level                checkpoint.Level
	encrypted            bool
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

// costTables caches classCosts for a Sim: each is measured once per run.
type costTables struct{ m map[costKey]*classCosts }

// sampleSeed keys the pages measured; any fixed value gives reproducible
// sizes.
const sampleSeed = 0x5eed_c1a55

func (t *costTables) get(k costKey) (*classCosts, error) {
	if c, ok := t.m[k]; ok {
		return c, nil
	}
	c, err := measureCosts(k)
	if err != nil {
		return nil, err
	}
	if t.m == nil {
		t.m = make(map[costKey]*classCosts)
	}
	t.m[k] = c
	return c, nil
}

func measureCosts(k costKey) (*classCosts, error) {
	enc, err := checkpoint.NewBatchEncoder(k.level)
	if err != nil {
		return nil, wrap(ErrConfig, err)
	}
	defer enc.Close()
	page := make([]byte, k.pageSize)
	encode := func(c memory.Class, n int) (int64, error) {
		if err := enc.Begin(0, k.pageSize); err != nil {
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
	n := max(1, k.batchBytes/k.pageSize)
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
func recordFraming(k costKey) (int64, error) {
	var cw countingWriter
	o := checkpoint.WriterOptions{Level: k.level, BatchBytes: k.batchBytes}
	if k.encrypted {
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
	costs    func(costKey) (*classCosts, error)
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

func newModelTransport(m *Migration, costs func(costKey) (*classCosts, error)) (*modelTransport, error) {
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

// costsFor returns the class costs of level for pages of ps bytes.
func (t *modelTransport) costsFor(level checkpoint.Level, ps int) (*classCosts, error) {
	return t.costs(costKey{pageSize: ps, batchBytes: t.m.cfg.BatchBytes, level: level, encrypted: t.m.cfg.EncryptionKey != nil})
}

// modelWire is the wire bytes of counts pages of each class, in batches,
// at costs cc.
func (t *modelTransport) modelWire(counts *[memory.ClassExplicit]int64, cc *classCosts, ps int) int64 {
	wire, pages := int64(0), int64(0)
	for cl, n := range counts {
		pages += n
		wire += scaleBytes(n, cc.classBytes[cl], cc.samplePages)
	}
	return wire + checkpoint.Batches(pages, t.m.cfg.BatchBytes, ps)*cc.perBatch
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
		cc, err := t.costsFor(l, ps)
		if err != nil {
			return 0, err
		}
		c := CodecCost{Level: l, EncodeBytesPerSec: PublishedEncodeBytesPerSec(l)}
		if raw > 0 {
			c.WirePerRaw = float64(t.modelWire(counts, cc, ps)) / float64(raw)
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
	level := t.m.cfg.level()
	if t.pinned != nil {
		var err error
		if level, err = t.chooseLevel(&counts, ps); err != nil {
			return Traffic{}, err
		}
		t.pinned.level = level
	}
	cc, err := t.costsFor(level, ps)
	if err != nil {
		return Traffic{}, err
	}
	var tr Traffic
	generated := int64(0)
	for _, n := range counts {
		generated += n
	}
	tr.Pages, tr.ZeroPages, tr.RawBytes = generated, counts[memory.ClassZero], generated*int64(ps)
	tr.WireBytes = t.modelWire(&counts, cc, ps)
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
