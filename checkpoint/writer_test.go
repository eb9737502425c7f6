package checkpoint

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

func TestWriterMisuse(t *testing.T) {
	meta := Metadata{Profiles: []string{"P40-1q"}, Regions: []RegionInfo{{ID: 3, SizeBytes: 8 * 4096, PageSize: 4096}}}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, meta, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	page := make([]byte, 4096)
	other := newRegion(t, memory.Sparse, 4, 4096, 0, memory.Mix{})
	for name, err := range map[string]error{
		"undeclared region":           w.WritePage(4, 0, 1, page),
		"page past region":            w.WritePage(3, 8, 1, page),
		"negative page":               w.WritePage(3, -1, 1, page),
		"short page":                  w.WritePage(3, 1, 1, page[:100]),
		"region of wrong size":        w.WriteRegion(3, other, nil),
		"undeclared device":           w.WriteDeviceState(DeviceState{Device: 1}),
		"digest of undeclared region": w.CloseWithDigests([]RegionDigest{{Region: 4}}),
		"two digests":                 w.CloseWithDigests([]RegionDigest{{Region: 3}, {Region: 3}}),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		wantErr(t, err, ErrInvalid)
	}
	// Argument errors are not sticky: the stream goes on and reads back.
	if err := w.WritePage(3, 2, 1, bytes.Repeat([]byte{1}, 4096)); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteDeviceState(DeviceState{Device: 0}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, w.WriteDeviceState(DeviceState{Device: 0}), ErrInvalid)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, w.WritePage(3, 3, 1, page), ErrState)
	wantErr(t, w.Close(), ErrState)
	if err := readAll(buf.Bytes(), ReaderOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]Metadata{
		"duplicate region": {Regions: []RegionInfo{{ID: 1, SizeBytes: 4096, PageSize: 4096}, {ID: 1, SizeBytes: 4096, PageSize: 4096}}},
		"page size":        {Regions: []RegionInfo{{ID: 1, SizeBytes: 3000, PageSize: 3000}}},
		"size":             {Regions: []RegionInfo{{ID: 1, SizeBytes: 5000, PageSize: 4096}}},
		"long name":        {VMID: string(bytes.Repeat([]byte{'v'}, MaxNameBytes+1))},
		"not utf-8":        {GPUModel: "\xff"},
	} {
		if _, err := NewWriter(io.Discard, m, WriterOptions{}); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			wantErr(t, err, ErrInvalid)
		}
	}
	for _, o := range []WriterOptions{{BatchBytes: -1}, {BatchBytes: MaxBatchBytes + 1}, {Level: 17}} {
		_, err := NewWriter(io.Discard, Metadata{}, o)
		wantErr(t, err, ErrInvalid)
	}
}

// failWriter fails after n bytes.
type failWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, errDiskFull
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWriterIOErrorIsSticky(t *testing.T) {
	src := newRegion(t, memory.Dense, 32, 4096, 1, memory.MixRandom())
	w, err := NewWriter(&failWriter{n: 20000}, Metadata{Regions: []RegionInfo{RegionInfoOf(0, src)}}, WriterOptions{BatchBytes: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	err = w.WriteRegion(0, src, nil)
	e := wantErr(t, err, ErrWrite)
	if !errors.Is(err, errDiskFull) || e.Offset != 20000 {
		t.Fatalf("error %v at %d", err, e.Offset)
	}
	if _, err2 := w.EndRound(); err2 != err {
		t.Fatalf("second error %v, want the first", err2)
	}
	if err2 := w.Close(); err2 != err {
		t.Fatalf("close: %v, want the first error", err2)
	}
}

// TestWriterReset checks that a reused Writer writes what fresh ones do.
func TestWriterReset(t *testing.T) {
	var a bytes.Buffer
	w, err := NewWriter(&a, Metadata{VMID: "x"}, WriterOptions{Level: LevelNone})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, g := range goldenFiles {
		fresh := goldenStream(t, g.wopts)
		var b bytes.Buffer
		g.wopts.StreamID = [StreamIDSize]byte{'g', 'o', 'l', 'd', 'e', 'n'}
		g.wopts.BatchBytes = 6 * 1024
		// Rewrite the golden stream through the reused writer.
		rd, err := NewReader(bytes.NewReader(fresh), g.ropts)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Reset(&b, *rd.Metadata(), g.wopts); err != nil {
			t.Fatal(err)
		}
		copyStream(t, rd, w)
		rd.Close()
		if !bytes.Equal(b.Bytes(), fresh) {
			t.Errorf("%s: reused writer differs from a fresh one", g.file)
		}
	}
}

// copyStream writes what rd reads to w, page by page.
func copyStream(tb testing.TB, rd *Reader, w *Writer) {
	tb.Helper()
	for {
		typ, err := rd.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			tb.Fatal(err)
		}
		switch typ {
		case RecordPageBatch:
			b := rd.Batch()
			if rd.Header().Codec == CodecMixed {
				// The batch's own level, as far as its codec tells.
				if err := w.SetLevel(levelOfCodec(b.Codec)); err != nil {
					tb.Fatal(err)
				}
			}
			ps := rd.Metadata().Regions[b.region].PageSize
			for i := range b.Len() {
				p := b.Page(i)
				data := p.Data
				if data == nil {
					data = make([]byte, ps)
				}
				if err := w.WritePage(b.Region, p.Index, p.Gen, data); err != nil {
					tb.Fatal(err)
				}
			}
			// Batch boundaries as read, so that the bytes can match.
			err = w.Flush()
		case RecordDeviceState:
			err = w.WriteDeviceState(rd.DeviceState())
		case RecordEndRound:
			_, err = w.EndRound()
		case RecordEndStream:
			err = w.CloseWithDigests(rd.StreamEnd().RegionDigests)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// TestParallelEncoders encodes batches on several goroutines, each with
// its own BatchEncoder, and writes them in order through one Writer, as
// the parallel copy engine will; the stream equals the one a single
// Writer produces.
func TestParallelEncoders(t *testing.T) {
	src := newRegion(t, memory.Sparse, 200, 4096, 21, memory.MixRealistic())
	meta := Metadata{Regions: []RegionInfo{RegionInfoOf(0, src)}}
	const batchPages = 16
	opts := WriterOptions{BatchBytes: batchPages * 4096, StreamID: testStreamID}

	var serial bytes.Buffer
	w, err := NewWriter(&serial, meta, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	if err := w.WriteRegion(0, src, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	var parallel bytes.Buffer
	if err := w.Reset(&parallel, meta, opts); err != nil {
		t.Fatal(err)
	}
	const workers = 4
	type job struct {
		first int
		done  chan EncodedBatch
		free  chan struct{} // the encoder's buffers may be reused
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			enc, err := NewBatchEncoder(LevelFastest)
			if err != nil {
				t.Error(err)
				return
			}
			defer enc.Close()
			for j := range jobs {
				if err := enc.Begin(0, 4096); err != nil {
					t.Error(err)
				}
				for p := j.first; p < min(j.first+batchPages, src.Pages()); p++ {
					if err := enc.AddFrom(src, p); err != nil {
						t.Error(err)
					}
				}
				b, err := enc.Finish()
				if err != nil {
					t.Error(err)
				}
				j.done <- b
				<-j.free
			}
		}()
	}
	var order []job
	for first := 0; first < src.Pages(); first += batchPages {
		order = append(order, job{first: first, done: make(chan EncodedBatch, 1), free: make(chan struct{})})
	}
	go func() {
		for _, j := range order {
			jobs <- j
		}
		close(jobs)
	}()
	// The ordered stage: write the batches in order as they finish.
	for _, j := range order {
		b := <-j.done
		if err := w.WriteBatch(b); err != nil {
			t.Fatal(err)
		}
		close(j.free)
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(serial.Bytes(), parallel.Bytes()) {
		t.Fatal("the parallel stream differs from the serial one")
	}
}
