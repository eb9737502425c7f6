package live

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

func TestLiveOwnerPausesDuringPreCopy(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-o", "P40-1Q", 64*MiB, 16*MiB, tinyModel, 5)
	must(t, src.Advance(50*time.Millisecond))
	var paused []uint64
	pause := func(p migrate.Event) {
		if p.Kind == migrate.RoundEnded && p.Round == 0 {
			must(t, vm.Pause()) // Progress runs on Send's goroutine
			paused = regionDigests(t, vm)
		}
	}
	sc, dc := loopbackConns(t, 1)
	res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc), SendConfig{Progress: pause}, ReceiveConfig{})
	if res.srcErr != nil || res.dstErr != nil {
		t.Fatalf("source: %v; destination: %v", res.srcErr, res.dstErr)
	}
	if res.in.State() != vgpu.VMPaused {
		t.Fatalf("destination VM is %v, want paused as its owner left it", res.in.State())
	}
	if got := regionDigests(t, res.in); !slices.Equal(got, paused) {
		t.Fatalf("destination digests %x, the source's when paused %x", got, paused)
	}
}
func TestLiveOwnerResumesDuringStun(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-o", "P40-1Q", 64*MiB, 16*MiB, tinyModel, 5)
	must(t, vm.Pause())
	var mu sync.Mutex
	sc, dc := loopbackConns(t, 1)
	// The source resumes the VM as the destination's "ready" arrives: the
	// stream has gone, the commit not yet.
	watch := &readyWatcher{Conn: sc[0], onReady: func() {
		mu.Lock()
		defer mu.Unlock()
		must(t, vm.Resume())
	}}
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{watch}, rws(dc), SendConfig{Lock: &mu}, ReceiveConfig{Timeout: 5 * time.Second})
	if !watch.fired {
		t.Fatal("the destination never said it was ready")
	}
	if !errors.Is(res.srcErr, migrate.ErrSource) {
		t.Fatalf("source error %v, want ErrSource", res.srcErr)
	}
	if res.dstErr == nil {
		t.Fatal("the destination kept a VM the source never committed")
	}
	mu.Lock()
	defer mu.Unlock()
	if vm.State() != vgpu.VMRunning || vm.Host() != src {
		t.Fatalf("source VM %v, want running", vm.State())
	}
	holdsNothing(t, dst)
}

// The destination's copy, restored and waiting for the commit, is held:
// its host's owner can neither resume it (it would run beside the
// source's) nor migrate it on; after the commit it is the owner's.
func TestLiveDestinationCopyHeld(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-h", "P40-1Q", 64*MiB, 16*MiB, tinyModel, 5)
	var dstMu sync.Mutex
	sc, dc := loopbackConns(t, 1)
	var resumeErr, sourceErr error
	watch := &readyWatcher{Conn: sc[0], onReady: func() {
		dstMu.Lock()
		defer dstMu.Unlock()
		copyAt, ok := dst.VM("vm-h")
		if !ok {
			resumeErr = errors.New("no copy at the destination")
			return
		}
		resumeErr = copyAt.Resume()
		_, sourceErr = migrate.NewSource(copyAt)
	}}
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{watch}, rws(dc), SendConfig{}, ReceiveConfig{Lock: &dstMu, Timeout: 5 * time.Second})
	if !watch.fired || res.srcErr != nil || res.dstErr != nil {
		t.Fatalf("ready seen %v; source %v; destination %v", watch.fired, res.srcErr, res.dstErr)
	}
	if !errors.Is(resumeErr, vgpu.ErrMigrating) || !errors.Is(sourceErr, migrate.ErrMigrating) {
		t.Fatalf("before the commit: resume %v, a migration of the copy %v; want both refused as migrating", resumeErr, sourceErr)
	}
	if res.in.State() != vgpu.VMRunning || res.in.Migrating() {
		t.Fatalf("after the commit the copy is %v, migrating %v; want running and the owner's", res.in.State(), res.in.Migrating())
	}
	must(t, res.in.Pause())
}

// readyWatcher calls onReady once the destination's ready message has been
// read through it.
type readyWatcher struct {
	net.Conn
	seen    []byte
	fired   bool
	onReady func()
}

func TestLiveOwnerWritesDuringStun(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-o", "P40-1Q", 64*MiB, 16*MiB, tinyModel, 5)
	var mu sync.Mutex
	sc, dc := loopbackConns(t, 1)
	// The stream has gone, the commit not yet: the owner writes the paused
	// VM's framebuffer.
	watch := &readyWatcher{Conn: sc[0], onReady: func() {
		mu.Lock()
		defer mu.Unlock()
		_, err := vm.Framebuffers()[0].WriteAt([]byte("late"), 4096)
		must(t, err)
	}}
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{watch}, rws(dc), SendConfig{Lock: &mu}, ReceiveConfig{Timeout: 5 * time.Second})
	if !watch.fired || !errors.Is(res.srcErr, migrate.ErrSource) || res.dstErr == nil {
		t.Fatalf("ready seen %v; source error %v, want ErrSource; destination error %v", watch.fired, res.srcErr, res.dstErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if vm.State() != vgpu.VMRunning || vm.Host() != src {
		t.Fatalf("source VM %v, want running", vm.State())
	}
	holdsNothing(t, dst)
}

func (c *readyWatcher) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.fired {
		return n, err
	}
	c.seen = append(c.seen, p[:n]...)
	for off := 0; off+5 <= len(c.seen); {
		end := off + 5 + int(binary.LittleEndian.Uint32(c.seen[off+1:]))
		if msgType(c.seen[off]) != msgChallenge {
			end += tagBytes // every message after the challenge is tagged
		}
		if end > len(c.seen) {
			break
		}
		if msgType(c.seen[off]) == msgReady {
			c.fired = true
			c.onReady()
			break
		}
		off = end
	}
	return n, err
}
