package live

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/vgpusim/vgpusim/migrate"
	"pgregory.net/rapid"
)

// Whatever is written through a stripeWriter over K connections reads back
// in order through a stripeReader over the same K, in reads of any size,
// and the reader consumes nothing that follows the stream.
func TestPropStripeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 5).Draw(t, "conns")
		bufs := make([]*bytes.Buffer, k)
		ws, rs := make([]io.Writer, k), make([]io.Reader, k)
		for i := range bufs {
			bufs[i] = new(bytes.Buffer)
			ws[i], rs[i] = bufs[i], bufs[i]
		}
		sw := newStripeWriter(ws)
		var want []byte
		for i, n := range rapid.SliceOfN(rapid.IntRange(1, 3000), 1, 20).Draw(t, "writes") {
			p := bytes.Repeat([]byte{byte(i + 1)}, n)
			if _, err := sw.Write(p); err != nil {
				t.Fatal(err)
			}
			want = append(want, p...)
		}
		for i := range bufs {
			bufs[i].WriteString("after") // what follows the stream on each connection
		}
		sr := newStripeReader(rs)
		got := make([]byte, 0, len(want))
		for len(got) < len(want) {
			n := rapid.IntRange(1, 4000).Draw(t, "read")
			p := make([]byte, min(n, len(want)-len(got)))
			m, err := io.ReadFull(sr, p)
			if err != nil {
				t.Fatalf("read after %d bytes: %v", len(got), err)
			}
			got = append(got, p[:m]...)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("the stream read back differs")
		}
		for i, b := range bufs {
			if b.String() != "after" {
				t.Fatalf("connection %d: the reader consumed past the stream, %q left", i, b.String())
			}
		}
	})
}

// A frame out of place, empty, over the limit, or cut short is an error,
// never a wait for more than the limit or a panic.
func TestStripeRejects(t *testing.T) {
	frame := func(idx uint64, n uint32, body int) []byte {
		b := make([]byte, stripeHeaderBytes, stripeHeaderBytes+body)
		binary.LittleEndian.PutUint64(b, idx)
		binary.LittleEndian.PutUint32(b[8:], n)
		return append(b, make([]byte, body)...)
	}
	for _, tc := range []struct {
		name string
		conn []byte
		want error
	}{
		{"frame out of order", frame(1, 4, 4), migrate.ErrStream},
		{"empty frame", frame(0, 0, 0), migrate.ErrStream},
		{"frame over the limit", frame(0, maxFrameBytes+1, 0), migrate.ErrStream},
		{"cut inside a header", frame(0, 4, 4)[:7], io.ErrUnexpectedEOF},
		{"cut inside a frame", frame(0, 8, 3), io.ErrUnexpectedEOF},
		{"nothing at all", nil, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := newStripeReader([]io.Reader{bytes.NewReader(tc.conn)})
			_, err := io.ReadAll(sr)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if _, again := sr.Read(make([]byte, 1)); !errors.Is(again, tc.want) {
				t.Fatalf("the error is not sticky: %v", again)
			}
		})
	}
}
