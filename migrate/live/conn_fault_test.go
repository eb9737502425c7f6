package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// liveFaultCase is a connection broken at a byte offset of one direction.
type liveFaultCase struct {
	toDst bool  // the source's writes break; otherwise the destination's
	at    int64 // bytes that go through before the fault
	stall bool  // the connection goes silent instead of closing
}

func (c liveFaultCase) String() string {
	dir, how := "to destination", "closed"
	if !c.toDst {
		dir = "to source"
	}
	if c.stall {
		how = "stalled"
	}
	return fmt.Sprintf("%s at byte %d %s", how, c.at, dir)
}

// runLiveFault migrates a VM whose memory does not change (its host is not
// advanced) over a connection broken as c says, and checks both ends: the
// VM is at exactly one of them, running; or, in doubt, paused at the source
// with nothing lost. It returns the bytes each direction carried.
func runLiveFault(t *testing.T, c liveFaultCase, clean bool) (toDst, toSrc int64) {
	t.Helper()
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-f", "P40-1Q", 64*MiB, 16*MiB, tinyModel, 11)
	must(t, src.Advance(50*time.Millisecond))
	before := regionDigests(t, vm)
	sc, dc := loopbackConns(t, 1)
	at := func(dir bool) int64 {
		if clean || dir != c.toDst {
			return -1
		}
		return c.at
	}
	fs, fd := newFaultConn(sc[0], at(true), c.stall), newFaultConn(dc[0], at(false), c.stall)
	timeout := 2 * time.Second
	res := liveMigrate(context.Background(), vm, dst, rws([]net.Conn{fs}), rws([]net.Conn{fd}),
		SendConfig{Timeout: timeout}, ReceiveConfig{Timeout: timeout})
	switch {
	case res.srcErr == nil:
		if res.dstErr != nil || res.in == nil || res.in.State() != vgpu.VMRunning || vm.State() != vgpu.VMDestroyed {
			t.Fatalf("%v: source succeeded, destination %v, source VM %v", c, res.dstErr, vm.State())
		}
		if got := regionDigests(t, res.in); !slices.Equal(got, before) {
			t.Fatalf("%v: destination digests %x, source's %x", c, got, before)
		}
	case errors.Is(res.srcErr, migrate.ErrInDoubt):
		if vm.State() != vgpu.VMPaused || !slices.Equal(regionDigests(t, vm), before) {
			t.Fatalf("%v: in doubt, source VM %v, memory changed: %v", c, vm.State(), !slices.Equal(regionDigests(t, vm), before))
		}
		if res.dstErr == nil && res.in.State() == vgpu.VMRunning {
			break // the destination has it; the source's copy is paused
		}
		holdsNothing(t, dst)
	default:
		var pe *migrate.PhaseError
		if !errors.As(res.srcErr, &pe) {
			t.Fatalf("%v: source error %v, want a *PhaseError", c, res.srcErr)
		}
		if !errors.Is(res.srcErr, migrate.ErrConnection) {
			t.Fatalf("%v: source error %v, want ErrConnection", c, res.srcErr)
		}
		if vm.State() != vgpu.VMRunning || vm.RAM().DirtyLogging() || !slices.Equal(regionDigests(t, vm), before) {
			t.Fatalf("%v: source VM %v, dirty logging %v, memory changed %v", c, vm.State(), vm.RAM().DirtyLogging(),
				!slices.Equal(regionDigests(t, vm), before))
		}
		if res.dstErr == nil {
			t.Fatalf("%v: destination succeeded while the source failed with %v", c, res.srcErr)
		}
		holdsNothing(t, dst)
		// Nothing was lost: the same VM migrates again and arrives whole.
		if c.at%3 == 0 {
			sc2, dc2 := loopbackConns(t, 1)
			again := liveMigrate(context.Background(), vm, dst, rws(sc2), rws(dc2), SendConfig{}, ReceiveConfig{})
			if again.srcErr != nil || again.dstErr != nil || !slices.Equal(regionDigests(t, again.in), before) {
				t.Fatalf("%v: second migration: %v / %v", c, again.srcErr, again.dstErr)
			}
		}
	}
	return fs.BytesWritten(), fd.BytesWritten()
}

// A connection killed at random byte offsets, in either direction, closed
// or stalled past the timeout: the source ends running and unchanged (or,
// killed after it committed, paused and in doubt) and the destination holds
// nothing — never two running copies, never a lost VM.
func TestLiveConnectionFaults(t *testing.T) {
	toDst, toSrc := runLiveFault(t, liveFaultCase{}, true)
	t.Logf("a clean migration: %d bytes to the destination, %d back", toDst, toSrc)
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []liveFaultCase{
		{toDst: true, at: 0}, {toDst: true, at: 5}, {toDst: true, at: 40},
		{toDst: true, at: toDst * 37 / 100}, {toDst: true, at: toDst - 1}, {toDst: true, at: toDst - 30},
		{toDst: false, at: 0}, {toDst: false, at: 3}, {toDst: false, at: toSrc - 5}, {toDst: false, at: toSrc - 1},
	}
	n := 12
	if testing.Short() || raceEnabled {
		n = 4
	}
	for range n {
		if rng.IntN(3) == 0 {
			cases = append(cases, liveFaultCase{toDst: false, at: rng.Int64N(toSrc)})
		} else {
			cases = append(cases, liveFaultCase{toDst: true, at: rng.Int64N(toDst)})
		}
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { runLiveFault(t, c, false) })
	}
}

// A link that goes silent fails the migration after the timeout, with the
// same guarantees.
func TestLiveConnectionStalls(t *testing.T) {
	toDst, _ := runLiveFault(t, liveFaultCase{}, true)
	for _, c := range []liveFaultCase{{toDst: true, at: toDst / 2, stall: true}, {toDst: false, at: 2, stall: true}} {
		t.Run(c.String(), func(t *testing.T) {
			start := time.Now()
			runLiveFault(t, c, false)
			if d := time.Since(start); d > time.Minute {
				t.Fatalf("a stalled link took %v to fail", d)
			}
		})
	}
}

// failingStart is a connection whose third write, the stream's header
// after the offer and the hello, fails as a reset connection does.
type failingStart struct {
	net.Conn
	writes int
}

func (f *failingStart) Write(p []byte) (int, error) {
	if f.writes++; f.writes == 3 {
		return 0, errors.New("connection reset by peer")
	}
	return f.Conn.Write(p)
}

// A connection that fails as the stream's header is written, right after
// the handshake, is the connection's failure (ErrConnection), not the
// configuration's; the VM stays at the source, running.
func TestLiveStreamHeaderFails(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := smallVM(t, src, "header")
	sc, dc := loopbackConns(t, 1)
	res := liveMigrate(context.Background(), vm, dst, []io.ReadWriter{&failingStart{Conn: sc[0]}}, rws(dc),
		SendConfig{Timeout: 2 * time.Second}, ReceiveConfig{Timeout: 2 * time.Second})
	if !errors.Is(res.srcErr, migrate.ErrConnection) || errors.Is(res.srcErr, migrate.ErrConfig) {
		t.Fatalf("source: %v, want ErrConnection", res.srcErr)
	}
	if res.dstErr == nil || vm.State() != vgpu.VMRunning {
		t.Fatalf("destination: %v; source VM %v", res.dstErr, vm.State())
	}
	holdsNothing(t, dst)
}
