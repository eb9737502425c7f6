package live

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The corpus of the hostile-stream tests: what a destination reads in real
// live migrations (Send to Receive over loopback TCP) of one small VM, in
// each mode, compressed or not, encrypted or not, parsed at the boundaries
// of the live protocol and of the checkpoint format so that a mutation can
// land on a known field and, where it means to reach a deeper check, put
// the check values (and the seal) right again.

// hostileVariant is one way of migrating the corpus VM.
type hostileVariant struct {
	mode      migrate.Mode
	level     checkpoint.Level
	encrypted bool
}

func (v hostileVariant) String() string {
	s := fmt.Sprintf("%v/%v", v.mode, v.level)
	if v.encrypted {
		s += "/encrypted"
	}
	return s
}

// hostileVariants is every mode with and without compression and
// encryption.
var hostileVariants = func() []hostileVariant {
	var vs []hostileVariant
	for _, m := range []migrate.Mode{migrate.PreCopy, migrate.Legacy} {
		for _, l := range []checkpoint.Level{checkpoint.LevelFastest, checkpoint.LevelNone} {
			for _, enc := range []bool{false, true} {
				vs = append(vs, hostileVariant{m, l, enc})
			}
		}
	}
	return vs
}()

// hostileKey is the corpus's migration key. Every recording draws the
// same nonces (replayable), so its streams share one stream key: a record
// replayed from another stream is caught by the stream it lands in, not by
// a wrong key.
var hostileKey = bytes.Repeat([]byte{0xa5}, checkpoint.KeySize)

const (
	// hostileBatchBytes is one framebuffer page (64 KiB) or the whole of
	// guest RAM a batch: every region change and every context page is a
	// record of its own, so a small VM still gives many records.
	hostileBatchBytes = 64 << 10
	hostileRAMBytes   = 64 << 10
	hostileVMSeed     = 0x5eed
	// hostileTextPages are guest RAM pages [hostileTextPage,
	// +hostileTextPages) filled with text before the migration: the
	// compressible pages that give the compressed variants a zstd frame
	// (the footprint and the vGPU context look like noise and go raw).
	hostileTextPage, hostileTextPages = 4, 4
)

// hostileHostConfig is a Sparse host at the default page sizes: 64 KiB
// framebuffer pages keep the 1 GiB window of a P40-1Q at 16384 pages, so
// mapping, scrubbing and hashing it — what every stream that passes the
// handshake costs — stays at a few milliseconds.
func hostileHostConfig(name string, seed uint64) vgpu.HostConfig {
	return vgpu.HostConfig{Name: name, Memory: memory.Sparse, Seed: seed, RAMBytes: 4 * GiB,
		Start: time.Duration(seed) * time.Hour}
}

// hostileHost returns a destination for the corpus's streams.
func hostileHost(t testing.TB, name string, seed uint64) *vgpu.Host {
	t.Helper()
	h, err := vgpu.NewHost(hostileHostConfig(name, seed))
	must(t, err)
	return h
}

// hostileRecord is one record of a checkpoint stream.
type hostileRecord struct {
	typ   checkpoint.RecordType
	seq   uint64
	off   int    // of the record's header in the whole recording
	wire  []byte // the record as sent: header, payload, check value
	plain []byte // the payload in the clear
}

func (r hostileRecord) payloadOff() int { return r.off + 14 }
func (r hostileRecord) checkOff() int   { return r.off + len(r.wire) - 8 }

// hostileStream is one recorded migration, parsed: the preamble, the hello
// message, the checkpoint stream's header and records, and what follows
// the stream (the commit message).
type hostileStream struct {
	v        hostileVariant
	raw      []byte
	helloOff int // the hello message's 5-byte header
	hdrOff   int // the checkpoint stream's header
	records  []hostileRecord
	tailOff  int // the commit message
}

func (s *hostileStream) header() []byte { return s.raw[s.hdrOff : s.hdrOff+40] }
func (s *hostileStream) hello() []byte  { return s.raw[s.helloOff:s.hdrOff] }
func (s *hostileStream) tail() []byte   { return s.raw[s.tailOff:] }

// first returns the index of the first record of type t, or -1.
func (s *hostileStream) first(t checkpoint.RecordType) int {
	for i, r := range s.records {
		if r.typ == t {
			return i
		}
	}
	return -1
}

// hostileCorpus is every variant's recording and, for replays, a second
// recording of the same VM spec with another stream id and other
// content. It is built once per test binary.
var hostileCorpus struct {
	once        sync.Once
	main, other []*hostileStream
	built       time.Duration
	err         error
}

func hostileStreams(t *testing.T) (main, other []*hostileStream) {
	t.Helper()
	hostileCorpus.once.Do(func() {
		start := time.Now()
		for _, v := range hostileVariants {
			m, err := hostileRecordMigration(v, 1, false)
			if err != nil {
				hostileCorpus.err = err
				return
			}
			o, err := hostileRecordMigration(v, 2, true)
			if err != nil {
				hostileCorpus.err = err
				return
			}
			hostileCorpus.main, hostileCorpus.other = append(hostileCorpus.main, m), append(hostileCorpus.other, o)
		}
		hostileCorpus.built = time.Since(start)
	})
	must(t, hostileCorpus.err)
	return hostileCorpus.main, hostileCorpus.other
}

// hostileRecordMigration migrates a fresh corpus VM in variant v with the
// given stream id, its first text page rewritten once more if touch, and
// returns what the source sent on its connection, parsed.
func hostileRecordMigration(v hostileVariant, streamID uint64, touch bool) (*hostileStream, error) {
	src, err := vgpu.NewHost(hostileHostConfig("src", 1))
	if err != nil {
		return nil, err
	}
	dst, err := vgpu.NewHost(hostileHostConfig("dst", 2))
	if err != nil {
		return nil, err
	}
	vm, err := src.CreateVM(vgpu.VMSpec{ID: "hostile", Seed: hostileVMSeed, RAMBytes: hostileRAMBytes,
		RAMFootprintBytes: hostileRAMBytes / 4, Profiles: []string{"P40-1Q"}})
	if err != nil {
		return nil, err
	}
	if err := vm.Start(); err != nil {
		return nil, err
	}
	if err := vm.RAM().Fill(hostileTextPage, hostileTextPages, memory.ClassText); err != nil {
		return nil, err
	}
	if touch { // a second generation of the first text page
		if err := vm.RAM().Fill(hostileTextPage, 1, memory.ClassText); err != nil {
			return nil, err
		}
	}
	sc, dc, err := hostileLoopback()
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	defer dc.Close()
	var sent bytes.Buffer
	tee := struct {
		io.Reader
		io.Writer
	}{sc, io.MultiWriter(sc, &sent)}
	scfg := SendConfig{Policy: migrate.Policy{Mode: v.mode}, Engine: migrate.EngineConfig{Level: v.level, BatchBytes: hostileBatchBytes}, StreamID: streamID, DigestWorkers: 1}
	rcfg := ReceiveConfig{DigestWorkers: 1}
	scfg, rcfg = replayable(scfg, rcfg)
	if v.encrypted {
		scfg.EncryptionKey, rcfg.EncryptionKey = hostileKey, hostileKey
	}
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{tee}, []io.ReadWriter{dc}, scfg, rcfg)
	if res.srcErr != nil || res.dstErr != nil {
		return nil, fmt.Errorf("recording %v: source: %v; destination: %v", v, res.srcErr, res.dstErr)
	}
	s, err := hostileParse(v, sent.Bytes())
	if err != nil {
		return nil, fmt.Errorf("parsing the recording of %v: %w", v, err)
	}
	return s, nil
}

// hostileLoopback returns the two ends of one loopback TCP connection.
func hostileLoopback() (src, dst net.Conn, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	if src, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		return nil, nil, err
	}
	if dst, err = ln.Accept(); err != nil {
		src.Close()
		return nil, nil, err
	}
	return src, dst, nil
}

// hostileParse splits a recording at the live protocol's and the
// checkpoint format's boundaries, checking every check value on the way
// and opening every sealed payload, so a parse that succeeds has
// understood the whole stream.
func hostileParse(v hostileVariant, raw []byte) (*hostileStream, error) {
	s := &hostileStream{v: v, raw: raw, helloOff: offerBytes}
	if len(raw) < offerBytes+5 || string(raw[:8]) != liveMagic || raw[offerBytes] != byte(msgHello) {
		return nil, fmt.Errorf("no offer and hello")
	}
	s.hdrOff = s.helloOff + 5 + int(binary.LittleEndian.Uint32(raw[s.helloOff+1:])) + tagBytes
	if s.hdrOff+40 > len(raw) {
		return nil, fmt.Errorf("no stream header")
	}
	hdr := raw[s.hdrOff : s.hdrOff+40]
	prev := binary.LittleEndian.Uint64(hdr[32:])
	if xxhash.Sum64(hdr[:32]) != prev {
		return nil, fmt.Errorf("header check")
	}
	off := s.hdrOff + 40
	for seq := uint64(0); ; seq++ {
		if off+14 > len(raw) {
			return nil, fmt.Errorf("stream ends at %d without its end-of-stream record", off)
		}
		rh := raw[off : off+14]
		n := int(binary.LittleEndian.Uint32(rh[2:]))
		end := off + 14 + n + 8
		if end > len(raw) || binary.LittleEndian.Uint64(rh[6:]) != seq {
			return nil, fmt.Errorf("record %d at %d", seq, off)
		}
		r := hostileRecord{typ: checkpoint.RecordType(binary.LittleEndian.Uint16(rh)), seq: seq, off: off, wire: raw[off:end]}
		if hostileCheck(prev, rh, r.wire[14:14+n]) != binary.LittleEndian.Uint64(raw[end-8:]) {
			return nil, fmt.Errorf("record %d check", seq)
		}
		prev = binary.LittleEndian.Uint64(raw[end-8:])
		r.plain = r.wire[14 : 14+n]
		if v.encrypted {
			var err error
			if r.plain, err = hostileAEAD().Open(nil, hostileNonce(seq), r.plain, append(bytes.Clone(hdr), rh...)); err != nil {
				return nil, fmt.Errorf("record %d does not open", seq)
			}
		}
		s.records = append(s.records, r)
		off = end
		if r.typ == checkpoint.RecordEndStream {
			break
		}
	}
	s.tailOff = off
	if off+5 > len(raw) || raw[off] != byte(msgCommit) || off+5+int(binary.LittleEndian.Uint32(raw[off+1:]))+tagBytes != len(raw) {
		return nil, fmt.Errorf("no commit message after the stream")
	}
	return s, nil
}
