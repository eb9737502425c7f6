package live

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// The wire matrix: a man in the middle between Send and Receive who, for
// every message of the protocol, drops it, holds it past the timeout,
// corrupts it, sends it twice, replaces it with the same message of
// another migration under the same key, forges it without the key, or
// cuts the line after it, next to the source or next to the destination:
// both ends lose the connection, the one it is cut next to first. Every
// cell must end with one copy of the VM and at most one running, no
// change of its run state or throttle that an end did not report, and a
// typed error at each end that failed.
//
// Post-copy has a matrix of its own (wire_matrix_postcopy_test.go), on
// the same man in the middle: its messages, its workload and its rule.

// mitmMessages are the protocol's messages in the order they cross the
// wire; "stream" is the checkpoint stream's first record, its metadata.
// "refuse" is the destination's answer to a hello it turns down, in a
// migration of its own.
var mitmMessages = []string{"offer", "challenge", "hello", "accept", "stream", "ready", "commit", "resumed", "refuse"}

// fromSource says which way each message goes, post-copy's included.
var fromSource = map[string]bool{"offer": true, "hello": true, "stream": true, "commit": true,
	"owed": true, "bitmap": true, "postcopy-stream": true}

type mitmAct int

const (
	mitmPass mitmAct = iota
	mitmDrop
	mitmDelay
	mitmCorrupt
	mitmDuplicate
	mitmReplay
	mitmForge
	mitmCutSource
	mitmCutDestination
)

var mitmActs = []mitmAct{mitmDrop, mitmDelay, mitmCorrupt, mitmDuplicate, mitmReplay, mitmForge, mitmCutSource, mitmCutDestination}

func (a mitmAct) String() string {
	return [...]string{"pass", "drop", "delay", "corrupt", "duplicate", "replay", "forge", "cut-source", "cut-destination"}[a]
}

// The man in the middle is the kit's Relay: between the source's end, its
// side a, and the destination's, its side b, it frames what each writes as wireParser
// reads it and acts on the one message that is its target.
const (
	mitmSource = vgpusimtest.SideA
	mitmDest   = vgpusimtest.SideB
)

// mitm is the Rule of one migration's relay: it acts on one message.
type mitm struct {
	target string
	act    mitmAct
	hold   time.Duration
	// replay and forged hold the messages of other migrations: under the
	// same key, and under another.
	replay, forged map[string][]byte

	// gate, where set, holds the post-copy stream back after its first
	// record until the destination's first fetch has crossed, Receive
	// has returned, or gateWait has passed: the destination then runs the
	// VM with every page still absent, so that the first page its
	// workload touches is surely fetched. Without it the push of a small
	// VM may land every page before the workload touches one. The gate
	// waits less than the timeout, which bounds the source's writes it
	// holds up.
	gate     bool
	gateWait time.Duration
	fetched  chan struct{} // closed by the destination's framer at its first fetch
	received chan struct{} // closed once Receive returned

	// The relay calls the rule one message at a time and the test reads
	// these once it is closed: they need no lock.
	seen map[string][]byte // every message that crossed, by name
	hit  bool              // the target crossed
}

// framer frames what one end writes, unit by unit as wireParser splits
// it, and names the units the matrices target. The source is the relay's
// side a.
//
// A source that may switch over into post-copy writes, after its first
// stream's end, control messages again — owed, the page bitmaps, and
// then the commit — and, once it has read the destination's resumed, a
// second checkpoint stream on the same connection, which wireParser does
// not know of: the commit moves it on to a stream header. (A pre-copy
// source writes nothing after its commit.) The destination writes
// control messages only: the challenge, accept, ready and resumed, and in
// post-copy its fetches and landed. Messages are named by their type,
// the first of several (a bitmap, a fetch) alone; a record by its place,
// the first of each stream, its metadata.
func (m *mitm) framer(from vgpusimtest.Side) vgpusimtest.Framer {
	source := from == mitmSource
	p := newWireParser(source)
	streams, records, bitmaps, fetches := 0, 0, 0, 0
	return func(pending []byte) (int, string, error) {
		u, ok := p.parse(pending, 0)
		if !ok {
			return 0, "", nil // its header is not all here yet
		}
		if u.end <= 0 {
			return 0, "", fmt.Errorf("a %d-byte unit", u.end)
		}
		name := ""
		switch u.kind {
		case unitPreamble:
			name = "offer"
		case unitStreamHeader:
			streams, records = streams+1, 0
		case unitRecord:
			records++
			switch {
			case records == 1 && streams == 1:
				name = "stream"
			case records == 1 && streams == 2:
				name = "postcopy-stream"
			case records == 2 && streams == 2:
				m.waitForFetch()
			}
		case unitMessage:
			switch typ := msgType(u.typ); typ {
			case msgOwedBits:
				if bitmaps++; bitmaps == 1 {
					name = "bitmap"
				}
			case msgFetch:
				if fetches++; fetches == 1 {
					name = "fetch"
					if m.fetched != nil {
						close(m.fetched)
					}
				}
			case msgCommit:
				name = "commit"
				p.stage = unitStreamHeader
			case msgHello, msgAccept, msgRefuse, msgReady, msgResumed, msgChallenge, msgOwed, msgLanded:
				name = typ.String()
			}
		}
		return int(u.end), name, nil
	}
}

// waitForFetch holds the source's post-copy stream up, if m gates it,
// until the destination's first fetch, the end of Receive or gateWait.
// It runs on the relay's goroutine for the source's bytes, which reads
// nothing from the source meanwhile; the destination's side goes on.
func (m *mitm) waitForFetch() {
	if !m.gate {
		return
	}
	t := time.NewTimer(m.gateWait)
	defer t.Stop()
	select {
	case <-m.fetched:
	case <-m.received:
	case <-t.C:
	}
}

// rule keeps every named message and acts on the target.
func (m *mitm) rule(msg vgpusimtest.Message) vgpusimtest.Action {
	if msg.Name != "" {
		m.seen[msg.Name] = msg.Data
	}
	if msg.Name != m.target {
		return vgpusimtest.Action{}
	}
	m.hit = true
	switch m.act {
	case mitmDrop:
		return vgpusimtest.Action{Drop: true}
	case mitmDelay:
		return vgpusimtest.Action{Delay: m.hold}
	case mitmCorrupt:
		return vgpusimtest.Action{FlipBits: []int64{mitmCorruptBit(len(msg.Data))}}
	case mitmDuplicate:
		return vgpusimtest.Action{Repeat: 1}
	case mitmReplay:
		return vgpusimtest.Action{Replace: m.replay[msg.Name]}
	case mitmForge:
		return vgpusimtest.Action{Replace: m.forge(msg.Name, msg.Data)}
	case mitmCutSource:
		return vgpusimtest.Action{Close: mitmSource}
	case mitmCutDestination:
		return vgpusimtest.Action{Close: mitmDest}
	}
	return vgpusimtest.Action{}
}

// mitmCorruptBit is the bit a corrupting man in the middle flips in a
// message of n bytes: bit 4 of its middle byte.
func mitmCorruptBit(n int) int64 { return 8*int64(n/2) + 4 }

// forge makes message name without the key: a nonce of the attacker's in
// the offer or the challenge; a control message saying what the attacker
// wants, with a tag made up; a first record sealed under another key.
func (m *mitm) forge(name string, b []byte) []byte {
	b = bytes.Clone(b)
	body := map[string]string{
		"accept":  `{"host":"mallory"}`,
		"commit":  `{"resume":true,"throttle":0}`,
		"resumed": `{"running":true,"throttle":0}`,
		"refuse":  `{"code":"busy","message":"forged"}`,
		// Post-copy: one page follows, in one bitmap; page 0 is fetched;
		// every page landed.
		"owed":   `{"pages":1,"chunks":1}`,
		"fetch":  `{"region":0,"page":0}`,
		"landed": `{"faults":0,"fetches":0,"p50_ns":0,"p99_ns":0,"max_ns":0,"stall_ns":0}`,
	}
	switch name {
	case "offer":
		_, _ = rand.Read(b[preambleBytes+1:])
	case "challenge":
		_, _ = rand.Read(b[msgHeaderBytes+1:])
	case "stream", "postcopy-stream":
		return m.forged[name]
	case "bitmap":
		// Every page of the bitmap's span follows.
		for i := msgHeaderBytes + owedChunkHeader; i < len(b)-tagBytes; i++ {
			b[i] = 0xff
		}
		_, _ = rand.Read(b[len(b)-tagBytes:])
	default:
		if js, ok := body[name]; ok {
			b = append(b[:1], 0, 0, 0, 0)
			b[1] = byte(len(js))
			b = append(b, js...)
			b = append(b, make([]byte, tagBytes)...)
		}
		_, _ = rand.Read(b[len(b)-tagBytes:])
	}
	return b
}

// mitmKey is the migration key of the matrix; mitmOtherKey another.
var (
	mitmKey      = bytes.Repeat([]byte{0x3c}, checkpoint.KeySize)
	mitmOtherKey = bytes.Repeat([]byte{0xc3}, checkpoint.KeySize)
)

// mitmOwnerThrottle is the throttle the source VM's owner set: it must
// reach the destination, or stay at the source.
const mitmOwnerThrottle = 0.25

// mitmRun migrates a fresh small VM, running under its owner's throttle,
// through m, and returns what both ends did. The destination refuses it,
// if m's target is the refusal, for batches larger than it takes.
func mitmRun(t *testing.T, m *mitm, key []byte, timeout time.Duration) (vm *vgpu.VM, src, dst *vgpu.Host, res liveResult) {
	t.Helper()
	src, dst = hostPair(t, memory.Sparse, 1)
	vm = smallVM(t, src, "mitm")
	must(t, vm.SetThrottle(mitmOwnerThrottle))
	m.seen = map[string][]byte{}
	sEnd, dEnd, relay := vgpusimtest.NewRelayPipe(vgpusimtest.RelayPlan{Framing: m.framer, Rule: m.rule})
	scfg := SendConfig{EncryptionKey: key, Timeout: timeout, DigestWorkers: 1}
	rcfg := ReceiveConfig{EncryptionKey: key, Timeout: timeout, DigestWorkers: 1}
	if m.target == "refuse" {
		rcfg.MaxBatchBytes = 4 << 10
	}
	res = liveMigrate(context.Background(), vm, dst, []io.ReadWriter{sEnd}, []io.ReadWriter{dEnd}, scfg, rcfg)
	sEnd.Close()
	dEnd.Close()
	if err := relay.Close(); err != nil {
		t.Errorf("the man in the middle: %v", err)
	}
	return vm, src, dst, res
}

// TestWireMatrix runs every message of the protocol through every action
// of the man in the middle.
func TestWireMatrix(t *testing.T) {
	timeout := 300 * time.Millisecond
	if raceEnabled {
		timeout = time.Second
	}
	// Two clean migrations, and a refused one, give the messages to
	// replay (same key) and to forge the stream with (another key).
	reference := func(key []byte) map[string][]byte {
		m := &mitm{act: mitmPass}
		_, _, _, res := mitmRun(t, m, key, timeout)
		if res.srcErr != nil || res.dstErr != nil {
			t.Fatalf("a clean migration: source %v, destination %v", res.srcErr, res.dstErr)
		}
		refused := &mitm{target: "refuse", act: mitmPass}
		if _, _, _, res := mitmRun(t, refused, key, timeout); !errors.Is(res.srcErr, migrate.ErrRefused) {
			t.Fatalf("a refused migration: source %v", res.srcErr)
		}
		m.seen["refuse"] = refused.seen["refuse"]
		for _, name := range mitmMessages {
			if m.seen[name] == nil {
				t.Fatalf("the man in the middle never saw %s", name)
			}
		}
		return m.seen
	}
	replay, forged := reference(mitmKey), reference(mitmOtherKey)
	cells := 0
	for _, name := range mitmMessages {
		for _, act := range mitmActs {
			t.Run(fmt.Sprintf("%s/%v", name, act), func(t *testing.T) {
				m := &mitm{target: name, act: act, hold: 2 * timeout, replay: replay, forged: forged}
				vm, src, dst, res := mitmRun(t, m, mitmKey, timeout)
				if !m.hit {
					t.Fatalf("%s never crossed", name)
				}
				mitmCheck(t, name, act, vm, src, dst, res)
			})
			cells++
		}
	}
	t.Logf("wire matrix: %d messages × %d actions = %d cells", len(mitmMessages), len(mitmActs), cells)
}
