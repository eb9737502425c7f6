package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The owner's changes inside a live stun, each at a point the test picks:
// a resume undone by a pause before the source looks at the run state
// again, a write the digests carry but the pages do not, a write just
// before the destination hangs up. Each fails the migration at the source
// with ErrSource, the VM staying there as its owner left it; the
// destination, which sees only the stream, fails with what it found.
func TestLiveOwnerChangesInStun(t *testing.T) {
	type plan struct {
		at     migrate.Phase // the owner acts as the source enters it
		hangUp bool          // the source's read in that phase fails after the owner acts
	}
	for _, tc := range []struct {
		name    string
		plan    plan
		act     func(t *testing.T, vm *vgpu.VM)
		want    vgpu.VMState // the source VM afterwards
		dstWant error        // what the destination finds, if it says
	}{
		{name: "resume-pause/final-pages", plan: plan{at: migrate.PhaseFinalFramebuffer}, act: resumePause, want: vgpu.VMPaused},
		{name: "resume-pause/device-state", plan: plan{at: migrate.PhaseDeviceState}, act: resumePause, want: vgpu.VMPaused},
		{name: "resume-pause/resume", plan: plan{at: migrate.PhaseResume}, act: resumePause, want: vgpu.VMPaused},
		// Written after the final pages left and before the digests are
		// taken: the destination's digest of the region differs.
		{name: "write/before-digests", plan: plan{at: migrate.PhaseDeviceState}, act: ownerWrite, want: vgpu.VMRunning, dstWant: migrate.ErrStream},
		// Written while the source waits for "ready", when the
		// destination hangs up: the source names its own VM, not the
		// connection.
		{name: "write/destination-hangs-up", plan: plan{at: migrate.PhaseRestore, hangUp: true}, act: ownerWrite, want: vgpu.VMRunning},
		{name: "resume-pause/destination-hangs-up", plan: plan{at: migrate.PhaseRestore, hangUp: true}, act: resumePause, want: vgpu.VMPaused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := hostPair(t, memory.Sparse, 1)
			vm := inferenceVM(t, src, "vm-o", "P40-1Q", 64*MiB, 16*MiB, tinyModel, 5)
			must(t, src.Advance(50*time.Millisecond))
			var mu sync.Mutex
			sc, dc := loopbackConns(t, 1)
			hc := &hangUpConn{Conn: sc[0]}
			acted := false
			progress := func(e migrate.Event) {
				if e.Kind != migrate.PhaseStarted || e.Phase != tc.plan.at || acted {
					return
				}
				acted = true
				if tc.plan.hangUp {
					hc.arm(func() {
						mu.Lock()
						defer mu.Unlock()
						tc.act(t, vm)
					})
					return
				}
				mu.Lock()
				defer mu.Unlock()
				tc.act(t, vm)
			}
			res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{hc}, rws(dc), SendConfig{Lock: &mu, Progress: progress},
				ReceiveConfig{Timeout: 5 * time.Second})
			var pe *migrate.PhaseError
			if !acted || !errors.Is(res.srcErr, migrate.ErrSource) || !errors.As(res.srcErr, &pe) || pe.Phase != tc.plan.at {
				t.Fatalf("owner acted %v; source error %v, want ErrSource in %v", acted, res.srcErr, tc.plan.at)
			}
			if errors.Is(res.srcErr, migrate.ErrConnection) {
				t.Fatalf("source error %v blames the connection", res.srcErr)
			}
			if res.dstErr == nil || tc.dstWant != nil && !errors.Is(res.dstErr, tc.dstWant) {
				t.Fatalf("destination error %v, want %v", res.dstErr, tc.dstWant)
			}
			mu.Lock()
			defer mu.Unlock()
			if vm.State() != tc.want || vm.Host() != src || vm.Migrating() {
				t.Fatalf("source VM %v (migrating %v), want %v at the source", vm.State(), vm.Migrating(), tc.want)
			}
			holdsNothing(t, dst)
		})
	}
}

func resumePause(t *testing.T, vm *vgpu.VM) {
	must(t, vm.Resume())
	must(t, vm.Pause())
}

func ownerWrite(t *testing.T, vm *vgpu.VM) {
	_, err := vm.RAM().WriteAt([]byte("late"), 3*4096+100)
	must(t, err)
}

// hangUpConn is a source's connection whose next read, once armed, runs
// the owner's act and fails as if the destination had hung up.
type hangUpConn struct {
	net.Conn
	mu  sync.Mutex
	act func()
}

func (c *hangUpConn) arm(act func()) {
	c.mu.Lock()
	c.act = act
	c.mu.Unlock()
}

func (c *hangUpConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	act := c.act
	c.mu.Unlock()
	if act == nil {
		return c.Conn.Read(p)
	}
	act()
	c.Conn.Close()
	return 0, io.EOF
}

// An owner that writes its VM from 0 to 22.5 ms into the stun, from its
// own goroutine under the host's lock, while a Runner drives the host: a
// write between the source's pause and its commit fails the migration with
// ErrSource at the source, never ErrConnection; a write before the pause
// goes with the final pages, and one after the commit is too late to
// matter: the migration succeeds.
func TestLiveOwnerWritesIntoStun(t *testing.T) {
	const tries = 16
	counts := map[string]int{}
	for i := range tries {
		delay := time.Duration(i*i) * 100 * time.Microsecond
		t.Run(fmt.Sprintf("delay=%v", delay), func(t *testing.T) {
			fw := newFaultWorld(t, false)
			run := NewRunner(fw.src, 0)
			run.Start()
			defer func() { _ = run.Stop() }()
			var (
				wg      sync.WaitGroup
				wrote   bool
				early   bool // the source had not paused the VM yet: the write goes with the final pages
				tooLate bool // the source had committed the VM by then
			)
			progress := func(e migrate.Event) {
				if e.Kind != migrate.StunStarted {
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(delay)
					run.Lock()
					defer run.Unlock()
					// An owner's throttle is refused from the commit on:
					// the probe says which side of it the write falls.
					err := fw.vm.SetThrottle(fw.vm.Throttle())
					tooLate = errors.Is(err, vgpu.ErrMigrating) || fw.vm.State() == vgpu.VMDestroyed
					early = fw.vm.State() == vgpu.VMRunning
					if fw.vm.State() != vgpu.VMDestroyed {
						_, err := fw.vm.Framebuffers()[0].WriteAt([]byte("late"), 5*4096+100)
						wrote = err == nil
					}
				}()
			}
			sc, dc := loopbackConns(t, 1)
			res := liveMigrate(context.Background(), fw.vm, fw.dst, rws(sc), rws(dc), SendConfig{Lock: run, Progress: progress},
				ReceiveConfig{Timeout: 5 * time.Second})
			wg.Wait()
			must(t, run.Stop())
			switch {
			case early && res.srcErr != nil:
				t.Fatalf("written before the pause: source error %v", res.srcErr)
			case early:
				counts["before the pause: moved"]++
			case !tooLate && (!wrote || !errors.Is(res.srcErr, migrate.ErrSource) || errors.Is(res.srcErr, migrate.ErrConnection)):
				t.Fatalf("written (%v) before the commit: source error %v, want ErrSource", wrote, res.srcErr)
			case tooLate && res.srcErr != nil:
				t.Fatalf("written after the commit: source error %v", res.srcErr)
			case tooLate:
				counts["after the commit: moved"]++
			default:
				counts["in the stun: "+migrate.ErrSource.Error()]++
				if errors.Is(res.dstErr, migrate.ErrStream) {
					counts["in the stun: destination found a digest mismatch"]++
				}
				if fw.vm.State() != vgpu.VMRunning || fw.vm.Host() != fw.src {
					t.Fatalf("source VM %v, want running at the source", fw.vm.State())
				}
				holdsNothing(t, fw.dst)
			}
			checkSettled(t, fw.vm.ID(), fw.src, fw.dst)
		})
	}
	t.Logf("%d tries: %v", tries, counts)
}

// The owner's throttle is kept whatever the migration does with its own:
// the throttle a live migration cuts the workload by (the Throttle policy,
// on a target no stun meets) runs above the owner's and ends with it; the
// owner's, set during pre-copy or inside the stun, is what the destination
// applies on success and what the source keeps after a cancel.
func TestLiveOwnerThrottleKept(t *testing.T) {
	const owner = 0.05
	// underCut is pre-copy's round 3, the migration's cut of 0.5 in force.
	underCut := func(e migrate.Event) bool { return e.Kind == migrate.RoundStarted && e.Round == 3 }
	enters := func(p migrate.Phase) func(migrate.Event) bool {
		return func(e migrate.Event) bool { return e.Phase == p }
	}
	for _, tc := range []struct {
		name   string
		set    func(migrate.Event) bool // the owner sets its throttle at the first such event
		cancel migrate.Phase            // the migration is canceled as it enters it; 0: it succeeds
	}{
		{name: "pre-copy/success", set: underCut},
		{name: "pre-copy/canceled-in-pre-copy", set: underCut, cancel: migrate.PhaseSwitchover},
		{name: "pre-copy/canceled-in-stun", set: underCut, cancel: migrate.PhaseDeviceState},
		{name: "stun/success", set: enters(migrate.PhaseFinalRAM)},
		{name: "stun/canceled", set: enters(migrate.PhaseFinalRAM), cancel: migrate.PhaseRestore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm, dst := branchVM(t)
			src := vm.Host()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			set := false
			progress := func(e migrate.Event) {
				if !set && tc.set(e) {
					set = true
					must(t, vm.SetThrottle(owner))
					if vm.Throttle() != owner || vm.EffectiveThrottle() < 0.5 {
						t.Errorf("under the migration's cut: owner's throttle %v, effective %v", vm.Throttle(), vm.EffectiveThrottle())
					}
				}
				if tc.cancel != 0 && e.Phase == tc.cancel {
					cancel()
				}
			}
			policy := migrate.Policy{StunTarget: time.Nanosecond, Throttle: migrate.ThrottleSteps{Start: 0.5, Step: 0.25, Max: 0.9}}
			sc, dc := pipeConns(t, 1)
			res := liveMigrate(ctx, vm, dst, rws(sc), rws(dc), SendConfig{Policy: policy, Clock: &stepClock{step: time.Millisecond}, Progress: progress},
				ReceiveConfig{Clock: &stepClock{step: time.Millisecond}})
			moved, want := res.in, dst
			if tc.cancel != 0 {
				if !errors.Is(res.srcErr, migrate.ErrCanceled) {
					t.Fatalf("source error %v, want canceled", res.srcErr)
				}
				moved, want = vm, src
				holdsNothing(t, dst)
			} else if res.srcErr != nil || res.dstErr != nil {
				t.Fatalf("source %v, destination %v", res.srcErr, res.dstErr)
			}
			if !set || moved.Host() != want || moved.Throttle() != owner || moved.EffectiveThrottle() != owner || moved.Migrating() {
				t.Fatalf("owner set %v; VM on %s: throttle %v, effective %v (migrating %v); want its owner's %v on %s",
					set, moved.Host().Name(), moved.Throttle(), moved.EffectiveThrottle(), moved.Migrating(), owner, want.Name())
			}
		})
	}
}
