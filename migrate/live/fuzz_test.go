package live

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the FuzzReceive seed corpus from live migrations")

// scriptConn is a connection whose peer is a script: reads come from the
// bytes given, writes are dropped. Receive reads a whole migration from it
// as if a source sent it, whatever the answers.
type scriptConn struct{ r io.Reader }

func (c scriptConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c scriptConn) Write(p []byte) (int, error) { return len(p), nil }

// fuzzHost is the destination every FuzzReceive input goes to: a host is
// costly to build, and one that holds nothing after each input, as it
// must, is as good as new.
var fuzzHost struct {
	once sync.Once
	h    *vgpu.Host
	err  error
}

// FuzzReceive feeds bytes to Receive as everything a source sends: the
// offer, the hello, the checkpoint stream and the commit. Whatever they
// are, Receive returns: the VM and no error, or a *PhaseError that names
// what failed, a report, and no VM — the host holds nothing of it. The
// seeds are two whole migrations recorded over TCP when the target starts
// (as files they would be 700 KB each: an untouched P40-1Q framebuffer
// still holds 256 KiB of vGPU context), and, under testdata/fuzz, the
// first bytes of one (writeFuzzSeeds).
func FuzzReceive(f *testing.F) {
	f.Add([]byte(nil))
	f.Add([]byte(liveMagic))
	for _, m := range seedMigrations {
		f.Add(recordMigration(f, m.mode, m.level))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzHost.once.Do(func() {
			fuzzHost.h, fuzzHost.err = vgpu.NewHost(vgpu.HostConfig{Name: "fuzz", GPUs: 1, Memory: memory.Sparse, Seed: 3, RAMBytes: 4 * GiB})
		})
		must(t, fuzzHost.err)
		host := fuzzHost.h
		// The limits keep one input's memory small; Receive's defaults
		// admit 16 MiB batches.
		_, cfg := replayable(SendConfig{}, ReceiveConfig{Timeout: time.Second, MaxBatchBytes: 1 << 20, DigestWorkers: 1})
		in, rep, err := Receive(context.Background(), host, []io.ReadWriter{scriptConn{bytes.NewReader(data)}}, cfg)
		if err == nil {
			if in == nil || rep == nil {
				t.Fatalf("Receive succeeded with VM %v and report %v", in, rep)
			}
			must(t, in.Destroy())
			holdsNothing(t, host)
			return
		}
		var pe *migrate.PhaseError
		if !errors.As(err, &pe) {
			t.Fatalf("error %v (%T) is not a *PhaseError", err, err)
		}
		if in != nil || rep == nil || rep.Outcome != migrate.PhaseFailed {
			t.Fatalf("failed Receive returned VM %v, report %v", in, rep)
		}
		typed := false
		for _, s := range []error{migrate.ErrConnection, migrate.ErrStream, migrate.ErrIncompatible, migrate.ErrConfig, migrate.ErrDestination, migrate.ErrRefused, migrate.ErrAuthentication, migrate.ErrVMLost} {
			typed = typed || errors.Is(err, s)
		}
		if !typed {
			t.Fatalf("error %v matches none of the package's sentinels", err)
		}
		holdsNothing(t, host)
	})
}

// seedMigrations are the migrations FuzzReceive starts from.
var seedMigrations = []struct {
	name  string
	mode  migrate.Mode
	level checkpoint.Level
}{{"precopy-zstd", migrate.PreCopy, checkpoint.LevelFastest}, {"legacy-none", migrate.Legacy, checkpoint.LevelNone},
	{"postcopy-zstd", migrate.PostCopy, checkpoint.LevelFastest}}

// seedPrefixBytes is how much of a recorded migration a committed seed
// keeps: the preamble, the hello, the stream's header and metadata and its
// first records.
const seedPrefixBytes = 4 << 10

// TestRecordedMigrationReplays checks that FuzzReceive's seeds are whole
// migrations: Receive, fed what a source sent, ends with the VM running.
// With -update-seeds it also rewrites the committed seeds.
func TestRecordedMigrationReplays(t *testing.T) {
	for _, m := range seedMigrations {
		data := recordMigration(t, m.mode, m.level)
		if *updateSeeds {
			writeFuzzSeed(t, m.name, data[:min(len(data), seedPrefixBytes)])
		}
		_, dst := hostPair(t, memory.Sparse, 1)
		_, rcfg := replayable(SendConfig{}, ReceiveConfig{})
		in, _, err := Receive(context.Background(), dst, []io.ReadWriter{scriptConn{bytes.NewReader(data)}}, rcfg)
		if err != nil {
			t.Fatalf("%s: replaying a recorded migration: %v", m.name, err)
		}
		if in.State() != vgpu.VMRunning {
			t.Fatalf("%s: VM is %v, want running", m.name, in.State())
		}
	}
}

// recordMigration returns what a source sends in a small live migration
// over TCP: a 64 KiB VM with a P40-1Q vGPU.
func recordMigration(t testing.TB, mode migrate.Mode, level checkpoint.Level) []byte {
	t.Helper()
	scfg, rcfg := replayable(SendConfig{Policy: migrate.Policy{Mode: mode}, Engine: migrate.EngineConfig{Level: level}}, ReceiveConfig{})
	return recordSent(t, "seed", scfg, rcfg)
}

// writeFuzzSeed writes data as FuzzReceive seed name.
func writeFuzzSeed(t *testing.T, name string, data []byte) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReceive")
	must(t, os.MkdirAll(dir, 0o755))
	seed := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
	must(t, os.WriteFile(filepath.Join(dir, name), []byte(seed), 0o644))
}
