package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
)

// The destination's report says what it can know: the source and mode the
// handshake declared, a round for every end-of-round record with the
// same bytes the source counted, every byte it read, the pages it applied,
// a stun with its dominant phase, and the digests.
func TestLiveReceiveReport(t *testing.T) {
	for _, mode := range []migrate.Mode{migrate.PreCopy, migrate.Legacy} {
		t.Run(mode.String(), func(t *testing.T) {
			src, dst := hostPair(t, memory.Sparse, 1)
			vm := inferenceVM(t, src, "vm-rep", "P40-1Q", 128*MiB, 32*MiB, tinyModel, 6)
			run := NewRunner(src, 0)
			run.Start()
			defer run.Stop()
			sc, dc := loopbackConns(t, 2)
			res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc),
				SendConfig{Policy: migrate.Policy{Mode: mode}, Engine: migrate.EngineConfig{Workers: 2}, Lock: run}, ReceiveConfig{})
			if res.srcErr != nil || res.dstErr != nil {
				t.Fatalf("source: %v; destination: %v", res.srcErr, res.dstErr)
			}
			s, d := res.srcRep, res.dstRep
			if d.Source != "src" || d.Destination != "dst" || d.Mode != mode || !d.Live || d.Outcome != migrate.PhaseDone {
				t.Fatalf("destination report: source %q, destination %q, mode %v, fidelity %v, outcome %v",
					d.Source, d.Destination, d.Mode, d.Fidelity, d.Outcome)
			}
			if d.WireBytes != s.WireBytes || d.RawBytes != s.RawBytes || d.RawBytes == 0 || d.DeviceStateBytes != s.DeviceStateBytes {
				t.Fatalf("destination read %d B for %d B of pages and %d B of device state; source wrote %d B for %d B and %d B",
					d.WireBytes, d.RawBytes, d.DeviceStateBytes, s.WireBytes, s.RawBytes, s.DeviceStateBytes)
			}
			if len(d.Rounds) != len(s.Rounds) {
				t.Fatalf("destination has %d rounds, source %d", len(d.Rounds), len(s.Rounds))
			}
			var last time.Duration
			for i, dr := range d.Rounds {
				sr := s.Rounds[i]
				if dr.Index != i || dr.WireBytes != sr.WireBytes || dr.Total().Pages != sr.Total().Pages ||
					dr.Total().RawBytes != sr.Total().RawBytes || len(dr.Framebuffers) != len(sr.Framebuffers) {
					t.Fatalf("round %d: destination %+v, source %+v", i, dr, sr)
				}
				if dr.Start < last || dr.Duration < 0 || dr.Start+dr.Duration > d.Total {
					t.Fatalf("round %d: start %v, duration %v after %v, total %v", i, dr.Start, dr.Duration, last, d.Total)
				}
				last = dr.Start + dr.Duration
			}
			if d.Final.RAM.Pages != s.Final.RAM.Pages || d.Final.Framebuffers[0].Pages != s.Final.Framebuffers[0].Pages ||
				d.PreCopy.Pages != s.PreCopy.Pages {
				t.Fatalf("pages: destination pre-copy %d, final %d + %d; source %d, %d + %d", d.PreCopy.Pages,
					d.Final.RAM.Pages, d.Final.Framebuffers[0].Pages, s.PreCopy.Pages, s.Final.RAM.Pages, s.Final.Framebuffers[0].Pages)
			}
			if d.Stun <= 0 || d.Stun > d.Total || d.Dominant == 0 || len(d.StunPhases) == 0 || d.CompressionRatio <= 0 {
				t.Fatalf("destination stun %v of %v, dominant %v, phases %v, ratio %v", d.Stun, d.Total, d.Dominant, d.StunPhases, d.CompressionRatio)
			}
			if !slices.Equal(d.RegionDigests, s.RegionDigests) {
				t.Fatalf("digests: destination %v, source %v", d.RegionDigests, s.RegionDigests)
			}
			str := d.String()
			for _, want := range []string{mode.String() + " mode", fmt.Sprintf("%d round(s)", len(s.Rounds)), "dominant: " + d.Dominant.String()} {
				if !strings.Contains(str, want) {
					t.Errorf("destination report lacks %q:\n%s", want, str)
				}
			}
		})
	}
}

// A report without a stun says so, in print and in JSON, instead of
// naming a phase that does not exist.
func TestReportWithoutStun(t *testing.T) {
	r := &migrate.Report{VM: "vm", Outcome: migrate.PhaseFailed, FailedIn: migrate.PhaseSetup, Error: "refused"}
	if s := r.String(); !strings.Contains(s, "dominant: none") || strings.Contains(s, "Phase(") {
		t.Fatalf("report without a stun:\n%s", s)
	}
	b, err := json.Marshal(r)
	must(t, err)
	if strings.Contains(string(b), "dominant") || strings.Contains(string(b), "Phase(") {
		t.Fatalf("JSON of a report without a stun: %s", b)
	}
}

// Digests marshal as 16 hexadecimal digits, which no JSON reader rounds,
// and read back exactly.
func TestReportDigestsJSON(t *testing.T) {
	in := migrate.Report{RegionDigests: []migrate.Digest{0xfedcba9876543210, 1, 0}}
	b, err := json.Marshal(&in)
	must(t, err)
	if !strings.Contains(string(b), `"region_digests":["fedcba9876543210","0000000000000001","0000000000000000"]`) {
		t.Fatalf("JSON: %s", b)
	}
	var out struct {
		RegionDigests []migrate.Digest `json:"region_digests"`
	}
	must(t, json.Unmarshal(b, &out))
	if !slices.Equal(out.RegionDigests, in.RegionDigests) {
		t.Fatalf("read back %v, wrote %v", out.RegionDigests, in.RegionDigests)
	}
	if got := fmt.Sprint(migrate.Digest(0xab)); got != "00000000000000ab" {
		t.Fatalf("Digest prints %q", got)
	}
	for _, bad := range []string{`"ab"`, `"fedcba98765432100"`, `"0x00000000000001"`, `"-000000000000001"`, `"fedcba987654321g"`, `18364758544493064720`} {
		var d []migrate.Digest
		if err := json.Unmarshal([]byte("["+bad+"]"), &d); err == nil {
			t.Errorf("%s read as a digest: %v", bad, d)
		}
	}
}

// Errors name each sentinel once, and still match every one of them.
func TestLiveErrorsReadOnce(t *testing.T) {
	t.Run("refusal", func(t *testing.T) {
		src, dst := hostPair(t, memory.Synthetic, 1)
		vm := inferenceVM(t, src, "vm-r", "P40-1Q", 64*MiB, 16*MiB, tinyModel, 2)
		sc, dc := loopbackConns(t, 1)
		res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc),
			SendConfig{Engine: migrate.EngineConfig{BatchBytes: 8 << 20}}, ReceiveConfig{MaxBatchBytes: 4 << 20})
		readsOnce(t, res.srcErr, migrate.ErrRefused, migrate.ErrConfig)
		readsOnce(t, res.dstErr, migrate.ErrConfig)
	})
	t.Run("cancel", func(t *testing.T) {
		src, dst := hostPair(t, memory.Sparse, 1)
		vm := inferenceVM(t, src, "vm-c", "P40-1Q", 64*MiB, 16*MiB, tinyModel, 3)
		sc, dc := loopbackConns(t, 1)
		ctx, cancel := context.WithCancel(context.Background())
		res := liveMigrate(ctx, vm, dst, rws(sc), rws(dc), SendConfig{Progress: func(p migrate.Event) {
			if p.Kind == migrate.RoundStarted {
				cancel()
			}
		}}, ReceiveConfig{Timeout: 5 * time.Second})
		readsOnce(t, res.srcErr, migrate.ErrCanceled, context.Canceled)
		readsOnce(t, res.dstErr, migrate.ErrCanceled, context.Canceled)
	})
	t.Run("deadline", func(t *testing.T) {
		_, dst := hostPair(t, memory.Synthetic, 1)
		_, dc := loopbackConns(t, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, _, err := Receive(ctx, dst, rws(dc), ReceiveConfig{})
		readsOnce(t, err, migrate.ErrCanceled, context.DeadlineExceeded)
		if !strings.Contains(err.Error(), "deadline exceeded") {
			t.Errorf("%q does not say the deadline passed", err)
		}
	})
}

// readsOnce fails t unless err matches every one of want and its message
// names each of the package's sentinels at most once.
func readsOnce(t *testing.T, err error, want ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", want)
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("%q does not match %v", err, w)
		}
	}
	for _, s := range []error{migrate.ErrConfig, migrate.ErrIncompatible, migrate.ErrCanceled, migrate.ErrStream, migrate.ErrConnection, migrate.ErrRefused, migrate.ErrSource, migrate.ErrDestination} {
		text := strings.TrimPrefix(s.Error(), "migrate: ")
		if n := strings.Count(err.Error(), text); n > 1 {
			t.Errorf("%q says %q %d times", err, text, n)
		}
	}
}

// A failure of the source's own making is not blamed on the connection,
// even when a connection has failed too; a stream that could not be
// written over a failed connection is.
func TestLiveCauseLabels(t *testing.T) {
	broken := newConnSet([]io.ReadWriter{nil}, bounds{timeout: time.Second})
	broken[0].record(net.ErrClosed)
	healthy := newConnSet([]io.ReadWriter{nil}, bounds{timeout: time.Second})
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		cs       connSet
		cause    error
		conn     bool
		matching []error
	}{
		{"memory read, connection broken", broken, wrap(migrate.ErrSource, io.ErrUnexpectedEOF), false, []error{migrate.ErrSource, io.ErrUnexpectedEOF}},
		{"memory read, connection fine", healthy, wrap(migrate.ErrSource, io.ErrUnexpectedEOF), false, []error{migrate.ErrSource}},
		{"stream write, connection broken", broken, wrap(migrate.ErrStream, net.ErrClosed), true, []error{migrate.ErrStream, net.ErrClosed}},
		{"peer closed", healthy, io.EOF, true, []error{io.EOF}},
		{"already the connection", broken, wrap(migrate.ErrConnection, net.ErrClosed), true, nil},
		{"corrupt stream, connection fine", healthy, wrap(migrate.ErrStream, errors.New("bad record")), false, []error{migrate.ErrStream}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := liveCause(ctx, tc.cs, tc.cause)
			if errors.Is(err, migrate.ErrConnection) != tc.conn {
				t.Errorf("%q: ErrConnection %v, want %v", err, !tc.conn, tc.conn)
			}
			readsOnce(t, err, tc.matching...)
		})
	}
}

// The destination refuses a mode it does not know, and reads the source's
// name as text fit to print, however long or odd.
func TestLiveHelloDeclarations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hello  hello
		want   error
		source string
	}{
		{"unknown mode", hello{Mode: 9, Source: "src"}, migrate.ErrConfig, "src"},
		{"odd source name", hello{Mode: uint8(migrate.PreCopy), Source: "a\x00b\n" + strings.Repeat("é", 300), Connections: 2}, migrate.ErrConfig,
			"ab" + strings.Repeat("é", maxPeerNameBytes/2-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dst := hostPair(t, memory.Synthetic, 1)
			sc, dc := loopbackConns(t, 1)
			h := tc.hello
			h.BatchBytes = 1 << 20
			if h.Connections == 0 {
				h.Connections = 1
			}
			answer := make(chan error, 1)
			go func() {
				conv := &conversation{w: sc[0], r: sc[0], end: migrate.SourceEnd, t: newTranscript()}
				nonce, _ := newNonce(nil)
				_, err := openConversation(conv, nil, nonce)
				if err == nil {
					err = conv.write(msgHello, h)
				}
				if err == nil {
					err = conv.read(msgAccept, &accept{})
				}
				answer <- err
			}()
			_, rep, err := Receive(context.Background(), dst, rws(dc), ReceiveConfig{Timeout: 5 * time.Second})
			if !errors.Is(err, tc.want) || rep.Source != tc.source {
				t.Fatalf("Receive: %v, source %q; want %v and %q", err, rep.Source, tc.want, tc.source)
			}
			if aerr := <-answer; !errors.Is(aerr, migrate.ErrRefused) || !errors.Is(aerr, tc.want) {
				t.Fatalf("the source heard %v, want a refusal with %v", aerr, tc.want)
			}
			holdsNothing(t, dst)
		})
	}
}
