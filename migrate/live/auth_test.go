package live

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// authKey is the migration key of these tests.
var authKey = bytes.Repeat([]byte{0x6b}, checkpoint.KeySize)

// authRecord migrates a fresh small VM under key, each end drawing its
// nonce as it does by default, and returns what the source sent.
func authRecord(t *testing.T, key []byte) []byte {
	t.Helper()
	src, dst := hostPair(t, memory.Sparse, 1)
	vm, err := src.CreateVM(vgpu.VMSpec{ID: "auth", Seed: 0xa11, RAMBytes: 64 << 10, RAMFootprintBytes: 16 << 10, Profiles: []string{"P40-1Q"}})
	must(t, err)
	must(t, vm.Start())
	sc, dc := loopbackConns(t, 1)
	var sent bytes.Buffer
	tee := struct {
		io.Reader
		io.Writer
	}{sc[0], io.MultiWriter(sc[0], &sent)}
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{tee}, rws(dc),
		SendConfig{EncryptionKey: key, DigestWorkers: 1}, ReceiveConfig{EncryptionKey: key, DigestWorkers: 1})
	if res.srcErr != nil || res.dstErr != nil {
		t.Fatalf("recording: source %v, destination %v", res.srcErr, res.dstErr)
	}
	return sent.Bytes()
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
	sent := authRecord(t, authKey)
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
	a, b := authRecord(t, authKey), authRecord(t, authKey)
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
	k1, k2, k3 := deriveKeys(authKey, n1, n2), deriveKeys(authKey, n2, n1), deriveKeys(authKey, n1, n2)
	if bytes.Equal(k1.stream, k2.stream) || bytes.Equal(k1.fromSource, k2.fromSource) || !bytes.Equal(k1.stream, k3.stream) {
		t.Fatal("the keys do not follow the nonces")
	}
	if bytes.Equal(k1.stream, k1.fromSource) || bytes.Equal(k1.fromSource, k1.fromDestination) {
		t.Fatal("one migration's keys repeat")
	}
	t.Logf("two migrations under one key: stream ids %x and %x; %d of %d sealed metadata bytes agree", idA, idB, same, n)
}

// Every bit of the hello flipped, with a key and without: the destination
// refuses it before it reads a field or reserves anything.
func TestHelloCorruption(t *testing.T) {
	for _, key := range [][]byte{nil, authKey} {
		sent := authRecord(t, key)
		hs, he := offerBytes, authStreamStart(sent)
		_, dst := hostPair(t, memory.Sparse, 1)
		// The destination draws a nonce of its own, as it does by
		// default: a flipped hello fails its tag as the unflipped one
		// would (a replay, TestReplayRefused); what this test checks is
		// that no flip gets further, whatever field it lands in.
		flips, auth := 0, 0
		for i := hs; i < he; i++ {
			for bit := range 8 {
				data := bytes.Clone(sent[:he])
				data[i] ^= 1 << bit
				in, rep, err := Receive(context.Background(), dst, []io.ReadWriter{hostileConn{bytes.NewReader(data)}},
					ReceiveConfig{EncryptionKey: key, DigestWorkers: 1, Timeout: 5 * time.Second})
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
		`"Passthrough":false},"stream_id":0,"source":"s","mode":0}`
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
		"not an object":       `[1]`,
	} {
		var h hello
		if err := decodeStrict([]byte(body), &h); err == nil {
			t.Errorf("%s: accepted", name)
		}
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
			vm, err := src.CreateVM(vgpu.VMSpec{ID: "slow", RAMBytes: 64 << 10, RAMFootprintBytes: 16 << 10, Profiles: []string{"P40-1Q"}})
			must(t, err)
			must(t, vm.Start())
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
