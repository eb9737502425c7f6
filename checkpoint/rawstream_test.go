package checkpoint

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/vgpusim/vgpusim/memory"
)

// rawRecord is a record as it sits on the wire, for tests that take
// streams apart and put them back together the way an attacker or a
// faulty link would.
type rawRecord struct {
	typ     RecordType
	seq     uint64
	payload []byte // as on the wire: sealed if the stream is encrypted
	check   uint64
	off     int // offset of the record header in the stream
}

const testPageSize = 1024

type rawStream struct {
	header []byte
	recs   []rawRecord
}

// splitStream takes a well-formed stream apart.
func splitStream(tb testing.TB, data []byte) rawStream {
	tb.Helper()
	size := int(binary.LittleEndian.Uint16(data[offHeaderSize:]))
	s := rawStream{header: append([]byte(nil), data[:size]...)}
	for off := size; off < len(data); {
		if off+recordHeaderSize > len(data) {
			tb.Fatalf("record header past the end at %d", off)
		}
		h := data[off:]
		n := int(binary.LittleEndian.Uint32(h[2:]))
		end := off + recordHeaderSize + n + checkSize
		s.recs = append(s.recs, rawRecord{
			typ:     RecordType(binary.LittleEndian.Uint16(h)),
			seq:     binary.LittleEndian.Uint64(h[6:]),
			payload: append([]byte(nil), data[off+recordHeaderSize:end-checkSize]...),
			check:   binary.LittleEndian.Uint64(data[end-checkSize:]),
			off:     off,
		})
		off = end
	}
	return s
}

// join puts a stream back together. With rechain, check values (and the
// header's) are recomputed, as anyone can without a key; with renumber,
// sequence numbers are too.
func (s rawStream) join(rechain, renumber bool) []byte {
	out := append([]byte(nil), s.header...)
	hs := len(s.header) - checkSize
	if rechain {
		binary.LittleEndian.PutUint64(out[hs:], xxhash.Sum64(out[:hs]))
	}
	prev := binary.LittleEndian.Uint64(out[hs:])
	for i, r := range s.recs {
		if renumber {
			r.seq = uint64(i)
		}
		var hdr [checkSize + recordHeaderSize]byte
		binary.LittleEndian.PutUint64(hdr[:], prev)
		binary.LittleEndian.PutUint16(hdr[8:], uint16(r.typ))
		binary.LittleEndian.PutUint32(hdr[10:], uint32(len(r.payload)))
		binary.LittleEndian.PutUint64(hdr[14:], r.seq)
		if rechain {
			d := xxhash.New()
			d.Write(hdr[:])
			d.Write(r.payload)
			r.check = d.Sum64()
		}
		out = append(out, hdr[checkSize:]...)
		out = append(out, r.payload...)
		out = binary.LittleEndian.AppendUint64(out, r.check)
		prev = r.check
	}
	return out
}

// clone returns a deep copy of s.
func (s rawStream) clone() rawStream {
	c := rawStream{header: append([]byte(nil), s.header...)}
	for _, r := range s.recs {
		r.payload = append([]byte(nil), r.payload...)
		c.recs = append(c.recs, r)
	}
	return c
}

// testStream writes a small stream: a RAM region and a framebuffer
// region, two rounds, a device state, final pages, the end. Pages are
// 1 KiB and mostly compressible, so that the stream stays around 10 KiB
// and tests can cut it at every byte.
func testStream(tb testing.TB, opts WriterOptions) ([]byte, []*memory.Region) {
	tb.Helper()
	return testStreamOf(tb, opts, testPageSize)
}

// testStreamOf is testStream with pages of ps bytes.
func testStreamOf(tb testing.TB, opts WriterOptions, ps int) ([]byte, []*memory.Region) {
	tb.Helper()
	ram := newRegion(tb, memory.Sparse, 24, ps, 5, memory.Mix{Name: "t", Parts: []memory.MixPart{
		{Class: memory.ClassZero, Weight: 1}, {Class: memory.ClassText, Weight: 2}, {Class: memory.ClassActivations, Weight: 1}}})
	fb := newRegion(tb, memory.Sparse, 4, ps, 6, memory.MixText())
	var buf bytes.Buffer
	if opts.BatchBytes == 0 {
		opts.BatchBytes = 4 * ps
	}
	opts.StreamID = testStreamID
	w, err := NewWriter(&buf, Metadata{
		VMID: "vm-test", GPUModel: "Tesla P40", Profiles: []string{"P40-4q"},
		Regions: []RegionInfo{RegionInfoOf(0, ram), RegionInfoOf(1, fb)},
	}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Release()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	// A mixed stream's batches take every codec: a level per part.
	level := func(l Level) {
		if opts.Mixed {
			must(w.SetLevel(l))
		}
	}
	var set memory.PageSet
	ram.CollectDirty(&set)
	level(LevelS2)
	must(w.WriteRegion(0, ram, &set))
	fb.CollectDirty(&set)
	level(LevelFastest)
	must(w.WriteRegion(1, fb, &set))
	_, err = w.EndRound()
	must(err)
	for p := 0; p < 24; p += 5 {
		_, err := ram.WriteAt([]byte("round one"), int64(p*ps+ps/2))
		must(err)
	}
	ram.CollectDirty(&set)
	level(LevelNone)
	must(w.WriteRegion(0, ram, &set))
	_, err = w.EndRound()
	must(err)
	must(w.WriteDeviceState(DeviceState{Device: 0, Version: 2, Data: []byte("channels, contexts, registers")}))
	_, err = fb.WriteAt([]byte("final"), int64(ps*2))
	must(err)
	fb.CollectDirty(&set)
	level(LevelS2)
	must(w.WriteRegion(1, fb, &set))
	ramDigest, err := ram.Digest()
	must(err)
	must(w.CloseWithDigests([]RegionDigest{{Region: 0, Digest: ramDigest}}))
	return buf.Bytes(), []*memory.Region{ram, fb}
}

func TestRawStreamJoinsBack(t *testing.T) {
	for _, opts := range []WriterOptions{{}, {Encryption: EncryptionOpportunistic, Key: testKey}} {
		data, _ := testStream(t, opts)
		s := splitStream(t, data)
		if got := s.join(false, false); !bytes.Equal(got, data) {
			t.Fatal("split and join changed the stream")
		}
		if got := s.join(true, true); !bytes.Equal(got, data) {
			t.Fatal("rechaining a good stream changed it")
		}
		if len(s.recs) < 8 {
			t.Fatalf("test stream has only %d records", len(s.recs))
		}
	}
}
