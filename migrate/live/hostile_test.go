package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// hostileLimits are the destination's limits in the suite: just above what
// the corpus's streams need (64 KiB batches, 16 pages of guest RAM, a
// device state under 1 KiB), so that the bound on what a hostile stream
// may make the destination allocate is tight.
var hostileLimits = checkpoint.Limits{
	MaxRecordBytes: 128 << 10, MaxBatchBytes: 128 << 10, MaxPagesPerRecord: 64, MaxWindowBytes: 128 << 10,
	MaxDeviceStateBytes: 16 << 10, MaxMetadataBytes: 4 << 10, MaxRegions: 4, MaxTotalBytes: 4 << 20,
}

func hostileConfig(v hostileVariant) ReceiveConfig {
	cfg := ReceiveConfig{Limits: hostileLimits, MaxBatchBytes: hostileLimits.MaxBatchBytes, DigestWorkers: 1, Timeout: 5 * time.Second}
	if v.encrypted {
		cfg.EncryptionKey = hostileKey
	}
	_, cfg = replayable(SendConfig{}, cfg)
	return cfg
}

// hostileAllocBound is how many bytes one Receive of a hostile stream may
// allocate in all (runtime/metrics /gc/heap/allocs:bytes, a cumulative
// count, so a bound on it bounds the peak too):
//
//	base                       the most a clean stream of any variant costs:
//	                           the VM and its regions, the connection buffers
//	+ 2 × MaxRecordBytes       a record's buffer, grown by doubling
//	+ MaxBatchBytes + 64       the decoded batch and zstd's slack
//	+ 2 × MaxWindowBytes       the zstd decoder's history and block buffers,
//	                           which a clean uncompressed stream never creates
//	+ MaxDeviceStateBytes + MaxMetadataBytes + maxControlBytes
//	+ 1 MiB                    the runtime counts a span of small objects as
//	                           allocated when a P takes it, one span per size
//	                           class at most, and the clean stream's count
//	                           varies by as much
//
// The bound is not derived from the limits alone: its base is measured,
// the most a clean recording cost in the same run, and the 1 MiB is slack
// sized by observation. It is a measured clean run plus what the limits
// let a hostile stream add, plus slack: it catches a length field believed
// (up to 4 GiB) or a bomb decoded (1 GiB), which would pass it hundreds of
// times over, not a hostile stream that costs a little more than a clean
// one.
func hostileAllocBound(base uint64) uint64 {
	l := hostileLimits
	return base + uint64(2*l.MaxRecordBytes+l.MaxBatchBytes+64+2*l.MaxWindowBytes+
		l.MaxDeviceStateBytes+l.MaxMetadataBytes+maxControlBytes) + 1<<20
}

// hostileConn is a connection whose peer is a recording: reads come from
// it, then end; writes are dropped. It takes read deadlines (a read never
// blocks, so they have nothing to do), so that Receive reads it ahead on a
// goroutine of its own, as it reads a net.Conn — a goroutine the suite
// checks it stops.
type hostileConn struct{ r *bytes.Reader }

func (c hostileConn) Read(p []byte) (int, error)      { return c.r.Read(p) }
func (c hostileConn) Write(p []byte) (int, error)     { return len(p), nil }
func (c hostileConn) SetReadDeadline(time.Time) error { return nil }

// hostileOutcome is what one Receive of a recording did.
type hostileOutcome struct {
	in       *vgpu.VM
	rep      *migrate.Report
	err      error
	panicked any
	allocs   uint64
}

func hostileReceive(dst *vgpu.Host, data []byte, cfg ReceiveConfig) (o hostileOutcome) {
	ms := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(ms)
	before := ms[0].Value.Uint64()
	defer func() {
		o.panicked = recover()
		metrics.Read(ms)
		o.allocs = ms[0].Value.Uint64() - before
	}()
	o.in, o.rep, o.err = Receive(context.Background(), dst, []io.ReadWriter{hostileConn{bytes.NewReader(data)}}, cfg)
	return o
}

// hostileSettle waits, up to a deadline, for the goroutines to be back to
// n, and returns how many are left over.
func hostileSettle(n int) int {
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return runtime.NumGoroutine() - n
}

// hostileCases returns every mutation of s.
func hostileCases(s, other *hostileStream) []hostileCase {
	return slices.Concat(hostileFlips(s), hostileCuts(s), hostileRecordCases(s, other), hostileHelloCases(s),
		hostileVersionCases(s), hostilePayloadCases(s), hostileBombs(s, hostileLimits))
}

// TestHostileStreams feeds Receive every mutation of every recording of
// the corpus and checks, for each, that it is refused with a *PhaseError
// matching the sentinels the mutation names, without a panic, within the
// allocation bound, with no goroutine left behind and nothing left on the
// destination host. Clean recordings go first, to show the harness lets a
// good stream through.
func TestHostileStreams(t *testing.T) {
	main, other := hostileStreams(t)
	start := time.Now()
	var base uint64
	for _, s := range main {
		dst := hostileHost(t, "dst", 3)
		for range 2 {
			o := hostileReceive(dst, s.raw, hostileConfig(s.v))
			if o.err != nil || o.panicked != nil || o.in == nil || o.in.State() != vgpu.VMRunning {
				t.Fatalf("%v: the clean recording does not migrate: %v, panic %v", s.v, o.err, o.panicked)
			}
			must(t, o.in.Destroy())
			base = max(base, o.allocs)
		}
	}
	bound := hostileAllocBound(base)
	variants, streams, worst, worstBomb := 0, 0, uint64(0), uint64(0)
	for vi, s := range main {
		if !hostileRuns(s.v) {
			continue
		}
		variants++
		dst := hostileHost(t, "dst", 3)
		cfg := hostileConfig(s.v)
		t.Run(hostileVariantName(s.v), func(t *testing.T) {
			for _, c := range hostileCases(s, other[vi]) {
				t.Run(c.name, func(t *testing.T) {
					streams++
					g := runtime.NumGoroutine()
					o := hostileReceive(dst, c.data, cfg)
					if o.in != nil { // reported below; gone before the next stream
						defer o.in.Destroy()
					}
					worst = max(worst, o.allocs)
					if strings.HasPrefix(c.name, "zstd-bomb=") {
						worstBomb = max(worstBomb, o.allocs)
					}
					hostileVerify(t, c, o, bound)
					if left := hostileSettle(g); left > 0 {
						t.Errorf("%d goroutine(s) left behind", left)
					}
					holdsNothing(t, dst)
				})
			}
		})
	}
	verdict := "all refused with typed errors"
	if t.Failed() {
		verdict = "NOT all refused as they must be"
	}
	t.Logf("hostile: %d variants, %d mutated streams, %s; most allocated by one Receive %d bytes "+
		"(zstd bombs %d), bound %d (clean stream %d); %v (corpus of %d recordings built in %v)", variants, streams, verdict,
		worst, worstBomb, bound, base, time.Since(start).Round(time.Millisecond), 2*len(main), hostileCorpus.built.Round(time.Millisecond))
}

// hostileVerify checks what Receive did with mutation c.
func hostileVerify(t *testing.T, c hostileCase, o hostileOutcome, bound uint64) {
	t.Helper()
	if o.panicked != nil {
		t.Fatalf("Receive panicked: %v", o.panicked)
	}
	var pe *migrate.PhaseError
	if !errors.As(o.err, &pe) {
		t.Fatalf("error %v (%T) is not a *PhaseError", o.err, o.err)
	}
	if o.in != nil || o.rep == nil || o.rep.Outcome != migrate.PhaseFailed {
		t.Errorf("failed Receive returned VM %v and report %v", o.in, o.rep)
	}
	for _, s := range c.all {
		if !errors.Is(o.err, s) {
			t.Errorf("error %v does not match %v", o.err, s)
		}
	}
	if len(c.oneOf) > 0 && !slices.ContainsFunc(c.oneOf, func(s error) bool { return errors.Is(o.err, s) }) {
		t.Errorf("error %v matches none of %v", o.err, c.oneOf)
	}
	if o.allocs > bound {
		t.Errorf("Receive allocated %d bytes, bound %d", o.allocs, bound)
	}
}

// hostileRuns reports whether variant v runs: every one normally; under
// -short, pre-copy compressed and encrypted and legacy uncompressed in
// the clear (both modes, both codecs, both kinds of sealing); under the
// race detector, which looks for what the connection's read-ahead
// goroutine and Receive share, the same in every variant, only the first
// of those.
func hostileRuns(v hostileVariant) bool {
	first := v.mode == migrate.PreCopy && v.level == checkpoint.LevelFastest && v.encrypted
	switch {
	case raceEnabled:
		return first
	case testing.Short():
		return first || v.mode == migrate.Legacy && v.level == checkpoint.LevelNone && !v.encrypted
	}
	return true
}

func hostileVariantName(v hostileVariant) string {
	return fmt.Sprintf("mode=%v,level=%v,encrypted=%v", v.mode, v.level, v.encrypted)
}
