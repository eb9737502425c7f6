package live

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// authKey is the migration key of these tests.
var authKey = bytes.Repeat([]byte{0x6b}, checkpoint.KeySize)

// smallVM starts a VM of 64 KiB of guest RAM, 16 KiB of it in use, and
// one P40-1Q vGPU, without a workload, on host: a migration of it is a
// few hundred KiB.
func smallVM(t testing.TB, host *vgpu.Host, id string) *vgpu.VM {
	t.Helper()
	vm, err := host.CreateVM(vgpu.VMSpec{ID: id, RAMBytes: 64 << 10, RAMFootprintBytes: 16 << 10, Profiles: []string{"P40-1Q"}})
	must(t, err)
	must(t, vm.Start())
	return vm
}

// authRecord migrates a fresh small VM under key, each end drawing its
// nonce as it does by default (or, replayable, the fixed ones), and
// returns what the source sent.
func authRecord(t *testing.T, key []byte, replay bool) []byte {
	t.Helper()
	scfg, rcfg := SendConfig{EncryptionKey: key, DigestWorkers: 1}, ReceiveConfig{EncryptionKey: key, DigestWorkers: 1}
	if replay {
		scfg, rcfg = replayable(scfg, rcfg)
	}
	return recordSent(t, "auth", scfg, rcfg)
}

// authStreamStart returns the offset of the checkpoint stream's header in
// what a source sent: after the offer and the tagged hello.
func authStreamStart(sent []byte) int {
	return offerBytes + msgHeaderBytes + int(binary.LittleEndian.Uint32(sent[offerBytes+1:])) + tagBytes
}

// A recorded encrypted migration, replayed byte for byte to a third host
// that holds the same key, is refused at its hello: the third host drew
// another nonce, so the recording's tags are not this migration's. It
// reserves nothing.
func TestReplayRefused(t *testing.T) {
	sent := authRecord(t, authKey, false)
	_, third := hostPair(t, memory.Sparse, 1)
	in, rep, err := Receive(context.Background(), third, []io.ReadWriter{hostileConn{bytes.NewReader(sent)}},
		ReceiveConfig{EncryptionKey: authKey, DigestWorkers: 1, Timeout: 5 * time.Second})
	var pe *migrate.PhaseError
	if in != nil || !errors.Is(err, migrate.ErrAuthentication) || !errors.As(err, &pe) || pe.Phase != migrate.PhaseSetup {
		t.Fatalf("replay: VM %v, error %v; want ErrAuthentication in setup", in, err)
	}
	if rep.VM != "" {
		t.Fatalf("the destination read the replayed hello's VM %q before authenticating it", rep.VM)
	}
	holdsNothing(t, third)
}

// Two migrations of the same VM under one key never seal under the same
// key and nonce: their streams' ids differ, and so do the sealed metadata
// records, although both hold the same bytes in the clear.
func TestNoNonceReuse(t *testing.T) {
	a, b := authRecord(t, authKey, false), authRecord(t, authKey, false)
	ha, hb := authStreamStart(a), authStreamStart(b)
	idA, idB := a[ha+16:ha+32], b[hb+16:hb+32]
	if bytes.Equal(idA, idB) {
		t.Fatalf("two migrations share the stream id %x", idA)
	}
	// The first record after the 40-byte header: the metadata, sealed.
	recA, recB := a[ha+40:], b[hb+40:]
	n := int(binary.LittleEndian.Uint32(recA[2:]))
	if n != int(binary.LittleEndian.Uint32(recB[2:])) || binary.LittleEndian.Uint64(recA[6:]) != 0 {
		t.Fatalf("the first records differ in length or are not record 0")
	}
	sealedA, sealedB := recA[14:14+n], recB[14:14+n]
	same := 0
	for i := range sealedA {
		if sealedA[i] == sealedB[i] {
			same++
		}
	}
	// Equal plaintexts under one key and nonce would give equal
	// ciphertexts; under two keys about 1 byte in 256 agrees.
	if same > n/16 {
		t.Fatalf("%d of %d bytes of the two sealed metadata records agree: the keystreams repeat", same, n)
	}
	// The key schedule itself: other nonces, other keys, every one.
	n1, n2 := replaySourceNonce, replayDestNonce
	derive := func(a, b *[nonceBytes]byte) sessionKeys {
		k, err := deriveKeys(authKey, a, b)
		must(t, err)
		return k
	}
	k1, k2, k3 := derive(n1, n2), derive(n2, n1), derive(n1, n2)
	stream := func(k sessionKeys, i int) []byte {
		key, err := k.streamKey(i)
		must(t, err)
		return key
	}
	if bytes.Equal(stream(k1, 0), stream(k2, 0)) || bytes.Equal(k1.fromSource, k2.fromSource) || !bytes.Equal(stream(k1, 1), stream(k3, 1)) {
		t.Fatal("the keys do not follow the nonces")
	}
	if bytes.Equal(stream(k1, 0), k1.fromSource) || bytes.Equal(k1.fromSource, k1.fromDestination) || bytes.Equal(stream(k1, 0), stream(k1, 1)) {
		t.Fatal("one migration's keys repeat")
	}
	t.Logf("two migrations under one key: stream ids %x and %x; %d of %d sealed metadata bytes agree", idA, idB, same, n)
}

// Every bit of the hello flipped, with a key and without: the destination
// refuses it before it reads a field or reserves anything. The destination
// draws the nonce the recording's did, so the hello as it was sent passes
// (and the destination then waits for a stream that never comes): every
// refusal is the flip's.
func TestHelloCorruption(t *testing.T) {
	for _, key := range [][]byte{nil, authKey} {
		sent := authRecord(t, key, true)
		hs, he := offerBytes, authStreamStart(sent)
		_, dst := hostPair(t, memory.Sparse, 1)
		receive := func(data []byte) (*vgpu.VM, *migrate.Report, error) {
			_, cfg := replayable(SendConfig{}, ReceiveConfig{EncryptionKey: key, DigestWorkers: 1, Timeout: 5 * time.Second})
			return Receive(context.Background(), dst, []io.ReadWriter{hostileConn{bytes.NewReader(data)}}, cfg)
		}
		if in, rep, err := receive(sent[:he]); in != nil || rep.VM != "auth" || errors.Is(err, migrate.ErrAuthentication) {
			t.Fatalf("the hello as sent: VM %v, the hello's VM %q, error %v; want it read, then the stream missing", in, rep.VM, err)
		}
		holdsNothing(t, dst)
		flips, auth := 0, 0
		for i := hs; i < he; i++ {
			for bit := range 8 {
				data, err := vgpusimtest.Flip(sent[:he], 8*int64(i)+int64(bit))
				must(t, err)
				in, rep, err := receive(data)
				flips++
				if in != nil || err == nil || rep.VM != "" {
					t.Fatalf("byte %d bit %d: VM %v, error %v, the hello's VM %q read", i, bit, in, err, rep.VM)
				}
				if errors.Is(err, migrate.ErrAuthentication) {
					auth++
				} else if i >= hs+msgHeaderBytes || !wrapsAny(err, migrate.ErrStream, migrate.ErrConnection) {
					// Only the type and the length may fail otherwise: out
					// of turn, too long, or longer than what came.
					t.Fatalf("byte %d bit %d: %v, want ErrAuthentication", i, bit, err)
				}
			}
		}
		holdsNothing(t, dst)
		t.Logf("key %v: %d flips of a %d-byte hello, %d refused by its tag, the rest by its type or length; nothing reserved",
			key != nil, flips, he-hs, auth)
	}
}

// A strict hello: unknown fields, fields matched without case, missing
// fields and trailing bytes are refused.
func TestStrictDecoding(t *testing.T) {
	good := `{"connections":1,"encrypted":false,"batch_bytes":4096,"spec":{"ID":"v","Seed":1,"RAMBytes":65536,` +
		`"RAMFootprintBytes":0,"RAMPageSize":4096,"FramebufferPageSize":65536,"GPUModel":"Tesla P40","Profiles":null,` +
		`"Passthrough":false},"stream_id":0,"source":"s","mode":0,"post_copy":false}`
	var h hello
	if err := decodeStrict([]byte(good), &h); err != nil || h.Spec.RAMBytes != 65536 {
		t.Fatalf("a good hello: %v", err)
	}
	for name, body := range map[string]string{
		"unknown field":       `{"connections":1,"extra":2,` + good[len(`{"connections":1,`):],
		"field without case":  `{"Connections":1,` + good[len(`{"connections":1,`):],
		"missing field":       `{` + good[len(`{"connections":1,`):],
		"missing inner field": bytes.NewBuffer(bytes.Replace([]byte(good), []byte(`"RAMFootprintBytes":0,`), nil, 1)).String(),
		"inner key changed":   bytes.NewBuffer(bytes.Replace([]byte(good), []byte(`"RAMFootprintBytes"`), []byte(`"RAMFootprintBytez"`), 1)).String(),
		"null spec":           bytes.NewBuffer(bytes.Replace([]byte(good), []byte(`"spec":{`), []byte(`"spec":null,"x":{`), 1)).String(),
		"trailing bytes":      good + `{}`,
		"a field never sent":  bytes.NewBuffer(bytes.Replace([]byte(good), []byte(`"Passthrough":false`), []byte(`"Passthrough":false,"Remote":null`), 1)).String(),
		"not an object":       `[1]`,
	} {
		var h hello
		if err := decodeStrict([]byte(body), &h); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// decodeStrict knows plain fields only, and fields never encoded ("-"):
// a tag option (omitempty, string) or an embedded struct in a message
// would make it refuse good messages or pass bad ones. Every message type
// keeps to those.
func TestMessagesHavePlainFields(t *testing.T) {
	var check func(reflect.Type)
	check = func(ty reflect.Type) {
		for i := range ty.NumField() {
			f := ty.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue // never on the wire: decodeStrict refuses it (TestStrictDecoding)
			}
			if f.Anonymous || strings.Contains(tag, ",") || !f.IsExported() {
				t.Errorf("%v.%s: embedded, unexported or tagged %q: decodeStrict does not know it", ty, f.Name, tag)
			}
			switch f.Type.Kind() {
			case reflect.Struct:
				check(f.Type)
			case reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint8, reflect.Uint64, reflect.Float64, reflect.String:
			case reflect.Slice:
				if f.Type.Elem().Kind() != reflect.String {
					t.Errorf("%v.%s: a slice of %v: decodeStrict checks no fields inside it", ty, f.Name, f.Type.Elem())
				}
			default:
				t.Errorf("%v.%s: a %v", ty, f.Name, f.Type.Kind())
			}
		}
	}
	for _, v := range []any{hello{}, accept{}, refusal{}, ready{}, commit{}, resumed{}, owed{}, fetch{}, landed{}} {
		check(reflect.TypeOf(v))
	}
}

// A message reflected back to its sender fails its tag: each direction
// has its own key.
func TestReflectionRefused(t *testing.T) {
	keys := replayKeys(authKey)
	src := &conversation{end: migrate.SourceEnd, t: newTranscript(), tagged: true}
	src.t.keyed(keys, migrate.SourceEnd)
	var wire bytes.Buffer
	src.w = &wire
	must(t, src.write(msgCommit, commit{Resume: true}))
	// The same bytes, read back by the source, over the same
	// transcript: only the direction's key tells them apart.
	back := &conversation{r: bytes.NewReader(wire.Bytes()), end: migrate.SourceEnd, t: newTranscript(), tagged: true}
	back.t.keyed(keys, migrate.SourceEnd)
	if err := back.read(msgCommit, &commit{}); !errors.Is(err, migrate.ErrAuthentication) {
		t.Fatalf("a commit reflected to its sender: %v, want ErrAuthentication", err)
	}
	back = &conversation{r: bytes.NewReader(wire.Bytes()), end: migrate.DestinationEnd, t: newTranscript(), tagged: true}
	back.t.keyed(keys, migrate.DestinationEnd)
	if err := back.read(msgCommit, &commit{}); err != nil {
		t.Fatalf("the commit, read by the destination it was for: %v", err)
	}
}

// A peer without the key declares a 64 GiB VM to a destination that
// requires one: refused at its hello, having made the destination
// allocate no more than a small fixed amount and reserve nothing.
func TestNothingAllocatedBeforeAuthentication(t *testing.T) {
	_, dst := hostPair(t, memory.Sparse, 1)
	sc, dc := net.Pipe()
	defer sc.Close()
	go func() {
		// A source that claims a key it does not hold.
		conv := &conversation{w: sc, r: sc, end: migrate.SourceEnd, t: newTranscript()}
		nonce, _ := newNonce(nil)
		if _, err := openConversation(conv, bytes.Repeat([]byte{1}, checkpoint.KeySize), nonce); err != nil {
			return
		}
		spec := vgpu.IncomingSpec{ID: "huge", Seed: 1, RAMBytes: 64 << 30, RAMPageSize: 4096, FramebufferPageSize: 64 << 10,
			GPUModel: "Tesla P40", Profiles: []string{"P40-24Q"}}
		_ = conv.write(msgHello, hello{Connections: 1, Encrypted: true, BatchBytes: 1 << 20, Spec: spec})
		_, _ = io.Copy(io.Discard, sc)
	}()
	// ReadMemStats counts every allocation (runtime/metrics counts a
	// span of small objects when a P takes it).
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	in, _, err := Receive(context.Background(), dst, []io.ReadWriter{dc}, ReceiveConfig{EncryptionKey: authKey, Timeout: 5 * time.Second})
	runtime.ReadMemStats(&m)
	allocated := m.TotalAlloc - before
	if in != nil || !errors.Is(err, migrate.ErrAuthentication) {
		t.Fatalf("VM %v, error %v; want ErrAuthentication", in, err)
	}
	holdsNothing(t, dst)
	// The control message's bound, its reading and the refusal: 64 KiB
	// and change. A reservation of 64 GiB's page states would be tens of
	// MiB.
	const bound = maxControlBytes + 192<<10
	if allocated > bound {
		t.Fatalf("the destination allocated %d bytes before authenticating its peer, bound %d", allocated, bound)
	}
	t.Logf("a keyless peer declaring 64 GiB: refused with %d bytes allocated (bound %d)", allocated, bound)
}

// trickleConn writes what it is given one byte at a time, every gap,
// from the byte at offset after on.
type trickleConn struct {
	net.Conn
	gap     time.Duration
	after   int64
	mu      sync.Mutex
	written int64
}

// SetWriteDeadline does nothing: a hostile peer keeps to no deadline.
func (c *trickleConn) SetWriteDeadline(time.Time) error { return nil }

func (c *trickleConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for len(p) > 0 {
		if c.written < c.after {
			k := min(int64(len(p)), c.after-c.written)
			m, err := c.Conn.Write(p[:k])
			n, c.written, p = n+m, c.written+int64(m), p[m:]
			if err != nil {
				return n, err
			}
			continue
		}
		time.Sleep(c.gap)
		m, err := c.Conn.Write(p[:1])
		n, c.written, p = n+m, c.written+int64(m), p[m:]
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// A peer that sends a byte every 10 ms, each within the 300 ms timeout,
// cannot hold a destination: in the handshake the handshake's deadline
// cuts it, and in the stream the minimum rate does. Either way the
// destination holds nothing within a bound of the timeout.
func TestSlowPeer(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name  string
		after int64 // bytes sent at full speed before the trickle
		bound time.Duration
	}{
		{"handshake", 0, 3 * timeout},
		{"stream", 16 << 10, 4 * timeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := hostPair(t, memory.Sparse, 1)
			vm := smallVM(t, src, "slow")
			sc, dc := loopbackConns(t, 1)
			slow := &trickleConn{Conn: sc[0], gap: 10 * time.Millisecond, after: tc.after}
			var (
				in     *vgpu.VM
				dstErr error
				took   time.Duration
				done   = make(chan struct{})
			)
			go func() {
				defer close(done)
				start := time.Now()
				in, _, dstErr = Receive(context.Background(), dst, rws(dc), ReceiveConfig{Timeout: timeout})
				took = time.Since(start)
				dc[0].Close()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, srcErr := Send(ctx, vm, []io.ReadWriter{slow}, SendConfig{Timeout: timeout})
			<-done
			var slowErr *slowPeerError
			if in != nil || !errors.Is(dstErr, migrate.ErrConnection) || !errors.As(dstErr, &slowErr) {
				t.Fatalf("destination: VM %v, error %v; want ErrConnection naming the slow peer", in, dstErr)
			}
			if took > tc.bound {
				t.Fatalf("the slow peer held the destination %v, bound %v", took, tc.bound)
			}
			if srcErr == nil || vm.State() != vgpu.VMRunning {
				t.Fatalf("source: %v, VM %v", srcErr, vm.State())
			}
			holdsNothing(t, dst)
			t.Logf("a byte every 10 ms in the %s: the destination gave up after %v (bound %v): %v", tc.name, took.Round(time.Millisecond), tc.bound, dstErr)
		})
	}
}

// bindTap does act to the first thing its source writes on an extra
// connection: the bind frame.
type bindTap struct {
	net.Conn
	act     mitmAct
	replay  []byte // another migration's bind, for mitmReplay
	first   []byte // the bind as written
	written bool
}

func (b *bindTap) Write(p []byte) (int, error) {
	if b.written {
		return b.Conn.Write(p)
	}
	b.written, b.first = true, bytes.Clone(p)
	switch b.act {
	case mitmDrop:
		return len(p), nil
	case mitmCorrupt:
		q, err := vgpusimtest.Flip(p, mitmCorruptBit(len(p)))
		if err != nil {
			return 0, err
		}
		_, err = b.Conn.Write(q)
		return len(p), err
	case mitmReplay:
		_, err := b.Conn.Write(b.replay)
		return len(p), err
	}
	return b.Conn.Write(p)
}

// A migration's extra connections open bound to it: one whose bind is
// lost, changed, or taken from another migration, or connections given to
// the destination in another order, fail the migration before the stream
// with the source's VM running and the destination holding nothing.
func TestBindFrames(t *testing.T) {
	const timeout = 300 * time.Millisecond
	run := func(act mitmAct, replay []byte, swap bool) (*bindTap, liveResult, *vgpu.VM, *vgpu.Host) {
		src, dst := hostPair(t, memory.Sparse, 1)
		vm := smallVM(t, src, "bind")
		sc, dc := loopbackConns(t, 2)
		tap := &bindTap{Conn: sc[1], act: act, replay: replay}
		dconns := rws(dc)
		if swap {
			dconns[0], dconns[1] = dconns[1], dconns[0]
		}
		res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{sc[0], tap}, dconns,
			SendConfig{EncryptionKey: authKey, Timeout: timeout, DigestWorkers: 1},
			ReceiveConfig{EncryptionKey: authKey, Timeout: timeout, DigestWorkers: 1})
		return tap, res, vm, dst
	}
	clean, res, _, _ := run(mitmPass, nil, false)
	if res.srcErr != nil || res.dstErr != nil || len(clean.first) != bindBytes {
		t.Fatalf("a clean migration over two connections: source %v, destination %v, bind of %d bytes", res.srcErr, res.dstErr, len(clean.first))
	}
	for _, tc := range []struct {
		name string
		act  mitmAct
		swap bool
		want error
	}{
		{"drop", mitmDrop, false, migrate.ErrAuthentication}, // the stream's first frame where the bind belongs
		{"corrupt", mitmCorrupt, false, migrate.ErrAuthentication},
		{"replay", mitmReplay, false, migrate.ErrAuthentication},
		{"swap", mitmPass, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, res, vm, dst := run(tc.act, clean.first, tc.swap)
			if res.srcErr == nil || res.dstErr == nil || res.in != nil {
				t.Fatalf("source %v, destination %v, VM %v: want both failed", res.srcErr, res.dstErr, res.in)
			}
			if tc.want != nil && !errors.Is(res.dstErr, tc.want) {
				t.Fatalf("destination %v, want %v", res.dstErr, tc.want)
			}
			if !wrapsSentinel(res.srcErr) || !wrapsSentinel(res.dstErr) {
				t.Fatalf("untyped: source %v, destination %v", res.srcErr, res.dstErr)
			}
			if vm.State() != vgpu.VMRunning || vm.Migrating() {
				t.Fatalf("the source VM is %v, migrating %v; want running, its own", vm.State(), vm.Migrating())
			}
			holdsNothing(t, dst)
		})
	}
}

// A refusal where the challenge belongs comes before the keys, from
// whoever wrote it: the source takes a version or configuration refusal
// and says it was unauthenticated, refuses any other code as out of place,
// and keeps its VM running either way.
func TestUnauthenticatedRefusal(t *testing.T) {
	for _, tc := range []struct {
		code string
		want []error
		not  error
	}{
		{"version", []error{migrate.ErrRefused, migrate.ErrIncompatible}, nil},
		{"config", []error{migrate.ErrRefused, migrate.ErrConfig}, nil},
		{"busy", []error{migrate.ErrStream}, migrate.ErrBusy},
		{"auth", []error{migrate.ErrStream}, migrate.ErrAuthentication},
	} {
		t.Run("code="+tc.code, func(t *testing.T) {
			src, _ := hostPair(t, memory.Sparse, 1)
			vm := smallVM(t, src, "unauth")
			sc, mc := net.Pipe()
			defer mc.Close()
			go func() {
				// The man in the middle reads the offer and answers for
				// the destination.
				var offer [offerBytes]byte
				if _, err := io.ReadFull(mc, offer[:]); err != nil {
					return
				}
				conv := &conversation{w: mc, r: mc, end: migrate.DestinationEnd, t: newTranscript()}
				_ = conv.write(msgRefuse, refusal{Code: tc.code, Message: "forged"})
				_, _ = io.Copy(io.Discard, mc)
			}()
			_, err := Send(context.Background(), vm, []io.ReadWriter{sc}, SendConfig{EncryptionKey: authKey, Timeout: 5 * time.Second})
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Fatalf("source: %v; want %v", err, tc.want)
				}
			}
			if tc.not != nil && errors.Is(err, tc.not) {
				t.Fatalf("source: %v believes the code %q", err, tc.code)
			}
			if errors.Is(err, migrate.ErrRefused) && !strings.Contains(err.Error(), "unauthenticated") {
				t.Fatalf("source: %q does not say the refusal was unauthenticated", err)
			}
			if vm.State() != vgpu.VMRunning || vm.Migrating() {
				t.Fatalf("the source VM is %v, migrating %v", vm.State(), vm.Migrating())
			}
		})
	}
}

// The minimum rate's arithmetic saturates: a long migration, a tiny rate
// or an endless Timeout never turns the allowance negative.
func TestRateCreditSaturates(t *testing.T) {
	for _, tc := range []struct {
		moved, rate int64
		want        time.Duration
	}{
		{0, 1, 0},
		{1 << 16, 1 << 16, time.Second},
		{3 << 15, 1 << 16, 1500 * time.Millisecond},
		{1 << 62, 1, maxDuration},
		{1<<63 - 1, 1 << 20, maxDuration},
		{1 << 40, 1 << 20, 1 << 20 * time.Second},
	} {
		got := rateCredit(tc.moved, tc.rate)
		if d := got - tc.want; d < -time.Second || d > time.Second || got < 0 {
			t.Errorf("rateCredit(%d, %d) = %v, want %v", tc.moved, tc.rate, got, tc.want)
		}
	}
	now := time.Now()
	for _, c := range []*timedConn{
		{timeout: maxDuration, minRate: DefaultMinBytesPerSec, moved: 1},
		{timeout: time.Second, minRate: 1, moved: 1 << 40},
		{timeout: maxDuration, minRate: 1, moved: 1<<63 - 1},
	} {
		if dl := c.deadline(now); !dl.After(now) {
			t.Errorf("Timeout %v, %d B/s, %d bytes moved: deadline %v is not ahead", c.timeout, c.minRate, c.moved, dl.Sub(now))
		}
	}
}

// slowStart holds its connection's third write — the stream's first
// frame, after the offer and the hello — for a while.
type slowStart struct {
	net.Conn
	hold   time.Duration
	writes int
}

func (s *slowStart) Write(p []byte) (int, error) {
	if s.writes++; s.writes == 3 {
		time.Sleep(s.hold)
	}
	return s.Conn.Write(p)
}

// The handshake's deadline ends with the handshake: an extra connection
// whose first frame comes after it, within Timeout, is read.
func TestHandshakeDeadlineEnds(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := smallVM(t, src, "late")
	sc, dc := loopbackConns(t, 2)
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{&slowStart{Conn: sc[0], hold: 600 * time.Millisecond}, sc[1]}, rws(dc),
		SendConfig{Timeout: 5 * time.Second, HandshakeTimeout: 300 * time.Millisecond},
		ReceiveConfig{Timeout: 5 * time.Second, HandshakeTimeout: 300 * time.Millisecond})
	if res.srcErr != nil || res.dstErr != nil {
		t.Fatalf("source %v, destination %v", res.srcErr, res.dstErr)
	}
}
