package live

import (
	"bytes"
	"io"
	"testing"

	"pgregory.net/rapid"
)

// TestReadAheadDeliversInOrder reads bytes written in random pieces over a
// TCP loopback connection through a read-ahead, in random pieces, stopping
// it at a random point, and checks them; then checks that what the peer
// sends next is read whole, through the wrapper or without it.
func TestReadAheadDeliversInOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		src, dst := loopbackConns(t, 1)
		t := rt
		data := make([]byte, rapid.IntRange(1, 3*readAheadBlockBytes).Draw(t, "bytes"))
		for i := range data {
			data[i] = byte(i*7 + i>>9)
		}
		writes := rapid.SliceOfN(rapid.IntRange(1, readAheadBlockBytes+7), 1, 64).Draw(t, "writes")
		reads := rapid.SliceOfN(rapid.IntRange(1, 2*readAheadBlockBytes), 1, 64).Draw(t, "reads")
		go func() {
			rest := data
			for i := 0; len(rest) > 0; i++ {
				n := min(len(rest), writes[i%len(writes)])
				if _, err := src[0].Write(rest[:n]); err != nil {
					return
				}
				rest = rest[n:]
			}
		}()
		ra := withReadAhead(dst[0])
		rc, ok := ra.(*readAheadConn)
		if !ok {
			t.Fatalf("a TCP connection got no read-ahead: %T", ra)
		}
		// Stopping the read-ahead part way loses nothing it read ahead.
		stopAt := rapid.IntRange(0, len(data)).Draw(t, "stopAt")
		got := make([]byte, 0, len(data))
		for i := 0; len(got) < len(data); i++ {
			if len(got) >= stopAt {
				rc.stopReading()
			}
			buf := make([]byte, min(reads[i%len(reads)], len(data)-len(got)))
			n, err := io.ReadFull(ra, buf)
			if err != nil {
				t.Fatalf("after %d of %d bytes: %v", len(got), len(data), err)
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Equal(got, data) {
			t.Fatal("bytes read through the read-ahead differ from those written")
		}
		rc.stopReading()
		rc.stopReading() // a second stop does nothing
		// After the stop, reads go to the connection: the next message
		// is read whole, through the wrapper or without it.
		for _, c := range []io.Reader{ra, dst[0]} {
			after := []byte("the caller's next message")
			if _, err := src[0].Write(after); err != nil {
				t.Fatal(err)
			}
			next := make([]byte, len(after))
			if _, err := io.ReadFull(c, next); err != nil || !bytes.Equal(next, after) {
				t.Fatalf("after the stop %T read %q, %v; want %q", c, next, err, after)
			}
		}
	})
}

// TestReadAheadNeedsDeadlines checks that a connection whose reads cannot
// be stopped is read directly.
func TestReadAheadNeedsDeadlines(t *testing.T) {
	var c struct{ io.ReadWriter }
	c.ReadWriter = new(bytes.Buffer)
	if got := withReadAhead(c); got != io.ReadWriter(c) {
		t.Fatalf("withReadAhead of a connection without deadlines = %T, want it unchanged", got)
	}
}
