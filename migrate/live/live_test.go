package live

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// A running VM moves over loopback TCP, its workload writing all along, on
// one and on several connections, with every codec, adaptive too, with
// and without encryption, with a destination of one worker and one batch
// in flight and of several: the destination ends with the VM running and regions whose
// digests equal the source's at the switchover, and the source with
// nothing.
func TestLiveMigrateLoopback(t *testing.T) {
	key := bytes.Repeat([]byte{7}, checkpoint.KeySize)
	for _, tc := range []struct {
		name    string
		conns   int
		workers int
		level   checkpoint.Level
		key     []byte
		mode    migrate.Mode
		auto    bool
		recv    ReceiveConfig
		filters migrate.Filtering
	}{
		{"one connection", 1, 1, checkpoint.LevelFastest, nil, migrate.PreCopy, false, ReceiveConfig{}, migrate.Filtering{}},
		{"three connections, two workers", 3, 2, checkpoint.LevelFastest, nil, migrate.PreCopy, false, ReceiveConfig{Workers: 3}, migrate.Filtering{}},
		{"uncompressed, encrypted", 2, 2, checkpoint.LevelNone, key, migrate.PreCopy, false, ReceiveConfig{}, migrate.Filtering{}},
		{"s2, encrypted, one batch in flight", 2, 2, checkpoint.LevelS2, key, migrate.PreCopy, false, ReceiveConfig{Workers: 1, InFlight: 1}, migrate.Filtering{}},
		{"adaptive, three connections, encrypted", 3, 2, checkpoint.LevelFastest, key, migrate.PreCopy, true, ReceiveConfig{Workers: 2}, migrate.Filtering{}},
		{"legacy", 1, 2, checkpoint.LevelFastest, nil, migrate.Legacy, false, ReceiveConfig{}, migrate.Filtering{}},
		{"shuffled and delta pages, three connections, encrypted", 3, 2, checkpoint.LevelFastest, key, migrate.PreCopy, false, ReceiveConfig{Workers: 2},
			migrate.Filtering{Shuffle: true, DeltaCacheBytes: 64 * MiB}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := hostPair(t, memory.Sparse, 1)
			vm := inferenceVM(t, src, "vm-live", "P40-1Q", 256*MiB, 64*MiB, tinyModel, 5)
			run := NewRunner(src, 0)
			run.Start()
			defer run.Stop()
			sc, dc := loopbackConns(t, tc.conns)
			var kinds []migrate.EventKind
			res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc),
				SendConfig{Policy: migrate.Policy{Mode: tc.mode}, Engine: migrate.EngineConfig{Workers: tc.workers, Level: tc.level}, AdaptiveCodec: tc.auto,
					Filtering: tc.filters, EncryptionKey: tc.key, Lock: run, Progress: func(p migrate.Event) { kinds = append(kinds, p.Kind) }},
				withKey(tc.recv, tc.key))
			if res.srcErr != nil || res.dstErr != nil {
				t.Fatalf("source: %v; destination: %v", res.srcErr, res.dstErr)
			}
			run.Lock()
			st := vm.State()
			run.Unlock()
			if st != vgpu.VMDestroyed {
				t.Fatalf("source VM is %v after the migration, want destroyed", st)
			}
			if res.in.State() != vgpu.VMRunning {
				t.Fatalf("destination VM is %v, want running", res.in.State())
			}
			if !slices.Equal(res.srcRep.RegionDigests, res.dstRep.RegionDigests) || len(res.srcRep.RegionDigests) != 2 {
				t.Fatalf("digests: source %v, destination %v", res.srcRep.RegionDigests, res.dstRep.RegionDigests)
			}
			r := res.srcRep
			if r.Outcome != migrate.PhaseDone || !r.Live || len(r.Rounds) == 0 || r.Stun <= 0 || r.Stun > r.Total || r.Destination != "dst" {
				t.Fatalf("report: %v", r)
			}
			if tc.filters.DeltaCacheBytes > 0 && r.PreCopy.DeltaPages+r.Final.RAM.DeltaPages == 0 {
				t.Fatalf("no delta page in %d rounds: %v", len(r.Rounds), r)
			}
			if kinds[0] != migrate.PhaseStarted || kinds[len(kinds)-1] != migrate.Done || !slices.Contains(kinds, migrate.SwitchedOver) || !slices.Contains(kinds, migrate.RoundEnded) {
				t.Fatalf("progress kinds %v", kinds)
			}
		})
	}
}

// A paused VM moves paused, and its memory arrives byte for byte.
func TestLiveMigratePausedVMExact(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-paused", "P40-2Q", 128*MiB, 32*MiB, tinyModel, 9)
	must(t, src.Advance(200*time.Millisecond))
	must(t, vm.Pause())
	before := regionDigests(t, vm)
	sc, dc := loopbackConns(t, 1)
	res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc), SendConfig{}, ReceiveConfig{})
	if res.srcErr != nil || res.dstErr != nil {
		t.Fatalf("source: %v; destination: %v", res.srcErr, res.dstErr)
	}
	if res.in.State() != vgpu.VMPaused {
		t.Fatalf("destination VM is %v, want paused as it was", res.in.State())
	}
	if got := regionDigests(t, res.in); !slices.Equal(got, before) {
		t.Fatalf("destination digests %x, source's before %x", got, before)
	}
}

// The destination refuses what it cannot or may not take, before any
// memory moves; the source keeps its VM running and the destination holds
// nothing.
func TestLiveRefusals(t *testing.T) {
	key := bytes.Repeat([]byte{1}, checkpoint.KeySize)
	for _, tc := range []struct {
		name     string
		profile  string
		scfg     SendConfig
		rcfg     ReceiveConfig
		dstConns int
		want     error
	}{
		{"no room", "P40-24Q", SendConfig{}, ReceiveConfig{}, 1, migrate.ErrIncompatible},
		{"destination requires encryption", "P40-1Q", SendConfig{}, ReceiveConfig{EncryptionKey: key}, 1, migrate.ErrConfig},
		{"destination has no key", "P40-1Q", SendConfig{EncryptionKey: key}, ReceiveConfig{}, 1, migrate.ErrConfig},
		{"batches over the destination's limit", "P40-1Q", SendConfig{Engine: migrate.EngineConfig{BatchBytes: 8 << 20}}, ReceiveConfig{MaxBatchBytes: 4 << 20}, 1, migrate.ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := hostPair(t, memory.Synthetic, 1)
			if tc.profile == "P40-24Q" {
				inferenceVM(t, dst, "squatter", "P40-12Q", 64*MiB, 16*MiB, tinyModel, 1)
			}
			vm := inferenceVM(t, src, "vm-r", tc.profile, 64*MiB, 16*MiB, tinyModel, 2)
			sc, dc := loopbackConns(t, 1)
			before := len(dst.VMs())
			res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc), tc.scfg, tc.rcfg)
			if !errors.Is(res.srcErr, migrate.ErrRefused) || !errors.Is(res.srcErr, tc.want) {
				t.Fatalf("source error %v, want ErrRefused and %v", res.srcErr, tc.want)
			}
			var pe *migrate.PhaseError
			if !errors.As(res.srcErr, &pe) || pe.Phase != migrate.PhaseSetup {
				t.Fatalf("source error %v, want a *PhaseError in setup", res.srcErr)
			}
			if !errors.Is(res.dstErr, tc.want) {
				t.Fatalf("destination error %v, want %v", res.dstErr, tc.want)
			}
			if vm.State() != vgpu.VMRunning || len(dst.VMs()) != before {
				t.Fatalf("after a refusal: source %v, destination holds %d VMs (had %d)", vm.State(), len(dst.VMs()), before)
			}
		})
	}
}

// A destination refuses a newer major version of the live protocol, and a
// peer that is not a live migration at all.
func TestLiveVersionAndMagic(t *testing.T) {
	for _, tc := range []struct {
		name     string
		preamble []byte
		want     error
	}{
		{"newer major version", func() []byte {
			b := []byte(liveMagic + "\x00\x00\x00\x00")
			binary.LittleEndian.PutUint16(b[8:], ProtocolMajor+1)
			return b
		}(), migrate.ErrIncompatible},
		{"not a live migration", []byte("GET / HTTP/1.1\r\n"), migrate.ErrStream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dst := hostPair(t, memory.Synthetic, 1)
			sc, dc := loopbackConns(t, 1)
			go func() { _, _ = sc[0].Write(tc.preamble) }()
			_, rep, err := Receive(context.Background(), dst, rws(dc), ReceiveConfig{Timeout: 5 * time.Second})
			if !errors.Is(err, tc.want) || rep.Outcome != migrate.PhaseFailed {
				t.Fatalf("Receive: %v (outcome %v), want %v", err, rep.Outcome, tc.want)
			}
			holdsNothing(t, dst)
		})
	}
}

// Canceling the source's context fails the migration with ErrCanceled and
// leaves the VM running at the source; the destination gives up too.
func TestLiveCancel(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-c", "P40-1Q", 256*MiB, 64*MiB, tinyModel, 3)
	sc, dc := loopbackConns(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	res := liveMigrate(ctx, vm, dst, rws(sc), rws(dc), SendConfig{
		Progress: func(p migrate.Event) {
			if p.Kind == migrate.RoundStarted {
				cancel()
			}
		}}, ReceiveConfig{Timeout: 5 * time.Second})
	if !errors.Is(res.srcErr, migrate.ErrCanceled) {
		t.Fatalf("source: %v, want ErrCanceled", res.srcErr)
	}
	if res.dstErr == nil || vm.State() != vgpu.VMRunning || vm.RAM().DirtyLogging() {
		t.Fatalf("destination: %v; source VM %v, dirty logging %v", res.dstErr, vm.State(), vm.RAM().DirtyLogging())
	}
	holdsNothing(t, dst)
}

// A logger receives the progress as structured records.
func TestLiveLogs(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-l", "P40-1Q", 128*MiB, 32*MiB, tinyModel, 4)
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sc, dc := loopbackConns(t, 1)
	res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc), SendConfig{Logger: lg}, ReceiveConfig{Logger: lg})
	if res.srcErr != nil || res.dstErr != nil {
		t.Fatalf("source: %v; destination: %v", res.srcErr, res.dstErr)
	}
	for _, want := range []string{"migrate: round ended", "migrate: switched over", "migrate: done", "vm=vm-l", "expected_stun="} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// The Runner advances its host by the wall time that passes, and stops.
func TestRunnerAdvancesHost(t *testing.T) {
	src, _ := hostPair(t, memory.Synthetic, 1)
	before := src.Now()
	r := NewRunner(src, time.Millisecond)
	r.Start()
	time.Sleep(30 * time.Millisecond)
	must(t, r.Stop())
	if d := src.Now() - before; d < 10*time.Millisecond {
		t.Fatalf("host advanced %v in 30 ms of wall time", d)
	}
	at := src.Now()
	time.Sleep(5 * time.Millisecond)
	if src.Now() != at {
		t.Fatal("host advanced after Stop")
	}
}

// withKey is c with key as its EncryptionKey.
func withKey(c ReceiveConfig, key []byte) ReceiveConfig {
	c.EncryptionKey = key
	return c
}
