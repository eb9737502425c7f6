package checkpoint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vgpusim/vgpusim/memory"
)

// fuzzLimits are tight, so that whatever a fuzzed stream declares, the
// reader holds little memory.
var fuzzLimits = Limits{
	MaxRecordBytes:      256 << 10,
	MaxBatchBytes:       128 << 10,
	MaxPagesPerRecord:   1024,
	MaxWindowBytes:      128 << 10,
	MaxDeviceStateBytes: 16 << 10,
	MaxMetadataBytes:    4 << 10,
	MaxRegions:          8,
	MaxTotalBytes:       4 << 20,
}

// fuzzReaderSeeds are real streams, whole and damaged. Their pages are
// small (the smallest a region may have), so that each stream is a couple
// of KiB and the fuzzer can run and minimize thousands a second.
func fuzzReaderSeeds(tb testing.TB) map[string][]byte {
	plain, _ := testStreamOf(tb, WriterOptions{}, memory.MinPageSize)
	sealed, _ := testStreamOf(tb, WriterOptions{Encryption: EncryptionOpportunistic, Key: testKey}, memory.MinPageSize)
	none, _ := testStreamOf(tb, WriterOptions{Level: LevelNone}, memory.MinPageSize)
	big, _ := testStreamOf(tb, WriterOptions{BatchBytes: 1024}, 1024)
	coded, _ := testStreamOf(tb, WriterOptions{Level: LevelS2}, memory.MinPageSize)
	mixed, _ := testStreamOf(tb, WriterOptions{Mixed: true}, memory.MinPageSize)
	mixedSealed, _ := testStreamOf(tb, WriterOptions{Mixed: true, Encryption: EncryptionOpportunistic, Key: testKey}, memory.MinPageSize)
	mixedBig, _ := testStreamOf(tb, WriterOptions{Mixed: true, BatchBytes: 2048}, 1024)
	shuffledSeed, _ := testStreamOf(tb, WriterOptions{Filters: true}, memory.MinPageSize)
	seeds := map[string][]byte{
		"stream-zstd":      plain,
		"stream-encrypted": sealed,
		"stream-none":      none,
		"stream-1k-pages":  big[:len(big)/4],
		"newer-minor":      newerMinor(tb, plain, false),
		"header-only":      plain[:headerSizeV1],
		"truncated":        plain[:len(plain)/2],

		// Version 1.1: coded page batches, of S2 and of every codec.
		"stream-s2":              coded,
		"stream-mixed":           mixed,
		"stream-mixed-encrypted": mixedSealed,
		"stream-mixed-1k-pages":  mixedBig[:len(mixedBig)/3],
		"mixed-truncated":        mixed[:len(mixed)*2/3],

		// Version 1.2: a suspend file, with attachments and page runs.
		"snapshot":           goldenSnapshotStream(tb, WriterOptions{}),
		"snapshot-encrypted": goldenSnapshotStream(tb, WriterOptions{Encryption: EncryptionOpportunistic, Key: testKey}),

		// Version 1.3: page filters, shuffled and delta pages.
		"filters-shuffled": shuffledSeed,
		"filters-delta":    deltaSeedStream(tb),
	}
	flipped := bytes.Clone(plain)
	flipped[len(flipped)/3] ^= 0x08
	seeds["flipped"] = flipped
	return seeds
}

// FuzzReader feeds arbitrary bytes to a Reader and an Applier. It must
// never panic, never hold buffers beyond its limits, fail only with the
// package's typed errors, and leave the destinations scrubbed when it
// fails.
func FuzzReader(f *testing.F) {
	for _, s := range fuzzReaderSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(fuzzReader)
}

// fuzzReaders keeps Readers, with their buffers and zstd decoders, from
// one input to the next: a fresh zstd decoder per input would cost more
// than reading the input, and Reset is the path a long-lived reader takes
// anyway.
var fuzzReaders = sync.Pool{New: func() any { return &Reader{} }}

func fuzzReader(t *testing.T, data []byte) {
	opts := ReaderOptions{Limits: fuzzLimits, Encryption: EncryptionOpportunistic, Key: testKey}
	rd := fuzzReaders.Get().(*Reader)
	defer fuzzReaders.Put(rd)
	if err := rd.Reset(bytes.NewReader(data), opts); err != nil {
		if !typedError(err) {
			t.Fatalf("untyped error %v", err)
		}
		return
	}
	var (
		dst []RegionRef
		err error
	)
	for _, ri := range rd.Metadata().Regions {
		if ri.Pages() > 4096 || ri.PageSize > 64<<10 {
			// Too large to scrub on every input; read without
			// applying.
			dst = nil
			break
		}
		dst = append(dst, RegionRef{ri.ID, fuzzRegion(t, ri)})
	}
	if dst == nil {
		err = drain(rd)
	} else {
		a, aerr := NewApplier(rd, dst)
		if aerr != nil {
			t.Fatal(aerr)
		}
		err = a.Run()
		if err == nil {
			err = a.Commit()
		} else {
			for _, d := range dst {
				for p := range d.Region.Pages() {
					if st, _ := d.Region.PageState(p); st != (memory.PageState{}) {
						t.Fatalf("region %d page %d not scrubbed after %v", d.ID, p, err)
					}
				}
			}
		}
	}
	if err != nil && !typedError(err) {
		t.Fatalf("untyped error %v", err)
	}
	if c := cap(rd.rr.buf); c > fuzzLimits.MaxRecordBytes+checkSize {
		t.Fatalf("record buffer of %d bytes", c)
	}
	if c := cap(rd.bd.scratch); c > fuzzLimits.MaxBatchBytes+zstdSlackBytes {
		t.Fatalf("decode buffer of %d bytes", c)
	}
}

// fuzzRegions keeps destination regions from one input to the next; an
// Applier scrubs them before use.
var fuzzRegions = struct {
	sync.Mutex
	m map[RegionInfo]*memory.Region
}{m: map[RegionInfo]*memory.Region{}}

func fuzzRegion(t *testing.T, ri RegionInfo) *memory.Region {
	fuzzRegions.Lock()
	defer fuzzRegions.Unlock()
	if r := fuzzRegions.m[ri]; r != nil {
		return r
	}
	if len(fuzzRegions.m) > 64 {
		clear(fuzzRegions.m)
	}
	r, err := memory.New(memory.Config{SizeBytes: ri.SizeBytes, PageSize: ri.PageSize, Kind: memory.Dense, Seed: ri.Seed})
	if err != nil {
		t.Fatalf("declared region %+v rejected by memory: %v", ri, err)
	}
	fuzzRegions.m[ri] = r
	return r
}

// drain reads rd to its end.
func drain(rd *Reader) error {
	for {
		if _, err := rd.Next(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// roundTripCase is what FuzzRoundTrip makes of its input: regions, the
// pages written round by round, and device blobs.
type roundTripCase struct {
	pageSize int
	pages    int
	regions  int
	level    Level
	mixed    bool // a mixed stream: each op sets the level first
	encrypt  bool
	batch    int
	ops      []rtOp
	devices  [][]byte
}

type rtOp struct {
	endRound bool
	region   uint32
	page     int
	gen      uint32
	fill     byte // 0: a zero page; else the bytes are script bytes and this
	bytes    []byte
	level    Level // in a mixed stream, of the batch this page may begin
}

// parseRoundTrip turns fuzz bytes into a case: a small header, then
// operations of a few bytes each, then device blobs.
func parseRoundTrip(script []byte, shape uint32) roundTripCase {
	c := roundTripCase{
		pageSize: memory.MinPageSize << (shape % 5), // 64 B .. 1 KiB
		pages:    1 + int(shape>>3%40),
		regions:  1 + int(shape>>9%3),
		level:    Level(shape >> 11 % 5),
		encrypt:  shape>>14&1 == 1,
	}
	// Bits 18 and 19, added with version 1.1 (older seeds have them
	// clear): an S2 stream, or a mixed one.
	switch shape >> 18 & 3 {
	case 1:
		c.level = LevelS2
	case 2, 3:
		c.mixed = true
	}
	c.batch = c.pageSize * (1 + int(shape>>15%8))
	for len(script) >= 4 && len(c.ops) < 200 {
		op := rtOp{
			endRound: script[0]&0x80 != 0,
			region:   uint32(script[0]&0x7f) % uint32(c.regions),
			page:     int(script[1]) % c.pages,
			gen:      uint32(script[2]),
			fill:     script[3],
			level:    Level((uint(script[1]) + uint(script[2])) % uint(maxLevel+1)),
		}
		script = script[4:]
		if op.fill&1 == 1 { // take page bytes from the script, repeated
			n := min(len(script), int(op.fill>>1))
			op.bytes, script = script[:n], script[n:]
		}
		c.ops = append(c.ops, op)
	}
	for len(script) > 0 && len(c.devices) < 3 {
		n := min(len(script), int(script[0]))
		c.devices = append(c.devices, append([]byte(nil), script[1:max(1, n)]...))
		script = script[max(1, n):]
	}
	return c
}

// pageOf fills p as op says.
func (op rtOp) pageOf(p []byte) {
	clear(p)
	if op.fill == 0 {
		return
	}
	src := op.bytes
	if len(src) == 0 {
		src = []byte{op.fill}
	}
	for n := 0; n < len(p); n += len(src) {
		copy(p[n:], src)
	}
	binary.LittleEndian.PutUint32(p, uint32(op.page)) // pages differ from each other
}

// roundTripWriters keeps Writers, with their zstd encoders, from one
// input to the next: Reset is cheap, a new zstd encoder is not.
var roundTripWriters = sync.Pool{New: func() any { return &Writer{} }}

// runRoundTrip writes c's operations to a stream and to source regions,
// applies the stream to fresh regions, and compares.
func runRoundTrip(t testing.TB, c roundTripCase) {
	var srcs []*memory.Region
	meta := Metadata{VMID: "fuzz", GPUModel: "Tesla P40"}
	for i := range c.regions {
		r, err := memory.New(memory.Config{SizeBytes: int64(c.pages * c.pageSize), PageSize: c.pageSize, Kind: memory.Sparse, Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, r)
		meta.Regions = append(meta.Regions, RegionInfoOf(uint32(10+i), r))
	}
	var devices []DeviceState
	for i, d := range c.devices {
		meta.Profiles = append(meta.Profiles, fmt.Sprintf("P40-%dq", i+1))
		devices = append(devices, DeviceState{Device: uint32(i), Version: uint32(7 * i), Data: d})
	}
	wopts := WriterOptions{Level: c.level, Mixed: c.mixed, BatchBytes: c.batch, StreamID: testStreamID}
	ropts := ReaderOptions{}
	if c.encrypt {
		wopts.Encryption, wopts.Key = EncryptionRequired, testKey
		ropts.Encryption, ropts.Key = EncryptionRequired, testKey
	}
	var stream bytes.Buffer
	w := roundTripWriters.Get().(*Writer)
	defer roundTripWriters.Put(w)
	if err := w.Reset(&stream, meta, wopts); err != nil {
		t.Fatal(err)
	}
	page := make([]byte, c.pageSize)
	for _, op := range c.ops {
		op.pageOf(page)
		if c.mixed {
			if err := w.SetLevel(op.level); err != nil {
				t.Fatal(err)
			}
		}
		if err := srcs[op.region].StorePage(op.page, page, op.gen); err != nil {
			t.Fatal(err)
		}
		if err := w.WritePage(10+op.region, op.page, op.gen, page); err != nil {
			t.Fatal(err)
		}
		if op.endRound {
			if _, err := w.EndRound(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, d := range devices {
		if err := w.WriteDeviceState(d); err != nil {
			t.Fatal(err)
		}
	}
	var digests []RegionDigest
	for i, r := range srcs {
		d, err := r.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, RegionDigest{Region: uint32(10 + i), Digest: d})
	}
	if err := w.CloseWithDigests(digests); err != nil {
		t.Fatal(err)
	}
	var dst []RegionRef
	for i, r := range srcs {
		d, err := memory.New(memory.Config{SizeBytes: r.Size(), PageSize: r.PageSize(), Kind: memory.Dense, Seed: r.Seed()})
		if err != nil {
			t.Fatal(err)
		}
		dst = append(dst, RegionRef{uint32(10 + i), d})
	}
	rd := fuzzReaders.Get().(*Reader)
	defer fuzzReaders.Put(rd)
	if err := rd.Reset(&stream, ropts); err != nil {
		t.Fatal(err)
	}
	a, err := NewApplier(rd, dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	meta2, got := *rd.Metadata(), a.DeviceStates()
	for i, r := range srcs {
		if p, _ := memory.FirstDiff(r, dst[i].Region); p >= 0 {
			t.Fatalf("region %d differs at page %d", i, p)
		}
	}
	if len(devices) == 0 {
		devices = nil
	}
	if diff := cmp.Diff(devices, got, cmp.Comparer(bytes.Equal)); diff != "" {
		t.Fatalf("device states (-sent +read):\n%s", diff)
	}
	if diff := cmp.Diff(meta, meta2, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("metadata (-sent +read):\n%s", diff)
	}
}

// roundTripSeeds are scripts for FuzzRoundTrip: pages of every kind over
// two rounds with devices, many pages of one region, nothing at all.
var roundTripSeeds = []struct {
	name   string
	script []byte
	shape  uint32
}{
	{"two-rounds", []byte("\x00\x01\x05\x07pattern\x81\x02\x01\x00\x01\x03\x02\x05abcd\x05dev0\x09device-1"), 0x1234},
	{"many-pages", bytes.Repeat([]byte{0x02, 0x09, 0x01, 0x11, 'z', 'e', 'r', 'o', 'x', 'y', 'z', 'w'}, 30), 0xffff},
	{"encrypted-1k", []byte("\x00\x00\x01\x00\x80\x01\x02\x0btext text\x01\x05\x09\x00\x04blob"), 4 | 1<<14 | 2<<11},
	{"empty", nil, 0},
	// Version 1.1: an S2 stream and mixed ones (shape bits 18-19).
	{"s2-two-rounds", []byte("\x00\x01\x05\x07pattern\x81\x02\x01\x00\x01\x03\x02\x05abcd\x05dev0\x09device-1"), 0x1234 | 1<<18},
	{"mixed-many-pages", bytes.Repeat([]byte{0x02, 0x09, 0x01, 0x11, 'z', 'e', 'r', 'o', 'x', 'y', 'z', 'w', 0x01, 0x0a, 0x02, 0x00}, 30), 0xffff | 2<<18},
	{"mixed-encrypted-1k", []byte("\x00\x00\x01\x00\x80\x01\x02\x0btext text\x01\x05\x09\x00\x04blob\x00\x02\x03\x05abcde"), 4 | 1<<14 | 2<<11 | 2<<18},
}

// FuzzRoundTrip writes arbitrary page sets and device blobs, reads them
// back and compares.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range roundTripSeeds {
		f.Add(s.script, s.shape)
	}
	f.Fuzz(func(t *testing.T, script []byte, shape uint32) {
		runRoundTrip(t, parseRoundTrip(script, shape))
	})
}

// TestWriteFuzzSeeds writes the seed corpus of real streams under
// testdata/fuzz when run with -update (missing files only).
func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to write missing seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path, body string) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range fuzzReaderSeeds(t) {
		write(filepath.Join(dir, "seed-"+name), fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data))
	}
	dir = filepath.Join("testdata", "fuzz", "FuzzRoundTrip")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range roundTripSeeds {
		write(filepath.Join(dir, "seed-"+s.name), fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint32(%d)\n", s.script, s.shape))
	}
}
