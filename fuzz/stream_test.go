package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/migrate/live"
	"github.com/vgpusim/vgpusim/vgpu"
)

// FuzzMigrationStream's input is one flags byte and then everything a
// source sends on the one connection of a live migration: the offer,
// the hello, the checkpoint stream and the commit. The flags byte chooses
// the destination's encryption key, so that a recorded encrypted migration
// replays whole and its mutants reach the records behind the seal.
const (
	streamFlagEncrypted = 1 << 0 // the destination holds a key
	streamFlagOtherKey  = 1 << 1 // ... and it is not the one the seeds were sealed with
)

// streamKeys are the keys the flags byte chooses from; the seeds are
// sealed with the first.
var streamKeys = [2][]byte{
	bytes.Repeat([]byte{0x5c}, checkpoint.KeySize),
	bytes.Repeat([]byte{0xc5}, checkpoint.KeySize),
}

// streamBatchBytes makes batches of four 4 KiB pages, so that even a
// small VM's stream has several page records to mutate.
const streamBatchBytes = 16 << 10

// streamReceiveConfig is the destination's configuration for the flags
// byte: one digest worker, and limits that admit the seeds (a 64 KiB VM
// with one P40-1Q vGPU on 4 KiB framebuffer pages) but keep what any one
// input can make the destination allocate to a few hundred KiB.
func streamReceiveConfig(flags byte) live.ReceiveConfig {
	cfg := live.ReceiveConfig{
		MaxBatchBytes: 64 << 10,
		Limits: checkpoint.Limits{
			MaxRecordBytes:      128 << 10,
			MaxBatchBytes:       64 << 10,
			MaxWindowBytes:      256 << 10,
			MaxDeviceStateBytes: 64 << 10,
			MaxMetadataBytes:    16 << 10,
			MaxRegions:          8,
			MaxTotalBytes:       8 << 20,
		},
		DigestWorkers: 1,
		Timeout:       time.Second,
		Rand:          streamRand(0xd5),
	}
	if flags&streamFlagEncrypted != 0 {
		cfg.EncryptionKey = streamKeys[(flags&streamFlagOtherKey)>>1]
	}
	return cfg
}

// streamRand is a Rand that draws its byte, always. Both ends of every
// recording and every replay draw fixed nonces, and every destination is
// named "stream-dst", so that a recorded migration replays: the tags of a
// migration cover both nonces and the destination's accept, and with
// random nonces (the default) nothing recorded passes the handshake.
type streamRand byte

func (r streamRand) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// streamScript is a connection whose peer is a script: reads come from the
// bytes given, writes (the destination's answers) are dropped.
type streamScript struct{ r io.Reader }

func (c streamScript) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c streamScript) Write(p []byte) (int, error) { return len(p), nil }

// streamSentinels are the errors a destination's failure may wrap.
var streamSentinels = []error{migrate.ErrConnection, migrate.ErrStream, migrate.ErrIncompatible,
	migrate.ErrConfig, migrate.ErrDestination, migrate.ErrRefused, migrate.ErrAuthentication, migrate.ErrVMLost}

var streamHost seedSharedHost

// FuzzMigrationStream feeds bytes to Receive, through the public API, as the
// whole of an incoming migration. Whatever they are, Receive returns either
// the VM, running or paused on the host, a report and no error, or no VM, a
// failed report and a *PhaseError wrapping one of the package's sentinels;
// either way, once the VM (if any) is destroyed, the host holds nothing.
// The seeds are live migrations recorded when the target starts
// (streamVariants: each mode, compressed or not, encrypted or not), and,
// under testdata, the small ones of them as files.
func FuzzMigrationStream(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{streamFlagEncrypted})
	// A quick run replays the committed small recordings only, from
	// testdata.
	if !seedQuick() {
		for _, s := range streamSeeds(f) {
			f.Add(s.input)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		host := streamHost.get(t, func() (*vgpu.Host, error) { return seedStreamHost("stream-dst", 2) })
		var flags byte
		if len(data) > 0 {
			flags, data = data[0], data[1:]
		}
		streamCheckReceive(t, host, streamReceiveConfig(flags), data)
	})
}

// streamCheckReceive runs Receive on host over a connection that delivers
// sent, checks what it returned, leaves the host holding nothing, and
// returns Receive's error.
func streamCheckReceive(t *testing.T, host *vgpu.Host, cfg live.ReceiveConfig, sent []byte) error {
	t.Helper()
	conn := streamScript{bytes.NewReader(sent)}
	in, rep, err := live.Receive(context.Background(), host, []io.ReadWriter{conn}, cfg)
	if rep == nil {
		t.Fatalf("Receive returned no report (error %v)", err)
	}
	if err == nil {
		if in == nil || rep.Outcome != migrate.PhaseDone {
			t.Fatalf("Receive succeeded with VM %v and outcome %v", in, rep.Outcome)
		}
		if got, ok := host.VM(in.ID()); !ok || got != in {
			t.Fatalf("received VM %q is not the host's", in.ID())
		}
		if st := in.State(); st != vgpu.VMRunning && st != vgpu.VMPaused {
			t.Fatalf("received VM is %v, want running or paused", st)
		}
		seedMust(t, in.Destroy())
		seedHoldsNothing(t, host)
		return nil
	}
	var pe *migrate.PhaseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *migrate.PhaseError", err, err)
	}
	if in != nil || rep.Outcome != migrate.PhaseFailed || rep.FailedIn != pe.Phase || rep.Error == "" {
		t.Fatalf("failed Receive (%v) returned VM %v, outcome %v, failed in %v, error %q",
			err, in, rep.Outcome, rep.FailedIn, rep.Error)
	}
	typed := false
	for _, s := range streamSentinels {
		typed = typed || errors.Is(err, s)
	}
	if !typed {
		t.Fatalf("error %v wraps none of the package's sentinels", err)
	}
	seedHoldsNothing(t, host)
	return err
}

// streamCommittedMax bounds a committed corpus file.
const streamCommittedMax = 30 << 10

// streamKeyCases are the flags bytes a recording is replayed with besides
// its own, and how the destination must fail: for a recording made without
// encryption, then for one made with it.
var streamKeyCases = []struct {
	name      string
	flags     func(own byte) byte
	want      [2]error
	wantPhase [2]migrate.Phase
}{
	{"encryption mode flipped", func(own byte) byte { return own ^ streamFlagEncrypted },
		[2]error{migrate.ErrConfig, migrate.ErrConfig}, [2]migrate.Phase{migrate.PhaseSetup, migrate.PhaseSetup}},
	{"the other key", func(own byte) byte { return own | streamFlagEncrypted | streamFlagOtherKey },
		[2]error{migrate.ErrConfig, migrate.ErrAuthentication}, [2]migrate.Phase{migrate.PhaseSetup, migrate.PhaseSetup}},
}

// TestMigrationStreamSeeds checks FuzzMigrationStream's seeds: every
// recording, replayed to a fresh destination with the key it was sealed
// with, ends with the VM running. A small one, replayed with the
// encryption mode flipped or the other key, fails typed in the handshake:
// a mode the destination does not allow, or a hello whose tag is not the
// destination's key's; and its committed corpus file must hold what the
// recorder makes now (-update-seeds rewrites it). A quick run checks
// streamQuickVariants only.
func TestMigrationStreamSeeds(t *testing.T) {
	host, err := seedStreamHost("stream-dst", 3)
	seedMust(t, err)
	for _, s := range streamSeeds(t) {
		own, sent := s.input[0], s.input[1:]
		if err := streamCheckReceive(t, host, streamReceiveConfig(own), sent); err != nil {
			t.Fatalf("%v: replaying the recording: %v", s.v, err)
		}
		if !s.v.small {
			continue
		}
		enc := 0
		if s.v.encrypted {
			enc = 1
		}
		for _, c := range streamKeyCases {
			err := streamCheckReceive(t, host, streamReceiveConfig(c.flags(own)), sent)
			var pe *migrate.PhaseError
			if !errors.Is(err, c.want[enc]) || !errors.As(err, &pe) || pe.Phase != c.wantPhase[enc] {
				t.Errorf("%v, %s: error %v, want %v in %v", s.v, c.name, err, c.want[enc], c.wantPhase[enc])
			}
		}
		if body, _ := seedCorpusFile(s.input); len(body) > streamCommittedMax {
			t.Fatalf("%v: corpus file of %d bytes, more than %d", s.v, len(body), streamCommittedMax)
		}
		seedSyncCorpus(t, "FuzzMigrationStream", s.v.String(), s.input)
	}
}

// streamVariant is one way of migrating a seed VM.
type streamVariant struct {
	mode      migrate.Mode
	level     checkpoint.Level
	encrypted bool
	// small: the VM's memory is rewritten first so that its stream fits a
	// committed corpus file (streamShrink).
	small bool
}

func (v streamVariant) String() string {
	s := fmt.Sprintf("%v-%v", v.mode, v.level)
	if v.encrypted {
		s += "-encrypted"
	}
	if v.small {
		s += "-small"
	}
	return s
}

// streamVariants is each mode (post-copy's stream: the first, the list of
// the pages that follow, and the second), compressed and not, encrypted and not, of
// a VM as it starts and of one shrunk to a small stream.
var streamVariants = func() []streamVariant {
	var vs []streamVariant
	for _, small := range []bool{false, true} {
		for _, m := range []migrate.Mode{migrate.PreCopy, migrate.Legacy, migrate.PostCopy} {
			for _, l := range []checkpoint.Level{checkpoint.LevelFastest, checkpoint.LevelNone} {
				for _, enc := range []bool{false, true} {
					if small && m == migrate.PostCopy {
						// Its two streams do not fit a committed file:
						// it is recorded when the target starts.
						continue
					}
					vs = append(vs, streamVariant{m, l, enc, small})
				}
			}
		}
	}
	return vs
}()

// streamSeed is one recorded migration as a FuzzMigrationStream input.
type streamSeed struct {
	v     streamVariant
	input []byte // flags byte, then what the source sent
}

var streamRecorded struct {
	once  sync.Once
	seeds []streamSeed
	err   error
}

// streamQuickVariants are the variants a quick run records: both modes,
// both levels, with and without encryption, all small.
var streamQuickVariants = []streamVariant{
	{migrate.PreCopy, checkpoint.LevelFastest, false, true},
	{migrate.Legacy, checkpoint.LevelNone, true, true},
}

// streamSeeds returns every variant's recording (in a quick run, the
// streamQuickVariants'), made once per test binary.
func streamSeeds(t testing.TB) []streamSeed {
	t.Helper()
	streamRecorded.once.Do(func() {
		vs := streamVariants
		if seedQuick() {
			vs = streamQuickVariants
		}
		for _, v := range vs {
			sent, err := streamRecord(v)
			if err != nil {
				streamRecorded.err = fmt.Errorf("recording %v: %w", v, err)
				return
			}
			var flags byte
			if v.encrypted {
				flags = streamFlagEncrypted
			}
			streamRecorded.seeds = append(streamRecorded.seeds, streamSeed{v, append([]byte{flags}, sent...)})
		}
	})
	seedMust(t, streamRecorded.err)
	return streamRecorded.seeds
}

// streamRecord migrates a fresh seed VM (64 KiB of guest RAM, 16 KiB of it
// in use, one P40-1Q vGPU, no workload) with Send to Receive over an
// in-memory pipe, and returns every byte the destination read. With no
// workload nothing dirties memory while it is copied, so the bytes are the
// same on every run.
func streamRecord(v streamVariant) ([]byte, error) {
	src, err := seedStreamHost("stream-src", 1)
	if err != nil {
		return nil, err
	}
	dst, err := seedStreamHost("stream-dst", 2)
	if err != nil {
		return nil, err
	}
	vm, err := src.CreateVM(vgpu.VMSpec{ID: "stream-seed", Seed: 0x5eed, RAMBytes: 64 << 10,
		RAMFootprintBytes: 16 << 10, Profiles: []string{"P40-1Q"}})
	if err != nil {
		return nil, err
	}
	if err := vm.Start(); err != nil {
		return nil, err
	}
	if v.small {
		if err := streamShrink(vm); err != nil {
			return nil, err
		}
	}
	sc, dc := net.Pipe()
	defer sc.Close()
	defer dc.Close()
	var read bytes.Buffer
	tee := struct {
		io.Reader
		io.Writer
	}{io.TeeReader(dc, &read), dc}
	scfg := live.SendConfig{Policy: migrate.Policy{Mode: v.mode}, Engine: migrate.EngineConfig{Level: v.level, BatchBytes: streamBatchBytes}, StreamID: 7, DigestWorkers: 1, Timeout: 10 * time.Second, Rand: streamRand(0x5c)}
	rcfg := streamReceiveConfig(0)
	rcfg.Timeout = scfg.Timeout
	// A clock that stands still: the rounds' measured rates, which decide
	// when the source switches over, do not depend on how fast this
	// machine runs them (the race detector, a loaded CI), so the stream's
	// bytes do not either.
	scfg.Clock, rcfg.Clock = stillClock{}, stillClock{}
	if v.encrypted {
		scfg.EncryptionKey, rcfg.EncryptionKey = streamKeys[0], streamKeys[0]
	}
	var (
		in     *vgpu.VM
		dstErr error
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		in, _, dstErr = live.Receive(context.Background(), dst, []io.ReadWriter{tee}, rcfg)
	}()
	_, srcErr := live.Send(context.Background(), vm, []io.ReadWriter{sc}, scfg)
	<-done
	if srcErr != nil || dstErr != nil {
		return nil, fmt.Errorf("source: %v; destination: %v", srcErr, dstErr)
	}
	if in.State() != vgpu.VMRunning {
		return nil, fmt.Errorf("migrated VM is %v", in.State())
	}
	return read.Bytes(), nil
}

// stillClock is a live.Clock that stands still.
type stillClock struct{}

func (stillClock) Now() time.Time { return time.Unix(1_700_000_000, 0) }
