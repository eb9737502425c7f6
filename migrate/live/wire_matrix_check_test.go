package live

import (
	"errors"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
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

// What every cell of the post-copy wire matrix
// (wire_matrix_postcopy_test.go) must end with.

// mitmPostHarmless reports the tampering a post-copy migration may go
// through unharmed: none but on landed, the last message, which the
// source reads once and nothing reads after, so that a copy of it, or a
// cut after it, changes nothing the source believes.
func mitmPostHarmless(name string, act mitmAct) bool {
	return act == mitmPass || name == "landed" && (act == mitmDuplicate || act == mitmCutSource || act == mitmCutDestination)
}

// mitmPostDestinationMayFinish reports the tampering after which the
// destination may hold every page, and so end well, while the source
// fails: tampering with what the source reads while it pushes or once it
// pushed (a fetch, landed, or a copy of resumed, read where a fetch
// belongs), which the destination does not see, and which may come after
// the last page went out. The destination cannot know whether its last
// word, landed, reached the source.
func mitmPostDestinationMayFinish(name string, act mitmAct) bool {
	return name == "fetch" || name == "landed" || name == "resumed" && act == mitmDuplicate
}

// mitmPostCheck checks one post-copy cell's outcome. It stops both
// Runners first: it reads and changes the VMs.
func mitmPostCheck(t *testing.T, name string, act mitmAct, pw *mitmPostWorld, res liveResult) {
	t.Helper()
	_ = pw.srcRun.Stop()
	_ = pw.dstRun.Stop()
	vm, in := pw.vm, res.in
	srcState := vm.State()
	if err := vgpusimtest.CheckOneOwner([]*vgpu.Host{pw.src, pw.dst}, vm.ID()); err != nil {
		t.Fatalf("%v: source %v (%v), destination holding %v (%v)", err, srcState, res.srcErr, in, res.dstErr)
	}
	for end, err := range map[string]error{"source": res.srcErr, "destination": res.dstErr} {
		var pe *migrate.PhaseError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("%s: %v (%T) is not a *PhaseError", end, err, err)
		}
		// ErrVMLost says what became of the VM, not why: the cause
		// is typed as well.
		if err != nil && !wrapsSentinel(err) {
			t.Fatalf("%s: %v wraps none of migrate's sentinels", end, err)
		}
	}
	t.Logf("source: %v; destination: %v", res.srcErr, res.dstErr)
	srcLost, dstLost := errors.Is(res.srcErr, migrate.ErrVMLost), errors.Is(res.dstErr, migrate.ErrVMLost)
	held := false // the source keeps its copy paused, held until resolved
	switch {
	case res.srcErr == nil && res.dstErr == nil:
		if !mitmPostHarmless(name, act) {
			t.Fatalf("a %v %s went unnoticed: both ends succeeded", act, name)
		}
		if srcState != vgpu.VMDestroyed || in == nil {
			t.Fatalf("both ends succeeded, the source VM %v, the destination holding %v", srcState, in)
		}
	case res.srcErr == nil:
		t.Fatalf("Send succeeded and let the VM go, Receive failed: %v", res.dstErr)
	case errors.Is(res.srcErr, migrate.ErrInDoubt):
		// The source cannot tell what the destination holds: its commit
		// went out and no acknowledgement came back, or every page went
		// out and no landed came back. The destination then holds
		// nothing, or, once every page landed, the whole VM.
		if in != nil && !mitmPostDestinationMayFinish(name, act) {
			t.Fatalf("in doubt at a %v %s, the destination holds the VM: source %v", act, name, res.srcErr)
		}
		held = true
	case srcLost && res.dstErr == nil:
		// Every page landed and the destination runs the VM; the source
		// failed once it had sent them all. ErrVMLost alone says the
		// destination's copy is gone, and whoever resolves the source's
		// as such (ResolveMigration(false), as ErrVMLost's documentation
		// has it) runs a second copy: the source can only be in doubt.
		if !mitmPostDestinationMayFinish(name, act) {
			t.Fatalf("the destination ended well before the source's post-copy did, at a %v %s: source %v", act, name, res.srcErr)
		}
		if in == nil {
			t.Fatalf("Receive succeeded with no VM; source %v", res.srcErr)
		}
		t.Errorf("the destination runs the VM whole, and the source says it is lost, not in doubt (ErrInDoubt): %v", res.srcErr)
		held = true
	case srcLost && dstLost:
		held = true
	case srcLost || dstLost:
		t.Fatalf("one end lost the VM in post-copy, the other did not: source %v, destination %v", res.srcErr, res.dstErr)
	default:
		// Failed before the commit: the VM is the source's as it was.
		if srcState != vgpu.VMRunning || vm.Migrating() || vm.Throttle() != mitmOwnerThrottle || in != nil {
			t.Fatalf("Send failed (%v), the source VM %v (held %v) at throttle %v, the destination holding %v; want it running at %v at the source only",
				res.srcErr, srcState, vm.Migrating(), vm.Throttle(), in, mitmOwnerThrottle)
		}
	}
	if held {
		if srcState != vgpu.VMPaused || !vm.Migrating() || vm.Throttle() != mitmOwnerThrottle {
			t.Fatalf("source %v: its VM is %v (held %v) at throttle %v; want paused and held at %v", res.srcErr, srcState, vm.Migrating(), vm.Throttle(), mitmOwnerThrottle)
		}
		if err := vm.Resume(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("the held source VM resumed by its owner: %v", err)
		}
		if err := vm.Destroy(); !errors.Is(err, vgpu.ErrMigrating) {
			t.Fatalf("the held source VM destroyed by its owner: %v", err)
		}
	}
	if in != nil {
		// The destination holds the VM only whole, and running as the
		// source committed it.
		if in.State() != vgpu.VMRunning || in.Throttle() != mitmOwnerThrottle {
			t.Fatalf("the destination's VM is %v at throttle %v (%v); want running at %v", in.State(), in.Throttle(), res.dstErr, mitmOwnerThrottle)
		}
		for i, reg := range append([]*memory.Region{in.RAM()}, in.Framebuffers()...) {
			if n := reg.AbsentPages(); n != 0 {
				t.Fatalf("the destination's VM runs with %d pages of region %d absent (%v)", n, i, res.dstErr)
			}
		}
		if pw.dstW == nil {
			t.Fatalf("the destination holds the VM, and never handed it over (OnResume)")
		}
		pw.dstW.Check(t, in)
	} else {
		holdsNothing(t, pw.dst)
	}
	// The end that reads a tampered message says so; one that is lost
	// or late is the connection's, unless the next message, read in its
	// place, says so first.
	reader, readerErr := "destination", res.dstErr
	if !fromSource[name] {
		reader, readerErr = "source", res.srcErr
	}
	tampered := []error{migrate.ErrAuthentication}
	if name == "postcopy-stream" {
		tampered = append(tampered, migrate.ErrStream) // its seal, or its place in the stream
	}
	connection := errors.Is(res.srcErr, migrate.ErrConnection) || errors.Is(res.dstErr, migrate.ErrConnection)
	switch act {
	case mitmCorrupt, mitmForge, mitmReplay:
		if !wrapsAny(readerErr, tampered...) {
			t.Fatalf("the %s read a %v %s and says %v; want %v", reader, act, name, readerErr, tampered)
		}
	case mitmDuplicate:
		// A control message's tag covers every message before it, and
		// a record's seal its place: the copy, read next, fails either
		// as out of its place or as not what the transcript expects.
		if !mitmPostHarmless(name, act) && !wrapsAny(readerErr, migrate.ErrAuthentication, migrate.ErrStream) {
			t.Fatalf("the %s read a %s twice and says %v; want ErrAuthentication or ErrStream", reader, name, readerErr)
		}
	case mitmDrop:
		if !connection && !wrapsAny(readerErr, migrate.ErrAuthentication, migrate.ErrStream) {
			t.Fatalf("a dropped %s: source %v, destination %v; want one ErrConnection, or the %s's ErrAuthentication or ErrStream", name, res.srcErr, res.dstErr, reader)
		}
	case mitmDelay:
		if !connection {
			t.Fatalf("a %s held past the timeout: source %v, destination %v; want one ErrConnection", name, res.srcErr, res.dstErr)
		}
	}
	if held {
		must(t, vm.ResolveMigration(in != nil))
	}
	if in != nil {
		must(t, in.Destroy())
	}
}
