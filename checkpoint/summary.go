package checkpoint

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// DeviceState is one vGPU's state, handed over at switchover: contexts,
// channels, registers, scheduler credit. The stream treats it as an
// opaque blob; Version is the blob's own format version, which the device
// model that reads it checks.
type DeviceState struct {
	// Device is the index of the vGPU in Metadata.Profiles.
	Device uint32
	// Version is the version of Data's format.
	Version uint32
	// Data is the blob.
	Data []byte
}

func appendDeviceState(b []byte, ds *DeviceState) []byte {
	b = appendUvarint(b, uint64(ds.Device))
	b = appendUvarint(b, uint64(ds.Version))
	return appendBytes(b, ds.Data)
}

func decodeDeviceState(p []byte, ds *DeviceState, max int, newer bool) (why string, overLimit bool) {
	d := newDecoder(p)
	ds.Device = d.uint32("device")
	ds.Version = d.uint32("device state version")
	ds.Data = d.bytes("device state", d.uvarintLimit("device state length", uint64(max)))
	d.end(newer)
	return d.problem()
}

// RoundEnd is the payload of an end-of-round record: what the round sent.
type RoundEnd struct {
	// Round numbers rounds from 0.
	Round uint64
	// Records counts the round's page batch and device state records.
	Records uint64
	// Pages counts the pages the round sent, ZeroPages those of them
	// that were zero.
	Pages, ZeroPages uint64
	// Digest is the round's digest (see tally).
	Digest uint64
}

func appendRoundEnd(b []byte, r *RoundEnd) []byte {
	b = appendUvarint(b, r.Round)
	b = appendUvarint(b, r.Records)
	b = appendUvarint(b, r.Pages)
	b = appendUvarint(b, r.ZeroPages)
	return appendUint64(b, r.Digest)
}

func decodeRoundEnd(p []byte, r *RoundEnd, newer bool) string {
	d := newDecoder(p)
	r.Round = d.uvarint("round")
	r.Records = d.uvarint("record count")
	r.Pages = d.uvarint("page count")
	r.ZeroPages = d.uvarint("zero page count")
	r.Digest = d.uint64("round digest")
	d.end(newer)
	return d.why
}

// RegionDigest is memory.Region.Digest of one region of the stream, taken
// by the writer when the region could no longer change (a suspended VM, a
// stunned one). A destination that applied the whole stream compares it
// with its own region's digest: an end-to-end check of the bytes, past
// every codec.
type RegionDigest struct {
	// Region is the region's id.
	Region uint32
	// Digest is memory.Region.Digest of the region.
	Digest uint64
}

// StreamEnd is the payload of the end-of-stream record: the totals of the
// whole stream.
type StreamEnd struct {
	// Rounds counts the end-of-round records.
	Rounds uint64
	// Records counts every page batch and device state record.
	Records uint64
	// Pages and ZeroPages count every page sent, and the zero ones.
	Pages, ZeroPages uint64
	// DeviceStates counts the device state records.
	DeviceStates uint64
	// Digest is the stream's digest (see tally).
	Digest uint64
	// RegionDigests are the regions' content digests, if the writer took
	// them.
	RegionDigests []RegionDigest
}

func appendStreamEnd(b []byte, s *StreamEnd) []byte {
	b = appendUvarint(b, s.Rounds)
	b = appendUvarint(b, s.Records)
	b = appendUvarint(b, s.Pages)
	b = appendUvarint(b, s.ZeroPages)
	b = appendUvarint(b, s.DeviceStates)
	b = appendUint64(b, s.Digest)
	b = appendUvarint(b, uint64(len(s.RegionDigests)))
	for _, r := range s.RegionDigests {
		b = appendUvarint(b, uint64(r.Region))
		b = appendUint64(b, r.Digest)
	}
	return b
}

func decodeStreamEnd(p []byte, s *StreamEnd, maxRegions int, newer bool) string {
	d := newDecoder(p)
	s.Rounds = d.uvarint("round count")
	s.Records = d.uvarint("record count")
	s.Pages = d.uvarint("page count")
	s.ZeroPages = d.uvarint("zero page count")
	s.DeviceStates = d.uvarint("device state count")
	s.Digest = d.uint64("stream digest")
	n := int(d.uvarintMax("region digest count", uint64(maxRegions)))
	s.RegionDigests = s.RegionDigests[:0]
	for i := 0; i < n && d.ok; i++ {
		id := d.uint32("region id")
		s.RegionDigests = append(s.RegionDigests, RegionDigest{Region: id, Digest: d.uint64("region digest")})
	}
	d.end(newer)
	return d.why
}

// tally keeps the counts and digests of a stream as it is written or
// read; writer and reader run the same code, and compare at each end of
// round and at the end of the stream.
//
// Each content record contributes a sum: for a page batch, the xxhash64 of
// its page table (region, indices, kinds, generations); for a device
// state, that of its payload. A round's digest is the xxhash64 of its
// records' sums in order, and the stream's digest that of all of them.
// The digests cover what was sent — which pages, at which generation, how —
// and not the page bytes, which the record check values already cover: a
// digest is computed where the batches are produced, so it catches a
// pipeline that drops, repeats or reorders a batch before the record layer
// chains it, which the check values cannot.
type tally struct {
	round        RoundEnd // current round; Digest unused until closed
	roundDigest  xxhash.Digest
	stream       StreamEnd
	streamDigest xxhash.Digest
	sumBuf       [8]byte
	deviceSeen   []bool // by device index: a stream carries one state per device
	attached     attachments
	runPages     []int64 // by region index: the pages page runs records covered
}

func (t *tally) reset(devices, regions int) {
	t.round = RoundEnd{}
	t.roundDigest.Reset()
	t.stream = StreamEnd{RegionDigests: t.stream.RegionDigests[:0]}
	t.streamDigest.Reset()
	t.deviceSeen = append(t.deviceSeen[:0], make([]bool, devices)...)
	t.attached.reset()
	t.runPages = append(t.runPages[:0], make([]int64, regions)...)
}

// addRuns counts the pages runs of region i (an index in the metadata)
// cover, reporting false once they are more than its pages: a region is
// sent as runs at most once, so that a stream's cost to apply stays in
// proportion to its size.
func (t *tally) addRuns(i int, covered, pages int) bool {
	t.runPages[i] += int64(covered)
	return t.runPages[i] <= int64(pages)
}

// addDevice counts the state of device dev, reporting false if the stream
// already carried one or dev names no device.
func (t *tally) addDevice(dev uint32, sum uint64) bool {
	if int64(dev) >= int64(len(t.deviceSeen)) || t.deviceSeen[dev] {
		return false
	}
	t.deviceSeen[dev] = true
	t.stream.DeviceStates++
	t.add(sum, 0, 0)
	return true
}

// add counts a content record with the given sum.
func (t *tally) add(sum uint64, pages, zero int) {
	binary.LittleEndian.PutUint64(t.sumBuf[:], sum)
	t.roundDigest.Write(t.sumBuf[:])
	t.streamDigest.Write(t.sumBuf[:])
	t.round.Records++
	t.round.Pages += uint64(pages)
	t.round.ZeroPages += uint64(zero)
	t.stream.Records++
	t.stream.Pages += uint64(pages)
	t.stream.ZeroPages += uint64(zero)
}

// endRound closes the round and returns its summary.
func (t *tally) endRound() RoundEnd {
	r := t.round
	r.Digest = t.roundDigest.Sum64()
	t.round = RoundEnd{Round: r.Round + 1}
	t.roundDigest.Reset()
	t.stream.Rounds++
	return r
}

// end returns the stream's summary (without region digests).
func (t *tally) end() StreamEnd {
	s := t.stream
	s.Digest = t.streamDigest.Sum64()
	s.RegionDigests = nil
	return s
}

func xxhashSum(b []byte) uint64 { return xxhash.Sum64(b) }
