package live

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// Hostile peers in post-copy. At the source, a real Send meets a scripted
// destination that shakes hands, applies nothing and acknowledges the
// stun honestly, then misbehaves: fetches of pages that did not follow, a
// flood of fetches, a fetch replayed, malformed or out of turn, an early
// or a missing word that every page landed. At the destination, a real
// Receive meets a scripted source that replays a recorded post-copy
// migration up to its stun, then sends a list of the pages that follow
// that does not add up, or a post-copy stream, written with the
// checkpoint package's own writer under the ids and keys the conversation
// gives, that carries a page that did not follow, a page twice, or too few
// pages. Both scripts speak through the package's own conversation, so
// every message they send carries the tag the real end would compute:
// what refuses a bad message is the check that knows what it means, not
// the tag. Each case must end with a typed error, within a bound of the
// timeout, without a panic and, at the destination, within a bound on
// what it allocates; after the commit the destination's error wraps
// ErrVMLost and it holds nothing, and the source's wraps ErrVMLost, or
// ErrInDoubt once it had sent every page, and it keeps its copy paused and
// held in doubt.

const (
	// pcTimeout is both ends' Timeout: short, so that a peer that goes
	// silent fails its case quickly.
	pcTimeout = 500 * time.Millisecond
	// pcBound is the longest a case may take: a few timeouts. A case
	// that runs into pcDeadline hung.
	pcBound    = 4 * time.Second
	pcDeadline = 8 * time.Second
)

// pcKey is the migration key of the keyed cases.
var pcKey = bytes.Repeat([]byte{0x9c}, checkpoint.KeySize)

// pcAllocs returns the bytes the process allocated so far
// (runtime/metrics counts them cumulatively).
func pcAllocs() uint64 {
	ms := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(ms)
	return ms[0].Value.Uint64()
}

// pcSkipStream reads one checkpoint stream from r, header to
// end-of-stream record, without applying it, and returns its length: what
// the source's writer counted, which the destination's ready repeats.
func pcSkipStream(r io.Reader) ([]byte, error) {
	var out bytes.Buffer
	hdr := make([]byte, 16)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint16(hdr[14:16]))
	if n < 16 {
		return nil, fmt.Errorf("a stream header of %d bytes", n)
	}
	rest := make([]byte, n-16)
	if _, err := io.ReadFull(r, rest); err != nil {
		return nil, err
	}
	out.Write(hdr)
	out.Write(rest)
	for {
		rh := make([]byte, 14)
		if _, err := io.ReadFull(r, rh); err != nil {
			return nil, err
		}
		body := make([]byte, int(binary.LittleEndian.Uint32(rh[2:]))+8)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		out.Write(rh)
		out.Write(body)
		if binary.LittleEndian.Uint16(rh) == recEndOfStream {
			return out.Bytes(), nil
		}
	}
}

// pcReadMsg reads one control message, tag and all, without checking it:
// for taking a recording apart.
func pcReadMsg(r io.Reader) (msgType, []byte, error) {
	var h [msgHeaderBytes]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.LittleEndian.Uint32(h[1:])+tagBytes)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return msgType(h[0]), body[:len(body)-tagBytes], nil
}

// pcPage names one page of a VM: its region (guest RAM 0, framebuffer k
// at k+1) and its index.
type pcPage struct{ region, page int }

// pcDecodeChunk returns the pages a bitmap message lists.
func pcDecodeChunk(body []byte) []pcPage {
	region := int(binary.LittleEndian.Uint32(body))
	first := int(binary.LittleEndian.Uint32(body[4:]))
	var ps []pcPage
	for i, b := range body[owedChunkHeader:] {
		for bit := range 8 {
			if b&(1<<bit) != 0 {
				ps = append(ps, pcPage{region, first + 8*i + bit})
			}
		}
	}
	return ps
}

// The destination's side: a recorded post-copy migration, and a source
// that replays it.

// pcRAMPages is the recorded VM's guest RAM: 13 pages, so that the last
// byte of its bitmap has bits past the region's end, which a hostile
// list may set.
const pcRAMPages = 13

// pcRecording is a real post-copy migration of a small VM, as its source
// sent it, taken apart at the live protocol's boundaries.
type pcRecording struct {
	key       []byte
	helloBody []byte
	hello     hello
	first     []byte // the stun's stream, header to end
	owed      owed
	chunks    [][]byte // the bitmaps' bodies
	commit    []byte   // the commit's body
	post      []byte   // the post-copy stream
	meta      checkpoint.Metadata
	owedPages []pcPage // every page that followed, in order
	pageSize  []int    // by region
	pages     []int    // by region
}

var pcRecordings struct {
	sync.Mutex
	byKey map[bool]*pcRecording
}

// pcRecord returns the recording under key (nil for none), made once per
// test binary: a running VM without a workload, so that nothing touches
// its memory at either end, no fetch is sent and the recording replays
// exactly to a destination that draws the fixed nonce.
func pcRecord(t *testing.T, key []byte) *pcRecording {
	t.Helper()
	pcRecordings.Lock()
	defer pcRecordings.Unlock()
	if r := pcRecordings.byKey[key != nil]; r != nil {
		return r
	}
	src, dst := hostPair(t, memory.Sparse, 1)
	vm, err := src.CreateVM(vgpu.VMSpec{ID: "pc-hostile", RAMBytes: pcRAMPages * 4096, RAMFootprintBytes: 5 * 4096, Profiles: []string{"P40-1Q"}})
	must(t, err)
	must(t, vm.Start())
	sc, dc := loopbackConns(t, 1)
	var sent bytes.Buffer
	tee := struct {
		io.Reader
		io.Writer
	}{sc[0], io.MultiWriter(sc[0], &sent)}
	scfg, rcfg := replayable(SendConfig{Policy: migrate.Policy{Mode: migrate.PostCopy}, EncryptionKey: key, DigestWorkers: 1},
		ReceiveConfig{EncryptionKey: key, DigestWorkers: 1})
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{tee}, rws(dc), scfg, rcfg)
	if res.srcErr != nil || res.dstErr != nil {
		t.Fatalf("recording a post-copy migration: source %v; destination %v", res.srcErr, res.dstErr)
	}
	if res.dstRep.PostCopy == nil || res.dstRep.PostCopy.OwedPages == 0 || res.dstRep.PostCopy.Fetches != 0 {
		t.Fatalf("the recording is no post-copy without fetches: %+v", res.dstRep.PostCopy)
	}
	rec, err := pcParse(sent.Bytes(), key)
	must(t, err)
	if pcRecordings.byKey == nil {
		pcRecordings.byKey = map[bool]*pcRecording{}
	}
	pcRecordings.byKey[key != nil] = rec
	return rec
}

// pcParse takes a recording apart.
func pcParse(raw []byte, key []byte) (*pcRecording, error) {
	rec := &pcRecording{key: key}
	r := bytes.NewReader(raw[offerBytes:])
	typ, body, err := pcReadMsg(r)
	if err != nil || typ != msgHello {
		return nil, fmt.Errorf("no hello: %v %v", typ, err)
	}
	rec.helloBody = body
	if err := decodeStrict(body, &rec.hello); err != nil {
		return nil, err
	}
	if rec.first, err = pcSkipStream(r); err != nil {
		return nil, fmt.Errorf("the stun's stream: %w", err)
	}
	if typ, body, err = pcReadMsg(r); err != nil || typ != msgOwed {
		return nil, fmt.Errorf("no owed message: %v %v", typ, err)
	}
	if err := decodeStrict(body, &rec.owed); err != nil {
		return nil, err
	}
	for range rec.owed.Chunks {
		if typ, body, err = pcReadMsg(r); err != nil || typ != msgOwedBits {
			return nil, fmt.Errorf("no page bitmap: %v %v", typ, err)
		}
		rec.chunks = append(rec.chunks, body)
		rec.owedPages = append(rec.owedPages, pcDecodeChunk(body)...)
	}
	if typ, rec.commit, err = pcReadMsg(r); err != nil || typ != msgCommit {
		return nil, fmt.Errorf("no commit: %v %v", typ, err)
	}
	if rec.post, err = pcSkipStream(r); err != nil {
		return nil, fmt.Errorf("the post-copy stream: %w", err)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%d bytes after the post-copy stream", r.Len())
	}
	opts := checkpoint.ReaderOptions{}
	if key != nil {
		k, err := replayKeys(key).streamKey(0)
		if err != nil {
			return nil, err
		}
		opts.Encryption, opts.Key = checkpoint.EncryptionRequired, k
	}
	rd, err := checkpoint.NewReader(bytes.NewReader(rec.first), opts)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	rec.meta = *rd.Metadata()
	for _, ri := range rec.meta.Regions {
		rec.pageSize, rec.pages = append(rec.pageSize, ri.PageSize), append(rec.pages, ri.Pages())
	}
	if int64(len(rec.owedPages)) != rec.owed.Pages || rec.pages[0] != pcRAMPages || len(rec.chunks) < 2 {
		return nil, fmt.Errorf("the recording lists %d pages, announces %d, in %d bitmaps; guest RAM has %d pages",
			len(rec.owedPages), rec.owed.Pages, len(rec.chunks), rec.pages[0])
	}
	return rec, nil
}

// maxChunks is how many bitmaps the recorded VM's regions take.
func (rec *pcRecording) maxChunks() int {
	n := 0
	for _, p := range rec.pages {
		n += (p + 8*owedChunkBits - 1) / (8 * owedChunkBits)
	}
	return n
}

// notOwed returns a page of guest RAM that did not follow.
func (rec *pcRecording) notOwed() pcPage {
	for p := range rec.pages[0] {
		if !slices.Contains(rec.owedPages, pcPage{0, p}) {
			return pcPage{0, p}
		}
	}
	panic("every page of guest RAM followed")
}

// pcSource is the scripted source: the recording's conversation, spoken
// afresh so that every tag is this migration's, with the steps a case
// changes.
type pcSource struct {
	rec  *pcRecording
	c    net.Conn
	conv *conversation
	// reached is the last step the script got through, and fetches
	// the destination's fetches it read.
	reached string
	fetches int
	// stale is a post-copy stream's id drawn before the resume, for the
	// case that sends it.
	stale [checkpoint.StreamIDSize]byte
}

// pcSourceCase is what the scripted source does differently: the list of
// the pages that follow (owed; nil sends the recorded one) and the
// post-copy stream (post; nil sends the recorded one).
type pcSourceCase struct {
	name string
	owed func(s *pcSource) error
	post func(s *pcSource) error
	// onResume, if set, is the destination's OnResume.
	onResume func(in *vgpu.VM)
	// want must every one match the destination's error; after is
	// whether it comes after the commit (ErrVMLost); oneOf, if set,
	// must have one match too. No want: the migration must succeed.
	want  []error
	oneOf []error
	after bool
	// clearOnly: the case waits out a timeout, and a key changes
	// nothing of it; it runs in the clear only.
	clearOnly bool
}

// run speaks the recorded migration, with the case's changes, until the
// destination's word that every page landed, or a failure.
func (s *pcSource) run(sc pcSourceCase) error {
	_ = s.c.SetDeadline(time.Now().Add(pcDeadline))
	br := bufio.NewReader(s.c)
	s.conv = &conversation{w: s.c, r: br, end: migrate.SourceEnd, t: newTranscript()}
	if _, err := openConversation(s.conv, s.rec.key, replaySourceNonce); err != nil {
		return err
	}
	if err := s.conv.writeRaw(msgHello, s.rec.helloBody); err != nil {
		return err
	}
	var a accept
	if err := s.conv.read(msgAccept, &a); err != nil {
		return err
	}
	if _, err := s.c.Write(s.rec.first); err != nil {
		return err
	}
	s.reached = "stream"
	owedFn := sc.owed
	if owedFn == nil {
		owedFn = (*pcSource).sendOwed
	}
	if err := owedFn(s); err != nil {
		return err
	}
	s.reached = "owed"
	var rd ready
	if err := s.conv.read(msgReady, &rd); err != nil {
		return err
	}
	if err := s.conv.writeRaw(msgCommit, s.rec.commit); err != nil {
		return err
	}
	var ack resumed
	if err := s.conv.read(msgResumed, &ack); err != nil {
		return err
	}
	s.reached = "resumed"
	postFn := sc.post
	if postFn == nil {
		postFn = func(s *pcSource) error { _, err := s.c.Write(s.rec.post); return err }
	}
	if err := postFn(s); err != nil {
		return err
	}
	s.reached = "post"
	for {
		typ, _, err := s.conv.readOneOf(msgFetch, msgLanded)
		if err != nil {
			return err
		}
		if typ == msgLanded {
			s.reached = "landed"
			return nil
		}
		s.fetches++
	}
}

// sendOwed sends the recorded list of the pages that follow.
func (s *pcSource) sendOwed() error { return s.sendOwedAs(s.rec.owed, s.rec.chunks...) }

// sendOwedAs sends o and the bitmaps given.
func (s *pcSource) sendOwedAs(o owed, chunks ...[]byte) error {
	if err := s.conv.write(msgOwed, o); err != nil {
		return err
	}
	for _, c := range chunks {
		if err := s.conv.writeRaw(msgOwedBits, c); err != nil {
			return err
		}
	}
	return nil
}

// postID is the id of the post-copy stream of index idx
// (postCopyStreamIndex(0) is the right one) as the conversation so far
// draws it.
func (s *pcSource) postID(idx int) [checkpoint.StreamIDSize]byte {
	return s.conv.t.streamID(s.rec.hello.StreamID, idx)
}

// postWriter opens a post-copy stream on the connection as the source
// does, with id, the key of stream keyIdx (postCopyStreamIndex(0) for the
// right one) where the migration is keyed, declaring meta.
func (s *pcSource) postWriter(id [checkpoint.StreamIDSize]byte, keyIdx int, meta checkpoint.Metadata) (*checkpoint.Writer, error) {
	opts := checkpoint.WriterOptions{StreamID: id, Level: checkpoint.LevelNone, BatchBytes: s.rec.hello.BatchBytes}
	if s.rec.key != nil {
		k, err := s.conv.t.keys.streamKey(keyIdx)
		if err != nil {
			return nil, err
		}
		opts.Encryption, opts.Key = checkpoint.EncryptionRequired, k
	}
	return checkpoint.NewWriter(s.c, meta, opts)
}

// writePages writes pages, each a page of a pattern, as a post-copy
// stream with the right id and key, and ends it.
func (s *pcSource) writePages(pages []pcPage) error {
	return s.writeStream(s.postID(postCopyStreamIndex(0)), postCopyStreamIndex(0), s.rec.meta, pages)
}

// writeStream writes a whole second stream of pages, with id, the key of
// stream index key and meta.
func (s *pcSource) writeStream(id [checkpoint.StreamIDSize]byte, key int, meta checkpoint.Metadata, pages []pcPage) error {
	w, err := s.postWriter(id, key, meta)
	if err != nil {
		return err
	}
	defer w.Release()
	if err := pcWritePages(w, s.rec, pages); err != nil {
		return err
	}
	return w.Close()
}

// pcWritePages writes pages to w, in the order given: a page that comes
// again, or before the page written last, starts a batch of its own.
func pcWritePages(w *checkpoint.Writer, rec *pcRecording, pages []pcPage) error {
	for _, p := range pages {
		data := bytes.Repeat([]byte{byte(p.page) | 1}, rec.pageSize[p.region])
		if err := w.WritePage(uint32(p.region), p.page, 1, data); err != nil {
			return err
		}
	}
	return nil
}

// pcOutcome is what one case did at the destination.
type pcOutcome struct {
	in       *vgpu.VM
	rep      *migrate.Report
	err      error
	srcErr   error
	reached  string
	fetches  int
	took     time.Duration
	allocs   uint64
	panicked any
}

// pcReceive runs a real Receive on dst against the scripted source doing
// sc.
func pcReceive(t *testing.T, dst *vgpu.Host, rec *pcRecording, sc pcSourceCase) pcOutcome {
	t.Helper()
	sconns, dconns := loopbackConns(t, 1)
	src := &pcSource{rec: rec, c: sconns[0]}
	srcDone := make(chan error, 1)
	_, rc := replayable(SendConfig{}, ReceiveConfig{EncryptionKey: rec.key, Timeout: pcTimeout, DigestWorkers: 1, Workers: 2,
		OnResume: sc.onResume})
	ctx, cancel := context.WithTimeout(context.Background(), pcDeadline)
	defer cancel()
	var o pcOutcome
	before := pcAllocs()
	start := time.Now()
	go func() { srcDone <- src.run(sc) }()
	func() {
		defer func() { o.panicked = recover() }()
		o.in, o.rep, o.err = Receive(ctx, dst, rws(dconns), rc)
	}()
	o.took = time.Since(start)
	// The source reads on until the connection ends: a destination that
	// succeeded leaves it open.
	dconns[0].Close()
	o.srcErr = <-srcDone
	o.allocs = pcAllocs() - before
	o.reached, o.fetches = src.reached, src.fetches
	return o
}

// pcCheckReceive checks what the destination did in case sc.
func pcCheckReceive(t *testing.T, dst *vgpu.Host, sc pcSourceCase, o pcOutcome, allocBound uint64) {
	t.Helper()
	if o.panicked != nil {
		t.Fatalf("Receive panicked: %v", o.panicked)
	}
	if o.took > pcBound {
		t.Errorf("Receive took %v, bound %v", o.took, pcBound)
	}
	if allocBound > 0 && o.allocs > allocBound {
		t.Errorf("the case allocated %d bytes, bound %d", o.allocs, allocBound)
	}
	if len(sc.want) == 0 {
		if o.err != nil || o.in == nil || o.reached != "landed" {
			t.Fatalf("destination: VM %v, error %v; the source got to %q (%v)", o.in, o.err, o.reached, o.srcErr)
		}
		for i, reg := range append([]*memory.Region{o.in.RAM()}, o.in.Framebuffers()...) {
			if n := reg.AbsentPages(); n != 0 {
				t.Fatalf("region %d has %d absent pages after the post-copy", i, n)
			}
		}
		must(t, o.in.Destroy())
		holdsNothing(t, dst)
		return
	}
	var pe *migrate.PhaseError
	if !errors.As(o.err, &pe) {
		t.Fatalf("destination error %v (%T) is not a *PhaseError", o.err, o.err)
	}
	if o.in != nil || o.rep == nil || o.rep.Outcome != migrate.PhaseFailed {
		t.Errorf("failed Receive returned VM %v, report %v", o.in, o.rep)
	}
	for _, w := range sc.want {
		if !errors.Is(o.err, w) {
			t.Errorf("destination error %v does not match %v", o.err, w)
		}
	}
	if len(sc.oneOf) > 0 && !slices.ContainsFunc(sc.oneOf, func(w error) bool { return errors.Is(o.err, w) }) {
		t.Errorf("destination error %v matches none of %v", o.err, sc.oneOf)
	}
	if errors.Is(o.err, migrate.ErrVMLost) != sc.after || (pe.Phase == migrate.PhasePostCopy) != sc.after {
		t.Errorf("destination error %v in %v; after the commit: %v", o.err, pe.Phase, sc.after)
	}
	if sc.after != (o.reached == "resumed" || o.reached == "post") {
		t.Errorf("the source got to %q (%v), the case fails after the commit: %v", o.reached, o.srcErr, sc.after)
	}
	holdsNothing(t, dst)
}

// writeCaptured writes one message through the conversation, as the
// source would, but to a buffer, and returns its bytes: for the caller to
// send as they are, twice, or altered.
func (s *pcSource) writeCaptured(typ msgType, body []byte) ([]byte, error) {
	var wire bytes.Buffer
	w := s.conv.w
	s.conv.w = &wire
	err := s.conv.writeRaw(typ, body)
	s.conv.w = w
	return wire.Bytes(), err
}

// pcChunk returns the body of a bitmap message.
func pcChunk(region, first int, bits []byte) []byte {
	return owedChunk{Region: region, First: first, Bits: bits}.encode()
}

// pcDestinationCases are the hostile sources: a list of the pages that
// follow that does not add up, refused before the commit (the source's
// VM is then whole, and the destination's copy goes), and post-copy
// streams that do not deliver what the list said, refused after it
// (ErrVMLost).
func pcDestinationCases(rec *pcRecording, access func(in *vgpu.VM)) []pcSourceCase {
	pages, chunks := rec.owed.Pages, rec.chunks
	n := len(chunks)
	owedAs := func(o owed, cs ...[]byte) func(*pcSource) error {
		return func(s *pcSource) error { return s.sendOwedAs(o, cs...) }
	}
	raw := func(typ msgType, body string, cs ...[]byte) func(*pcSource) error {
		return func(s *pcSource) error {
			if err := s.conv.writeRaw(typ, []byte(body)); err != nil {
				return err
			}
			for _, c := range cs {
				if err := s.conv.writeRaw(msgOwedBits, c); err != nil {
					return err
				}
			}
			return nil
		}
	}
	// Guest RAM's bitmap with a byte more, a byte less, from another
	// page, and with bit 13 set, past its 13 pages.
	ram := pcDecodeChunk(chunks[0])
	long := append(bytes.Clone(chunks[0]), 0)
	short := chunks[0][:len(chunks[0])-1]
	shifted := pcChunk(0, 8, chunks[0][owedChunkHeader+1:])
	past := bytes.Clone(chunks[0])
	past[owedChunkHeader+pcRAMPages/8] |= 1 << (pcRAMPages % 8)
	huge := pcChunk(0, 0, make([]byte, maxControlBytes-owedChunkHeader))
	stream := []error{migrate.ErrStream}
	lost := func(errs ...error) []error { return append(errs, migrate.ErrVMLost) }
	pagesOf := func(ps []pcPage) func(*pcSource) error {
		return func(s *pcSource) error { return s.writePages(ps) }
	}
	cases := []pcSourceCase{
		// The harness lets a good source through: the recording as it
		// was, and a post-copy stream written afresh.
		{name: "clean/recorded"},
		{name: "clean/rewritten", post: pagesOf(rec.owedPages)},

		// The list's header: counts that cannot describe the regions
		// the destination holds, refused before any bitmap is read.
		{name: "owed=pages-without-chunks", owed: owedAs(owed{Pages: pages, Chunks: 0}), want: stream},
		{name: "owed=chunks-without-pages", owed: owedAs(owed{Pages: 0, Chunks: n}, chunks...), want: stream},
		{name: "owed=pages-negative", owed: owedAs(owed{Pages: -1, Chunks: n}, chunks...), want: stream},
		{name: "owed=chunks-negative", owed: owedAs(owed{Pages: pages, Chunks: -1}, chunks...), want: stream},
		{name: "owed=chunks-past-regions", owed: owedAs(owed{Pages: pages, Chunks: rec.maxChunks() + 1}, chunks...), want: stream},
		{name: "owed=chunks-huge", owed: owedAs(owed{Pages: pages, Chunks: 1 << 40}, chunks...), want: stream},
		// Counts that fit, and bitmaps that do not hold what they say.
		{name: "owed=pages-huge", owed: owedAs(owed{Pages: 1 << 62, Chunks: n}, chunks...), want: stream},
		{name: "owed=pages-more-than-listed", owed: owedAs(owed{Pages: pages + 1, Chunks: n}, chunks...), want: stream},
		{name: "owed=pages-fewer-than-listed", owed: owedAs(owed{Pages: pages - 1, Chunks: n}, chunks...), want: stream},
		{name: "owed=chunks-fewer-than-regions", owed: owedAs(owed{Pages: int64(len(ram)), Chunks: n - 1}, chunks[:n-1]...), want: stream},
		// A source that says nothing follows after a stun that sent no
		// page and no digest: the destination would run a VM whose pages
		// never came.
		{name: "owed=none-after-a-post-copy-stun", owed: owedAs(owed{}), want: stream},
		// The header decoded strictly.
		{name: "owed=unknown-field", owed: raw(msgOwed, fmt.Sprintf(`{"pages":%d,"chunks":%d,"more":1}`, pages, n), chunks...), want: stream},
		{name: "owed=missing-field", owed: raw(msgOwed, fmt.Sprintf(`{"pages":%d}`, pages), chunks...), want: stream},
		{name: "owed=null", owed: raw(msgOwed, `null`, chunks...), want: stream},
		{name: "owed=chunks-as-text", owed: raw(msgOwed, fmt.Sprintf(`{"pages":%d,"chunks":"%d"}`, pages, n), chunks...), want: stream},
		// Out of turn: a bitmap, or the commit, where the list belongs.
		{name: "owed=bitmap-first", owed: func(s *pcSource) error { return s.conv.writeRaw(msgOwedBits, chunks[0]) }, want: stream},
		{name: "owed=commit-first", owed: func(s *pcSource) error { return s.conv.writeRaw(msgCommit, s.rec.commit) }, want: stream},

		// The bitmaps, each taken only in its place, of its size.
		{name: "bits=out-of-order", owed: owedAs(owed{Pages: pages, Chunks: n}, slices.Concat(chunks[1:], chunks[:1])...), want: stream},
		{name: "bits=repeated", owed: owedAs(owed{Pages: pages, Chunks: n}, chunks[0], chunks[0]), want: stream},
		{name: "bits=other-first-page", owed: owedAs(owed{Pages: pages, Chunks: n}, shifted, chunks[1]), want: stream},
		{name: "bits=a-byte-long", owed: owedAs(owed{Pages: pages, Chunks: n}, long, chunks[1]), want: stream},
		{name: "bits=a-byte-short", owed: owedAs(owed{Pages: pages, Chunks: n}, short, chunks[1]), want: stream},
		{name: "bits=shorter-than-its-header", owed: owedAs(owed{Pages: pages, Chunks: n}, chunks[0][:owedChunkHeader-1], chunks[1]), want: stream},
		{name: "bits=control-limit", owed: owedAs(owed{Pages: pages, Chunks: n}, huge, chunks[1]), want: stream},
		{name: "bits=page-past-region-end", owed: owedAs(owed{Pages: pages + 1, Chunks: n}, past, chunks[1]), want: stream},
		{name: "bits=region-undeclared", owed: owedAs(owed{Pages: pages, Chunks: n}, chunks[0], pcChunk(len(rec.pages), 0, []byte{1})), want: stream},
		{name: "bits=fewer-than-announced", owed: func(s *pcSource) error {
			if err := s.sendOwedAs(owed{Pages: pages, Chunks: n}, chunks[:n-1]...); err != nil {
				return err
			}
			return s.conv.writeRaw(msgCommit, s.rec.commit)
		}, want: stream},
		// Every bitmap is the transcript's: replayed or altered, its tag
		// fails before its content is looked at.
		{name: "bits=replayed", owed: func(s *pcSource) error {
			if err := s.conv.write(msgOwed, owed{Pages: pages, Chunks: n}); err != nil {
				return err
			}
			wire, err := s.writeCaptured(msgOwedBits, chunks[0])
			if err != nil {
				return err
			}
			_, err = s.c.Write(append(bytes.Clone(wire), wire...))
			return err
		}, want: []error{migrate.ErrAuthentication}},
		{name: "bits=tag-altered", owed: func(s *pcSource) error {
			if err := s.conv.write(msgOwed, owed{Pages: pages, Chunks: n}); err != nil {
				return err
			}
			wire, err := s.writeCaptured(msgOwedBits, chunks[0])
			if err != nil {
				return err
			}
			wire[len(wire)-1] ^= 1
			_, err = s.c.Write(wire)
			return err
		}, want: []error{migrate.ErrAuthentication}},

		// The post-copy stream, once the VM runs at the destination: a
		// page that did not follow, a page twice, pages missing.
		{name: "post=page-not-owed", post: pagesOf(append([]pcPage{rec.notOwed()}, rec.owedPages...)), want: lost(migrate.ErrStream), after: true},
		{name: "post=page-twice", post: pagesOf(append(slices.Clone(rec.owedPages), rec.owedPages[0])), want: lost(migrate.ErrStream), after: true},
		{name: "post=page-missing", post: pagesOf(rec.owedPages[1:]), want: lost(migrate.ErrStream), after: true},
		// A page twice and another never: as many pages landed as the
		// list announced, and still one missing, which the VM would
		// read as whatever the destination's memory held.
		{name: "post=page-twice-another-missing", post: pagesOf(append(slices.Clone(rec.owedPages[1:]), rec.owedPages[1])),
			want: lost(migrate.ErrStream), after: true},
		{name: "post=no-page", post: pagesOf(nil), want: lost(migrate.ErrStream), after: true},
		// A stream that is not this migration's post-copy stream: the
		// first stream's id, an id drawn before the resume, another VM.
		{name: "post=first-stream-id", post: func(s *pcSource) error {
			return s.writeStream(s.postID(0), postCopyStreamIndex(0), s.rec.meta, s.rec.owedPages)
		}, want: lost(migrate.ErrAuthentication), after: true},
		{name: "post=id-drawn-before-the-resume", owed: func(s *pcSource) error {
			if err := s.sendOwed(); err != nil {
				return err
			}
			s.stale = s.postID(postCopyStreamIndex(0))
			return nil
		}, post: func(s *pcSource) error {
			return s.writeStream(s.stale, postCopyStreamIndex(0), s.rec.meta, s.rec.owedPages)
		}, want: lost(migrate.ErrAuthentication), after: true},
		{name: "post=other-vm", post: func(s *pcSource) error {
			meta := s.rec.meta
			meta.VMID = "impostor"
			return s.writeStream(s.postID(postCopyStreamIndex(0)), postCopyStreamIndex(0), meta, s.rec.owedPages)
		}, want: lost(migrate.ErrStream), after: true},
		// Cut short: the source hangs up halfway through.
		{name: "post=cut-short", post: func(s *pcSource) error {
			w, err := s.postWriter(s.postID(postCopyStreamIndex(0)), postCopyStreamIndex(0), s.rec.meta)
			if err != nil {
				return err
			}
			defer w.Release()
			if err := pcWritePages(w, s.rec, s.rec.owedPages[:2]); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
			s.c.Close()
			return nil
		}, want: lost(), oneOf: []error{migrate.ErrStream, migrate.ErrConnection}, after: true},
		// Silent: the stream opens and no page comes, while an access
		// of the VM's waits for one. The access fails with the migration
		// instead of waiting for ever.
		{name: "post=silent-with-an-access-waiting", onResume: access, post: func(s *pcSource) error {
			w, err := s.postWriter(s.postID(postCopyStreamIndex(0)), postCopyStreamIndex(0), s.rec.meta)
			if err != nil {
				return err
			}
			return w.Release()
		}, want: lost(migrate.ErrConnection), after: true, clearOnly: true},
	}
	if rec.key != nil {
		// The right id, sealed under the first stream's key.
		cases = append(cases, pcSourceCase{name: "post=first-stream-key", post: func(s *pcSource) error {
			return s.writeStream(s.postID(postCopyStreamIndex(0)), 0, s.rec.meta, s.rec.owedPages)
		}, want: lost(migrate.ErrStream, checkpoint.ErrAuth), after: true})
	}
	return cases
}

// TestHostilePostCopyDestination runs every hostile source against a
// real Receive, in the clear and keyed.
func TestHostilePostCopyDestination(t *testing.T) {
	for _, key := range [][]byte{nil, pcKey} {
		rec := pcRecord(t, key)
		_, dst := hostPair(t, memory.Sparse, 1)
		// The silent case's access: a read of the first page that
		// follows, from OnResume, on a goroutine of its own.
		var accessErr chan error
		access := func(in *vgpu.VM) {
			p, done := rec.owedPages[0], accessErr
			go func() {
				b := make([]byte, rec.pageSize[p.region])
				_, err := in.RAM().ReadAt(b, int64(p.page)*int64(len(b)))
				done <- err
			}()
		}
		cases := pcDestinationCases(rec, access)
		// The allocation bound: the most a clean case cost (both ends'
		// scripts and buffers included), and slack for what a hostile
		// list may make the destination hold: a control message, a bit
		// a page of its regions.
		var base uint64
		for _, sc := range cases[:2] {
			o := pcReceive(t, dst, rec, sc)
			pcCheckReceive(t, dst, sc, o, 0)
			base = max(base, o.allocs)
		}
		bound := base + 4<<20
		t.Run(fmt.Sprintf("keyed=%v", key != nil), func(t *testing.T) {
			for _, sc := range cases {
				if sc.clearOnly && key != nil {
					continue
				}
				t.Run(sc.name, func(t *testing.T) {
					accessErr = make(chan error, 1)
					g := runtime.NumGoroutine()
					o := pcReceive(t, dst, rec, sc)
					defer func() {
						// A VM the destination should not have kept goes
						// before the next case, which checks the host
						// holds nothing.
						if o.in != nil && o.in.State() != vgpu.VMDestroyed {
							_ = o.in.Destroy()
						}
					}()
					pcCheckReceive(t, dst, sc, o, bound)
					t.Logf("%v in %v, %d bytes allocated (bound %d)", o.err, o.took.Round(time.Millisecond), o.allocs, bound)
					if sc.onResume != nil {
						select {
						case err := <-accessErr:
							if err == nil {
								t.Errorf("the access waiting for a page that never came succeeded")
							}
						case <-time.After(pcBound):
							t.Errorf("the access waiting for a page that never came still waits")
						}
						if o.fetches == 0 {
							t.Errorf("the waiting access sent no fetch")
						}
					}
					if left := hostileSettle(g); left > 0 {
						t.Errorf("%d goroutine(s) left behind", left)
					}
				})
			}
		})
	}
}

// The source's side: a real Send, and a destination that speaks
// honestly up to a point, then does what a case says.

// pcDest is the scripted destination. It applies nothing: it reads the
// stun's stream to its end, counting its bytes for the ready, and the
// list of the pages that follow.
type pcDest struct {
	key       []byte
	c         net.Conn
	br        *bufio.Reader
	conv      *conversation
	hello     hello
	owed      owed
	owedPages []pcPage
	commit    commit
	// reached is the last step the script got through.
	reached string
}

// pcDestCase is one hostile destination: where it departs from the
// protocol (in the ready's place, in the resumed's, or once the source
// runs its post-copy), what it does there, and how the source must end.
type pcDestCase struct {
	name string
	at   string // "ready", "resumed" or "post"
	act  func(d *pcDest) error
	// want must every one match the source's error, and one of oneOf
	// if set; no want: the migration must succeed.
	want, oneOf []error
	// check, if set, checks a source's report more closely.
	check func(t *testing.T, rep *migrate.Report)
	// clearOnly: the case waits out a timeout, and a key changes
	// nothing of it; it runs in the clear only.
	clearOnly bool
}

// run shakes hands, reads the stun and answers it, up to the case's
// step, then acts.
func (d *pcDest) run(dc pcDestCase) error {
	_ = d.c.SetDeadline(time.Now().Add(pcDeadline))
	d.br = bufio.NewReader(d.c)
	d.conv = &conversation{w: d.c, r: d.br, end: migrate.DestinationEnd, t: newTranscript()}
	major, pre, err := readPreamble(d.br)
	if err != nil {
		return err
	}
	if major != ProtocolMajor {
		return fmt.Errorf("version %d", major)
	}
	o, err := readOfferRest(d.br, d.conv.t, pre[:])
	if err != nil {
		return err
	}
	if err := d.conv.writeRaw(msgChallenge, challengeBody(d.key != nil, replayDestNonce)); err != nil {
		return err
	}
	keys, err := deriveKeys(d.key, &o.nonce, replayDestNonce)
	if err != nil {
		return err
	}
	d.conv.t.keyed(keys, migrate.DestinationEnd)
	d.conv.tagged = true
	if err := d.conv.read(msgHello, &d.hello); err != nil {
		return err
	}
	if err := d.conv.write(msgAccept, accept{Host: "scripted"}); err != nil {
		return err
	}
	stream, err := pcSkipStream(d.br)
	if err != nil {
		return err
	}
	if err := d.conv.read(msgOwed, &d.owed); err != nil {
		return err
	}
	for range d.owed.Chunks {
		body, err := d.conv.readRaw(msgOwedBits)
		if err != nil {
			return err
		}
		d.owedPages = append(d.owedPages, pcDecodeChunk(body)...)
	}
	if int64(len(d.owedPages)) != d.owed.Pages || d.owed.Pages == 0 {
		return fmt.Errorf("a list of %d pages announced %d", len(d.owedPages), d.owed.Pages)
	}
	d.reached = "owed"
	if dc.at == "ready" {
		return d.act(dc)
	}
	if err := d.conv.write(msgReady, ready{StreamBytes: int64(len(stream))}); err != nil {
		return err
	}
	if err := d.conv.read(msgCommit, &d.commit); err != nil {
		return err
	}
	d.reached = "commit"
	if dc.at == "resumed" {
		return d.act(dc)
	}
	if err := d.conv.write(msgResumed, resumed{Running: d.commit.Resume, Throttle: d.commit.Throttle}); err != nil {
		return err
	}
	d.reached = "resumed"
	return d.act(dc)
}

// act does what the case does, while a goroutine drains what the source
// sends meanwhile (the post-copy stream), until the connection ends: the
// source closes it when it fails, the test once Send has returned. The
// drain only reads and the case only writes.
func (d *pcDest) act(dc pcDestCase) error {
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, d.br)
	}()
	dc.act(d) // the source may hang up on it halfway: only how it ends counts
	<-drained
	return nil
}

// fetch asks for p as a destination would.
func (d *pcDest) fetch(p pcPage) error {
	return d.conv.write(msgFetch, fetch{Region: p.region, Page: p.page})
}

// notOwed returns a page of guest RAM that did not follow.
func (d *pcDest) notOwed() pcPage {
	ram := int(d.hello.Spec.RAMBytes / int64(d.hello.Spec.RAMPageSize))
	for p := range ram {
		if !slices.Contains(d.owedPages, pcPage{0, p}) {
			return pcPage{0, p}
		}
	}
	panic("every page of guest RAM followed")
}

// writeCaptured writes one message through the conversation, as the
// destination would, and returns its bytes on the wire.
func (d *pcDest) writeCaptured(typ msgType, v any) ([]byte, error) {
	var wire bytes.Buffer
	w := d.conv.w
	d.conv.w = &wire
	err := d.conv.write(typ, v)
	d.conv.w = w
	if err != nil {
		return nil, err
	}
	return wire.Bytes(), nil
}

// pcDestCases are the hostile destinations.
func pcDestCases() []pcDestCase {
	stream := []error{migrate.ErrStream}
	// After the commit the source's error says lost (ErrVMLost) or, once
	// its pushes had all gone, in doubt (ErrInDoubt): which depends on how
	// far the push got, and the check below takes either, never both.
	lost := func(errs ...error) []error { return errs }
	raw := func(typ msgType, body string) func(*pcDest) error {
		return func(d *pcDest) error { return d.conv.writeRaw(typ, []byte(body)) }
	}
	fetchOf := func(region, page int) func(*pcDest) error {
		return func(d *pcDest) error { return d.fetch(pcPage{region, page}) }
	}
	flood := func(n func(d *pcDest) int) func(*pcDest) error {
		return func(d *pcDest) error {
			for i := range n(d) {
				if err := d.fetch(d.owedPages[i%len(d.owedPages)]); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return []pcDestCase{
		// The harness lets a good destination through: it asks for every
		// page once (each may be on its way already), then says they
		// landed; the source takes its measures.
		{name: "clean/fetch-all-then-landed", at: "post", act: func(d *pcDest) error {
			for _, p := range d.owedPages {
				if err := d.fetch(p); err != nil {
					return err
				}
			}
			n := int64(len(d.owedPages))
			return d.conv.write(msgLanded, landed{Faults: n, Fetches: n, P50NS: 1000, P99NS: 2000, MaxNS: 3000, StallNS: 9000})
		}, check: func(t *testing.T, rep *migrate.Report) {
			if p := rep.PostCopy; p == nil || p.Fetches != p.OwedPages || p.Faults != p.OwedPages || p.Stall != 9000 {
				t.Errorf("the source's post-copy report %+v does not take the destination's measures", rep.PostCopy)
			}
		}},

		// Fetches of pages that did not follow, or do not exist.
		{name: "fetch=page-not-owed", at: "post", act: func(d *pcDest) error { return d.fetch(d.notOwed()) }, want: lost(migrate.ErrStream)},
		{name: "fetch=region-past-the-vm", at: "post", act: fetchOf(2, 0), want: lost(migrate.ErrStream)},
		{name: "fetch=region-negative", at: "post", act: fetchOf(-1, 0), want: lost(migrate.ErrStream)},
		{name: "fetch=region-huge", at: "post", act: fetchOf(1<<40, 0), want: lost(migrate.ErrStream)},
		{name: "fetch=page-past-the-region", at: "post", act: fetchOf(0, 1<<20), want: lost(migrate.ErrStream)},
		{name: "fetch=page-negative", at: "post", act: fetchOf(0, -1), want: lost(migrate.ErrStream)},
		// More fetches than pages followed: a destination asks for a
		// page once. Just one more, and far more than the source queues.
		{name: "fetch=flood-one-more", at: "post", act: flood(func(d *pcDest) int { return len(d.owedPages) + 1 }), want: lost(migrate.ErrStream)},
		{name: "fetch=flood", at: "post", act: flood(func(*pcDest) int { return 4 * fetchQueue }), want: lost(migrate.ErrStream)},
		// The same bytes twice: the second is out of its place in the
		// transcript, whatever it asks for.
		{name: "fetch=replayed", at: "post", act: func(d *pcDest) error {
			wire, err := d.writeCaptured(msgFetch, fetch{Region: d.owedPages[0].region, Page: d.owedPages[0].page})
			if err != nil {
				return err
			}
			_, err = d.c.Write(append(bytes.Clone(wire), wire...))
			return err
		}, want: lost(migrate.ErrAuthentication)},
		{name: "fetch=tag-altered", at: "post", act: func(d *pcDest) error {
			wire, err := d.writeCaptured(msgFetch, fetch{Region: d.owedPages[0].region, Page: d.owedPages[0].page})
			if err != nil {
				return err
			}
			wire[len(wire)-1] ^= 0x80
			_, err = d.c.Write(wire)
			return err
		}, want: lost(migrate.ErrAuthentication)},
		// Decoded strictly, with a good tag.
		{name: "fetch=unknown-field", at: "post", act: raw(msgFetch, `{"region":0,"page":0,"pages":1000}`), want: lost(migrate.ErrStream)},
		{name: "fetch=missing-field", at: "post", act: raw(msgFetch, `{"region":0}`), want: lost(migrate.ErrStream)},
		{name: "fetch=field-without-case", at: "post", act: raw(msgFetch, `{"Region":0,"page":0}`), want: lost(migrate.ErrStream)},
		{name: "fetch=not-an-object", at: "post", act: raw(msgFetch, `[0,0]`), want: lost(migrate.ErrStream)},
		{name: "fetch=trailing-bytes", at: "post", act: raw(msgFetch, `{"region":0,"page":0}{}`), want: lost(migrate.ErrStream)},
		{name: "fetch=length-huge", at: "post", act: func(d *pcDest) error {
			_, err := d.c.Write([]byte{byte(msgFetch), 0xff, 0xff, 0xff, 0x7f})
			return err
		}, want: lost(migrate.ErrStream)},
		// Out of turn in post-copy.
		{name: "unexpected=ready", at: "post", act: func(d *pcDest) error {
			return d.conv.write(msgReady, ready{StreamBytes: 1})
		}, want: lost(migrate.ErrStream)},
		{name: "unexpected=resumed-again", at: "post", act: func(d *pcDest) error {
			return d.conv.write(msgResumed, resumed{Running: true})
		}, want: lost(migrate.ErrStream)},
		{name: "unexpected=page-bitmap", at: "post", act: raw(msgOwedBits, "\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff"), want: lost(migrate.ErrStream)},
		{name: "unexpected=unknown-type", at: "post", act: raw(msgType(0x7f), `{}`), want: lost(migrate.ErrStream)},
		// A refusal once the VM runs at the destination: the source
		// reads it as the destination's word, and the VM is lost all the
		// same; the refusal's code is reported beside ErrVMLost.
		{name: "unexpected=refusal", at: "post", act: func(d *pcDest) error {
			return d.conv.write(msgRefuse, refusal{Code: "busy", Message: "changed its mind"})
		}, want: lost(migrate.ErrRefused, migrate.ErrBusy)},
		// The word that every page landed, decoded strictly too.
		{name: "landed=unknown-field", at: "post", act: raw(msgLanded, `{"faults":0,"fetches":0,"p50_ns":0,"p99_ns":0,"max_ns":0,"stall_ns":0,"pages":1}`),
			want: lost(migrate.ErrStream)},
		{name: "landed=missing-field", at: "post", act: raw(msgLanded, `{"faults":0}`), want: lost(migrate.ErrStream)},
		// landed before any page could have landed. The source only
		// reports what the destination says: it goes on pushing every
		// page that follows, ends the stream, and only then lets the VM
		// go, so an early word costs a lying destination its own copy,
		// never the source a page it did not send. The migration
		// succeeds.
		{name: "landed=early", at: "post", act: func(d *pcDest) error { return d.conv.write(msgLanded, landed{}) }},
		// Negative measures are only reports: taken as zero.
		{name: "landed=negative-measures", at: "post", act: func(d *pcDest) error {
			return d.conv.write(msgLanded, landed{Faults: -1, Fetches: -1, P50NS: -1, P99NS: -1, MaxNS: -1, StallNS: -1})
		}, check: func(t *testing.T, rep *migrate.Report) {
			if p := rep.PostCopy; p == nil || p.Faults != 0 || p.Fetches != 0 || p.Stall != 0 || p.FaultLatencyMax != 0 || p.FaultLatencyP50 != 0 {
				t.Errorf("negative measures reported as %+v", rep.PostCopy)
			}
		}},
		// Silent: no fetch and no word, with the connection open. Once
		// every page is on the wire the source waits for the word within
		// its timeout, not for ever.
		{name: "silent", at: "post", act: func(*pcDest) error { return nil }, want: lost(migrate.ErrConnection), clearOnly: true},
		{name: "silent-after-a-fetch", at: "post", act: func(d *pcDest) error { return d.fetch(d.owedPages[0]) },
			want: lost(migrate.ErrConnection), clearOnly: true},

		// Before the commit the post-copy messages are out of turn, and
		// the source keeps its VM as it was, running.
		{name: "before-commit/fetch-for-ready", at: "ready", act: func(d *pcDest) error { return d.fetch(d.owedPages[0]) }, want: stream},
		{name: "before-commit/landed-for-ready", at: "ready", act: func(d *pcDest) error { return d.conv.write(msgLanded, landed{}) }, want: stream},
		// After the commit and before the acknowledgement: in doubt, not
		// lost; the source keeps its copy paused and held.
		{name: "in-doubt/fetch-for-resumed", at: "resumed", act: func(d *pcDest) error { return d.fetch(d.owedPages[0]) },
			want: []error{migrate.ErrStream, migrate.ErrInDoubt}},
	}
}

// TestHostilePostCopySource runs every hostile destination against a
// real Send of a running VM in post-copy, in the clear and keyed.
func TestHostilePostCopySource(t *testing.T) {
	for _, key := range [][]byte{nil, pcKey} {
		t.Run(fmt.Sprintf("keyed=%v", key != nil), func(t *testing.T) {
			for _, dc := range pcDestCases() {
				if dc.clearOnly && key != nil {
					continue
				}
				t.Run(dc.name, func(t *testing.T) { pcSendCase(t, key, dc) })
			}
		})
	}
}

// pcSendCase runs one hostile destination against a real Send and checks
// how the source ended.
func pcSendCase(t *testing.T, key []byte, dc pcDestCase) {
	src, _ := hostPair(t, memory.Sparse, 1)
	vm := smallVM(t, src, "pc-source")
	before := regionDigests(t, vm)
	sconns, dconns := loopbackConns(t, 1)
	d := &pcDest{key: key, c: dconns[0]}
	destDone := make(chan error, 1)
	g := runtime.NumGoroutine()
	go func() { destDone <- d.run(dc) }()
	ctx, cancel := context.WithTimeout(context.Background(), pcDeadline)
	defer cancel()
	start := time.Now()
	var (
		rep      *migrate.Report
		err      error
		panicked any
	)
	func() {
		defer func() { panicked = recover() }()
		rep, err = Send(ctx, vm, rws(sconns), SendConfig{Policy: migrate.Policy{Mode: migrate.PostCopy}, EncryptionKey: key,
			Timeout: pcTimeout, DigestWorkers: 1})
	}()
	took := time.Since(start)
	sconns[0].Close()
	if derr := <-destDone; derr != nil {
		t.Fatalf("the scripted destination failed before its step (%q): %v; the source: %v", d.reached, derr, err)
	}
	t.Logf("%v in %v (the destination got to %q)", err, took.Round(time.Millisecond), d.reached)
	if panicked != nil {
		t.Fatalf("Send panicked: %v", panicked)
	}
	if took > pcBound {
		t.Errorf("Send took %v, bound %v", took, pcBound)
	}
	if left := hostileSettle(g); left > 0 {
		t.Errorf("%d goroutine(s) left behind", left)
	}
	if len(dc.want) == 0 {
		if err != nil || rep == nil || rep.PostCopy == nil || vm.State() != vgpu.VMDestroyed {
			t.Fatalf("source: %v, VM %v, report %v; want the migration done", err, vm.State(), rep)
		}
		if dc.check != nil {
			dc.check(t, rep)
		}
		return
	}
	var pe *migrate.PhaseError
	if !errors.As(err, &pe) || rep == nil || rep.Outcome != migrate.PhaseFailed {
		t.Fatalf("source error %v (%T), report %v: want a *PhaseError and a failed report", err, err, rep)
	}
	for _, w := range dc.want {
		if !errors.Is(err, w) {
			t.Errorf("source error %v does not match %v", err, w)
		}
	}
	if len(dc.oneOf) > 0 && !slices.ContainsFunc(dc.oneOf, func(w error) bool { return errors.Is(err, w) }) {
		t.Errorf("source error %v matches none of %v", err, dc.oneOf)
	}
	if dc.at == "post" && !slices.Contains(dc.want, migrate.ErrConnection) && errors.Is(err, checkpoint.ErrWrite) {
		// The source closes the connections when it refuses what the
		// destination said, and its pushes' writes fail on them: that
		// failure is a consequence, and must not stand for the cause.
		t.Errorf("source error %v names the pushes' write, which its own close cut, not what the destination did", err)
	}
	lost, inDoubt := errors.Is(err, migrate.ErrVMLost), errors.Is(err, migrate.ErrInDoubt)
	post := dc.at == "post"
	if post != (pe.Phase == migrate.PhasePostCopy) || post && lost == inDoubt || !post && (lost || inDoubt != (dc.at == "resumed")) {
		t.Errorf("source error %v in %v: lost %v, in doubt %v, for a destination that departs at %q", err, pe.Phase, lost, inDoubt, dc.at)
	}
	if got := regionDigests(t, vm); !slices.Equal(got, before) {
		t.Errorf("the source's copy changed: digests %x, before %x", got, before)
	}
	if dc.at == "ready" {
		// Before the commit: the VM is its owner's again, running.
		if vm.State() != vgpu.VMRunning || vm.Migrating() {
			t.Fatalf("the source VM is %v, migrating %v; want running, its own", vm.State(), vm.Migrating())
		}
		return
	}
	// Lost in post-copy, or in doubt: the source's copy, as of the stun,
	// stays paused and held until whoever manages the hosts decides.
	if vm.State() != vgpu.VMPaused || !vm.Migrating() {
		t.Fatalf("the source VM is %v, migrating %v; want paused and held", vm.State(), vm.Migrating())
	}
	if rerr := vm.Resume(); !errors.Is(rerr, vgpu.ErrMigrating) {
		t.Fatalf("the owner resumed the copy held in doubt: %v; want vgpu.ErrMigrating", rerr)
	}
	must(t, vm.ResolveMigration(false))
	must(t, vm.Resume())
	if vm.Migrating() || vm.State() != vgpu.VMRunning {
		t.Fatalf("given back, the source VM is %v, migrating %v", vm.State(), vm.Migrating())
	}
}

// The list's reader alone, on regions the recorded VM does not have:
// one of no page, which no bitmap covers, and one of more pages than a
// bitmap holds, whose last bitmap ends inside a byte.
func TestHostilePostCopyOwedReader(t *testing.T) {
	sizes := []int{13, 0, 8*owedChunkBits + 5}
	sets := make([]*memory.PageSet, len(sizes))
	for i, n := range sizes {
		sets[i] = memory.NewPageSet(n)
		for p := 0; p < n; p += 3 {
			sets[i].Add(p)
		}
	}
	sets[2].Add(sizes[2] - 1)
	chunks, pages := owedChunks(sets)
	if len(chunks) != 3 || chunks[2].Region != 2 || chunks[2].First != 8*owedChunkBits || len(chunks[2].Bits) != 1 {
		t.Fatalf("the bitmaps of regions of %v pages: %+v", sizes, chunks)
	}
	// feed gives a fresh reader the bodies in order, and returns the
	// first refusal, or done's verdict.
	feed := func(announced int64, bodies ...[]byte) error {
		rd := newOwedReader(sizes)
		for _, b := range bodies {
			if err := rd.add(b); err != nil {
				return err
			}
		}
		return rd.done(announced)
	}
	enc := func(cs ...owedChunk) [][]byte {
		var out [][]byte
		for _, c := range cs {
			out = append(out, c.encode())
		}
		return out
	}
	good := enc(chunks...)
	if err := feed(pages, good...); err != nil {
		t.Fatalf("the bitmaps as written: %v", err)
	}
	rd := newOwedReader(sizes)
	for _, b := range good {
		must(t, rd.add(b))
	}
	for i := range sets {
		if rd.sets[i].Len() != sets[i].Len() || rd.sets[i].Next(0) != sets[i].Next(0) {
			t.Fatalf("region %d read back as %d pages, written %d", i, rd.sets[i].Len(), sets[i].Len())
		}
	}
	last := chunks[2]
	pastLast := owedChunk{Region: 2, First: last.First, Bits: []byte{last.Bits[0] | 1<<5}}
	for _, tc := range []struct {
		name      string
		announced int64
		bodies    [][]byte
	}{
		{"none", pages, nil},
		{"last-missing", pages, good[:2]},
		{"one-more", pages, append(slices.Clone(good), good[2])},
		{"empty-region-covered", pages, enc(chunks[0], owedChunk{Region: 1, First: 0, Bits: nil}, chunks[1], chunks[2])},
		{"second-bitmap-first", pages, enc(chunks[0], chunks[2], chunks[1])},
		{"second-bitmap-overlaps", pages, enc(chunks[0], chunks[1], owedChunk{Region: 2, First: last.First - 8, Bits: []byte{0, last.Bits[0]}})},
		{"bit-past-the-end", pages + 1, enc(chunks[0], chunks[1], pastLast)},
		{"region-huge", pages, [][]byte{binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1<<32-1), 0)}},
		{"first-page-huge", pages, [][]byte{binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 0), 1<<32-1)}},
		{"header-short", pages, [][]byte{{0, 0, 0}}},
		{"announced-more", pages + 1, good},
		{"announced-fewer", pages - 1, good},
		{"announced-negative", -1, good},
	} {
		if err := feed(tc.announced, tc.bodies...); !errors.Is(err, migrate.ErrStream) {
			t.Errorf("%s: %v, want ErrStream", tc.name, err)
		}
	}
	// No region at all: no bitmap belongs, and none is taken.
	if err := newOwedReader(nil).done(0); err != nil {
		t.Errorf("no regions, no bitmaps: %v", err)
	}
	if err := newOwedReader(nil).add(good[0]); !errors.Is(err, migrate.ErrStream) {
		t.Errorf("a bitmap for a VM of no region: %v, want ErrStream", err)
	}
}
