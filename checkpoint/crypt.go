package checkpoint

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
)

// gcmTagSize is the size of the AES-GCM tag appended to a sealed payload.
const gcmTagSize = 16

// sealer seals and opens record payloads with AES-256-GCM. The nonce is
// the record's sequence number, which a stream never repeats; the key is
// used for one stream only, so no (key, nonce) pair is ever used twice.
// The associated data is the whole stream header followed by the record
// header, so a record cannot be moved to another stream, to another place
// in this one, or be given another type or length without failing to
// open.
type sealer struct {
	aead  cipher.AEAD
	nonce [12]byte
	aad   []byte // stream header, then room for one record header
	hdrN  int    // length of the stream header in aad
}

func newSealer(key, streamHeader []byte) (*sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, invalid("%v", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, invalid("%v", err)
	}
	aad := make([]byte, 0, len(streamHeader)+recordHeaderSize)
	aad = append(aad, streamHeader...)
	return &sealer{aead: aead, aad: aad, hdrN: len(streamHeader)}, nil
}

func (s *sealer) prepare(seq uint64, recHeader []byte) {
	// The first four nonce bytes stay zero: the sequence number fills the
	// rest, and a stream never has 2^64 records.
	binary.BigEndian.PutUint64(s.nonce[4:], seq)
	s.aad = append(s.aad[:s.hdrN], recHeader...)
}

// seal encrypts plain in place (plain must have gcmTagSize bytes of spare
// capacity) and returns the sealed payload.
func (s *sealer) seal(seq uint64, recHeader, plain []byte) []byte {
	s.prepare(seq, recHeader)
	return s.aead.Seal(plain[:0], s.nonce[:], plain, s.aad)
}

// open decrypts sealed in place and returns the plaintext.
func (s *sealer) open(seq uint64, recHeader, sealed []byte) ([]byte, error) {
	s.prepare(seq, recHeader)
	return s.aead.Open(sealed[:0], s.nonce[:], sealed, s.aad)
}
