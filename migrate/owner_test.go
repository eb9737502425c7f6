package migrate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The VM's owner keeps driving it while it migrates. A pause during
// pre-copy is the owner's to make, and the destination keeps it; a resume
// during the stun would let the VM write what never reaches the
// destination, so the migration fails and the VM runs on at the source.

func TestOwnerPausesDuringPreCopy(t *testing.T) {
	src, dst := smallPageHosts(t)
	w := &counterWorkload{pagesPerSec: 10, pages: 16}
	vm := counterVM(t, src, w)
	s, err := NewSim(SimConfig{}, src, dst)
	must(t, err)
	m, err := s.Start(vm, dst, Config{Link: slowLink})
	must(t, err)
	runTo(t, m, PhasePreCopy)
	must(t, vm.Pause())
	if _, err := m.Run(); err != nil {
		t.Fatal(err)
	}
	if m.VM().Host() != dst || m.VM().State() != vgpu.VMPaused {
		t.Fatalf("VM %v on %s, want paused at the destination as its owner left it", m.VM().State(), m.VM().Host().Name())
	}
	w.check(t, m.VM())
}

func TestOwnerResumesDuringStun(t *testing.T) {
	for _, p := range []Phase{PhaseDeviceSave, PhaseFinalRAM, PhaseDeviceState, PhaseResume} {
		t.Run("phase="+p.String(), func(t *testing.T) {
			src, dst := smallPageHosts(t)
			w := &counterWorkload{pagesPerSec: 10, pages: 16}
			vm := counterVM(t, src, w)
			must(t, vm.Pause())
			s, err := NewSim(SimConfig{}, src, dst)
			must(t, err)
			m, err := s.Start(vm, dst, Config{Link: slowLink})
			must(t, err)
			runTo(t, m, p)
			must(t, vm.Resume())
			if _, err := m.Run(); !errors.Is(err, ErrSource) {
				t.Fatalf("a VM resumed in %v: migration error %v, want ErrSource", p, err)
			}
			if vm.Host() != src || vm.State() != vgpu.VMRunning {
				t.Fatalf("VM %v on %s, want running at the source", vm.State(), vm.Host().Name())
			}
			checkNothingAt(t, dst)
			if _, err := s.Advance(500 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			w.check(t, vm)
		})
	}
}

func TestLiveOwnerPausesDuringPreCopy(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-o", "P40-1Q", 64*MiB, 16*MiB, tinyModel, 5)
	must(t, src.Advance(50*time.Millisecond))
	var paused []uint64
	pause := func(p Event) {
		if p.Kind == RoundEnded && p.Round == 0 {
			must(t, vm.Pause()) // Progress runs on Send's goroutine
			paused = regionDigests(t, vm)
		}
	}
	sc, dc := loopbackConns(t, 1)
	res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc), LiveConfig{Progress: pause}, ReceiveConfig{})
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
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{watch}, rws(dc), LiveConfig{Lock: &mu}, ReceiveConfig{Timeout: 5 * time.Second})
	if !watch.fired {
		t.Fatal("the destination never said it was ready")
	}
	if !errors.Is(res.srcErr, ErrSource) {
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

// readyWatcher calls onReady once the destination's ready message has been
// read through it.
type readyWatcher struct {
	net.Conn
	seen    []byte
	fired   bool
	onReady func()
}

func (c *readyWatcher) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.fired {
		return n, err
	}
	c.seen = append(c.seen, p[:n]...)
	for off := 0; off+5 <= len(c.seen); {
		end := off + 5 + int(binary.LittleEndian.Uint32(c.seen[off+1:]))
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

// A VM resumed and paused again between two of the migration's events, or
// written by its owner while paused, has changed since its final pages
// left: the migration fails with ErrSource rather than resume a stale copy.
func TestOwnerWritesDuringStun(t *testing.T) {
	phases := []Phase{PhaseFinalRAM, PhaseFinalFramebuffer, PhaseDeviceState, PhaseRestore, PhaseResume}
	for _, mode := range []Mode{PreCopy, Legacy} {
		for _, p := range phases {
			for _, how := range []string{"resume-pause", "owner-write"} {
				t.Run(fmt.Sprintf("mode=%v/phase=%v/how=%s", mode, p, how), func(t *testing.T) {
					src, dst := smallPageHosts(t)
					w := &counterWorkload{pagesPerSec: 1000, pages: 16}
					vm := counterVM(t, src, w)
					s, err := NewSim(SimConfig{}, src, dst)
					must(t, err)
					m, err := s.Start(vm, dst, Config{Policy: Policy{Mode: mode}, Link: slowLink})
					must(t, err)
					runTo(t, m, p)
					// The VM ran before the migration, and runs after it
					// fails; unless it failed while the owner had the VM
					// running, and the owner then paused it.
					want := vgpu.VMRunning
					if how == "resume-pause" {
						must(t, vm.Resume())
						if _, err := s.Advance(time.Millisecond); err != nil {
							t.Fatal(err)
						}
						if m.Done() {
							want = vgpu.VMPaused
						}
						must(t, vm.Pause())
					} else {
						for _, r := range []*memory.Region{vm.RAM(), vm.Framebuffers()[0]} {
							_, err := r.WriteAt([]byte("late"), r.Size()/2)
							must(t, err)
						}
					}
					if _, err := m.Run(); !errors.Is(err, ErrSource) {
						t.Fatalf("migration error %v, want ErrSource", err)
					}
					if vm.Host() != src || vm.State() != want {
						t.Fatalf("VM %v on %s, want %v at the source", vm.State(), vm.Host().Name(), want)
					}
					checkNothingAt(t, dst)
				})
			}
		}
	}
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
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{watch}, rws(dc), LiveConfig{Lock: &mu}, ReceiveConfig{Timeout: 5 * time.Second})
	if !watch.fired || !errors.Is(res.srcErr, ErrSource) || res.dstErr == nil {
		t.Fatalf("ready seen %v; source error %v, want ErrSource; destination error %v", watch.fired, res.srcErr, res.dstErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if vm.State() != vgpu.VMRunning || vm.Host() != src {
		t.Fatalf("source VM %v, want running", vm.State())
	}
	holdsNothing(t, dst)
}
