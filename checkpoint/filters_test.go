package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"slices"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
	"pgregory.net/rapid"
)

// TestShuffleAgainstDefinition checks shuffle against its definition, byte
// b of element i at b*n+i, and unshuffle as its inverse.
func TestShuffleAgainstDefinition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		src := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "elements")
		src = src[:len(src)/4*4]
		n := len(src) / 4
		got := make([]byte, len(src))
		shuffle(got, src)
		for i := range n {
			for b := range 4 {
				if got[b*n+i] != src[4*i+b] {
					t.Fatalf("byte %d of element %d at %d is %#x, want %#x", b, i, b*n+i, got[b*n+i], src[4*i+b])
				}
			}
		}
		back := make([]byte, len(src))
		unshuffle(back, got)
		if !bytes.Equal(back, src) {
			t.Fatalf("unshuffle(shuffle(x)) = %x, want %x", back, src)
		}
	})
}

// TestXorIntoCountsZeros checks xorInto's XOR and its count of zero bytes
// against a byte at a time.
func TestXorIntoCountsZeros(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := 8 * rapid.IntRange(0, 16).Draw(t, "words")
		// Bytes drawn from a small alphabet, so that equal bytes (zero
		// XORs) are common.
		a := rapid.SliceOfN(rapid.ByteRange(0, 3), n, n).Draw(t, "a")
		b := rapid.SliceOfN(rapid.ByteRange(0, 3), n, n).Draw(t, "b")
		dst := make([]byte, n)
		zeros := xorInto(dst, a, b)
		want := 0
		for i := range n {
			if dst[i] != a[i]^b[i] {
				t.Fatalf("byte %d: %#x, want %#x", i, dst[i], a[i]^b[i])
			}
			if dst[i] == 0 {
				want++
			}
		}
		if zeros != want {
			t.Fatalf("%d zero bytes counted, want %d", zeros, want)
		}
		xorInPlace(dst, b)
		if !bytes.Equal(dst, a) {
			t.Fatal("xorInPlace(a^b, b) != a")
		}
	})
}

// TestLooksFloat32 checks the sampler's verdict on each content class and
// on the XOR of two generations of a page changed in its low bits.
func TestLooksFloat32(t *testing.T) {
	const ps = 64 << 10
	page := func(c memory.Class, gen uint32) []byte {
		p := make([]byte, ps)
		memory.Generate(p, c, 7, 3, gen)
		return p
	}
	// A float page changed in its low 16 bits only, as a small update
	// changes trained weights.
	w := page(memory.ClassWeights, 1)
	nudged := bytes.Clone(w)
	nudgeLowBytes(nudged)
	x := make([]byte, ps)
	xorInto(x, w, nudged)
	for _, tc := range []struct {
		name string
		page []byte
		want bool
	}{
		{"weights", w, true},
		{"activations", page(memory.ClassActivations, 1), false},
		{"text", page(memory.ClassText, 1), false},
		{"random", page(memory.ClassRandom, 1), false},
		{"zero", page(memory.ClassZero, 1), false},
		{"xor of a low-bit update", x, true},
		{"short", w[:256], false},
	} {
		if got := looksFloat32(tc.page); got != tc.want {
			t.Errorf("%s: looksFloat32 = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// nudgeLowBytes flips pseudo-random bits in the two low bytes of each
// float32 of p, as a small update changes trained weights.
func nudgeLowBytes(p []byte) {
	x := uint32(2463534242)
	for i := 0; i+4 <= len(p); i += 4 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] ^= byte(x)
		p[i+1] ^= byte(x>>8) | 1
	}
}

// writeFilteredStream writes src over rounds: round i sends rounds[i].send
// (indices increasing) through an encoder with filters f, after mutate(i)
// changed src, committing the delta cache after each round. It returns the
// stream and the batches' counts of delta and unchanged pages.
func writeFilteredStream(tb fataler, src *memory.Region, level Level, f PageFilters, rounds int,
	mutate func(round int) []int) (stream []byte, deltas, unchanged int) {
	tb.Helper()
	meta := Metadata{VMID: "vm-filters", GPUModel: "Tesla P40", Profiles: []string{"P40-1Q"},
		Regions: []RegionInfo{RegionInfoOf(3, src)}}
	if f.Delta != nil {
		if err := f.Delta.Reset(meta.Regions); err != nil {
			tb.Fatal(err)
		}
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, meta, WriterOptions{Level: level, Filters: f.Enabled(), StreamID: testStreamID})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Release()
	enc, err := NewBatchEncoder(level)
	if err != nil {
		tb.Fatal(err)
	}
	defer enc.Close()
	enc.SetFilters(f)
	perBatch := PagesPerBatch(DefaultBatchBytes, src.PageSize())
	for round := range rounds {
		send := mutate(round)
		for len(send) > 0 {
			n := min(perBatch, len(send))
			if err := enc.Begin(3, src.PageSize()); err != nil {
				tb.Fatal(err)
			}
			for _, p := range send[:n] {
				if err := enc.AddFrom(src, p); err != nil {
					tb.Fatal(err)
				}
			}
			b, err := enc.Finish()
			if err != nil {
				tb.Fatal(err)
			}
			deltas += b.DeltaPages
			unchanged += b.UnchangedPages
			if err := w.WriteBatch(b); err != nil {
				tb.Fatal(err)
			}
			send = send[n:]
		}
		if f.Delta != nil {
			f.Delta.Commit()
		}
		if _, err := w.EndRound(); err != nil {
			tb.Fatal(err)
		}
	}
	d, err := src.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.CloseWithDigests([]RegionDigest{{Region: 3, Digest: d}}); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), deltas, unchanged
}

// applyStream applies stream to a fresh region shaped like src and returns
// it, or the Applier's error.
func applyStream(tb fataler, stream []byte, src *memory.Region) (*memory.Region, error) {
	tb.Helper()
	rd, err := NewReader(bytes.NewReader(stream), ReaderOptions{})
	if err != nil {
		return nil, err
	}
	dst, err := memory.New(memory.Config{SizeBytes: src.Size(), PageSize: src.PageSize(), Kind: memory.Sparse, Seed: src.Seed()})
	if err != nil {
		tb.Fatal(err)
	}
	a, err := NewApplier(rd, []RegionRef{{ID: 3, Region: dst}})
	if err != nil {
		return nil, err
	}
	if err := a.Run(); err != nil {
		return nil, err
	}
	return dst, a.Commit()
}

// TestFilteredRoundsMatchSource writes pages over several rounds with
// shuffling and a delta cache of random size (so that pages share slots),
// changing pages between rounds in the ways a guest does — rewritten with
// fresh content, changed in a few bytes, zeroed — and sending some pages
// unchanged; the destination must end with exactly the source's pages,
// whatever the filters chose.
func TestFilteredRoundsMatchSource(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Pages of 512 bytes and more are sampled for float data and
		// shuffled; smaller ones never are.
		ps := rapid.SampledFrom([]int{memory.MinPageSize, 512, 4096}).Draw(t, "page size")
		pages := rapid.IntRange(1, 48).Draw(t, "pages")
		src, err := memory.New(memory.Config{SizeBytes: int64(pages * ps), PageSize: ps, Kind: memory.Sparse, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		var f PageFilters
		f.Shuffle = rapid.Bool().Draw(t, "shuffle")
		if rapid.Bool().Draw(t, "delta") {
			slots := rapid.IntRange(1, pages+2).Draw(t, "cache slots")
			if f.Delta, err = NewDeltaCache(int64(2 * slots * ps)); err != nil {
				t.Fatal(err)
			}
		}
		level := rapid.SampledFrom([]Level{LevelNone, LevelFastest, LevelS2}).Draw(t, "level")
		classes := []memory.Class{memory.ClassWeights, memory.ClassTrainingWeights, memory.ClassText, memory.ClassRandom, memory.ClassActivations, memory.ClassZero}
		rounds := rapid.IntRange(1, 5).Draw(t, "rounds")
		stream, _, _ := writeFilteredStream(t, src, level, f, rounds, func(round int) []int {
			send := map[int]bool{}
			if round == 0 {
				for p := range pages {
					send[p] = true
				}
			}
			for range rapid.IntRange(0, pages).Draw(t, "changes") {
				p := rapid.IntRange(0, pages-1).Draw(t, "page")
				send[p] = true
				switch rapid.IntRange(0, 2).Draw(t, "change") {
				case 0:
					if err := src.Fill(p, 1, rapid.SampledFrom(classes).Draw(t, "class")); err != nil {
						t.Fatal(err)
					}
				case 1:
					off := rapid.IntRange(0, ps-8).Draw(t, "offset")
					if _, err := src.WriteAt([]byte("nudged!!"), int64(p*ps+off)); err != nil {
						t.Fatal(err)
					}
				case 2:
					if err := src.Fill(p, 1, memory.ClassZero); err != nil {
						t.Fatal(err)
					}
				}
			}
			// A page sent again without a change.
			if round > 0 && rapid.Bool().Draw(t, "resend") {
				send[rapid.IntRange(0, pages-1).Draw(t, "resent page")] = true
			}
			return slices.Sorted(mapKeys(send))
		})
		dst, err := applyStream(t, stream, src)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := memory.FirstDiff(src, dst); err != nil || p >= 0 {
			t.Fatalf("destination differs from the source at page %d (%v)", p, err)
		}
	})
}

func mapKeys(m map[int]bool) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestDeltaOfWeightsUnderUpdate checks that a float page changed in its
// low bits goes as a shuffled delta, one unchanged as an unchanged page,
// and one rewritten with fresh content whole.
func TestDeltaOfWeightsUnderUpdate(t *testing.T) {
	const ps, pages = 64 << 10, 4
	src, err := memory.New(memory.Config{SizeBytes: pages * ps, PageSize: ps, Kind: memory.Sparse, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Fill(0, pages, memory.ClassWeights); err != nil {
		t.Fatal(err)
	}
	cache, err := NewDeltaCache(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []PageKind
	stream, deltas, unchanged := writeFilteredStream(t, src, LevelFastest, PageFilters{Shuffle: true, Delta: cache}, 2, func(round int) []int {
		if round == 0 {
			return []int{0, 1, 2, 3}
		}
		{
			// Page 0: its low mantissa bytes nudged; page 1 untouched;
			// page 2 fresh weights.
			page := make([]byte, ps)
			if _, err := src.ReadPage(0, page); err != nil {
				t.Fatal(err)
			}
			nudgeLowBytes(page)
			if _, err := src.WriteAt(page, 0); err != nil {
				t.Fatal(err)
			}
			if err := src.Fill(2, 1, memory.ClassWeights); err != nil {
				t.Fatal(err)
			}
		}
		return []int{0, 1, 2}
	})
	rd, err := NewReader(bytes.NewReader(stream), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	round := 0
	for {
		typ, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if typ == RecordEndStream {
			break
		}
		if typ == RecordEndRound {
			round++
		}
		if typ == RecordPageBatch && round == 1 {
			b := rd.Batch()
			for i := range b.Len() {
				kinds = append(kinds, b.Page(i).Kind)
			}
		}
	}
	want := []PageKind{PageDelta | PageShuffled, PageUnchanged, PageShuffled}
	if !slices.Equal(kinds, want) {
		t.Fatalf("round 1 kinds %v, want %v", kinds, want)
	}
	if deltas != 2 || unchanged != 1 {
		t.Fatalf("%d delta pages, %d unchanged, want 2 and 1", deltas, unchanged)
	}
	dst, err := applyStream(t, stream, src)
	if err != nil {
		t.Fatal(err)
	}
	sameRegion(t, src, dst)
}

// TestDeltaBaseMismatchFails checks that a delta against content the
// destination does not hold fails with ErrDeltaBase and leaves no page
// half-applied: the Applier scrubs the destination.
func TestDeltaBaseMismatchFails(t *testing.T) {
	const ps, pages = 4096, 2
	src, err := memory.New(memory.Config{SizeBytes: pages * ps, PageSize: ps, Kind: memory.Sparse, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Fill(0, pages, memory.ClassText); err != nil {
		t.Fatal(err)
	}
	cache, err := NewDeltaCache(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	stream, deltas, _ := writeFilteredStream(t, src, LevelFastest, PageFilters{Delta: cache}, 1, func(int) []int {
		// The cache is told of content the stream never carries, as a
		// sender that forgot to Reset it would.
		page := make([]byte, ps)
		if _, err := src.ReadPage(1, page); err != nil {
			t.Fatal(err)
		}
		page[100] ^= 1
		cache.add(3, 1, page)
		cache.Commit()
		return []int{1}
	})
	if deltas != 1 {
		t.Fatalf("%d delta pages, want 1", deltas)
	}
	_, err = applyStream(t, stream, src)
	wantErr(t, err, ErrDeltaBase)
}

// TestDeltaCacheIndependentOfOrder checks that a pass's additions leave the
// cache the same whatever their order, as encoders on several goroutines
// add them: the slot a page keeps and what a lookup returns, for pages
// added with their bytes, by an id alone (AddID) or as zero pages.
func TestDeltaCacheIndependentOfOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const ps = memory.MinPageSize
		pages := rapid.IntRange(1, 40).Draw(t, "pages")
		slots := rapid.IntRange(1, pages).Draw(t, "slots")
		regions := []RegionInfo{{ID: 1, SizeBytes: int64(pages * ps), PageSize: ps}}
		sent := rapid.SliceOfNDistinct(rapid.IntRange(0, pages-1), 1, pages, rapid.ID[int]).Draw(t, "sent")
		how := rapid.SliceOfN(rapid.IntRange(0, 2), len(sent), len(sent)).Draw(t, "zero, bytes or id")
		perm := rapid.Permutation(slices.Clone(sent)).Draw(t, "order")
		kind := func(p int) int { return how[slices.Index(sent, p)] }
		content := func(p int) []byte { return bytes.Repeat([]byte{byte(p + 1)}, ps) }
		type held struct {
			data []byte
			id   uint64
			byID bool
		}
		state := func(order []int) []held {
			c, err := NewDeltaCache(int64(2 * slots * ps))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Reset(regions); err != nil {
				t.Fatal(err)
			}
			for _, p := range order {
				switch kind(p) {
				case 0:
					c.add(1, p, nil)
				case 1:
					c.add(1, p, content(p))
				case 2:
					c.AddID(1, p, uint64(p)+100, false)
				}
			}
			c.Commit()
			hs := make([]held, pages)
			for p := range pages {
				if data, _, ok := c.lookup(1, p); ok {
					hs[p].data = bytes.Clone(data)
				}
				hs[p].id, hs[p].byID = c.LookupID(1, p)
			}
			if c.HeldBytes() > c.Capacity() {
				t.Fatalf("cache holds %d bytes, capacity %d", c.HeldBytes(), c.Capacity())
			}
			return hs
		}
		a, b := state(sent), state(perm)
		for p := range pages {
			if !bytes.Equal(a[p].data, b[p].data) || a[p].id != b[p].id || a[p].byID != b[p].byID {
				t.Fatalf("page %d: cached %d bytes or id %d in one order, %d bytes or id %d in another", p, len(a[p].data), a[p].id, len(b[p].data), b[p].id)
			}
			switch {
			case a[p].data != nil && (kind(p) != 1 || !bytes.Equal(a[p].data, content(p))):
				t.Fatalf("page %d: cached content is not what was sent", p)
			case a[p].byID && (kind(p) != 2 || a[p].id != uint64(p)+100):
				t.Fatalf("page %d: cached id %d is not what was sent", p, a[p].id)
			case a[p].data != nil && a[p].byID:
				t.Fatalf("page %d: cached by its bytes and by an id", p)
			}
		}
	})
}

// TestFilteredStreamVersion checks the header of a stream with page
// filters: version 1.3 and the flag, which a stream that declares an older
// minor cannot carry.
func TestFilteredStreamVersion(t *testing.T) {
	stream, _ := testStreamOf(t, WriterOptions{Filters: true}, memory.MinPageSize)
	rd, err := NewReader(bytes.NewReader(stream), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := rd.Header(); !h.Filters || h.Minor != minorFilters {
		t.Fatalf("header %+v, want page filters at minor %d", h, minorFilters)
	}
	if err := readAll(stream, ReaderOptions{}); err != nil {
		t.Fatal(err)
	}
	old := withMinor(t, stream, minorSnapshot)
	wantErr(t, readAll(old, ReaderOptions{}), ErrVersion)

	// A batch of the older layout refused in a stream with page filters.
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Metadata{VMID: "vm", GPUModel: "Tesla P40", Profiles: []string{"P40-1Q"},
		Regions: []RegionInfo{{ID: 0, SizeBytes: memory.MinPageSize, PageSize: memory.MinPageSize}}}, WriterOptions{Filters: true})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := NewBatchEncoder(LevelFastest)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	if err := enc.Begin(0, memory.MinPageSize); err != nil {
		t.Fatal(err)
	}
	if err := enc.Add(0, 1, make([]byte, memory.MinPageSize)); err != nil {
		t.Fatal(err)
	}
	b, err := enc.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch(b); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unfiltered batch in a filtered stream: %v, want ErrInvalid", err)
	}
}

// TestPageKindNames checks the names of the kinds of version 1.3.
func TestPageKindNames(t *testing.T) {
	for k, want := range map[PageKind]string{
		PageZero: "zero", PageRaw: "raw", PageCompressed: "compressed", PageShuffled: "shuffled",
		PageUnchanged: "unchanged", PageDelta | PageRaw: "delta-raw", PageDelta | PageShuffled: "delta-shuffled",
		PageDelta | PageCompressed: "delta-compressed", 4: "PageKind(4)", 0x20: "PageKind(32)",
	} {
		if got := k.String(); got != want {
			t.Errorf("PageKind(%#x) = %q, want %q", uint8(k), got, want)
		}
	}
	if bits.OnesCount8(uint8(PageDelta)) != 1 || PageDelta&pageStorageMask != 0 {
		t.Fatal("PageDelta is not a flag apart from the storage bits")
	}
}

// withMinor returns data, a stream, with its header declaring minor
// version minor, its check values recomputed.
func withMinor(tb testing.TB, data []byte, minor uint16) []byte {
	s := splitStream(tb, data)
	h := s.header[:len(s.header)-checkSize]
	binary.LittleEndian.PutUint16(h[offMinor:], minor)
	s.header = append(h, make([]byte, checkSize)...)
	return s.join(true, true)
}

// deltaSeedStream is a stream of two rounds with every kind of version
// 1.3: weights shuffled in round 0; in round 1 a shuffled delta, an
// unchanged page, a compressed delta of text and a raw delta of random
// bytes, under zstd. Small pages keep it a short fuzz seed.
func deltaSeedStream(tb testing.TB) []byte {
	const ps, pages = 1024, 6
	src, err := memory.New(memory.Config{SizeBytes: pages * ps, PageSize: ps, Kind: memory.Sparse, Seed: 9})
	if err != nil {
		tb.Fatal(err)
	}
	for p, c := range []memory.Class{memory.ClassWeights, memory.ClassWeights, memory.ClassText, memory.ClassRandom, memory.ClassZero, memory.ClassText} {
		if err := src.Fill(p, 1, c); err != nil {
			tb.Fatal(err)
		}
	}
	cache, err := NewDeltaCache(1 << 20)
	if err != nil {
		tb.Fatal(err)
	}
	stream, deltas, unchanged := writeFilteredStream(tb, src, LevelFastest, PageFilters{Shuffle: true, Delta: cache}, 2, func(round int) []int {
		if round == 0 {
			return []int{0, 1, 2, 3, 4, 5}
		}
		page := make([]byte, ps)
		if _, err := src.ReadPage(0, page); err != nil {
			tb.Fatal(err)
		}
		nudgeLowBytes(page)
		for _, w := range []struct {
			off  int
			data []byte
		}{{0, page}, {2*ps + 16, []byte("nudged")}, {3*ps + 16, []byte("overwritten bytes")}} {
			if _, err := src.WriteAt(w.data, int64(w.off)); err != nil {
				tb.Fatal(err)
			}
		}
		return []int{0, 1, 2, 3}
	})
	if deltas != 4 || unchanged != 1 {
		tb.Fatalf("seed stream has %d delta pages, %d unchanged; want 4 and 1", deltas, unchanged)
	}
	return stream
}

// TestDeltaCacheStaysWithinCapacity lays a cache out for regions of any
// sizes and page sizes, sends every page of each twice with its bytes,
// and checks that the cache never holds more than its capacity, and that
// a region small enough beside the capacity keeps every page.
func TestDeltaCacheStaysWithinCapacity(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := int64(rapid.IntRange(1, 64).Draw(t, "capacity KiB")) << 10
		var regions []RegionInfo
		for i := range rapid.IntRange(1, 4).Draw(t, "regions") {
			ps := rapid.SampledFrom([]int{64, 512, 4096}).Draw(t, "page size")
			pages := rapid.IntRange(0, 40).Draw(t, "pages")
			regions = append(regions, RegionInfo{ID: uint32(i), SizeBytes: int64(pages * ps), PageSize: ps})
		}
		c, err := NewDeltaCache(capacity)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Reset(regions); err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, ri := range regions {
			total += ri.SizeBytes
		}
		for pass := range 2 {
			for _, ri := range regions {
				for p := range ri.Pages() {
					c.add(ri.ID, p, bytes.Repeat([]byte{byte(pass + 1)}, ri.PageSize))
				}
			}
			c.Commit()
			if c.HeldBytes() > c.Capacity() {
				t.Fatalf("pass %d: cache holds %d bytes, capacity %d", pass, c.HeldBytes(), c.Capacity())
			}
		}
		if 2*total <= capacity {
			for _, ri := range regions {
				for p := range ri.Pages() {
					if _, _, ok := c.lookup(ri.ID, p); !ok {
						t.Fatalf("region %d page %d not cached though every page fits", ri.ID, p)
					}
				}
			}
		}
	})
}
