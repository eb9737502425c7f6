package migrate

import (
	"bytes"
	"context"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

// engineRegion returns a region of pages pages of pageSize bytes on the
// given backing, filled with mix m, then partly rewritten: a hot-set
// pattern of the realistic mix, explicit text-like bytes, and a few pages
// zeroed again at a later generation, so that generations, classes and
// explicit overlays all vary.
func engineRegion(t tb, kind memory.Kind, pages, pageSize int, seed uint64, m memory.Mix) *memory.Region {
	t.Helper()
	r, err := memory.New(memory.Config{SizeBytes: int64(pages) * int64(pageSize), PageSize: pageSize, Kind: kind, Seed: seed})
	must(t, err)
	must(t, r.FillMix(0, pages, m))
	p, err := memory.NewPattern(r, memory.PatternConfig{Kind: memory.HotSet, RateBytesPerSec: int64(pages*pageSize) / 4, Seed: seed})
	must(t, err)
	_, err = p.Advance(time.Second)
	must(t, err)
	text := bytes.Repeat([]byte("vgpu page "), pageSize/10+1)[:pageSize]
	for q := int(seed % 7); q < pages; q += 11 {
		_, err := r.WriteAt(text, int64(q)*int64(pageSize))
		must(t, err)
	}
	for q := int(seed % 5); q < pages; q += 13 {
		must(t, r.Fill(q, 1, memory.ClassZero))
	}
	return r
}

// streamOf writes one round of region r's pages through a fresh
// checkpoint.Writer, with copyPages doing the pages, and returns the
// stream. When all is set the regions' digest closes the stream, which
// an Applier then checks.
func streamOf(t tb, r *memory.Region, level checkpoint.Level, batchBytes int, all bool,
	copyPages func(w *checkpoint.Writer) error) []byte {
	t.Helper()
	return streamWith(t, r, checkpoint.WriterOptions{Level: level, BatchBytes: batchBytes}, all, copyPages)
}

// streamWith is streamOf with the Writer's options given.
func streamWith(t tb, r *memory.Region, opts checkpoint.WriterOptions, all bool,
	copyPages func(w *checkpoint.Writer) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := checkpoint.NewWriter(&buf, checkpoint.Metadata{Regions: []checkpoint.RegionInfo{checkpoint.RegionInfoOf(0, r)}}, opts)
	must(t, err)
	defer w.Release()
	must(t, copyPages(w))
	_, err = w.EndRound()
	must(t, err)
	var digests []checkpoint.RegionDigest
	if all {
		d, err := r.Digest()
		must(t, err)
		digests = []checkpoint.RegionDigest{{Region: 0, Digest: d}}
	}
	must(t, w.CloseWithDigests(digests))
	return buf.Bytes()
}

// encodePages is the engine's naive reference: it encodes the pages of set
// from r one at a time, cutting a batch when the next page would take it
// past batchBytes (and never leaving one empty), and hands each to write.
func encodePages(enc *checkpoint.BatchEncoder, r *memory.Region, id uint32, set *memory.PageSet,
	batchBytes int, write func(checkpoint.EncodedBatch) error) (Traffic, error) {
	return encodePagesChosen(enc, r, id, set, batchBytes, nil, write)
}

// encodePagesChosen is encodePages with each batch's level, if choose is
// set, what choose says for it.
func encodePagesChosen(enc *checkpoint.BatchEncoder, r *memory.Region, id uint32, set *memory.PageSet,
	batchBytes int, choose func(BatchInfo) checkpoint.Level, write func(checkpoint.EncodedBatch) error) (Traffic, error) {
	var tr Traffic
	ps := r.PageSize()
	flush := func() error {
		if enc.Len() == 0 {
			return nil
		}
		b, err := enc.Finish()
		if err != nil {
			return wrap(ErrSource, err)
		}
		tr.Pages += int64(b.Pages)
		tr.ZeroPages += int64(b.ZeroPages)
		tr.RawBytes += int64(b.RawBytes)
		if err := write(b); err != nil {
			return wrap(ErrStream, err)
		}
		return wrap0(ErrSource, enc.Begin(id, ps))
	}
	if err := enc.Begin(id, ps); err != nil {
		return tr, wrap(ErrSource, err)
	}
	for p := set.Next(0); p >= 0; p = set.Next(p + 1) {
		if enc.Len() > 0 && enc.RawBytes()+ps > batchBytes {
			if err := flush(); err != nil {
				return tr, err
			}
		}
		if enc.Len() == 0 && choose != nil {
			info := BatchInfo{Region: id, PageSize: ps, First: p, MaxPages: checkpoint.PagesPerBatch(batchBytes, ps)}
			if err := enc.SetLevel(choose(info)); err != nil {
				return tr, wrap(ErrConfig, err)
			}
			if err := enc.Begin(id, ps); err != nil {
				return tr, wrap(ErrSource, err)
			}
		}
		if err := enc.AddFrom(r, p); err != nil {
			return tr, wrap(ErrSource, err)
		}
	}
	return tr, flush()
}

// usedPages is the pages of r in use, the reference's nil set.
func usedPages(r *memory.Region, dst *memory.PageSet) (*memory.PageSet, error) {
	return dst, r.UsedPages(dst)
}

// referenceStream is the stream of the serial reference, encodePages.
func referenceStream(t tb, r *memory.Region, set *memory.PageSet, level checkpoint.Level, batchBytes int) ([]byte, Traffic) {
	t.Helper()
	return referenceWith(t, r, set, checkpoint.WriterOptions{Level: level, BatchBytes: batchBytes}, level, nil)
}

// referenceWith is the stream of the serial reference (encodePagesChosen)
// copying set (nil for every used page) into a Writer of opts, its
// batches encoded at level or, if pick is set, at what pick says.
func referenceWith(t tb, r *memory.Region, set *memory.PageSet, opts checkpoint.WriterOptions, level checkpoint.Level,
	pick func(BatchInfo) checkpoint.Level) ([]byte, Traffic) {
	t.Helper()
	all := set == nil
	if all {
		var err error
		set, err = usedPages(r, memory.NewPageSet(0))
		must(t, err)
	}
	enc, err := checkpoint.NewBatchEncoder(level)
	must(t, err)
	defer enc.Close()
	var tr Traffic
	stream := streamWith(t, r, opts, all, func(w *checkpoint.Writer) error {
		tr, err = encodePagesChosen(enc, r, 0, set, opts.BatchBytes, pick, w.WriteBatch)
		return err
	})
	return stream, tr
}

// engineStream is the stream of e copying set (nil for every used page).
func engineStream(t tb, e *Engine, r *memory.Region, set *memory.PageSet) ([]byte, Traffic) {
	t.Helper()
	cfg := e.Config()
	var tr Traffic
	opts := checkpoint.WriterOptions{Level: cfg.Level, BatchBytes: cfg.BatchBytes, Mixed: cfg.Chooser != nil}
	stream := streamWith(t, r, opts, set == nil, func(w *checkpoint.Writer) error {
		cw := &batchCounter{w: w}
		var err error
		tr, err = e.Copy(context.Background(), cw, r, 0, set)
		if err == nil && tr.WireBytes != cw.payload {
			t.Fatalf("Copy says %d wire bytes, handed %d", tr.WireBytes, cw.payload)
		}
		return err
	})
	return stream, tr
}

// batchCounter counts the batches and payload bytes it passes on to w
// (which may be nil).
type batchCounter struct {
	w       BatchWriter
	batches int
	payload int64
}

func (c *batchCounter) WriteBatch(b checkpoint.EncodedBatch) error {
	c.batches++
	for _, p := range b.Payload {
		c.payload += int64(len(p))
	}
	if c.w == nil {
		return nil
	}
	return c.w.WriteBatch(b)
}

// applyStream applies stream to a fresh region shaped like src and
// returns it.
func applyStream(t tb, src *memory.Region, stream []byte) *memory.Region {
	t.Helper()
	dst, err := memory.New(memory.Config{SizeBytes: src.Size(), PageSize: src.PageSize(), Kind: memory.Sparse, Seed: src.Seed()})
	must(t, err)
	rd, err := checkpoint.NewReader(bytes.NewReader(stream), checkpoint.ReaderOptions{Limits: checkpoint.LimitsForBatch(checkpoint.MaxBatchBytes)})
	must(t, err)
	defer rd.Close()
	ap, err := checkpoint.NewApplier(rd, []checkpoint.RegionRef{{ID: 0, Region: dst}})
	must(t, err)
	must(t, ap.Run())
	must(t, ap.Commit())
	return dst
}

// checkApplied checks that dst holds src's pages of set, bytes and
// generation, and its other pages in their initial state.
func checkApplied(t tb, src, dst *memory.Region, set *memory.PageSet) {
	t.Helper()
	a, b := make([]byte, src.PageSize()), make([]byte, src.PageSize())
	for p := range src.Pages() {
		sb, err := dst.ReadPage(p, b)
		must(t, err)
		if !set.Has(p) {
			if sb.Gen != 0 || !memory.IsZero(b) {
				t.Fatalf("page %d not in the set arrived: generation %d", p, sb.Gen)
			}
			continue
		}
		sa, err := src.ReadPage(p, a)
		must(t, err)
		if sa.Gen != sb.Gen || !bytes.Equal(a, b) {
			t.Fatalf("page %d: generation %d, want %d, or bytes differ", p, sb.Gen, sa.Gen)
		}
	}
}
