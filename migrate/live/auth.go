package live

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
)

// Every migration is fresh and every control message authenticated. Each
// end draws a random nonce; the keys of one migration are derived with
// HKDF (RFC 5869) from the shared migration key and both nonces, so no two
// migrations share a key, and the checkpoint stream's AES-GCM nonces (its
// record numbers, which every stream repeats) never meet the same key
// twice. Every control message carries an HMAC-SHA-256 tag, under its
// direction's key, of the hash of the whole conversation so far, itself
// included: a message forged, altered, dropped, reordered, reflected back
// or replayed from another migration fails the next tag. Without a key
// the same tags are computed with an empty secret: they then catch
// corruption, not an attacker.

const (
	nonceBytes = 32
	tagBytes   = sha256.Size
)

// sessionKeys are one migration's keys.
type sessionKeys struct {
	fromSource, fromDestination []byte // control-message MAC keys, by sender
	prk                         []byte // HKDF's pseudorandom key, which the streams' keys expand
}

// streamKey is the key of the migration's stream i: each stream has its
// own, since every stream numbers its records, the AES-GCM nonces, from 0.
func (k sessionKeys) streamKey(i int) ([]byte, error) {
	key, err := hkdf.Expand(sha256.New, k.prk, fmt.Sprintf("vgpusim live 3: stream %d", i), checkpoint.KeySize)
	if err != nil {
		return nil, fmt.Errorf("%w: deriving stream %d's key: %v", migrate.ErrConfig, i, err)
	}
	return key, nil
}

// noKey is the secret of a migration without a key: a fixed one, not an
// empty one, which FIPS 140-only mode refuses.
var noKey = sha256.Sum256([]byte("vgpusim live: no key"))

// deriveKeys derives a migration's keys from the shared key (nil for
// none) and both ends' nonces.
func deriveKeys(key []byte, sourceNonce, destNonce *[nonceBytes]byte) (sessionKeys, error) {
	if key == nil {
		key = noKey[:]
	}
	salt := make([]byte, 0, 2*nonceBytes)
	salt = append(append(salt, sourceNonce[:]...), destNonce[:]...)
	prk, err := hkdf.Extract(sha256.New, key, salt)
	if err != nil {
		return sessionKeys{}, fmt.Errorf("%w: deriving the migration's keys: %v", migrate.ErrConfig, err)
	}
	keys := sessionKeys{prk: prk}
	for _, k := range []struct {
		dst  *[]byte
		info string
		n    int
	}{
		{&keys.fromSource, "vgpusim live 3: source control", sha256.Size},
		{&keys.fromDestination, "vgpusim live 3: destination control", sha256.Size},
	} {
		if *k.dst, err = hkdf.Expand(sha256.New, prk, k.info, k.n); err != nil {
			return sessionKeys{}, fmt.Errorf("%w: deriving the migration's keys: %v", migrate.ErrConfig, err)
		}
	}
	return keys, nil
}

// newNonce draws a nonce from r, or from the system's secure random
// source if r is nil.
func newNonce(r io.Reader) (*[nonceBytes]byte, error) {
	var n [nonceBytes]byte
	if r == nil {
		_, _ = rand.Read(n[:]) // never fails (crypto/rand)
		return &n, nil
	}
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, fmt.Errorf("%w: drawing a nonce from Rand: %v", migrate.ErrConfig, err)
	}
	return &n, nil
}

// transcript is one end's record of its migration's control conversation:
// a running hash of every byte exchanged, and the keys that tag it.
type transcript struct {
	h          hash.Hash
	send, recv []byte // MAC keys: this end's messages, the peer's
	keys       sessionKeys
}

func newTranscript() *transcript { return &transcript{h: sha256.New()} }

// add appends bytes the conversation carried.
func (t *transcript) add(bs ...[]byte) {
	for _, b := range bs {
		t.h.Write(b)
	}
}

// keyed sets the migration's keys, for the end that e is.
func (t *transcript) keyed(keys sessionKeys, e migrate.End) {
	t.keys = keys
	t.send, t.recv = keys.fromSource, keys.fromDestination
	if e == migrate.DestinationEnd {
		t.send, t.recv = t.recv, t.send
	}
}

// tag is the tag under key of the conversation so far.
func (t *transcript) tag(key []byte) []byte { return t.labelled(key, "") }

// labelled is an HMAC under key of label, then the conversation so far:
// with a label, a value of this conversation that no message's tag
// (label "") can be taken for.
func (t *transcript) labelled(key []byte, label string, more ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	for _, b := range more {
		m.Write(b)
	}
	m.Write(t.h.Sum(nil))
	return m.Sum(nil)
}

// streamID is the id of the migration's stream i: the caller's half, and
// a half drawn from the conversation up to the hello, which binds the
// hello and both nonces into every stream's header, and i, which no other
// stream of the migration shares.
func (t *transcript) streamID(caller uint64, i int) [checkpoint.StreamIDSize]byte {
	sum := t.labelled(t.keys.fromSource, "stream id", binary.LittleEndian.AppendUint32(nil, uint32(i)))
	return migrate.StreamID(caller, binary.LittleEndian.Uint64(sum[:8]))
}

// bindTag is the tag that binds extra connection i to the migration.
func (t *transcript) bindTag(i int) []byte {
	return t.labelled(t.keys.fromSource, "connection", binary.LittleEndian.AppendUint32(nil, uint32(i)))
}
