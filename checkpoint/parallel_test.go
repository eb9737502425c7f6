package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"pgregory.net/rapid"
)

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
}

// writeSet writes the pages of r in set as batches of at most pages pages,
// encoded with enc, to pw.
func writeSet(tb fataler, pw *ParallelWriter, enc *BatchEncoder, id uint32, r *memory.Region, set *memory.PageSet, pages int) {
	tb.Helper()
	for p := set.Next(0); p >= 0; {
		if err := enc.Begin(id, r.PageSize()); err != nil {
			tb.Fatal(err)
		}
		for n := 0; n < pages && p >= 0; n++ {
			if err := enc.AddFrom(r, p); err != nil {
				tb.Fatal(err)
			}
			p = set.Next(p + 1)
		}
		b, err := enc.Finish()
		if err != nil {
			tb.Fatal(err)
		}
		if err := pw.WriteBatch(b); err != nil {
			tb.Fatal(err)
		}
	}
}

// parallelKeys returns a key for each of k streams, or nil.
func parallelKeys(k int, encrypt bool) [][]byte {
	keys := make([][]byte, k)
	for i := range keys {
		if encrypt {
			keys[i] = bytes.Repeat([]byte{byte(0x40 + i)}, KeySize)
		}
	}
	return keys
}

// parallelStreams opens k streams written to bufs, for a ParallelApplier.
func parallelStreams(bufs []*bytes.Buffer, keys [][]byte) []ParallelStream {
	var ss []ParallelStream
	for i, b := range bufs {
		ss = append(ss, ParallelStream{R: bytes.NewReader(b.Bytes()), Key: keys[i]})
	}
	return ss
}

// TestPropertyParallel: rounds of random writes, sent over K streams by a
// ParallelWriter and applied by a ParallelApplier with W workers, give
// the destination the source's final contents, however pages were
// rewritten from round to round and whichever streams carried their
// copies: a page's newer copy is never overwritten by its older one. The
// streams' bytes do not depend on anything but the batches.
func TestPropertyParallel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ps := rapid.SampledFrom([]int{256, 4096}).Draw(t, "pageSize")
		pages := rapid.IntRange(1, 96).Draw(t, "pages")
		k := rapid.IntRange(1, 4).Draw(t, "streams")
		workers := rapid.IntRange(1, 4).Draw(t, "workers")
		batch := rapid.IntRange(1, 8).Draw(t, "batchPages")
		encrypt := rapid.Bool().Draw(t, "encrypt")
		src, err := memory.New(memory.Config{SizeBytes: int64(pages * ps), PageSize: ps, Kind: memory.Sparse, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		meta := Metadata{VMID: "vm", Profiles: []string{"P40-1q"}, Regions: []RegionInfo{RegionInfoOf(5, src)}}
		level := rapid.SampledFrom([]Level{LevelNone, LevelFastest}).Draw(t, "level")
		wopts := WriterOptions{Level: level}
		ropts := ReaderOptions{}
		if encrypt {
			wopts.Encryption, ropts.Encryption = EncryptionRequired, EncryptionRequired
		}
		keys := parallelKeys(k, encrypt)
		bufs := make([]*bytes.Buffer, k)
		outs := make([]ParallelOut, k)
		for i := range outs {
			bufs[i] = &bytes.Buffer{}
			outs[i] = ParallelOut{W: bufs[i], StreamID: [StreamIDSize]byte{byte(i)}, Key: keys[i]}
		}
		pw, err := NewParallelWriter(meta, wopts, outs)
		if err != nil {
			t.Fatal(err)
		}
		defer pw.Release()
		enc, err := NewBatchEncoder(level)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		var set memory.PageSet
		for range rapid.IntRange(1, 5).Draw(t, "rounds") {
			for range rapid.IntRange(0, 40).Draw(t, "writes") {
				p := rapid.IntRange(0, pages-1).Draw(t, "page")
				switch rapid.IntRange(0, 2).Draw(t, "op") {
				case 0:
					err = src.Fill(p, 1, rapid.SampledFrom([]memory.Class{memory.ClassZero, memory.ClassText, memory.ClassRandom}).Draw(t, "class"))
				case 1:
					_, err = src.WriteAt([]byte(fmt.Sprint("write ", p)), int64(p*ps))
				case 2:
					_, err = src.WriteAt(make([]byte, ps), int64(p*ps))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			src.CollectDirty(&set)
			writeSet(t, pw, enc, 5, src, &set, batch)
			if err := pw.EndRound(); err != nil {
				t.Fatal(err)
			}
		}
		// The final pages: some rewritten once more.
		for p := 0; p < pages; p += rapid.IntRange(1, pages).Draw(t, "stride") {
			if _, err := src.WriteAt([]byte("final"), int64(p*ps)); err != nil {
				t.Fatal(err)
			}
		}
		src.CollectDirty(&set)
		writeSet(t, pw, enc, 5, src, &set, batch)
		if err := pw.WriteDeviceState(DeviceState{Device: 0, Version: 3, Data: []byte("state")}); err != nil {
			t.Fatal(err)
		}
		d, err := src.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if err := pw.CloseWithDigests([]RegionDigest{{5, d}}); err != nil {
			t.Fatal(err)
		}

		dst, err := memory.New(memory.Config{SizeBytes: src.Size(), PageSize: ps, Kind: memory.Sparse, Seed: src.Seed()})
		if err != nil {
			t.Fatal(err)
		}
		pa, err := NewParallelApplier(parallelStreams(bufs, keys), ropts, []RegionRef{{5, dst}}, ParallelOptions{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		defer pa.Close()
		if err := pa.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := pa.Commit(); err != nil {
			t.Fatal(err)
		}
		if p, err := memory.FirstDiff(src, dst); err != nil || p >= 0 {
			t.Fatalf("regions differ at page %d (%v)", p, err)
		}
		if ds := pa.DeviceStates(); len(ds) != 1 || string(ds[0].Data) != "state" {
			t.Fatalf("device states %+v", ds)
		}
		if got := pa.RegionDigests(); len(got) != 1 || got[0].Digest != d {
			t.Fatalf("digests %+v, want %#x", got, d)
		}
		var total int64
		for _, b := range bufs {
			total += int64(b.Len())
		}
		if pa.Offset() != total || pw.Offset() != total {
			t.Fatalf("applier read %d bytes, writer wrote %d, streams hold %d", pa.Offset(), pw.Offset(), total)
		}
	})
}

// parallelFixture writes a small VM's stream over k streams: two rounds
// and the final pages. It returns the streams' bytes and a fresh
// destination.
func parallelFixture(tb testing.TB, k int) ([][]byte, *memory.Region) {
	return parallelFixtureWith(tb, k, 2, false)
}

// parallelFixtureWith is parallelFixture with rounds rounds before the
// final pages, and, if twice, device 0's state on every stream.
func parallelFixtureWith(tb testing.TB, k, rounds int, twice bool) ([][]byte, *memory.Region) {
	tb.Helper()
	src := newRegion(tb, memory.Sparse, 64, 1024, 11, memory.MixRealistic())
	meta := Metadata{VMID: "vm", Profiles: []string{"P40-1Q"}, Regions: []RegionInfo{RegionInfoOf(0, src)}}
	bufs := make([]*bytes.Buffer, k)
	outs := make([]ParallelOut, k)
	for i := range outs {
		bufs[i] = &bytes.Buffer{}
		outs[i] = ParallelOut{W: bufs[i], StreamID: [StreamIDSize]byte{byte(i)}}
	}
	pw, err := NewParallelWriter(meta, WriterOptions{}, outs)
	if err != nil {
		tb.Fatal(err)
	}
	defer pw.Release()
	enc, err := NewBatchEncoder(LevelFastest)
	if err != nil {
		tb.Fatal(err)
	}
	defer enc.Close()
	var set memory.PageSet
	for range rounds {
		src.CollectDirty(&set)
		writeSet(tb, pw, enc, 0, src, &set, 4)
		if err := pw.EndRound(); err != nil {
			tb.Fatal(err)
		}
		if err := src.Fill(0, 20, memory.ClassText); err != nil {
			tb.Fatal(err)
		}
	}
	src.CollectDirty(&set)
	writeSet(tb, pw, enc, 0, src, &set, 4)
	for i := range pw.Streams() {
		if i == 0 || twice {
			if err := pw.Stream(i).WriteDeviceState(DeviceState{Device: 0, Data: []byte("state")}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	d, err := src.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	if err := pw.CloseWithDigests([]RegionDigest{{0, d}}); err != nil {
		tb.Fatal(err)
	}
	out := make([][]byte, k)
	for i, b := range bufs {
		out[i] = b.Bytes()
	}
	return out, emptyLike(tb, src, memory.Sparse)
}

// runParallel applies streams to dst and returns Run's error; the
// destination must be scrubbed if it failed.
func runParallel(tb testing.TB, streams [][]byte, dst *memory.Region, workers int) error {
	tb.Helper()
	var ss []ParallelStream
	for _, s := range streams {
		ss = append(ss, ParallelStream{R: bytes.NewReader(s)})
	}
	pa, err := NewParallelApplier(ss, ReaderOptions{}, []RegionRef{{0, dst}}, ParallelOptions{Workers: workers})
	if err != nil {
		return err
	}
	defer pa.Close()
	err = pa.Run(context.Background())
	if err != nil {
		if n := dst.ResidentBytes(); n != 0 {
			tb.Fatalf("failed with %d bytes left at the destination", n)
		}
		if pa.Commit() == nil {
			tb.Fatal("Commit after a failure")
		}
	}
	return err
}

// TestParallelHostile: what only several streams together can get wrong
// fails with a typed error and leaves the destination scrubbed.
func TestParallelHostile(t *testing.T) {
	good, _ := parallelFixture(t, 3)
	other, _ := parallelFixture(t, 2)
	cut := func(b []byte, n int) []byte { return b[:len(b)-n] }
	for _, tc := range []struct {
		name    string
		streams func() [][]byte
		want    error
	}{
		{"stream truncated", func() [][]byte { return [][]byte{good[0], cut(good[1], 10), good[2]} }, ErrTruncated},
		{"stream cut at a record", func() [][]byte {
			// Stream 2 without its end of stream: 24 bytes of record
			// framing and its payload, at least 8 bytes.
			rd, _ := NewReader(bytes.NewReader(good[2]), ReaderOptions{})
			for {
				before := rd.Offset()
				if t, err := rd.Next(); err != nil || t == RecordEndStream {
					return [][]byte{good[0], good[1], good[2][:before]}
				}
			}
		}, ErrTruncated},
		{"streams swapped", func() [][]byte { return [][]byte{good[1], good[0], good[2]} }, nil},
		{"a stream of another split", func() [][]byte { return [][]byte{good[0], other[1], good[2]} }, ErrChecksum},
		{"a stream twice", func() [][]byte { return [][]byte{good[0], good[1], good[1]} }, ErrChecksum},
		{"a stream missing", func() [][]byte { return [][]byte{good[0], good[1]} }, ErrChecksum},
		{"a stream of more rounds", func() [][]byte {
			more, _ := parallelFixtureWith(t, 3, 3, false)
			return [][]byte{good[0], good[1], more[2]}
		}, ErrMalformed},
		{"a device state on two streams", func() [][]byte {
			twice, _ := parallelFixtureWith(t, 3, 2, true)
			return twice
		}, ErrMalformed},
		{"a corrupt byte", func() [][]byte {
			b := bytes.Clone(good[1])
			b[len(b)/2] ^= 1
			return [][]byte{good[0], b, good[2]}
		}, ErrChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dst := parallelFixture(t, 3)
			err := runParallel(t, tc.streams(), dst, 2)
			if tc.want == nil {
				// Swapping whole streams reorders nothing within a
				// round: the streams' ids are the caller's to check.
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, tc.want)
		})
	}
}

// TestParallelRunsOnce: Run twice is an error, and a failed applier cannot
// commit.
func TestParallelRunsOnce(t *testing.T) {
	streams, dst := parallelFixture(t, 2)
	var ss []ParallelStream
	for _, s := range streams {
		ss = append(ss, ParallelStream{R: bytes.NewReader(s)})
	}
	pa, err := NewParallelApplier(ss, ReaderOptions{}, []RegionRef{{0, dst}}, ParallelOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	if err := pa.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, pa.Run(context.Background()), ErrState)
	if err := pa.Commit(); err != nil {
		t.Fatal(err)
	}
}

// blockingReader never returns: a stream whose peer stalls.
type blockingReader struct{ stop chan struct{} }

func (b blockingReader) Read([]byte) (int, error) { <-b.stop; return 0, io.ErrClosedPipe }

// TestParallelStopsStalledStreams: a failure on one stream calls Stop,
// which unblocks the others, and Run returns the failure.
func TestParallelStopsStalledStreams(t *testing.T) {
	good, dst := parallelFixture(t, 2)
	stall := blockingReader{stop: make(chan struct{})}
	// Stream 1 sends its header and metadata, then stalls.
	rd, err := NewReader(bytes.NewReader(good[1]), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	head := good[1][:rd.Offset()]
	bad := bytes.Clone(good[0])
	bad[len(head)+30] ^= 1 // in stream 0's first batch, before any barrier
	ss := []ParallelStream{{R: bytes.NewReader(bad)}, {R: io.MultiReader(bytes.NewReader(head), stall)}}
	pa, err := NewParallelApplier(ss, ReaderOptions{}, []RegionRef{{0, dst}},
		ParallelOptions{Workers: 2, Stop: func() { close(stall.stop) }})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	wantErr(t, pa.Run(context.Background()), ErrChecksum)
}

// TestParallelCancel: the caller's ctx done while every stream is blocked
// in a read stops them through Stop, and Run returns the context's error,
// the destination scrubbed.
func TestParallelCancel(t *testing.T) {
	good, dst := parallelFixture(t, 2)
	stall := blockingReader{stop: make(chan struct{})}
	var ss []ParallelStream
	for _, s := range good {
		rd, err := NewReader(bytes.NewReader(s), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, ParallelStream{R: io.MultiReader(bytes.NewReader(s[:rd.Offset()]), stall)})
	}
	pa, err := NewParallelApplier(ss, ReaderOptions{}, []RegionRef{{0, dst}},
		ParallelOptions{Workers: 2, Stop: func() { close(stall.stop) }})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- pa.Run(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after a cancel: %v, want context.Canceled", err)
	}
}

// TestParallelCancelAtEnd cancels Run's ctx as the streams end, and as
// the applier begins to check them together: Run either succeeds with the
// device states or fails with the cancel and holds none, and, under
// -race, the check and the cancel's failure never touch the results
// unsynchronized.
func TestParallelCancelAtEnd(t *testing.T) {
	for i := range 20 {
		good, dst := parallelFixtureWith(t, 2, 2, false)
		var ss []ParallelStream
		for _, s := range good {
			ss = append(ss, ParallelStream{R: bytes.NewReader(s)})
		}
		ctx, cancel := context.WithCancel(context.Background())
		opts := ParallelOptions{Workers: 2}
		if i%2 == 0 {
			opts.Applied = func(a Applied) {
				if a.Type == RecordEndStream {
					cancel()
				}
			}
		}
		pa, err := NewParallelApplier(ss, ReaderOptions{}, []RegionRef{{0, dst}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			pa.beforeFinish = cancel
		}
		err = pa.Run(ctx)
		switch {
		case err == nil && pa.DeviceStates() == nil:
			t.Fatal("Run succeeded without the device states")
		case err != nil && !errors.Is(err, context.Canceled):
			t.Fatalf("Run canceled at the end: %v, want context.Canceled", err)
		case err != nil && pa.DeviceStates() != nil:
			t.Fatal("a canceled Run holds device states")
		}
		pa.Close()
		cancel()
	}
}

// TestParallelFewerSlotsThanStreams: with one batch in flight and two
// streams, stream 0's sender writes nothing until stream 1 has been read
// through its first round, as a source does whose writes to stream 1
// block on a full connection. Stream 0, blocked reading, must not hold
// the only slot stream 1 needs: InFlight is raised to one per stream.
func TestParallelFewerSlotsThanStreams(t *testing.T) {
	good, dst := parallelFixtureWith(t, 2, 2, false)
	rd, err := NewReader(bytes.NewReader(good[1]), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		typ, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if typ == RecordEndRound {
			break
		}
	}
	open := make(chan struct{})
	b := &countingReader{r: bytes.NewReader(good[1]), at: rd.Offset(), reached: open}
	rd.Close()
	rd0, err := NewReader(bytes.NewReader(good[0]), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hdr := rd0.Offset()
	rd0.Close()
	a := io.MultiReader(bytes.NewReader(good[0][:hdr]), &gatedReader{r: bytes.NewReader(good[0][hdr:]), open: open})
	pa, err := NewParallelApplier([]ParallelStream{{R: a}, {R: b}}, ReaderOptions{}, []RegionRef{{0, dst}},
		ParallelOptions{Workers: 1, InFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	if err := pa.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// countingReader closes reached once it has delivered at bytes.
type countingReader struct {
	r       io.Reader
	n, at   int64
	reached chan struct{}
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n < c.at && c.n+int64(n) >= c.at {
		close(c.reached)
	}
	c.n += int64(n)
	return n, err
}

// gatedReader delivers nothing until open is closed; after ten seconds it
// fails instead, so that a deadlock fails the test rather than hanging it.
type gatedReader struct {
	r    io.Reader
	open chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	select {
	case <-g.open:
		return g.r.Read(p)
	case <-time.After(10 * time.Second):
		return 0, errors.New("gate never opened: the streams deadlocked")
	}
}

// TestParallelHoldsInFlight: a stream of many one-page batches holds no
// more batch results than InFlight and one, however long its round.
func TestParallelHoldsInFlight(t *testing.T) {
	src := newRegion(t, memory.Sparse, 512, 1024, 3, memory.MixRealistic())
	meta := Metadata{VMID: "vm", Regions: []RegionInfo{RegionInfoOf(0, src)}}
	var buf bytes.Buffer
	pw, err := NewParallelWriter(meta, WriterOptions{}, []ParallelOut{{W: &buf}})
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Release()
	enc, err := NewBatchEncoder(LevelFastest)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var set memory.PageSet
	src.CollectDirty(&set)
	writeSet(t, pw, enc, 0, src, &set, 1)
	if err := pw.CloseWithDigests(nil); err != nil {
		t.Fatal(err)
	}
	const inFlight = 2
	pa, err := NewParallelApplier([]ParallelStream{{R: &buf}}, ReaderOptions{}, []RegionRef{{0, emptyLike(t, src, memory.Sparse)}},
		ParallelOptions{Workers: 2, InFlight: inFlight})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	if err := pa.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(pa.streams[0].spare); n > inFlight+1 || set.Len() < 100 {
		t.Fatalf("%d batch results made for %d batches, %d in flight", n, set.Len(), inFlight)
	}
}

// cancelingReader reads r until n bytes are left, then fails with an error
// of the caller's own that wraps context.Canceled.
type cancelingReader struct {
	r    *bytes.Reader
	left int
}

func (c *cancelingReader) Read(p []byte) (int, error) {
	if c.r.Len() <= c.left {
		return 0, fmt.Errorf("the peer went away: %w", context.Canceled)
	}
	return c.r.Read(p[:min(len(p), c.r.Len()-c.left)])
}

// TestParallelReaderCanceled: a stream's reader failing with an error that
// wraps a cancellation, before anything stopped the applier, fails Run,
// for one stream and for several: it is not taken for the stop another
// failure caused.
func TestParallelReaderCanceled(t *testing.T) {
	for _, k := range []int{1, 2} {
		streams, dst := parallelFixture(t, k)
		var ss []ParallelStream
		for i, s := range streams {
			var r io.Reader = bytes.NewReader(s)
			if i == 0 {
				r = &cancelingReader{r: bytes.NewReader(s), left: 2 * len(s) / 3}
			}
			ss = append(ss, ParallelStream{R: r})
		}
		pa, err := NewParallelApplier(ss, ReaderOptions{}, []RegionRef{{0, dst}}, ParallelOptions{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- pa.Run(context.Background()) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%d streams: Run returned %v, want the reader's error", k, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d streams: Run did not return", k)
		}
		if pa.Commit() == nil {
			t.Errorf("%d streams: Commit after a failed stream", k)
		}
		pa.Close()
	}
}
