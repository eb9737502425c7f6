package checkpoint

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/vgpusim/vgpusim/memory"
)

var update = flag.Bool("update", false, "write missing golden streams and fuzz seeds under testdata")

// goldenPage fills p with the content of page i of region r at
// generation gen, from arithmetic of its own so that the golden streams
// do not depend on the memory package's generators: zero, text-like or
// noise, by page.
func goldenPage(p []byte, r uint32, i int, gen uint32) {
	switch (i + int(r)) % 4 {
	case 0:
		clear(p)
	case 1, 2:
		words := []string{"stun ", "round ", "page ", "dirty ", "copy ", "frame "}
		for n := 0; n < len(p); {
			n += copy(p[n:], words[(n/7+i+int(gen))%len(words)])
		}
	default:
		x := uint64(r)<<40 | uint64(i)<<8 | uint64(gen) | 1
		for n := range p {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			p[n] = byte(x >> 32)
		}
	}
}

// goldenMixedLevels are the levels the batches of a mixed golden stream
// take in turn, one per codec; levelOfCodec maps a batch's codec back to
// its level.
var goldenMixedLevels = []Level{LevelS2, LevelFastest, LevelNone}

func levelOfCodec(c Codec) Level {
	return map[Codec]Level{CodecNone: LevelNone, CodecZstd: LevelFastest, CodecS2: LevelS2}[c]
}

// goldenStream writes the stream the golden files hold.
func goldenStream(tb testing.TB, opts WriterOptions) []byte {
	tb.Helper()
	const ps = 1024
	var buf bytes.Buffer
	opts.StreamID = [StreamIDSize]byte{'g', 'o', 'l', 'd', 'e', 'n'}
	opts.BatchBytes = 6 * ps
	w, err := NewWriter(&buf, Metadata{
		VMID: "vm-golden", GPUModel: "Tesla P40", Profiles: []string{"P40-1q", "P40-2q"},
		Regions: []RegionInfo{{ID: 0, SizeBytes: 32 * ps, PageSize: ps, Seed: 1}, {ID: 7, SizeBytes: 8 * ps, PageSize: ps, Seed: 2}},
	}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Release()
	page := make([]byte, ps)
	n := 0 // pages written
	write := func(r uint32, i int, gen uint32) {
		if opts.Mixed {
			// A level for the batch this page may begin.
			if err := w.SetLevel(goldenMixedLevels[n/6%len(goldenMixedLevels)]); err != nil {
				tb.Fatal(err)
			}
		}
		n++
		goldenPage(page, r, i, gen)
		if err := w.WritePage(r, i, gen, page); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range 32 {
		write(0, i, 1)
	}
	for i := range 8 {
		write(7, i, 1)
	}
	if _, err := w.EndRound(); err != nil {
		tb.Fatal(err)
	}
	for i := 3; i < 32; i += 4 {
		write(0, i, 2)
	}
	if _, err := w.EndRound(); err != nil {
		tb.Fatal(err)
	}
	for d := range 2 {
		if err := w.WriteDeviceState(DeviceState{Device: uint32(d), Version: 1, Data: []byte(fmt.Sprintf("device %d state", d))}); err != nil {
			tb.Fatal(err)
		}
	}
	write(7, 5, 2)
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// goldenSnapshotStream writes the stream of the version 1.2 golden file:
// a suspend file's records, attachments and page runs, beside pages,
// device states and two rounds.
func goldenSnapshotStream(tb testing.TB, opts WriterOptions) []byte {
	tb.Helper()
	const ps = 1024
	var buf bytes.Buffer
	opts.StreamID = [StreamIDSize]byte{'g', 'o', 'l', 'd', 'e', 'n', '1', '2'}
	opts.Snapshot = true
	w, err := NewWriter(&buf, Metadata{
		VMID: "vm-golden", GPUModel: "Tesla P40", Profiles: []string{"P40-1q"},
		Regions: []RegionInfo{{ID: 0, SizeBytes: 64 * ps, PageSize: ps, Seed: 1}, {ID: 7, SizeBytes: 8 * ps, PageSize: ps, Seed: 2}},
	}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Release()
	text := memory.Mix{Parts: []memory.MixPart{{Class: memory.ClassText, Weight: 3}, {Class: memory.ClassZero, Weight: 1}}}
	steps := []error{
		w.WriteAttachment(Attachment{Name: "spec", Data: []byte("a VM of one P40-1Q")}),
		w.WriteAttachment(Attachment{Name: "empty"}),
		w.WriteRuns(0, []memory.Run{
			{First: 0, Pages: 4, Class: memory.ClassWeights, Gen: 1},
			{First: 4, Pages: 20, Mix: memory.MixRealistic(), MixSeed: 9, MixKey: 4, Gen: 2},
			{First: 30, Pages: 10, Mix: memory.MixRealistic(), MixSeed: 9, MixKey: 30, Gen: 3},
			{First: 40, Pages: 3, Mix: text, MixSeed: 1, MixKey: 0, Gen: 1},
		}),
		w.WriteRuns(7, []memory.Run{{First: 0, Pages: 8, Class: memory.ClassActivations, Gen: 5}}),
	}
	page := make([]byte, ps)
	for _, i := range []int{24, 25, 63} {
		goldenPage(page, 0, i, 1)
		steps = append(steps, w.WritePage(0, i, 1, page))
	}
	_, err = w.EndRound()
	steps = append(steps, err,
		w.WriteRuns(0, []memory.Run{{First: 1, Pages: 2, Class: memory.ClassRandom, Gen: 4}}),
		w.WriteDeviceState(DeviceState{Device: 0, Version: 1, Data: []byte("device 0 state")}),
		w.Close())
	for _, err := range steps {
		if err != nil {
			tb.Fatal(err)
		}
	}
	return buf.Bytes()
}

// contentSum reads a whole stream and hashes what it carries: every page
// (region, index, generation, bytes), every device state, every summary.
// Two streams with equal sums deliver the same thing, however encoded.
func contentSum(tb testing.TB, data []byte, opts ReaderOptions) uint64 {
	tb.Helper()
	rd, err := NewReader(bytes.NewReader(data), opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer rd.Close()
	h := xxhash.New()
	m := rd.Metadata()
	fmt.Fprintf(h, "%q %q %q %v\n", m.VMID, m.GPUModel, m.Profiles, m.Regions)
	var zero []byte
	for {
		t, err := rd.Next()
		if err != nil {
			if rd.Done() {
				return h.Sum64()
			}
			tb.Fatal(err)
		}
		switch t {
		case RecordPageBatch:
			b := rd.Batch()
			ps := m.Regions[m.region(b.Region)].PageSize
			for i := range b.Len() {
				p := b.Page(i)
				fmt.Fprintf(h, "page %d %d %d ", b.Region, p.Index, p.Gen)
				if p.Data == nil {
					zero = append(zero[:0], make([]byte, ps)...)
					h.Write(zero)
				} else {
					h.Write(p.Data)
				}
			}
		case RecordPageRuns:
			pr := rd.PageRuns()
			for _, r := range pr.Runs {
				fmt.Fprintf(h, "run %d %d %d %d %v %d %d %d\n", pr.Region, r.First, r.Pages, r.Class, r.Mix.Parts, r.MixSeed, r.MixKey, r.Gen)
			}
		case RecordAttachment:
			p := rd.AttachmentPart()
			fmt.Fprintf(h, "attachment %q %d %d %q\n", p.Name, p.TotalBytes, p.Offset, p.Data)
		case RecordDeviceState:
			ds := rd.DeviceState()
			fmt.Fprintf(h, "device %d %d %q\n", ds.Device, ds.Version, ds.Data)
		case RecordEndRound:
			r := rd.RoundEnd()
			fmt.Fprintf(h, "round %d %d %d %d\n", r.Round, r.Records, r.Pages, r.ZeroPages)
		case RecordEndStream:
			e := rd.StreamEnd()
			fmt.Fprintf(h, "end %d %d %d %d %d\n", e.Rounds, e.Records, e.Pages, e.ZeroPages, e.DeviceStates)
		}
	}
}

// The golden streams: written by versions 1.0 and 1.1 of the format and
// kept, so that every later version of the package is tested against
// them. A new version adds files; it never rewrites these.
var goldenFiles = []struct {
	file  string
	wopts WriterOptions
	ropts ReaderOptions
	// stable: the bytes depend on this package only (no zstd), so
	// today's writer must reproduce them exactly.
	stable bool
}{
	{"stream-v1.0-none.ckpt", WriterOptions{Level: LevelNone}, ReaderOptions{}, true},
	{"stream-v1.0-zstd.ckpt", WriterOptions{Level: LevelFastest}, ReaderOptions{}, false},
	{"stream-v1.0-zstd-encrypted.ckpt",
		WriterOptions{Level: LevelDefault, Encryption: EncryptionRequired, Key: testKey},
		ReaderOptions{Encryption: EncryptionRequired, Key: testKey}, false},
	// Version 1.1: an S2 stream, and a mixed one whose batches take the
	// three codecs in turn (goldenMixedLevels).
	{"stream-v1.1-s2.ckpt", WriterOptions{Level: LevelS2}, ReaderOptions{}, false},
	{"stream-v1.1-mixed.ckpt", WriterOptions{Mixed: true}, ReaderOptions{}, false},
	// Version 1.3: page filters, the float pages shuffled.
	{"stream-v1.3-filters.ckpt", WriterOptions{Filters: true}, ReaderOptions{}, false},
}

// The golden suspend files, without compression: that of version 1.2,
// which today's reader must read, and that of version 1.3 (the first
// whose page runs may name the class of weights under training), which
// today's writer must reproduce byte for byte.
const goldenSnapshotContentSum = 0xda55b92dca5c7405

var goldenSnapshots = []struct {
	file   string
	minor  uint16
	stable bool
}{
	{"stream-v1.2-snapshot.ckpt", 2, false},
	{"stream-v1.3-snapshot.ckpt", 3, true},
}

func TestGoldenSnapshot(t *testing.T) {
	for _, g := range goldenSnapshots {
		t.Run(g.file, func(t *testing.T) {
			path := filepath.Join("testdata", g.file)
			if _, err := os.Stat(path); *update && os.IsNotExist(err) {
				if err := os.WriteFile(path, goldenSnapshotStream(t, WriterOptions{Level: LevelNone}), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if sum := contentSum(t, data, ReaderOptions{}); sum != goldenSnapshotContentSum {
				t.Errorf("content sum %#016x, want %#016x", sum, uint64(goldenSnapshotContentSum))
			}
			if g.stable && !bytes.Equal(goldenSnapshotStream(t, WriterOptions{Level: LevelNone}), data) {
				t.Error("today's writer no longer produces the golden bytes: a format change needs a new version and a new golden file")
			}
			if h := splitStream(t, data).header; binary.LittleEndian.Uint16(h[offMinor:]) != g.minor {
				t.Errorf("header declares minor %d, want %d", binary.LittleEndian.Uint16(h[offMinor:]), g.minor)
			}
		})
	}
}

// goldenContentSum is the content of the golden streams, as contentSum
// hashes it.
const goldenContentSum = 0xca34cf5420dae97d

func TestGoldenStreams(t *testing.T) {
	for _, g := range goldenFiles {
		t.Run(g.file, func(t *testing.T) {
			path := filepath.Join("testdata", g.file)
			if _, err := os.Stat(path); *update && os.IsNotExist(err) {
				// Only a missing file is written: the golden streams
				// of past versions are never rewritten.
				if err := os.WriteFile(path, goldenStream(t, g.wopts), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if sum := contentSum(t, data, g.ropts); sum != goldenContentSum {
				t.Errorf("content sum %#016x, want %#016x", sum, uint64(goldenContentSum))
			}
			if g.stable && !bytes.Equal(goldenStream(t, g.wopts), data) {
				t.Error("today's writer no longer produces the golden bytes: a format change needs a new version and a new golden file")
			}
		})
	}
}

// TestWriterDeterministic writes the same content twice, under every
// level and with encryption, and expects the same bytes.
func TestWriterDeterministic(t *testing.T) {
	for _, g := range goldenFiles {
		if a, b := goldenStream(t, g.wopts), goldenStream(t, g.wopts); !bytes.Equal(a, b) {
			t.Errorf("%s: two writes differ", g.file)
		}
	}
}

// newerMinor rewrites a version 1.0 stream as a later minor version would
// write it: a longer header, fields appended to records that allow it, an
// optional record this version does not know, and, if critical is set, a
// critical one too.
func newerMinor(tb testing.TB, data []byte, critical bool) []byte {
	s := splitStream(tb, data)
	h := s.header[:len(s.header)-checkSize]
	binary.LittleEndian.PutUint16(h[offMinor:], VersionMinor+1)
	binary.LittleEndian.PutUint16(h[offHeaderSize:], headerSizeV1+8)
	h[offFlags+1] |= 0x40 // an optional flag
	h = append(h, "newfield"...)
	s.header = append(h, make([]byte, checkSize)...)
	var recs []rawRecord
	for i, r := range s.recs {
		switch r.typ {
		case RecordMetadata, RecordEndRound, RecordEndStream:
			// A device state's payload is hashed whole into the
			// digests, so fields appended to it would need the digests
			// recomputed, as a newer writer would; these three are not.
			r.payload = append(r.payload, 0x01, 0x02, 0x03)
		}
		recs = append(recs, r)
		if i == 2 {
			recs = append(recs, rawRecord{typ: optionalBit | 0x0123, payload: []byte("an annotation")})
			if critical {
				recs = append(recs, rawRecord{typ: 0x0123, payload: []byte("a new kind of pages")})
			}
		}
	}
	s.recs = recs
	return s.join(true, true)
}

func TestVersionRules(t *testing.T) {
	data := goldenStream(t, WriterOptions{})
	want := contentSum(t, data, ReaderOptions{})
	t.Run("newer minor with known critical records", func(t *testing.T) {
		newer := newerMinor(t, data, false)
		if got := contentSum(t, newer, ReaderOptions{}); got != want {
			t.Fatalf("content differs: %#x, want %#x", got, want)
		}
		rd, err := NewReader(bytes.NewReader(newer), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := rd.Header(); h.Minor != VersionMinor+1 || h.Major != VersionMajor {
			t.Fatalf("header %+v", h)
		}
	})
	t.Run("newer minor with an unknown critical record", func(t *testing.T) {
		wantErr(t, readAll(newerMinor(t, data, true), ReaderOptions{}), ErrUnknownRecord)
	})
	t.Run("same minor with appended fields", func(t *testing.T) {
		s := splitStream(t, data)
		s.recs[0].payload = append(s.recs[0].payload, 1)
		wantErr(t, readAll(s.join(true, false), ReaderOptions{}), ErrMalformed)
	})
	t.Run("optional record in the same minor", func(t *testing.T) {
		s := splitStream(t, data)
		s.recs = append(s.recs[:2], append([]rawRecord{{typ: optionalBit | 0x77, payload: []byte("x")}}, s.recs[2:]...)...)
		if got := contentSum(t, s.join(true, true), ReaderOptions{}); got != want {
			t.Fatalf("content differs after an optional record")
		}
	})
	t.Run("newer major", func(t *testing.T) {
		s := splitStream(t, data)
		binary.LittleEndian.PutUint16(s.header[offMajor:], VersionMajor+1)
		wantErr(t, readAll(s.join(true, false), ReaderOptions{}), ErrVersion)
	})
}

// TestGoldenCodecs checks that the version 1.1 golden streams hold what
// they are kept for: version 1.1 headers, and compressed pages of every
// codec their batches name.
func TestGoldenCodecs(t *testing.T) {
	for file, want := range map[string][]Codec{
		"stream-v1.1-s2.ckpt":    {CodecS2},
		"stream-v1.1-mixed.ckpt": {CodecNone, CodecZstd, CodecS2},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		rd, err := NewReader(bytes.NewReader(data), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := rd.Header(); h.Minor != 1 || !h.Codec.coded() {
			t.Errorf("%s: header %+v", file, h)
		}
		compressed := map[Codec]int{}
		batches := map[Codec]int{}
		eachBatch(t, rd, func(b *Batch) {
			batches[b.Codec]++
			for i := range b.Len() {
				if b.Page(i).Kind == PageCompressed {
					compressed[b.Codec]++
				}
			}
		})
		rd.Close()
		for _, c := range want {
			if batches[c] == 0 || c != CodecNone && compressed[c] == 0 {
				t.Errorf("%s: %d batches of codec %v, %d compressed pages", file, batches[c], c, compressed[c])
			}
		}
	}
}
