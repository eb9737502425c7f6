package live

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// stepClock is a Clock that moves step forward each time it is read, so
// that a live migration's rates and decisions do not depend on how fast
// the machine runs, and nothing sleeps.
type stepClock struct {
	step time.Duration
	n    atomic.Int64
}

func (c *stepClock) Now() time.Time {
	return time.Unix(0, 0).Add(time.Duration(c.n.Add(1)) * c.step)
}

// pipeConns returns k in-memory connection pairs.
func pipeConns(t *testing.T, k int) (src, dst []net.Conn) {
	t.Helper()
	for range k {
		a, b := net.Pipe()
		src, dst = append(src, a), append(dst, b)
	}
	t.Cleanup(func() {
		for _, c := range append(src, dst...) {
			c.Close()
		}
	})
	return src, dst
}

// branchVM is a paused inference VM with guest RAM and framebuffer in
// use, on the first of a new host pair.
func branchVM(t *testing.T) (*vgpu.VM, *vgpu.Host) {
	t.Helper()
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-b", "P40-1Q", 64*MiB, 8*MiB, tinyModel, 7)
	must(t, src.Advance(50*time.Millisecond))
	must(t, vm.Pause())
	return vm, dst
}

// TestLiveBranches runs the live driver over in-memory connections, on a
// clock that moves by itself, through every branch of the Core the
// simulator's tests take: each non-convergence policy, the round limit
// and the stun limit at switchover, in both modes.
func TestLiveBranches(t *testing.T) {
	// A target of 1 ns, which no stun meets: pre-copy never converges,
	// and each policy decides.
	for _, tc := range []struct {
		name     string
		policy   migrate.Policy
		err      error
		why      migrate.Reason
		throttle float64
	}{
		{name: "abort", policy: migrate.Policy{StunTarget: time.Nanosecond, OnNonConvergence: migrate.Abort}, err: migrate.ErrNotConverged},
		{name: "switch anyway", policy: migrate.Policy{StunTarget: time.Nanosecond, OnNonConvergence: migrate.SwitchAnyway}, why: migrate.DirtyRateTooHigh},
		{name: "throttle", policy: migrate.Policy{StunTarget: time.Nanosecond, Throttle: migrate.ThrottleSteps{Start: 0.5, Step: 0.25, Max: 0.9}},
			why: migrate.ThrottledToLimit, throttle: 0.9},
		{name: "round limit", policy: migrate.Policy{StunTarget: time.Nanosecond, MaxRounds: 1}, why: migrate.RoundLimit},
		{name: "stun limit at switchover", policy: migrate.Policy{StunTarget: time.Nanosecond, OnNonConvergence: migrate.SwitchAnyway, StunLimit: time.Nanosecond},
			err: migrate.ErrStunLimit},
		{name: "converged", policy: migrate.Policy{StunTarget: time.Hour}, why: migrate.Converged},
		{name: "legacy stun limit at switchover", policy: migrate.Policy{Mode: migrate.Legacy, StunTarget: time.Hour, StunLimit: time.Nanosecond},
			err: migrate.ErrStunLimit},
		{name: "legacy converged", policy: migrate.Policy{Mode: migrate.Legacy, StunTarget: time.Hour}, why: migrate.Converged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm, dst := branchVM(t)
			before := regionDigests(t, vm)
			sc, dc := pipeConns(t, 1)
			clock := &stepClock{step: time.Millisecond}
			res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc),
				SendConfig{Policy: tc.policy, Clock: clock}, ReceiveConfig{Clock: &stepClock{step: time.Millisecond}})
			if tc.err != nil {
				var pe *migrate.PhaseError
				if !errors.Is(res.srcErr, tc.err) || !errors.As(res.srcErr, &pe) || pe.Phase != migrate.PhasePreCopy {
					t.Fatalf("source: %v, want %v in pre-copy", res.srcErr, tc.err)
				}
				if res.dstErr == nil || vm.State() != vgpu.VMPaused || vm.Throttle() != 0 {
					t.Fatalf("destination %v; source VM %v, throttle %v", res.dstErr, vm.State(), vm.Throttle())
				}
				if got := regionDigests(t, vm); !equalDigests(got, before) {
					t.Fatal("the source VM changed")
				}
				holdsNothing(t, dst)
				return
			}
			if res.srcErr != nil || res.dstErr != nil {
				t.Fatalf("source %v, destination %v", res.srcErr, res.dstErr)
			}
			if res.srcRep.Switchover != tc.why || res.srcRep.MaxThrottle != tc.throttle {
				t.Fatalf("switchover %v, max throttle %v; want %v, %v", res.srcRep.Switchover, res.srcRep.MaxThrottle, tc.why, tc.throttle)
			}
			if res.in.Throttle() != 0 || res.in.State() != vgpu.VMPaused || !equalDigests(regionDigests(t, res.in), before) {
				t.Fatalf("destination VM %v, throttle %v", res.in.State(), res.in.Throttle())
			}
		})
	}
}

// TestLiveCancelEveryPhase cancels a live migration as it enters each
// phase. Before the acknowledgement it fails in that phase, the source VM
// as it was, the destination holding nothing (the commit has not gone
// out: the cancel is seen before each step). From the acknowledgement on
// the VM is the destination's: the migration completes and the source
// lets its copy go.
func TestLiveCancelEveryPhase(t *testing.T) {
	for _, at := range migrate.Phases()[:migrate.PhaseRelease] {
		if at == migrate.PhasePostCopy {
			continue // the live mode has no post-copy (yet)
		}
		t.Run(at.String(), func(t *testing.T) {
			vm, dst := branchVM(t)
			src := vm.Host()
			must(t, vm.Resume())
			sc, dc := pipeConns(t, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			progress := func(e migrate.Event) {
				if e.Phase == at {
					cancel()
				}
			}
			res := liveMigrate(ctx, vm, dst, rws(sc), rws(dc), SendConfig{Policy: migrate.Policy{MaxRounds: 2}, Clock: &stepClock{step: time.Millisecond}, Progress: progress}, ReceiveConfig{})
			if at == migrate.PhaseRelease {
				if res.srcErr != nil || res.dstErr != nil || len(src.VMs()) != 0 || res.in.State() != vgpu.VMRunning {
					t.Fatalf("canceled at the release: source %v, destination %v, %d VMs left at the source", res.srcErr, res.dstErr, len(src.VMs()))
				}
				return
			}
			var pe *migrate.PhaseError
			if !errors.As(res.srcErr, &pe) || pe.Phase != at || !errors.Is(res.srcErr, migrate.ErrCanceled) || errors.Is(res.srcErr, migrate.ErrInDoubt) {
				t.Fatalf("source: %v, want canceled in %v", res.srcErr, at)
			}
			if vm.State() != vgpu.VMRunning || res.dstErr == nil {
				t.Fatalf("source VM %v, destination %v", vm.State(), res.dstErr)
			}
			holdsNothing(t, dst)
		})
	}
}

func equalDigests(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
