package live

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/vgpusim/vgpusim/checkpoint"
)

// Rebuilding the corpus's streams. A mutation that means to reach a check
// deeper than the check values (and, encrypted, the seals) rebuilds the
// stream around its change the way a writer would have written it:
// hostileChain puts every check value right, hostileBuild also seals every
// payload again.

// hostileFramed is a record as the record layer sees it: its 14-byte
// header and its payload as on the wire; the check value is computed.
type hostileFramed struct {
	header  []byte
	payload []byte
}

// framed returns the stream's records as they were sent.
func (s *hostileStream) framed() []hostileFramed {
	out := make([]hostileFramed, len(s.records))
	for i, r := range s.records {
		out[i] = hostileFramed{bytes.Clone(r.wire[:14]), bytes.Clone(r.wire[14 : len(r.wire)-8])}
	}
	return out
}

// hostileFixHeader returns a copy of a stream header with its check value
// recomputed.
func hostileFixHeader(header []byte) []byte {
	h := bytes.Clone(header)
	binary.LittleEndian.PutUint64(h[len(h)-8:], xxhash.Sum64(h[:len(h)-8]))
	return h
}

// hostileChain writes a stream of header (its check recomputed) and recs,
// each followed by a fresh check value that chains the previous one. The
// payloads are kept as they are: a sealed payload stays sealed for the
// stream it came from.
func hostileChain(header []byte, recs []hostileFramed) []byte {
	h := hostileFixHeader(header)
	out := bytes.Clone(h)
	prev := binary.LittleEndian.Uint64(h[len(h)-8:])
	for _, r := range recs {
		prev = hostileCheck(prev, r.header, r.payload)
		out = append(append(append(out, r.header...), r.payload...), binary.LittleEndian.AppendUint64(nil, prev)...)
	}
	return out
}

// hostileSealed is a record to write with hostileBuild: a type, a
// sequence number and a payload in the clear.
type hostileSealed struct {
	typ   checkpoint.RecordType
	seq   uint64
	plain []byte
}

// sealed returns the stream's records as hostileBuild takes them.
func (s *hostileStream) sealed() []hostileSealed {
	out := make([]hostileSealed, len(s.records))
	for i, r := range s.records {
		out[i] = hostileSealed{r.typ, r.seq, bytes.Clone(r.plain)}
	}
	return out
}

// hostileRenumber gives recs the sequence numbers 0, 1, 2, ... of their
// places, as a writer that meant to send them in that order would have.
func hostileRenumber(recs []hostileSealed) []hostileSealed {
	out := make([]hostileSealed, len(recs))
	for i, r := range recs {
		out[i] = hostileSealed{r.typ, uint64(i), r.plain}
	}
	return out
}

// hostileBuild writes a checkpoint stream as a writer that meant it
// would: header (its check recomputed), then each record sealed (when the
// header says so, with the corpus key) and chained with a fresh check
// value. A mutation built this way passes every check value and seal, and
// reaches the checks behind them.
func hostileBuild(header []byte, recs []hostileSealed) []byte {
	h := hostileFixHeader(header)
	encrypted := binary.LittleEndian.Uint16(h[12:])&0x10 != 0
	framed := make([]hostileFramed, len(recs))
	for i, r := range recs {
		payload := r.plain
		size := len(payload)
		if encrypted {
			size += 16
		}
		rh := make([]byte, 14)
		binary.LittleEndian.PutUint16(rh, uint16(r.typ))
		binary.LittleEndian.PutUint32(rh[2:], uint32(size))
		binary.LittleEndian.PutUint64(rh[6:], r.seq)
		if encrypted {
			payload = hostileAEAD().Seal(nil, hostileNonce(r.seq), payload, append(bytes.Clone(h), rh...))
		}
		framed[i] = hostileFramed{rh, payload}
	}
	return hostileChain(h, framed)
}

// withStream returns the recording with its checkpoint stream replaced.
func (s *hostileStream) withStream(stream []byte) []byte {
	out := append(bytes.Clone(s.raw[:s.hdrOff]), stream...)
	return append(out, s.tail()...)
}

// stream returns the recording's checkpoint stream, header and records,
// for the kit's mutators.
func (s *hostileStream) stream() []byte { return s.raw[s.hdrOff:s.tailOff] }

// mutated returns the recording with its checkpoint stream replaced by
// what a mutator of the kit made of it.
func (s *hostileStream) mutated(stream []byte, err error) []byte {
	return s.withStream(hostileMutant(stream, err))
}

// withHello returns the recording with its hello replaced by h, encoded.
// The hello is tagged as the source would have tagged it; the stream that
// follows keeps the id drawn from the recorded hello.
func (s *hostileStream) withHello(h hello) []byte {
	var key []byte
	if s.v.encrypted {
		key = hostileKey
	}
	out := append(bytes.Clone(s.raw[:s.helloOff]), replayHello(s.raw[:s.helloOff], key, h)...)
	return append(out, s.raw[s.hdrOff:]...)
}

// helloMsg decodes the recording's hello.
func (s *hostileStream) helloMsg() hello { return replayReadHello(s.hello()) }

// hostileBatch is a page batch payload taken apart (FORMAT.md, Page
// batch), so a mutation can change one field and put it back together.
type hostileBatch struct {
	region uint64
	index  []uint64 // absolute page indices
	kinds  []byte
	gens   []uint64
	frame  []byte // the zstd frame
	raw    []byte // the raw pages
}

// hostileParseBatch takes apart a payload of the corpus, which parsed
// already: it panics on one that does not follow the format.
func hostileParseBatch(p []byte) hostileBatch {
	var b hostileBatch
	off := 0
	next := func() uint64 {
		v, n := binary.Uvarint(p[off:])
		if n <= 0 {
			panic(fmt.Sprintf("bad uvarint at %d of a batch", off))
		}
		off += n
		return v
	}
	b.region = next()
	n := int(next())
	at := uint64(0)
	for i := range n {
		d := next()
		if i > 0 {
			d += at + 1
		}
		at = d
		b.index = append(b.index, d)
	}
	b.kinds = bytes.Clone(p[off : off+n])
	off += n
	for range n {
		b.gens = append(b.gens, next())
	}
	f := int(next())
	b.frame = bytes.Clone(p[off : off+f])
	b.raw = bytes.Clone(p[off+f:])
	return b
}

func (b hostileBatch) encode() []byte {
	out := binary.AppendUvarint(nil, b.region)
	out = binary.AppendUvarint(out, uint64(len(b.index)))
	for i, x := range b.index {
		if i > 0 {
			x -= b.index[i-1] + 1
		}
		out = binary.AppendUvarint(out, x)
	}
	out = append(out, b.kinds...)
	for _, g := range b.gens {
		out = binary.AppendUvarint(out, g)
	}
	out = binary.AppendUvarint(out, uint64(len(b.frame)))
	return append(append(out, b.frame...), b.raw...)
}

// hostileMetaFields returns the offsets in a metadata payload of its GPU
// model string (its length prefix) and of its region count.
func hostileMetaFields(p []byte) (gpuModel, regionCount int) {
	off := 0
	str := func() {
		n, k := binary.Uvarint(p[off:])
		off += k + int(n)
	}
	str() // VM id
	gpuModel = off
	str()
	np, k := binary.Uvarint(p[off:])
	off += k
	for range np {
		str()
	}
	return gpuModel, off
}

// hostileCheck is a record's check value (FORMAT.md, Records).
func hostileCheck(prev uint64, recHeader, payload []byte) uint64 {
	d := xxhash.New()
	_ = binary.Write(d, binary.LittleEndian, prev)
	d.Write(recHeader)
	d.Write(payload)
	return d.Sum64()
}

func hostileAEAD() cipher.AEAD {
	key, err := replayKeys(hostileKey).streamKey(0)
	if err != nil {
		panic(err)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		panic(err)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic(err)
	}
	return g
}

func hostileNonce(seq uint64) []byte {
	n := make([]byte, 12)
	binary.BigEndian.PutUint64(n[4:], seq)
	return n
}
