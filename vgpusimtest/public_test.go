package vgpusimtest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/migrate/live"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// These tests use the kit as anyone's tests would: through its public
// API and the library's, from outside both.

// migrateOver live-migrates vm to dst over a net.Pipe whose source end is
// a FaultConn with plan f, and returns the FaultConn, the source's error
// and the destination's.
func migrateOver(t *testing.T, vm *vgpu.VM, dst *vgpu.Host, f vgpusimtest.Fault) (fc *vgpusimtest.FaultConn, srcErr, dstErr error) {
	t.Helper()
	a, b := net.Pipe()
	fc = vgpusimtest.NewFaultConn(a, f)
	defer fc.Close()
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		_, _, err := live.Receive(context.Background(), dst, []io.ReadWriter{b}, live.ReceiveConfig{Timeout: 5 * time.Second})
		done <- err
	}()
	_, srcErr = live.Send(context.Background(), vm, []io.ReadWriter{fc}, live.SendConfig{Timeout: 5 * time.Second})
	return fc, srcErr, <-done
}

func newVM(t *testing.T, host *vgpu.Host, id string) *vgpu.VM {
	t.Helper()
	vm, err := host.CreateVM(vgpu.VMSpec{ID: id, RAMBytes: 1 << 20, RAMFootprintBytes: 256 << 10, Profiles: []string{"P40-1Q"}})
	must(t, err)
	must(t, vm.Start())
	return vm
}

func newHost(t *testing.T, name string) *vgpu.Host {
	t.Helper()
	h, err := vgpu.NewHost(vgpu.HostConfig{Name: name})
	must(t, err)
	return h
}

// TestLiveMigrationCutMidStream: a live migration whose connection closes
// halfway through the source's bytes fails at both ends with the
// connection's error; the source's VM is left running with its memory
// unchanged, and the destination holds nothing of it.
func TestLiveMigrationCutMidStream(t *testing.T) {
	src := newHost(t, "src")
	// A clean migration of a twin measures the bytes.
	clean, srcErr, dstErr := migrateOver(t, newVM(t, src, "twin"), newHost(t, "twin-dst"), vgpusimtest.Fault{})
	if srcErr != nil || dstErr != nil {
		t.Fatalf("clean migration: %v / %v", srcErr, dstErr)
	}
	total := clean.BytesWritten()

	vm, dst := newVM(t, src, "vm"), newHost(t, "dst")
	before, err := vm.RAM().Digest()
	must(t, err)
	cut := total / 2
	fc, srcErr, dstErr := migrateOver(t, vm, dst, vgpusimtest.Fault{Write: vgpusimtest.CloseAfter(cut)})
	var pe *migrate.PhaseError
	if !errors.As(srcErr, &pe) || !errors.Is(srcErr, migrate.ErrConnection) || dstErr == nil {
		t.Fatalf("source %v, destination %v; want a *PhaseError wrapping ErrConnection, and a failure", srcErr, dstErr)
	}
	if fc.BytesWritten() != cut {
		t.Fatalf("%d bytes went through a cut at %d", fc.BytesWritten(), cut)
	}
	after, err := vm.RAM().Digest()
	must(t, err)
	if vm.State() != vgpu.VMRunning || vm.RAM().DirtyLogging() || after != before {
		t.Fatalf("source VM %v, dirty logging %v, memory changed %v", vm.State(), vm.RAM().DirtyLogging(), after != before)
	}
	if vms := dst.VMs(); len(vms) != 0 {
		t.Fatalf("the destination holds %d VM(s)", len(vms))
	}
	for _, g := range dst.GPUs() {
		if n, w := g.VGPUCount(), len(g.Framebuffer().Windows()); n != 0 || w != 0 {
			t.Fatalf("destination GPU %d holds %d vGPU(s) and %d window(s)", g.Index(), n, w)
		}
	}
	t.Logf("cut at byte %d of %d", cut, total)
}

// smallStream writes a 64 KiB region as a checkpoint stream of id in
// 16 KiB batches, with its digest, and returns it and the region.
func smallStream(t *testing.T, id byte) []byte {
	t.Helper()
	ram, err := memory.New(memory.Config{SizeBytes: 64 << 10, Kind: memory.Dense, Seed: 5})
	must(t, err)
	must(t, ram.FillMix(0, 16, memory.MixRealistic()))
	meta := checkpoint.Metadata{VMID: "vm", Regions: []checkpoint.RegionInfo{checkpoint.RegionInfoOf(0, ram)}}
	var buf bytes.Buffer
	w, err := checkpoint.NewWriter(&buf, meta, checkpoint.WriterOptions{StreamID: [16]byte{id}, BatchBytes: 16 << 10})
	must(t, err)
	defer w.Release()
	var all memory.PageSet
	ram.CollectDirty(&all)
	must(t, w.WriteRegion(0, ram, &all))
	_, err = w.EndRound()
	must(t, err)
	d, err := ram.Digest()
	must(t, err)
	must(t, w.CloseWithDigests([]checkpoint.RegionDigest{{Region: 0, Digest: d}}))
	return buf.Bytes()
}

// TestMutatedStreamsRefused: a stream mutated by each mutator is refused
// by the checkpoint reader with a typed error.
func TestMutatedStreamsRefused(t *testing.T) {
	a, b := smallStream(t, 1), smallStream(t, 2)
	recs, err := vgpusimtest.Records(a)
	must(t, err)
	last := len(recs) - 1
	mutants := []struct {
		name string
		do   func() ([]byte, error)
		want error
	}{
		{"Flip", func() ([]byte, error) { return vgpusimtest.Flip(a, 8*recs[1].Offset+8*20) }, checkpoint.ErrChecksum},
		{"Truncate", func() ([]byte, error) { return vgpusimtest.Truncate(a, len(a)-1) }, checkpoint.ErrTruncated},
		{"DuplicateRecord", func() ([]byte, error) { return vgpusimtest.DuplicateRecord(a, 1) }, checkpoint.ErrSequence},
		{"SwapRecords", func() ([]byte, error) { return vgpusimtest.SwapRecords(a, 1, last) }, checkpoint.ErrSequence},
		{"Splice", func() ([]byte, error) { return vgpusimtest.Splice(a, b, 2) }, checkpoint.ErrChecksum},
		{"ReplayRecord", func() ([]byte, error) { return vgpusimtest.ReplayRecord(a, b, 1) }, checkpoint.ErrChecksum},
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			s, err := m.do()
			must(t, err)
			dst, err := memory.New(memory.Config{SizeBytes: 64 << 10, Kind: memory.Dense, Seed: 5})
			must(t, err)
			rd, err := checkpoint.NewReader(bytes.NewReader(s), checkpoint.ReaderOptions{})
			if err == nil {
				defer rd.Close()
				var ap *checkpoint.Applier
				if ap, err = checkpoint.NewApplier(rd, []checkpoint.RegionRef{{ID: 0, Region: dst}}); err == nil {
					err = ap.Run()
				}
			}
			var ce *checkpoint.Error
			if !errors.As(err, &ce) || !errors.Is(err, m.want) {
				t.Fatalf("reader returned %v, want a *checkpoint.Error wrapping %v", err, m.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
