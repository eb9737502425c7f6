package live

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// The record mutations: records dropped, duplicated, swapped and replayed
// from the other recording, each twice — as the bytes were sent, which
// the sequence numbers and check values must catch, and rebuilt as a
// writer would have written them (renumbered, re-sealed, re-chained), which
// the stream's own counts, digests and seals must catch — and length
// fields set huge.

// hostileRecordCases returns the record mutations of s; other is the
// recording of the same variant with another stream id and content.
func hostileRecordCases(s, other *hostileStream) []hostileCase {
	var cs []hostileCase
	last := len(s.records) - 1
	seq := inStream(checkpoint.ErrSequence)
	malformed := inStream(checkpoint.ErrMalformed)
	// A record header read in the commit message's place, or the commit
	// read in a record header's: "\x05" and its length read as a record
	// type and length declare a record of 2 GB.
	commitAsRecord := inStream(checkpoint.ErrLimit)
	for i, r := range s.records {
		at := func(what string) string { return fmt.Sprintf("record=%d-%v/%s", i, r.typ, what) }
		add := func(what string, data []byte, all, oneOf []error) {
			cs = append(cs, hostileCase{name: at(what), data: data, all: all, oneOf: oneOf})
		}
		rebuilt := func(recs []hostileSealed) []byte {
			return s.withStream(hostileBuild(s.header(), hostileRenumber(recs)))
		}

		// Dropped.
		drop := s.mutated(vgpusimtest.DropRecord(s.stream(), i))
		resealedDrop := slices.Delete(s.sealed(), i, i+1)
		if i == last {
			add("drop", drop, commitAsRecord, nil)
			add("drop,resealed", rebuilt(resealedDrop), commitAsRecord, nil)
		} else {
			add("drop", drop, seq, nil)
			// The metadata must come first; any other record missing
			// leaves a round's or the stream's counts short.
			add("drop,resealed", rebuilt(resealedDrop), malformed, nil)
		}

		// Duplicated.
		dup := s.mutated(vgpusimtest.DuplicateRecord(s.stream(), i))
		resealedDup := slices.Insert(s.sealed(), i+1, s.sealed()[i])
		if i == last {
			add("duplicate", dup, nil, hostileAfterEnd)
			add("duplicate,resealed", rebuilt(resealedDup), nil, hostileAfterEnd)
		} else {
			add("duplicate", dup, seq, nil)
			// A second metadata, a device's second state, a round ended
			// twice, or a round's counts one record long.
			add("duplicate,resealed", rebuilt(resealedDup), malformed, nil)
		}

		// Swapped with the next record.
		if i < last {
			add("swap-with-next", s.mutated(vgpusimtest.SwapRecords(s.stream(), i, i+1)), seq, nil)
			rs := s.sealed()
			rs[i], rs[i+1] = rs[i+1], rs[i]
			// Two records that carry sums (page batches, device
			// states) in the other order keep every count: only the
			// digest of their round or stream, the sums in stream order,
			// tells. Any other pair moves a record across the end of a
			// round or breaks the metadata-first rule, and a count.
			want := malformed
			if hostileSummed(r.typ) && hostileSummed(s.records[i+1].typ) {
				want = inStream(checkpoint.ErrChecksum)
			}
			add("swap-with-next,resealed", rebuilt(rs), want, nil)
		}

		// Replayed from the other recording, at the same place.
		o := other.records[i]
		if o.typ != r.typ {
			panic(fmt.Sprintf("the recordings of %v differ in record %d's type", s.v, i))
		}
		if !bytes.Equal(o.wire, r.wire) {
			add("replay", s.mutated(vgpusimtest.ReplaceRecord(s.stream(), other.stream(), i)), inStream(checkpoint.ErrChecksum), nil)
		}
		rc := s.framed()
		rc[i] = other.framed()[i]
		switch {
		case s.v.encrypted: // sealed for the other stream's header
			add("replay,rechained", s.withStream(hostileChain(s.header(), rc)), inStream(checkpoint.ErrAuth), nil)
		case !bytes.Equal(o.plain, r.plain):
			// Other pages, a page table at other generations, or the
			// other stream's digests: a round's, the stream's or a
			// region's digest.
			add("replay,rechained", s.withStream(hostileChain(s.header(), rc)), inStream(checkpoint.ErrChecksum), nil)
		}

		// A huge length, which the reader must refuse before it sets
		// aside a buffer for it.
		add("length=huge", hostileSetU32(s.raw, r.off+2, ^uint32(0)), inStream(checkpoint.ErrLimit), nil)
	}
	return append(cs,
		hostileCase{name: "hello/length=huge", data: hostileSetU32(s.raw, s.helloOff+1, ^uint32(0)), all: []error{migrate.ErrStream}},
		hostileCase{name: "commit/length=huge", data: hostileSetU32(s.raw, s.tailOff+1, ^uint32(0)), all: []error{migrate.ErrStream}},
	)
}

// hostileSummed reports a record type whose sum the round and stream
// digests chain.
func hostileSummed(t checkpoint.RecordType) bool {
	return t == checkpoint.RecordPageBatch || t == checkpoint.RecordDeviceState
}

func hostileSetU32(raw []byte, off int, v uint32) []byte {
	b := bytes.Clone(raw)
	binary.LittleEndian.PutUint32(b[off:], v)
	return b
}
