package live

import (
	"errors"
	"testing"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// What every cell of the wire matrix (wire_matrix_test.go) must end with.

// mitmCheck checks one cell's outcome.
func mitmCheck(t *testing.T, name string, act mitmAct, vm *vgpu.VM, src, dst *vgpu.Host, res liveResult) {
	t.Helper()
	srcState, in := vm.State(), res.in
	// The kit's rule first: never lost, never running twice. What follows
	// is stricter, as the matrix knows how each end must have ended.
	if err := vgpusimtest.CheckOneOwner([]*vgpu.Host{src, dst}, vm.ID()); err != nil {
		t.Fatalf("%v: source %v (%v), destination holding %v (%v)", err, srcState, res.srcErr, in, res.dstErr)
	}
	inDoubt := errors.Is(res.srcErr, migrate.ErrInDoubt)
	switch {
	case res.srcErr == nil:
		if srcState != vgpu.VMDestroyed || in == nil {
			t.Fatalf("Send succeeded, the source VM %v, the destination holding %v (%v)", srcState, in, res.dstErr)
		}
	case inDoubt:
		if srcState != vgpu.VMPaused || vm.Throttle() != mitmOwnerThrottle {
			t.Fatalf("in doubt, the source VM is %v at throttle %v; want paused at %v", srcState, vm.Throttle(), mitmOwnerThrottle)
		}
		// Held until resolved: its owner cannot run it beside the
		// destination's, nor destroy the only copy.
		if err := vm.Resume(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("in doubt, the source VM resumed by its owner: %v", err)
		}
		if err := vm.Destroy(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("in doubt, the source VM destroyed by its owner: %v", err)
		}
		must(t, vm.ResolveMigration(in != nil))
	default:
		if srcState != vgpu.VMRunning || vm.Throttle() != mitmOwnerThrottle || in != nil {
			t.Fatalf("Send failed (%v), the source VM %v at throttle %v, the destination holding %v; want it running at %v at the source only",
				res.srcErr, srcState, vm.Throttle(), in, mitmOwnerThrottle)
		}
	}
	if in != nil {
		// The destination holds the VM only as the source committed it.
		if in.State() != vgpu.VMRunning || in.Throttle() != mitmOwnerThrottle {
			t.Fatalf("the destination's VM is %v at throttle %v (%v); want running at %v", in.State(), in.Throttle(), res.dstErr, mitmOwnerThrottle)
		}
	} else {
		holdsNothing(t, dst)
	}
	for end, err := range map[string]error{"source": res.srcErr, "destination": res.dstErr} {
		var pe *migrate.PhaseError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("%s: %v (%T) is not a *PhaseError", end, err, err)
		}
		if err != nil && !wrapsSentinel(err) {
			t.Fatalf("%s: %v wraps none of migrate's sentinels", end, err)
		}
	}
	// The end that reads a tampered message says so; a message that never
	// came, or came too late, is the connection's.
	reader, readerErr := "destination", res.dstErr
	if !fromSource[name] {
		reader, readerErr = "source", res.srcErr
	}
	switch act {
	case mitmCorrupt, mitmForge, mitmReplay:
		want := []error{migrate.ErrAuthentication}
		if name == "stream" {
			want = append(want, migrate.ErrStream) // its seal or its check value
		}
		if name == "offer" || name == "challenge" {
			// A nonce changed on the way gives the ends other keys: the
			// destination finds out at the hello.
			readerErr = res.dstErr
		}
		if !wrapsAny(readerErr, want...) {
			t.Fatalf("the %s read a %s %v and says %v; want %v", reader, act, name, readerErr, want)
		}
	case mitmDrop, mitmDelay:
		if !errors.Is(res.srcErr, migrate.ErrConnection) && !errors.Is(res.dstErr, migrate.ErrConnection) {
			t.Fatalf("a %s %v: source %v, destination %v; want one ErrConnection", act, name, res.srcErr, res.dstErr)
		}
	}
	if in != nil {
		must(t, in.Destroy())
	}
}

func wrapsAny(err error, sentinels ...error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func wrapsSentinel(err error) bool {
	return wrapsAny(err, migrate.ErrAuthentication, migrate.ErrConnection, migrate.ErrStream, migrate.ErrRefused,
		migrate.ErrInDoubt, migrate.ErrConfig, migrate.ErrDestination, migrate.ErrIncompatible, migrate.ErrSource)
}
