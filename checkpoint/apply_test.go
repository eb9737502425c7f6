package checkpoint

import (
	"bytes"
	"io"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// TestApplyRounds streams a VM whose memory keeps changing, round by
// round, and applies each round at the destination as it arrives, the way
// a migration does; the destination equals the source at the stun.
func TestApplyRounds(t *testing.T) {
	for _, kind := range []memory.Kind{memory.Dense, memory.Sparse, memory.Synthetic} {
		t.Run(kind.String(), func(t *testing.T) {
			src := newRegion(t, kind, 64, 4096, 3, memory.MixRealistic())
			fbRoot := newRegion(t, kind, 40, 4096, 4, memory.Mix{})
			fb, err := fbRoot.Map(8, 16, 44) // a vGPU's framebuffer window
			if err != nil {
				t.Fatal(err)
			}
			if err := fb.FillMix(0, 16, memory.MixText()); err != nil {
				t.Fatal(err)
			}
			var link bytes.Buffer
			w, err := NewWriter(&link, Metadata{VMID: "vm", Profiles: []string{"P40-1q"},
				Regions: []RegionInfo{RegionInfoOf(0, src), RegionInfoOf(1, fb)}}, WriterOptions{BatchBytes: 32 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Release()
			rd, err := NewReader(&link, ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			dstRoot := newRegion(t, kind, 40, 4096, 4, memory.Mix{})
			dfb, err := dstRoot.Map(20, 16, 44)
			if err != nil {
				t.Fatal(err)
			}
			dst := emptyLike(t, src, kind)
			a, err := NewApplier(rd, []RegionRef{{0, dst}, {1, dfb}})
			if err != nil {
				t.Fatal(err)
			}
			var set memory.PageSet
			pat, err := memory.NewPattern(src, memory.PatternConfig{Kind: memory.HotSet, RateBytesPerSec: 40 * 4096, Seed: 1, Mix: memory.MixRealistic()})
			if err != nil {
				t.Fatal(err)
			}
			for round := range 4 {
				src.CollectDirty(&set)
				if err := w.WriteRegion(0, src, &set); err != nil {
					t.Fatal(err)
				}
				fb.CollectDirty(&set)
				if err := w.WriteRegion(1, fb, &set); err != nil {
					t.Fatal(err)
				}
				sent, err := w.EndRound()
				if err != nil {
					t.Fatal(err)
				}
				// The destination applies the round that arrived.
				for {
					typ, err := a.Step()
					if err != nil {
						t.Fatal(err)
					}
					if typ == RecordEndRound {
						break
					}
				}
				if got := rd.RoundEnd(); got != sent {
					t.Fatalf("round %d: read %+v, sent %+v", round, got, sent)
				}
				if _, err := pat.Advance(1e9 / 4); err != nil { // the VM runs for the round
					t.Fatal(err)
				}
				if _, err := fb.WriteAt([]byte{byte(round)}, int64(round)*4096+9); err != nil {
					t.Fatal(err)
				}
			}
			// Stun: the last dirty pages, the device state, the end.
			src.CollectDirty(&set)
			if err := w.WriteRegion(0, src, &set); err != nil {
				t.Fatal(err)
			}
			fb.CollectDirty(&set)
			if err := w.WriteRegion(1, fb, &set); err != nil {
				t.Fatal(err)
			}
			if err := w.WriteDeviceState(DeviceState{Device: 0, Version: 1, Data: []byte("state")}); err != nil {
				t.Fatal(err)
			}
			ds, _ := src.Digest()
			fs, _ := fb.Digest()
			if err := w.CloseWithDigests([]RegionDigest{{0, ds}, {1, fs}}); err != nil {
				t.Fatal(err)
			}
			if err := a.Commit(); err == nil {
				t.Fatal("commit before the end of the stream")
			}
			if a.DeviceStates() != nil {
				t.Fatal("device states before the end of the stream")
			}
			if err := a.Run(); err != nil {
				t.Fatal(err)
			}
			if err := a.Commit(); err != nil {
				t.Fatal(err)
			}
			sameRegion(t, src, dst)
			sameRegion(t, fb, dfb)
			if got := a.DeviceStates(); len(got) != 1 || string(got[0].Data) != "state" {
				t.Fatalf("device states %+v", got)
			}
			if typ, err := a.Step(); err != io.EOF {
				t.Fatalf("step after the end: %v %v", typ, err)
			}
			a.Abort() // after Commit: nothing happens
			sameRegion(t, src, dst)
		})
	}
}

func TestApplierDestinations(t *testing.T) {
	data, src := testStream(t, WriterOptions{})
	ram, fb := src[0], src[1]
	newDst := func(pages, ps int, seed uint64) *memory.Region {
		return newRegion(t, memory.Sparse, pages, ps, seed, memory.Mix{})
	}
	good := func() []RegionRef {
		return []RegionRef{{0, emptyLike(t, ram, memory.Sparse)}, {1, emptyLike(t, fb, memory.Sparse)}}
	}
	cases := []struct {
		name string
		dst  []RegionRef
	}{
		{"missing region", good()[:1]},
		{"undeclared region", append(good(), RegionRef{9, emptyLike(t, fb, memory.Sparse)})},
		{"region twice", append(good(), good()[1])},
		{"page size", []RegionRef{{0, newDst(ram.Pages()/2, 2*ram.PageSize(), ram.Seed())}, good()[1]}},
		{"page count", []RegionRef{{0, newDst(ram.Pages()+1, ram.PageSize(), ram.Seed())}, good()[1]}},
		{"seed", []RegionRef{{0, newDst(ram.Pages(), ram.PageSize(), ram.Seed()+1)}, good()[1]}},
		{"nil region", []RegionRef{{0, nil}, good()[1]}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rd, err := NewReader(bytes.NewReader(data), ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			_, err = NewApplier(rd, c.dst)
			wantErr(t, err, ErrInvalid)
		})
	}
	t.Run("reader already used", func(t *testing.T) {
		rd, err := NewReader(bytes.NewReader(data), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		if _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
		_, err = NewApplier(rd, good())
		wantErr(t, err, ErrState)
	})
}

// TestApplierLeavesNothing checks that a failed or aborted stream leaves
// every destination scrubbed, even pages the destination held before.
func TestApplierLeavesNothing(t *testing.T) {
	data, src := testStream(t, WriterOptions{})
	s := splitStream(t, data)
	end := findRecord(t, s, RecordEndStream, 0)
	wrongDigest := s.clone()
	var e StreamEnd
	decodeStreamEnd(wrongDigest.recs[end].payload, &e, 16, false)
	e.RegionDigests[0].Digest++
	wrongDigest.recs[end].payload = appendStreamEnd(nil, &e)

	cases := []struct {
		name  string
		data  []byte
		abort bool
		want  error
	}{
		{"truncated", data[:len(data)-30], false, ErrTruncated},
		{"region digest", wrongDigest.join(true, false), false, ErrChecksum},
		{"aborted", data, true, ErrState},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rd, err := NewReader(bytes.NewReader(c.data), ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			dst := []*memory.Region{emptyLike(t, src[0], memory.Dense), emptyLike(t, src[1], memory.Dense)}
			// Stale content from an earlier tenant: the Applier must not
			// leave it either.
			if err := dst[0].FillMix(0, 4, memory.MixRandom()); err != nil {
				t.Fatal(err)
			}
			a, err := NewApplier(rd, []RegionRef{{0, dst[0]}, {1, dst[1]}})
			if err != nil {
				t.Fatal(err)
			}
			if c.abort {
				for range 3 {
					if _, err := a.Step(); err != nil {
						t.Fatal(err)
					}
				}
				a.Abort()
				err = a.Err()
			} else {
				err = a.Run()
			}
			wantErr(t, err, c.want)
			wantErr(t, a.Commit(), ErrState)
			if _, err := a.Step(); err == nil {
				t.Fatal("step after failure")
			}
			for i, r := range dst {
				if p, _ := memory.FirstDiff(r, emptyLike(t, r, memory.Sparse)); p >= 0 {
					t.Errorf("destination %d holds data at page %d", i, p)
				}
			}
		})
	}
}

// TestDecodedPagesAreCapped guards against the zstd decoder using spare
// capacity as scratch: every decoded page's capacity ends at the page, and
// the decoder's buffer is never written past what a batch declared and the
// zstdSlackBytes it is lent for its own use, which no page view covers.
func TestDecodedPagesAreCapped(t *testing.T) {
	src := newRegion(t, memory.Dense, 256, 4096, 8, memory.Mix{Name: "mixed", Parts: []memory.MixPart{
		{Class: memory.ClassText, Weight: 3}, {Class: memory.ClassActivations, Weight: 2}, {Class: memory.ClassZero, Weight: 1}, {Class: memory.ClassRandom, Weight: 1}}})
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Metadata{Regions: []RegionInfo{RegionInfoOf(0, src)}}, WriterOptions{BatchBytes: 64 << 10})
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
	rd, err := NewReader(&buf, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	// A scratch buffer twice what any batch needs, filled with a marker.
	rd.bd.scratch = bytes.Repeat([]byte{0xa5}, 2*(64<<10))
	compressed := decodeCheckingNeighbours(t, rd, src)[CodecZstd]
	if compressed < 100 {
		t.Fatalf("only %d compressed pages: the test proves little", compressed)
	}
}
