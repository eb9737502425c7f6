package live

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The wire matrix: a man in the middle between Send and Receive who, for
// every message of the protocol, drops it, holds it past the timeout,
// corrupts it, sends it twice, replaces it with the same message of
// another migration under the same key, forges it without the key, or
// cuts either end's connection after it. Every cell must end with one
// copy of the VM and at most one running, no change of its run state or
// throttle that an end did not report, and a typed error at each end
// that failed.

// mitmMessages are the protocol's messages in the order they cross the
// wire; "stream" is the checkpoint stream's first record, its metadata.
// "refuse" is the destination's answer to a hello it turns down, in a
// migration of its own.
var mitmMessages = []string{"offer", "challenge", "hello", "accept", "stream", "ready", "commit", "resumed", "refuse"}

// fromSource says which way each message goes.
var fromSource = map[string]bool{"offer": true, "hello": true, "stream": true, "commit": true}

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

// mitm relays one migration's only connection and acts on one message.
type mitm struct {
	target string
	act    mitmAct
	hold   time.Duration
	// replay and forged hold the messages of other migrations: under the
	// same key, and under another.
	replay, forged map[string][]byte

	toSource, toDest net.Conn // the man in the middle's ends

	mu   sync.Mutex
	seen map[string][]byte // every message that crossed, by name
	hit  bool              // the target crossed
}

// relay carries what one end writes to the other, unit by unit, naming
// each unit and acting on the target.
func (m *mitm) relay(from, to net.Conn, source bool) {
	defer to.Close()
	p := newWireParser(source)
	handled, messages := 0, 0
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		p.feed(buf[:n])
		for ; handled < len(p.units) && p.units[handled].end <= int64(len(p.buf)); handled++ {
			u := p.units[handled]
			name := ""
			switch {
			case u.kind == unitPreamble:
				name = "offer"
			case u.kind == unitRecord && u.typ == 0x0001:
				name = "stream"
			case u.kind == unitMessage && msgType(u.typ) == msgRefuse:
				name = "refuse"
			case u.kind == unitMessage && source:
				name = map[int]string{0: "hello", 1: "commit"}[messages]
				messages++
			case u.kind == unitMessage:
				name = map[int]string{0: "challenge", 1: "accept", 2: "ready", 3: "resumed"}[messages]
				messages++
			}
			m.handle(name, bytes.Clone(p.buf[u.start:u.end]), to)
		}
		if err != nil {
			return
		}
	}
}

func (m *mitm) handle(name string, b []byte, to net.Conn) {
	m.mu.Lock()
	if name != "" {
		m.seen[name] = b
	}
	hit := name == m.target
	m.hit = m.hit || hit
	m.mu.Unlock()
	if !hit {
		_, _ = to.Write(b)
		return
	}
	switch m.act {
	case mitmPass:
		_, _ = to.Write(b)
	case mitmDrop:
	case mitmDelay:
		time.Sleep(m.hold)
		_, _ = to.Write(b)
	case mitmCorrupt:
		b[len(b)/2] ^= 0x10
		_, _ = to.Write(b)
	case mitmDuplicate:
		_, _ = to.Write(b)
		_, _ = to.Write(b)
	case mitmReplay:
		_, _ = to.Write(m.replay[name])
	case mitmForge:
		_, _ = to.Write(m.forge(name, b))
	case mitmCutSource:
		_, _ = to.Write(b)
		m.toSource.Close()
	case mitmCutDestination:
		_, _ = to.Write(b)
		m.toDest.Close()
	}
}

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
	}
	switch name {
	case "offer":
		_, _ = rand.Read(b[preambleBytes+1:])
	case "challenge":
		_, _ = rand.Read(b[msgHeaderBytes+1:])
	case "stream":
		return m.forged[name]
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
func mitmRun(t *testing.T, m *mitm, key []byte, timeout time.Duration) (vm *vgpu.VM, dst *vgpu.Host, res liveResult) {
	t.Helper()
	src, dst := hostPair(t, memory.Sparse, 1)
	vm = smallVM(t, src, "mitm")
	must(t, vm.SetThrottle(mitmOwnerThrottle))
	sEnd, mS := net.Pipe()
	mD, dEnd := net.Pipe()
	m.toSource, m.toDest, m.seen = mS, mD, map[string][]byte{}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); m.relay(mS, mD, true) }()
	go func() { defer wg.Done(); m.relay(mD, mS, false) }()
	scfg := SendConfig{EncryptionKey: key, Timeout: timeout, DigestWorkers: 1}
	rcfg := ReceiveConfig{EncryptionKey: key, Timeout: timeout, DigestWorkers: 1}
	if m.target == "refuse" {
		rcfg.MaxBatchBytes = 4 << 10
	}
	res = liveMigrate(context.Background(), vm, dst, []io.ReadWriter{sEnd}, []io.ReadWriter{dEnd}, scfg, rcfg)
	for _, c := range []net.Conn{sEnd, mS, mD, dEnd} {
		c.Close()
	}
	wg.Wait()
	return vm, dst, res
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
		_, _, res := mitmRun(t, m, key, timeout)
		if res.srcErr != nil || res.dstErr != nil {
			t.Fatalf("a clean migration: source %v, destination %v", res.srcErr, res.dstErr)
		}
		refused := &mitm{target: "refuse", act: mitmPass}
		if _, _, res := mitmRun(t, refused, key, timeout); !errors.Is(res.srcErr, migrate.ErrRefused) {
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
				vm, dst, res := mitmRun(t, m, mitmKey, timeout)
				if !m.hit {
					t.Fatalf("%s never crossed", name)
				}
				mitmCheck(t, name, act, vm, dst, res)
			})
			cells++
		}
	}
	t.Logf("wire matrix: %d messages × %d actions = %d cells", len(mitmMessages), len(mitmActs), cells)
}

// mitmCheck checks one cell's outcome.
func mitmCheck(t *testing.T, name string, act mitmAct, vm *vgpu.VM, dst *vgpu.Host, res liveResult) {
	t.Helper()
	srcState, in := vm.State(), res.in
	running := 0
	if srcState == vgpu.VMRunning {
		running++
	}
	if in != nil && in.State() == vgpu.VMRunning {
		running++
	}
	switch {
	case running > 1:
		t.Fatalf("two running copies: source %v (%v), destination %v (%v)", srcState, res.srcErr, in.State(), res.dstErr)
	case srcState == vgpu.VMDestroyed && in == nil:
		t.Fatalf("the VM is lost: source %v, destination %v", res.srcErr, res.dstErr)
	}
	inDoubt := errors.Is(res.srcErr, migrate.ErrInDoubt)
	switch {
	case res.srcErr == nil:
		if srcState != vgpu.VMDestroyed || in == nil {
			t.Fatalf("Send succeeded, the source VM %v, the destination holding %v (%v)", srcState, in, res.dstErr)
		}
	case inDoubt:
		if srcState != vgpu.VMPaused || vm.Throttle() != mitmOwnerThrottle {
			t.Fatalf("in doubt, the source VM is %v at throttle %v; want paused at %v", srcState, vm.Throttle(), mitmOwnerThrottle)
		}
		// Held until resolved: its owner cannot run it beside the
		// destination's, nor destroy the only copy.
		if err := vm.Resume(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("in doubt, the source VM resumed by its owner: %v", err)
		}
		if err := vm.Destroy(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("in doubt, the source VM destroyed by its owner: %v", err)
		}
		must(t, vm.ResolveMigration(in != nil))
	default:
		if srcState != vgpu.VMRunning || vm.Throttle() != mitmOwnerThrottle || in != nil {
			t.Fatalf("Send failed (%v), the source VM %v at throttle %v, the destination holding %v; want it running at %v at the source only",
				res.srcErr, srcState, vm.Throttle(), in, mitmOwnerThrottle)
		}
	}
	if in != nil {
		// The destination holds the VM only as the source committed it.
		if in.State() != vgpu.VMRunning || in.Throttle() != mitmOwnerThrottle {
			t.Fatalf("the destination's VM is %v at throttle %v (%v); want running at %v", in.State(), in.Throttle(), res.dstErr, mitmOwnerThrottle)
		}
	} else {
		holdsNothing(t, dst)
	}
	for end, err := range map[string]error{"source": res.srcErr, "destination": res.dstErr} {
		var pe *migrate.PhaseError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("%s: %v (%T) is not a *PhaseError", end, err, err)
		}
		if err != nil && !wrapsSentinel(err) {
			t.Fatalf("%s: %v wraps none of migrate's sentinels", end, err)
		}
	}
	// The end that reads a tampered message says so; a message that never
	// came, or came too late, is the connection's.
	reader, readerErr := "destination", res.dstErr
	if !fromSource[name] {
		reader, readerErr = "source", res.srcErr
	}
	switch act {
	case mitmCorrupt, mitmForge, mitmReplay:
		want := []error{migrate.ErrAuthentication}
		if name == "stream" {
			want = append(want, migrate.ErrStream) // its seal or its check value
		}
		if name == "offer" || name == "challenge" {
			// A nonce changed on the way gives the ends other keys: the
			// destination finds out at the hello.
			readerErr = res.dstErr
		}
		if !wrapsAny(readerErr, want...) {
			t.Fatalf("the %s read a %s %v and says %v; want %v", reader, act, name, readerErr, want)
		}
	case mitmDrop, mitmDelay:
		if !errors.Is(res.srcErr, migrate.ErrConnection) && !errors.Is(res.dstErr, migrate.ErrConnection) {
			t.Fatalf("a %s %v: source %v, destination %v; want one ErrConnection", act, name, res.srcErr, res.dstErr)
		}
	}
	if in != nil {
		must(t, in.Destroy())
	}
}

func wrapsAny(err error, sentinels ...error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func wrapsSentinel(err error) bool {
	return wrapsAny(err, migrate.ErrAuthentication, migrate.ErrConnection, migrate.ErrStream, migrate.ErrRefused,
		migrate.ErrInDoubt, migrate.ErrConfig, migrate.ErrDestination, migrate.ErrIncompatible, migrate.ErrSource)
}
