package live

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// A recorded migration replays only to a destination that draws the nonce
// it drew: every migration is fresh. The tests that feed a destination a
// recording (the hostile streams, FuzzReceive) fix both ends' nonces, so
// that the recording's tags and stream key are the ones the destination
// derives.
var (
	replaySourceNonce = (*[nonceBytes]byte)(bytes.Repeat([]byte{0x51}, nonceBytes))
	replayDestNonce   = (*[nonceBytes]byte)(bytes.Repeat([]byte{0xd7}, nonceBytes))
)

// replayable returns the configurations with the fixed nonces.
func replayable(s SendConfig, r ReceiveConfig) (SendConfig, ReceiveConfig) {
	s.Rand, r.Rand = fixedRand(replaySourceNonce[0]), fixedRand(replayDestNonce[0])
	return s, r
}

// fixedRand is a Rand that draws b, always.
type fixedRand byte

func (f fixedRand) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(f)
	}
	return len(p), nil
}

// replayKeys are the keys of a migration between the fixed nonces under key
// (nil for none).
func replayKeys(key []byte) sessionKeys {
	keys, err := deriveKeys(key, replaySourceNonce, replayDestNonce)
	if err != nil {
		panic(err)
	}
	return keys
}

// replayHello returns the hello message, tagged, that a source with the
// fixed nonce and key sends after offer to a destination with the fixed
// nonce.
func replayHello(offer []byte, key []byte, h hello) []byte {
	t := newTranscript()
	t.add(offer)
	challenge := make([]byte, msgHeaderBytes)
	challenge[0] = byte(msgChallenge)
	binary.LittleEndian.PutUint32(challenge[1:], 1+nonceBytes)
	t.add(challenge, challengeBody(key != nil, replayDestNonce))
	t.keyed(replayKeys(key), 0)
	var out bytes.Buffer
	conv := &conversation{w: &out, end: 0, t: t, tagged: true}
	if err := conv.write(msgHello, h); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// replayReadHello decodes a hello message, tag and all.
func replayReadHello(msg []byte) hello {
	n := binary.LittleEndian.Uint32(msg[1:])
	var h hello
	if err := decodeStrict(msg[msgHeaderBytes:msgHeaderBytes+n], &h); err != nil {
		panic(err)
	}
	return h
}

// recordSent migrates a fresh small VM named id over loopback TCP with the
// configurations given, and returns every byte the source sent.
func recordSent(t testing.TB, id string, scfg SendConfig, rcfg ReceiveConfig) []byte {
	t.Helper()
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := smallVM(t, src, id)
	sc, dc := loopbackConns(t, 1)
	var sent bytes.Buffer
	tee := struct {
		io.Reader
		io.Writer
	}{sc[0], io.MultiWriter(sc[0], &sent)}
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{tee}, rws(dc), scfg, rcfg)
	if res.srcErr != nil || res.dstErr != nil {
		t.Fatalf("recording a migration: source %v; destination %v", res.srcErr, res.dstErr)
	}
	return sent.Bytes()
}
