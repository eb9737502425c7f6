package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/memory"
)

// testRuns are runs of a region of 1000 pages: classes, a mix defined and
// then reused, a second mix, a key below the first page.
func testRuns() []memory.Run {
	text := memory.Mix{Parts: []memory.MixPart{{Class: memory.ClassText, Weight: 3}, {Class: memory.ClassZero, Weight: 1}}}
	return []memory.Run{
		{First: 0, Pages: 10, Class: memory.ClassWeights, Gen: 1},
		{First: 10, Pages: 90, Mix: memory.MixRealistic(), MixSeed: 77, MixKey: 10, Gen: 3},
		{First: 120, Pages: 1, Class: memory.ClassZero, Gen: 9},
		{First: 121, Pages: 300, Mix: memory.MixRealistic(), MixSeed: 77, MixKey: 121, Gen: 4},
		{First: 421, Pages: 5, Mix: text, MixSeed: 1, MixKey: 0, Gen: 1 << 31},
		{First: 999, Pages: 1, Class: memory.ClassRandom, Gen: 2},
	}
}

// comparableRuns drops what the record does not carry: a mix's name.
func comparableRuns(runs []memory.Run) []memory.Run {
	out := append([]memory.Run(nil), runs...)
	for i := range out {
		out[i].Mix.Name = ""
	}
	return out
}

func TestPageRunsRoundTrip(t *testing.T) {
	meta := Metadata{Regions: []RegionInfo{{ID: 3, SizeBytes: 1000 * 4096, PageSize: 4096}}}
	runs := testRuns()
	payload := appendPageRuns(nil, 3, runs)
	var pr PageRuns
	if why, _ := decodePageRuns(payload, &pr, &meta, 1<<16, VersionMinor, false); why != "" {
		t.Fatal(why)
	}
	if diff := cmp.Diff(comparableRuns(runs), comparableRuns(pr.Runs)); diff != "" {
		t.Fatalf("runs (-sent +read):\n%s", diff)
	}
	if pages, zero := pr.Pages(); pages != 407 || zero != 1 {
		t.Errorf("pages %d, zero %d", pages, zero)
	}
	// The second run of the realistic mix names it again in a byte, not
	// its parts: a record of fragments of one fill stays small.
	if len(payload) > 80 {
		t.Errorf("payload of %d bytes", len(payload))
	}
}

// TestPageRunsRefused checks that every malformed or oversized record is
// refused with a typed reason, before any run is applied.
func TestPageRunsRefused(t *testing.T) {
	meta := Metadata{Regions: []RegionInfo{{ID: 3, SizeBytes: 1000 * 4096, PageSize: 4096}}}
	run := func(gap, pages uint64, kind byte, rest ...byte) []byte {
		b := binary.AppendUvarint(nil, gap)
		b = binary.AppendUvarint(b, pages)
		b = append(b, kind)
		return append(b, rest...)
	}
	record := func(region, n uint64, runs ...[]byte) []byte {
		b := binary.AppendUvarint(nil, region)
		b = binary.AppendUvarint(b, n)
		for _, r := range runs {
			b = append(b, r...)
		}
		return b
	}
	mix := func(parts ...byte) []byte {
		b := []byte{byte(len(parts) / 2)}
		b = append(b, parts...)
		b = binary.LittleEndian.AppendUint64(b, 5) // seed
		return append(b, 0)                        // key
	}
	for _, c := range []struct {
		name    string
		payload []byte
		limit   bool
	}{
		{"undeclared region", record(4, 1, run(0, 1, 0, 1)), false},
		{"no run", record(3, 0), false},
		{"more runs than the limit", record(3, 17, run(0, 1, 0, 1)), true},
		{"more runs than bytes", record(3, 9, run(0, 1, 0, 1)), false},
		{"zero pages", record(3, 1, run(0, 0, 0, 1)), false},
		{"past the region", record(3, 1, run(990, 11, 0, 1)), false},
		{"gap past the region", record(3, 1, run(1001, 1, 0, 1)), false},
		{"explicit class", record(3, 1, run(0, 1, byte(memory.ClassExplicit), 1)), false},
		{"unknown kind", record(3, 1, run(0, 1, 0x42, 1)), false},
		{"previous mix, none defined", record(3, 1, run(0, 1, runSameMix, 0, 1)), false},
		{"mix of no part", record(3, 1, run(0, 1, runMix, append(mix(), 1)...)), false},
		{"mix of weight zero", record(3, 1, run(0, 1, runMix, append(mix(3, 0), 1)...)), false},
		{"mix of an explicit class", record(3, 1, run(0, 1, runMix, append(mix(byte(memory.ClassExplicit), 1), 1)...)), false},
		{"mix of too many parts", record(3, 1, run(0, 1, runMix, 65)), false},
		{"generation past 32 bits", record(3, 1, run(0, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x10)), false},
		{"truncated", record(3, 1, run(0, 1, 0)), false},
		{"trailing byte", append(record(3, 1, run(0, 1, 0, 1)), 0), false},
		{"gap wrapping around", record(3, 2, run(0, 2, 0, 1), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 1, 0, 1}), false},
	} {
		var pr PageRuns
		why, over := decodePageRuns(c.payload, &pr, &meta, 16, VersionMinor, false)
		if why == "" || over != c.limit {
			t.Errorf("%s: %q, over the limit %v", c.name, why, over)
		}
	}
}

// snapshotRegion is a Synthetic region of 1 GiB written as a guest's is:
// a large fill of a mix, a rewrite of part of it, single pages set at
// other generations and classes, and a few pages of bytes of their own.
func snapshotRegion(tb testing.TB, seed uint64) *memory.Region {
	tb.Helper()
	r, err := memory.New(memory.Config{SizeBytes: 1 << 30, Kind: memory.Synthetic, Seed: seed})
	if err != nil {
		tb.Fatal(err)
	}
	steps := []error{
		r.FillMix(0, 200000, memory.MixRealistic()),
		r.FillMix(1000, 50000, memory.MixRealistic()),
		r.Fill(230000, 1000, memory.ClassWeights),
		r.StoreGenerated(5, memory.ClassText, 7),
		r.StoreGenerated(200001, memory.ClassRandom, 3),
	}
	for _, err := range steps {
		if err != nil {
			tb.Fatal(err)
		}
	}
	for p := 100; p < 400; p += 60 {
		if _, err := r.WriteAt([]byte("bytes of its own"), int64(p)*4096+9); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

func TestSaveCompact(t *testing.T) {
	src := snapshotRegion(t, 11)
	small := newRegion(t, memory.Dense, 64, 4096, 12, memory.MixRealistic())
	spec := Attachment{Name: "spec", Data: []byte("the VM's spec")}
	state := Attachment{Name: "workload", Data: bytes.Repeat([]byte("state "), 500000)} // three parts
	var file bytes.Buffer
	err := Save(&file, Snapshot{
		VMID: "vm-c", GPUModel: "Tesla P40", Profiles: []string{"P40-1Q"},
		Regions:     []RegionRef{{ID: 0, Region: src}, {ID: 1, Region: small}},
		Devices:     []DeviceState{{Device: 0, Version: 1, Data: []byte("ctx")}},
		Attachments: []Attachment{spec, state},
		Compact:     true,
	}, WriterOptions{StreamID: testStreamID})
	if err != nil {
		t.Fatal(err)
	}
	// The attachment is 3 MB; the gigabyte of generated content, a few
	// kilobytes, and the explicit pages a few more.
	if n := file.Len() - len(state.Data); n > 64<<10 {
		t.Errorf("%d bytes besides the attachment", n)
	}
	data := file.Bytes()
	dst, dstSmall := emptyLike(t, src, memory.Synthetic), emptyLike(t, small, memory.Sparse)
	var seen []Attachment
	res, err := RestorePrepared(bytes.NewReader(data), func(meta Metadata, atts []Attachment) ([]RegionRef, error) {
		seen = atts
		if meta.VMID != "vm-c" {
			t.Errorf("metadata %+v", meta)
		}
		return []RegionRef{{ID: 1, Region: dstSmall}, {ID: 0, Region: dst}}, nil
	}, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameRegion(t, small, dstSmall)
	// Of the gigabyte, the classes and generations of every page, and
	// the bytes of the pages that hold their own: generated pages of
	// equal class and generation under one seed hold equal bytes.
	a, b := make([]byte, 4096), make([]byte, 4096)
	for p := range src.Pages() {
		sa, _ := src.PageState(p)
		sb, _ := dst.PageState(p)
		if sa != sb {
			t.Fatalf("page %d: source %+v, restored %+v", p, sa, sb)
		}
		if sa.Class == memory.ClassExplicit {
			_, _ = src.ReadPage(p, a)
			_, _ = dst.ReadPage(p, b)
			if !bytes.Equal(a, b) {
				t.Fatalf("page %d: bytes differ", p)
			}
		}
	}
	want := []Attachment{spec, state}
	sameAttachments := func(got []Attachment) bool {
		return slices.EqualFunc(want, got, func(a, b Attachment) bool { return a.Name == b.Name && bytes.Equal(a.Data, b.Data) })
	}
	if !sameAttachments(seen) {
		t.Errorf("%d attachments before the pages, not the ones written", len(seen))
	}
	if !sameAttachments(res.Attachments) {
		t.Errorf("%d attachments restored, not the ones written", len(res.Attachments))
	}
	if len(res.Devices) != 1 || string(res.Devices[0].Data) != "ctx" {
		t.Errorf("devices %+v", res.Devices)
	}

	// The same file read by a reader of version 1.1 is refused where
	// its first new record is.
	s := splitStream(t, data)
	binary.LittleEndian.PutUint16(s.header[offMinor:], 1)
	wantErr(t, readAll(s.join(true, false), ReaderOptions{}), ErrUnknownRecord)
}

// TestPrepareFails checks that a prepare that fails fails the restore,
// typed, and that a destination that does not match is refused.
func TestPrepareFails(t *testing.T) {
	src := newRegion(t, memory.Synthetic, 64, 4096, 3, memory.MixRealistic())
	var file bytes.Buffer
	if err := Save(&file, Snapshot{VMID: "vm", Regions: []RegionRef{{ID: 0, Region: src}}, Compact: true}, WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("no room")
	_, err := RestorePrepared(bytes.NewReader(file.Bytes()), func(Metadata, []Attachment) ([]RegionRef, error) {
		return nil, boom
	}, ReaderOptions{})
	if e := wantErr(t, err, ErrInvalid); !errors.Is(e, boom) {
		t.Errorf("error %v does not wrap prepare's", err)
	}
	other := newRegion(t, memory.Synthetic, 32, 4096, 3, memory.Mix{})
	_, err = RestorePrepared(bytes.NewReader(file.Bytes()), func(Metadata, []Attachment) ([]RegionRef, error) {
		return []RegionRef{{ID: 0, Region: other}}, nil
	}, ReaderOptions{})
	wantErr(t, err, ErrInvalid)
}

// TestAttachmentsRefused checks the rules of attachment parts: in order,
// whole by the end, within the limit, and only in a stream declared a
// snapshot.
func TestAttachmentsRefused(t *testing.T) {
	write := func(parts ...AttachmentPart) []byte {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, Metadata{VMID: "vm"}, WriterOptions{Snapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			w.buf = appendAttachmentPart(w.buf[:0], &p)
			if err := w.rw.WriteRecord(RecordAttachment, w.buf); err != nil {
				t.Fatal(err)
			}
			w.tally.add(xxhashSum(w.buf), 0, 0)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	part := func(name string, total, off int64, data string) AttachmentPart {
		return AttachmentPart{Name: name, TotalBytes: total, Offset: off, Data: []byte(data)}
	}
	if err := readAll(write(part("a", 6, 0, "abc"), part("a", 6, 3, "def"), part("b", 0, 0, "")), ReaderOptions{}); err != nil {
		t.Fatalf("well-formed parts: %v", err)
	}
	for _, c := range []struct {
		name  string
		parts []AttachmentPart
		want  error
	}{
		{"incomplete", []AttachmentPart{part("a", 6, 0, "abc")}, ErrMalformed},
		{"part skipped", []AttachmentPart{part("a", 9, 0, "abc"), part("a", 9, 6, "ghi")}, ErrMalformed},
		{"part repeated", []AttachmentPart{part("a", 6, 0, "abc"), part("a", 6, 0, "abc")}, ErrMalformed},
		{"length changed", []AttachmentPart{part("a", 6, 0, "abc"), part("a", 7, 3, "defg")}, ErrMalformed},
		{"starts late", []AttachmentPart{part("a", 6, 3, "def")}, ErrMalformed},
		{"past its length", []AttachmentPart{part("a", 2, 0, "abc")}, ErrMalformed},
		{"empty part", []AttachmentPart{part("a", 2, 0, "")}, ErrMalformed},
		{"empty one repeated", []AttachmentPart{part("a", 0, 0, ""), part("a", 0, 0, "")}, ErrMalformed},
		{"over the limit", []AttachmentPart{part("a", 40, 0, "x"), part("b", 30, 0, "y")}, ErrLimit},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, readAll(write(c.parts...), ReaderOptions{Limits: Limits{MaxAttachmentBytes: 64}}), c.want)
		})
	}
	var many []AttachmentPart
	for i := range MaxAttachments + 1 {
		many = append(many, part(fmt.Sprint(i), 1, 0, "x"))
	}
	wantErr(t, readAll(write(many...), ReaderOptions{}), ErrLimit)

	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Metadata{VMID: "vm"}, WriterOptions{})
	wantErr(t, w.WriteAttachment(Attachment{Name: "a"}), ErrInvalid)
	w, _ = NewWriter(&buf, Metadata{VMID: "vm"}, WriterOptions{Snapshot: true})
	if err := w.WriteAttachment(Attachment{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, w.WriteAttachment(Attachment{Name: "a"}), ErrInvalid)
	wantErr(t, w.WriteAttachment(Attachment{Name: strings.Repeat("n", MaxNameBytes+1)}), ErrInvalid)
}

// TestParallelRefusesSnapshotRecords checks that streams side by side
// carry no page runs: a reader of several streams refuses them rather
// than leave their pages out.
func TestParallelRefusesSnapshotRecords(t *testing.T) {
	src := newRegion(t, memory.Synthetic, 64, 4096, 3, memory.MixRealistic())
	var file bytes.Buffer
	if err := Save(&file, Snapshot{VMID: "vm", Regions: []RegionRef{{ID: 0, Region: src}}, Compact: true}, WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	dst := emptyLike(t, src, memory.Synthetic)
	pa, err := NewParallelApplier([]ParallelStream{{R: bytes.NewReader(file.Bytes())}}, ReaderOptions{}, []RegionRef{{ID: 0, Region: dst}}, ParallelOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, pa.Run(t.Context()), ErrMalformed)
}

// TestSaveWorkers checks that the bytes of a saved file do not depend on
// how many goroutines wrote it, that they are those of a writer given each
// page in turn, and that a write that fails half-way stops every worker.
func TestSaveWorkers(t *testing.T) {
	ram := newRegion(t, memory.Sparse, 3000, 4096, 5, memory.MixRealistic())
	fb := newRegion(t, memory.Synthetic, 1000, 4096, 6, memory.MixWeights())
	snap := Snapshot{VMID: "vm-w", Regions: []RegionRef{{ID: 0, Region: ram}, {ID: 1, Region: fb}},
		Devices: []DeviceState{{Device: 0, Version: 1, Data: []byte("ctx")}}, Profiles: []string{"P40-1Q"}}
	opts := WriterOptions{StreamID: testStreamID, BatchBytes: 64 << 10}

	var seq bytes.Buffer
	w, err := NewWriter(&seq, Metadata{VMID: "vm-w", Profiles: []string{"P40-1Q"},
		Regions: []RegionInfo{RegionInfoOf(0, ram), RegionInfoOf(1, fb)}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	var digests []RegionDigest
	for _, r := range snap.Regions {
		if err := w.WriteRegion(r.ID, r.Region, nil); err != nil {
			t.Fatal(err)
		}
		d, _ := r.Region.Digest()
		digests = append(digests, RegionDigest{Region: r.ID, Digest: d})
	}
	_, _ = w.EndRound()
	_ = w.WriteDeviceState(snap.Devices[0])
	if err := w.CloseWithDigests(digests); err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2, 3, 8} {
		snap.Workers = workers
		var file bytes.Buffer
		if err := Save(&file, snap, opts); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(file.Bytes(), seq.Bytes()) {
			t.Fatalf("%d workers: the file differs from a sequential writer's", workers)
		}
		for _, n := range []int{100, seq.Len() / 2} {
			if err := Save(&failWriter{n: n}, snap, opts); !errors.Is(err, errDiskFull) {
				t.Fatalf("%d workers, disk full after %d bytes: %v", workers, n, err)
			}
		}
	}
}

// BenchmarkSave writes a guest of 256 MiB of the realistic mix as a
// suspend file of bytes, its pages read, hashed and compressed by workers
// goroutines. SetBytes is the pages' bytes.
func BenchmarkSave(b *testing.B) {
	const pages = 1 << 16
	for _, kind := range []memory.Kind{memory.Synthetic, memory.Sparse} {
		ram := newRegion(b, kind, pages, 4096, 5, memory.MixRealistic())
		for _, workers := range []int{1, 2, 4, 8, 16} {
			b.Run(fmt.Sprintf("kind=%v/workers=%d", kind, workers), func(b *testing.B) {
				b.SetBytes(pages * 4096)
				b.ReportAllocs()
				for b.Loop() {
					// A region whose digest is fresh would skip the
					// hashing: touch it as a guest would.
					_ = ram.FillMix(0, 1, memory.MixRealistic())
					if err := Save(io.Discard, Snapshot{VMID: "vm", Regions: []RegionRef{{ID: 0, Region: ram}}, Workers: workers},
						WriterOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestPageRunsOnce checks that a region is sent as runs at most once:
// records that cover its pages again, which would cost the destination
// work out of proportion to the stream's size, are refused by the writer
// and by the reader.
func TestPageRunsOnce(t *testing.T) {
	meta := Metadata{VMID: "vm", Regions: []RegionInfo{{ID: 0, SizeBytes: 1 << 30, PageSize: 4096}}}
	whole := []memory.Run{{First: 0, Pages: 1 << 18, Class: memory.ClassText, Gen: 1}}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, meta, WriterOptions{Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRuns(0, whole); err != nil {
		t.Fatal(err)
	}
	wantErr(t, w.WriteRuns(0, whole[:1]), ErrInvalid)

	buf.Reset()
	w, _ = NewWriter(&buf, meta, WriterOptions{Snapshot: true})
	for range 3 {
		w.buf = appendPageRuns(w.buf[:0], 0, whole)
		if err := w.rw.WriteRecord(RecordPageRuns, w.buf); err != nil {
			t.Fatal(err)
		}
		w.tally.add(xxhashSum(w.buf), 1<<18, 0)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, readAll(buf.Bytes(), ReaderOptions{}), ErrMalformed)
}

// TestPreparedAttachmentsFirst checks that a restore that prepares its
// destinations from the attachments sees them all, whole: an attachment
// cut by another record, or one after it, is refused.
func TestPreparedAttachmentsFirst(t *testing.T) {
	src := newRegion(t, memory.Synthetic, 64, 4096, 3, memory.MixRealistic())
	meta := Metadata{VMID: "vm", Regions: []RegionInfo{RegionInfoOf(0, src)}}
	stream := func(parts ...any) []byte {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, meta, WriterOptions{Snapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			switch p := p.(type) {
			case AttachmentPart:
				w.buf = appendAttachmentPart(w.buf[:0], &p)
				if err := w.rw.WriteRecord(RecordAttachment, w.buf); err != nil {
					t.Fatal(err)
				}
				w.tally.attached.add(&p, math.MaxInt64)
				w.tally.add(xxhashSum(w.buf), 0, 0)
			case *memory.Region:
				if err := w.WriteRegionRuns(0, p); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	part := func(name string, total, off int64, data string) AttachmentPart {
		return AttachmentPart{Name: name, TotalBytes: total, Offset: off, Data: []byte(data)}
	}
	prepare := func(Metadata, []Attachment) ([]RegionRef, error) {
		return []RegionRef{{ID: 0, Region: emptyLike(t, src, memory.Synthetic)}}, nil
	}
	good := stream(part("a", 6, 0, "abc"), part("a", 6, 3, "def"), src)
	if _, err := RestorePrepared(bytes.NewReader(good), prepare, ReaderOptions{}); err != nil {
		t.Fatalf("attachments first: %v", err)
	}
	for name, data := range map[string][]byte{
		"cut by pages":     stream(part("a", 6, 0, "abc"), src, part("a", 6, 3, "def")),
		"one after a page": stream(part("a", 3, 0, "abc"), src, part("b", 3, 0, "def")),
	} {
		_, err := RestorePrepared(bytes.NewReader(data), prepare, ReaderOptions{})
		if e := wantErr(t, err, ErrMalformed); e == nil {
			t.Errorf("%s: no error", name)
		}
		// An Applier given its destinations takes the same stream.
		if _, err := Restore(bytes.NewReader(data), []RegionRef{{ID: 0, Region: emptyLike(t, src, memory.Synthetic)}}, ReaderOptions{}); err != nil {
			t.Errorf("%s, destinations given: %v", name, err)
		}
	}
}
