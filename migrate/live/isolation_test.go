package live

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// TestLiveAbortedMigrationInScrubbed: a live migration whose connection
// the source loses late, at 95 % of the stream's bytes, leaves the
// destination holding nothing, and a tenant placed next in the window it
// had reserved reads zeros in all of it.
func TestLiveAbortedMigrationInScrubbed(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, isolationVMID, "P40-1Q", 64*MiB, 16*MiB, tinyModel, 11)
	writeSecret(t, vm)
	// A clean run to a twin destination measures the stream.
	_, twin := hostPair(t, memory.Sparse, 1)
	sc, dc := loopbackConns(t, 1)
	clean := newFaultConn(sc[0], -1, false)
	if res := liveMigrate(context.Background(), vm, twin, rws([]net.Conn{clean}), rws(dc), SendConfig{}, ReceiveConfig{}); res.srcErr != nil || res.dstErr != nil {
		t.Fatalf("clean run: %v / %v", res.srcErr, res.dstErr)
	}
	vm = nil
	// The twin's copy migrates back, secret and all, to be the source.
	twinVM, _ := twin.VM(isolationVMID)
	if secretPagesIn(t, twinVM.Framebuffers()[0]) == 0 {
		t.Fatal("the clean run did not carry the secret")
	}
	total := clean.BytesWritten()

	sc, dc = loopbackConns(t, 1)
	cut := total * 95 / 100
	broken := newFaultConn(sc[0], cut, false)
	// Receive reports no progress while the stream arrives, so the test
	// cannot look at the incoming VM mid-stream; it records the window the
	// destination reserved from the host's only GPU once it is freed.
	res := liveMigrate(context.Background(), twinVM, dst, rws([]net.Conn{broken}), rws(dc), SendConfig{}, ReceiveConfig{})
	var pe *migrate.PhaseError
	if !errors.As(res.srcErr, &pe) || !errors.Is(res.srcErr, migrate.ErrConnection) || res.dstErr == nil {
		t.Fatalf("source %v, destination %v; want a *PhaseError wrapping ErrConnection and a failed destination", res.srcErr, res.dstErr)
	}
	if twinVM.State() != vgpu.VMRunning || secretPagesIn(t, twinVM.Framebuffers()[0]) == 0 {
		t.Fatalf("the source VM is %v after the failure, or lost its secret", twinVM.State())
	}
	holdsNothing(t, dst)
	checkNothingAt(t, dst)
	// The first vGPU placed on an empty P40 takes slot 0.
	nextTenantReadsZeros(t, dst, windowAt{}, nil)
	t.Logf("live: connection cut at byte %d of %d to the destination", cut, total)
}
