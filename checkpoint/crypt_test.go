package checkpoint

import (
	"bytes"
	"testing"
)

// TestEncryptionModes runs every pair of writer and reader modes, with and
// without keys, against the rule in FORMAT.md.
func TestEncryptionModes(t *testing.T) {
	type end struct {
		mode EncryptionMode
		key  []byte
	}
	writers := map[string]end{
		"disabled":          {EncryptionDisabled, nil},
		"opportunistic":     {EncryptionOpportunistic, nil},
		"opportunistic+key": {EncryptionOpportunistic, testKey},
		"required+key":      {EncryptionRequired, testKey},
	}
	readers := map[string]end{
		"disabled":          {EncryptionDisabled, nil},
		"opportunistic":     {EncryptionOpportunistic, nil},
		"opportunistic+key": {EncryptionOpportunistic, testKey},
		"required+key":      {EncryptionRequired, testKey},
	}
	// want[writer][reader]: nil, or the error the reader reports.
	want := map[string]map[string]error{
		"disabled":          {"disabled": nil, "opportunistic": nil, "opportunistic+key": nil, "required+key": ErrEncryptionMode},
		"opportunistic":     {"disabled": nil, "opportunistic": nil, "opportunistic+key": nil, "required+key": ErrEncryptionMode},
		"opportunistic+key": {"disabled": ErrEncryptionMode, "opportunistic": ErrEncryptionMode, "opportunistic+key": nil, "required+key": nil},
		"required+key":      {"disabled": ErrEncryptionMode, "opportunistic": ErrEncryptionMode, "opportunistic+key": nil, "required+key": nil},
	}
	for wn, w := range writers {
		data, _ := testStream(t, WriterOptions{Encryption: w.mode, Key: w.key})
		for rn, r := range readers {
			t.Run("writer="+wn+"/reader="+rn, func(t *testing.T) {
				err := readAll(data, ReaderOptions{Encryption: r.mode, Key: r.key})
				if want[wn][rn] == nil {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				e := wantErr(t, err, want[wn][rn])
				if e.Offset != offFlags {
					t.Errorf("offset %d, want the flags at %d", e.Offset, offFlags)
				}
			})
		}
	}
	t.Run("invalid", func(t *testing.T) {
		for _, c := range []struct {
			mode EncryptionMode
			key  []byte
		}{{EncryptionRequired, nil}, {EncryptionDisabled, testKey}, {EncryptionOpportunistic, testKey[:16]}, {9, nil}} {
			if _, err := NewWriter(&bytes.Buffer{}, Metadata{}, WriterOptions{Encryption: c.mode, Key: c.key}); err == nil {
				t.Errorf("writer accepts mode %v with a %d-byte key", c.mode, len(c.key))
			} else {
				wantErr(t, err, ErrInvalid)
			}
			_, err := NewReader(bytes.NewReader(nil), ReaderOptions{Encryption: c.mode, Key: c.key})
			wantErr(t, err, ErrInvalid)
		}
	})
}

// TestEncryptionAttacks tampers with an encrypted stream the way someone
// without the key could — recomputing every unkeyed check value — and
// expects ErrAuth each time.
func TestEncryptionAttacks(t *testing.T) {
	opts := WriterOptions{Encryption: EncryptionRequired, Key: testKey}
	data, _ := testStream(t, opts)
	base := splitStream(t, data)
	batch := findRecord(t, base, RecordPageBatch, 0)
	ropts := ReaderOptions{Encryption: EncryptionRequired, Key: testKey}

	// Another stream under the same key (which the rules forbid, and
	// which is the worst case for a replay).
	otherID := testStreamID
	otherID[0] ^= 1
	var other bytes.Buffer
	w, err := NewWriter(&other, Metadata{VMID: "other"}, WriterOptions{StreamID: otherID, Encryption: EncryptionRequired, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	foreign := splitStream(t, other.Bytes())

	cases := []struct {
		name   string
		mutate func(s rawStream) []byte
		ropts  ReaderOptions
		want   error
	}{
		{"flipped bit in payload", func(s rawStream) []byte {
			s.recs[batch].payload[5] ^= 0x10
			return s.join(true, false)
		}, ropts, ErrAuth},
		{"flipped bit in tag", func(s rawStream) []byte {
			p := s.recs[batch].payload
			p[len(p)-1] ^= 0x01
			return s.join(true, false)
		}, ropts, ErrAuth},
		{"changed record type", func(s rawStream) []byte {
			s.recs[batch].typ = RecordDeviceState
			return s.join(true, false)
		}, ropts, ErrAuth},
		{"truncated payload", func(s rawStream) []byte {
			s.recs[batch].payload = s.recs[batch].payload[:10]
			return s.join(true, false)
		}, ropts, ErrAuth},
		{"reordered records", func(s rawStream) []byte {
			s.recs[batch], s.recs[batch+1] = s.recs[batch+1], s.recs[batch]
			return s.join(true, true)
		}, ropts, ErrAuth},
		{"dropped record", func(s rawStream) []byte {
			s.recs = append(s.recs[:batch], s.recs[batch+1:]...)
			return s.join(true, true)
		}, ropts, ErrAuth},
		{"replayed record", func(s rawStream) []byte {
			s.recs[batch+1] = s.recs[batch]
			return s.join(true, true)
		}, ropts, ErrAuth},
		{"record from another stream", func(s rawStream) []byte {
			s.recs[0] = foreign.recs[0]
			return s.join(true, true)
		}, ropts, ErrAuth},
		{"changed stream id", func(s rawStream) []byte {
			s.header[offStreamID] ^= 1
			return s.join(true, false)
		}, ropts, ErrAuth},
		{"wrong key", func(s rawStream) []byte { return s.join(false, false) },
			ReaderOptions{Encryption: EncryptionRequired, Key: otherKey}, ErrAuth},
		{"downgraded to plaintext", func(s rawStream) []byte {
			s.header[offFlags] &^= flagEncrypted
			return s.join(true, false)
		}, ropts, ErrEncryptionMode},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, readAll(c.mutate(base.clone()), c.ropts), c.want)
		})
	}
	t.Run("downgrade to an opportunistic reader", func(t *testing.T) {
		// An opportunistic reader accepts plaintext by definition; the
		// sealed payloads then fail to parse, and whatever the error it
		// is a typed one. Required mode is the defence.
		s := base.clone()
		s.header[offFlags] &^= flagEncrypted
		err := readAll(s.join(true, false), ReaderOptions{Encryption: EncryptionOpportunistic, Key: testKey})
		if err == nil || !typedError(err) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("no plaintext on the wire", func(t *testing.T) {
		for _, s := range []string{"vm-test", "Tesla P40", "channels, contexts"} {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%q in the clear", s)
			}
		}
		plain, _ := testStream(t, WriterOptions{})
		if !bytes.Contains(plain, []byte("vm-test")) {
			t.Error("the plaintext stream does not hold the VM id: the test above proves nothing")
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		again, _ := testStream(t, opts)
		if !bytes.Equal(again, data) {
			t.Error("same key, stream id and content give different bytes")
		}
	})
}
