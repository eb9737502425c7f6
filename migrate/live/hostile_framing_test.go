package live

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// The framing mutations: one bit flipped at a representative offset of
// each class of field, and the recording cut short at every record
// boundary and inside each kind of field. Each names what it must fail
// with: the migrate sentinel and, for a stream the checkpoint reader
// refuses, the checkpoint sentinel beside it.

// hostileCase is one mutated recording and what Receive must fail with.
type hostileCase struct {
	name string
	data []byte
	// all must every one match the error (errors.Is); when oneOf is set,
	// one of it must too.
	all, oneOf []error
}

// inStream is the error of a stream the checkpoint reader refuses with
// sentinel.
func inStream(sentinel error) []error { return []error{migrate.ErrStream, sentinel} }

// hostileAfterEnd is what a mutation that puts record bytes after the
// end-of-stream record fails with: the destination reads them as the
// commit message, and a record header read that way is a message of an
// unknown type (ErrStream) or one whose length runs past the recording
// (the connection ends, ErrConnection).
var hostileAfterEnd = []error{migrate.ErrStream, migrate.ErrConnection}

// hostileFlip returns raw with bit bit (0 the least significant) of byte
// off flipped.
func hostileFlip(raw []byte, off int, bit uint) []byte {
	return hostileMutant(vgpusimtest.Flip(raw, 8*int64(off)+int64(bit)))
}

// hostileMutant returns what a mutator of the kit made. The suite mutates
// its own recordings, at places their parse found, so an error is a bug
// in the suite, not something Receive is shown.
func hostileMutant(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// hostileFlips returns the bit flips of s.
func hostileFlips(s *hostileStream) []hostileCase {
	idAt := s.helloOff + bytes.Index(s.hello(), []byte(`"ID":"`)) + len(`"ID":"`)
	h := s.hdrOff
	cs := []hostileCase{
		{name: "flip=preamble-magic", data: hostileFlip(s.raw, 0, 0), all: []error{migrate.ErrStream}},
		{name: "flip=preamble-major", data: hostileFlip(s.raw, 8, 1), all: []error{migrate.ErrIncompatible}},
		// Bit 1 makes the hello a refusal, which only a destination sends;
		// bit 2 a commit.
		{name: "flip=hello-type-refuse", data: hostileFlip(s.raw, s.helloOff, 1), all: []error{migrate.ErrStream}},
		{name: "flip=hello-type-commit", data: hostileFlip(s.raw, s.helloOff, 2), all: []error{migrate.ErrStream}},
		// The offer's flags and nonce, and every byte of the hello, are
		// the hello's tag's: a flipped bit fails it, before the
		// destination reads a field or reserves anything.
		{name: "flip=offer-flags", data: hostileFlip(s.raw, preambleBytes, 0), all: []error{migrate.ErrConfig}},
		{name: "flip=offer-nonce", data: hostileFlip(s.raw, preambleBytes+1, 0), all: []error{migrate.ErrAuthentication}},
		{name: "flip=hello-length", data: hostileFlip(s.raw, s.helloOff+1, 0), all: []error{migrate.ErrAuthentication}},
		{name: "flip=hello-json", data: hostileFlip(s.raw, s.helloOff+5, 0), all: []error{migrate.ErrAuthentication}},
		{name: "flip=hello-vm-id", data: hostileFlip(s.raw, idAt, 5), all: []error{migrate.ErrAuthentication}},
		{name: "flip=hello-tag", data: hostileFlip(s.raw, s.hdrOff-1, 7), all: []error{migrate.ErrAuthentication}},
		{name: "flip=header-magic", data: hostileFlip(s.raw, h, 0), all: inStream(checkpoint.ErrBadMagic)},
		{name: "flip=header-major", data: hostileFlip(s.raw, h+8, 1), all: inStream(checkpoint.ErrVersion)},
		{name: "flip=header-stream-id", data: hostileFlip(s.raw, h+16, 0), all: inStream(checkpoint.ErrChecksum)},
		{name: "flip=header-check", data: hostileFlip(s.raw, h+32, 0), all: inStream(checkpoint.ErrChecksum)},
	}
	// Flags, with the header's check put right so that the flag, not the
	// check, is what the reader refuses.
	for _, f := range []struct {
		name string
		bit  uint
		want error
	}{{"codec", 1, checkpoint.ErrVersion}, {"encryption", 4, checkpoint.ErrEncryptionMode}, {"reserved", 5, checkpoint.ErrVersion}} {
		hdr := hostileFlip(s.header(), 12, f.bit)
		cs = append(cs, hostileCase{name: "flip=header-flag-" + f.name + ",fixed",
			data: s.withStream(append(hostileFixHeader(hdr), s.raw[s.hdrOff+40:s.tailOff]...)), all: inStream(f.want)})
	}
	if s.v.encrypted {
		// Another stream id with every check value recomputed: only the
		// seals, whose associated data is the header, can tell. (A
		// plaintext stream's id is covered by check values alone, which
		// anyone can recompute: FORMAT.md, Encryption.)
		hdr := hostileFlip(s.header(), 16, 0)
		cs = append(cs, hostileCase{name: "flip=header-stream-id,rechained",
			data: s.withStream(hostileChain(hdr, s.framed())), all: inStream(checkpoint.ErrAuth)})
	}
	for i, r := range s.records {
		at := func(what string) string { return fmt.Sprintf("record=%d-%v/flip=%s", i, r.typ, what) }
		cs = append(cs,
			hostileCase{name: at("type"), data: hostileFlip(s.raw, r.off, 2), all: inStream(checkpoint.ErrChecksum)},
			hostileCase{name: at("length"), data: hostileFlip(s.raw, r.off+2, 0), all: inStream(checkpoint.ErrChecksum)},
			hostileCase{name: at("sequence"), data: hostileFlip(s.raw, r.off+6, 0), all: inStream(checkpoint.ErrSequence)},
			hostileCase{name: at("payload"), data: hostileFlip(s.raw, r.payloadOff()+(len(r.wire)-22)/2, 0), all: inStream(checkpoint.ErrChecksum)},
			hostileCase{name: at("check"), data: hostileFlip(s.raw, r.checkOff(), 0), all: inStream(checkpoint.ErrChecksum)},
		)
		// The same fields with the check values put right, so that the
		// check behind them is what must catch the change.
		recs := s.framed()
		binary.LittleEndian.PutUint16(recs[i].header, 0x0006) // an unknown critical type
		c := hostileCase{name: at("type,rechained"), data: s.withStream(hostileChain(s.header(), recs))}
		switch {
		case s.v.encrypted: // the record header is the seal's associated data
			c.all = inStream(checkpoint.ErrAuth)
		case i == 0:
			c.all = inStream(checkpoint.ErrMalformed) // the first record must be the metadata
		default:
			c.all = inStream(checkpoint.ErrUnknownRecord)
		}
		cs = append(cs, c)
		recs = s.framed()
		recs[i].payload = hostileFlipLast(recs[i].payload)
		c = hostileCase{name: at("payload-end,rechained"), data: s.withStream(hostileChain(s.header(), recs))}
		c.all, c.oneOf = hostileRechainedPayload(s.v, r.typ)
		cs = append(cs, c)
	}
	tail := s.tailOff
	cs = append(cs,
		hostileCase{name: "flip=commit-type", data: hostileFlip(s.raw, tail, 1), all: []error{migrate.ErrStream}},
		// A commit changed on the way would leave the VM paused at the
		// destination, or throttled, while the source believes it
		// resumed: its tag refuses every bit of it.
		hostileCase{name: "flip=commit-json", data: hostileFlip(s.raw, tail+5, 0), all: []error{migrate.ErrAuthentication}},
		hostileCase{name: "flip=commit-resume-value", data: hostileFlip(s.raw, tail+bytes.Index(s.tail(), []byte(`"resume":`))+len(`"resume":`), 1), all: []error{migrate.ErrAuthentication}},
		hostileCase{name: "flip=commit-throttle-key", data: hostileFlip(s.raw, tail+bytes.Index(s.tail(), []byte(`"throttle"`))+1, 0), all: []error{migrate.ErrAuthentication}},
		hostileCase{name: "flip=commit-tag", data: hostileFlip(s.raw, len(s.raw)-1, 0), all: []error{migrate.ErrAuthentication}},
	)
	return cs
}

// hostileRechainedPayload is what the last payload byte of a record of
// type t flipped, check values recomputed, fails with: a sealed payload
// fails to open; in the clear, the byte is the last region's seed in the
// metadata (which then does not match the region the handshake
// prepared), page bytes or a
// zstd frame in a page batch (the region's content digest, or zstd), and
// a digest in every other record.
func hostileRechainedPayload(v hostileVariant, t checkpoint.RecordType) (all, oneOf []error) {
	switch {
	case v.encrypted:
		return inStream(checkpoint.ErrAuth), nil
	case t == checkpoint.RecordMetadata:
		return []error{migrate.ErrStream}, nil
	case t == checkpoint.RecordPageBatch:
		return []error{migrate.ErrStream}, []error{checkpoint.ErrChecksum, checkpoint.ErrMalformed}
	}
	return inStream(checkpoint.ErrChecksum), nil
}

// hostileCuts returns s cut short: at its start, inside each control
// message, at every record boundary, inside each field of every record.
func hostileCuts(s *hostileStream) []hostileCase {
	cut := func(name string, n int, all ...error) hostileCase {
		return hostileCase{name: name, data: hostileMutant(vgpusimtest.Truncate(s.raw, n)), all: all}
	}
	// A control message cut short is a connection that ended; a
	// checkpoint stream cut short is a truncated stream.
	truncated := inStream(checkpoint.ErrTruncated)
	cs := []hostileCase{
		cut("truncate=empty", 0, migrate.ErrConnection),
		cut("truncate=preamble", preambleBytes/2, migrate.ErrConnection),
		cut("truncate=hello-header", s.helloOff+3, migrate.ErrConnection),
		cut("truncate=hello-body", s.hdrOff-1, migrate.ErrConnection),
		cut("truncate=before-header", s.hdrOff, truncated...),
		cut("truncate=header", s.hdrOff+20, truncated...),
	}
	for i, r := range s.records {
		at := func(what string) string { return fmt.Sprintf("record=%d-%v/truncate=%s", i, r.typ, what) }
		cs = append(cs,
			cut(at("boundary"), r.off, truncated...),
			cut(at("header"), r.off+7, truncated...),
			cut(at("payload"), r.payloadOff()+(len(r.wire)-22)/2, truncated...),
			cut(at("check"), r.checkOff()+4, truncated...),
		)
	}
	return append(cs,
		cut("truncate=before-commit", s.tailOff, migrate.ErrConnection),
		cut("truncate=commit", len(s.raw)-1, migrate.ErrConnection),
	)
}
