package live

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
)

// The semantic mutations: a field inside a control message or a record
// payload changed to something a writer would never send — a VM the host
// cannot take, another VM than the stream's, a newer version, a page past
// its region, a huge length — with every check value and seal put right,
// so that the check that knows what the field means is what refuses it.

// hostileHelloCases returns s with its hello changed.
func hostileHelloCases(s *hostileStream) []hostileCase {
	type edit struct {
		name string
		fn   func(*hello)
		want error
	}
	edits := []edit{
		// The handshake refuses what the host cannot take, before any
		// memory is set aside.
		{"gpu-model", func(h *hello) { h.Spec.GPUModel = "V100" }, migrate.ErrIncompatible},
		{"profile-unknown", func(h *hello) { h.Spec.Profiles = []string{"P40-5Q"} }, migrate.ErrIncompatible},
		{"mode", func(h *hello) { h.Mode = 9 }, migrate.ErrConfig},
		{"connections", func(h *hello) { h.Connections = 2 }, migrate.ErrConfig},
		{"encrypted", func(h *hello) { h.Encrypted = !h.Encrypted }, migrate.ErrConfig},
		{"batch-bytes-huge", func(h *hello) { h.BatchBytes = 1 << 40 }, migrate.ErrConfig},
		// A VM the host can take, then a stream that declares another:
		// what the handshake reserved must be freed.
		{"profile-other", func(h *hello) { h.Spec.Profiles = []string{"P40-2Q"} }, migrate.ErrStream},
		{"vm-id", func(h *hello) { h.Spec.ID = "impostor" }, migrate.ErrStream},
	}
	var cs []hostileCase
	for _, e := range edits {
		h := s.helloMsg()
		e.fn(&h)
		cs = append(cs, hostileCase{name: "hello=" + e.name, data: s.withHello(h), all: []error{e.want}})
	}
	// Guest RAM of another size: the region the handshake prepared is not
	// the one the stream declares.
	h := s.helloMsg()
	h.Spec.RAMBytes *= 2
	cs = append(cs, hostileCase{name: "hello=ram-size", data: s.withHello(h), all: []error{migrate.ErrStream}})
	// A footprint, a batch size or a source name the metadata does not
	// declare: the stream's id, drawn from the hello the source wrote,
	// is not the one this hello gives.
	for _, e := range []edit{
		{"footprint", func(h *hello) { h.Spec.RAMFootprintBytes += 4096 }, nil},
		{"batch-bytes", func(h *hello) { h.BatchBytes *= 2 }, nil},
		{"source", func(h *hello) { h.Source = "elsewhere" }, nil},
		{"stream-id", func(h *hello) { h.StreamID++ }, nil},
	} {
		h := s.helloMsg()
		e.fn(&h)
		cs = append(cs, hostileCase{name: "hello=" + e.name, data: s.withHello(h), all: []error{migrate.ErrAuthentication}})
	}
	return cs
}

// hostileVersionCases returns s from newer major versions: of the live
// protocol, of the checkpoint format, and with a critical record type
// this version does not know.
func hostileVersionCases(s *hostileStream) []hostileCase {
	pre := bytes.Clone(s.raw)
	binary.LittleEndian.PutUint16(pre[8:], ProtocolMajor+1)
	hdr := bytes.Clone(s.header())
	binary.LittleEndian.PutUint16(hdr[8:], checkpoint.VersionMajor+1)
	recs := slices.Concat(s.sealed()[:1], []hostileSealed{{typ: 0x0006, plain: []byte{1, 2, 3}}}, s.sealed()[1:])
	return []hostileCase{
		{name: "version=live-major", data: pre, all: []error{migrate.ErrIncompatible}},
		{name: "version=checkpoint-major,fixed", data: s.withStream(hostileBuild(hdr, s.sealed())), all: inStream(checkpoint.ErrVersion)},
		{name: "version=unknown-critical-record,resealed", data: s.withStream(hostileBuild(s.header(), hostileRenumber(recs))),
			all: inStream(checkpoint.ErrUnknownRecord)},
	}
}

// hostilePayloadCases returns s with one field of a record payload
// changed and the stream re-sealed.
func hostilePayloadCases(s *hostileStream) []hostileCase {
	var cs []hostileCase
	edit := func(name string, typ checkpoint.RecordType, fn func(plain []byte) []byte, all ...error) {
		i := s.first(typ)
		recs := s.sealed()
		recs[i].plain = fn(recs[i].plain)
		cs = append(cs, hostileCase{name: name + ",resealed", data: s.withStream(hostileBuild(s.header(), recs)), all: all})
	}
	batch := func(fn func(*hostileBatch)) func([]byte) []byte {
		return func(p []byte) []byte {
			b := hostileParseBatch(p)
			fn(&b)
			return b.encode()
		}
	}
	ramPages := uint64(hostileRAMBytes / 4096)
	limit, malformed, checksum := inStream(checkpoint.ErrLimit), inStream(checkpoint.ErrMalformed), inStream(checkpoint.ErrChecksum)
	pb := checkpoint.RecordPageBatch
	// The first batch is guest RAM's (region 0) in every mode.
	edit("batch=index-past-region", pb, batch(func(b *hostileBatch) { b.index[len(b.index)-1] = ramPages }), limit...)
	edit("batch=page-count-huge", pb, func(p []byte) []byte {
		return binary.AppendUvarint(binary.AppendUvarint(nil, 0), 1<<40)
	}, limit...)
	edit("batch=undeclared-region", pb, batch(func(b *hostileBatch) { b.region = 9 }), malformed...)
	edit("batch=page-kind", pb, batch(func(b *hostileBatch) { b.kinds[0] = 7 }), malformed...)
	edit("batch=frame-length-huge", pb, func(p []byte) []byte {
		b := hostileParseBatch(p)
		b.frame, b.raw = nil, nil
		enc := b.encode()
		return binary.AppendUvarint(enc[:len(enc)-1], 1<<40) // the frame length is the last field left
	}, malformed...)
	// A raw page's last byte: caught by the region's content digest.
	edit("batch=page-bytes", pb, hostileFlipLast, checksum...)
	edit("device-state=blob-length-huge", checkpoint.RecordDeviceState, func(p []byte) []byte {
		_, a := binary.Uvarint(p)
		_, b := binary.Uvarint(p[a:])
		return binary.AppendUvarint(bytes.Clone(p[:a+b]), 1<<40)
	}, limit...)
	edit("device-state=undeclared-device", checkpoint.RecordDeviceState, func(p []byte) []byte {
		return append([]byte{5}, p[1:]...)
	}, malformed...)
	edit("end-round=digest", checkpoint.RecordEndRound, hostileFlipLast, checksum...)
	edit("end-stream=region-digest", checkpoint.RecordEndStream, hostileFlipLast, checksum...)
	gpu, regions := hostileMetaFields(s.records[0].plain)
	edit("metadata=gpu-model", checkpoint.RecordMetadata, func(p []byte) []byte {
		return hostileFlip(p, gpu+1, 5) // "P40" to "p40": not the GPU model of the hello
	}, migrate.ErrStream)
	edit("metadata=profile", checkpoint.RecordMetadata, func(p []byte) []byte {
		return bytes.Replace(p, []byte("P40-1Q"), []byte("P40-2Q"), 1)
	}, migrate.ErrStream)
	edit("metadata=region-count-huge", checkpoint.RecordMetadata, func(p []byte) []byte {
		return binary.AppendUvarint(bytes.Clone(p[:regions]), 1<<40)
	}, limit...)
	return cs
}

// hostileFlipLast returns p with the lowest bit of its last byte flipped.
func hostileFlipLast(p []byte) []byte { return hostileFlip(p, len(p)-1, 0) }
