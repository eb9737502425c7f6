package migrate

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// TestSixConcurrentMigrations: six VMs migrate at once over one 10 GbE
// link, as the blog post "GPU Virtualization for Machine Learning
// Workloads, Part 2" (Uday Kurkure, Lan Vu, Hari Sivaraman; VMware)
// measured; each completes with its
// own report, the rates on the link never add up to more than its goodput,
// and sharing makes each take longer than it would alone.
func TestSixConcurrentMigrations(t *testing.T) {
	src, dst := hostPair(t, memory.Synthetic, 4)
	var vms []*vgpu.VM
	for i := range 6 {
		vms = append(vms, inferenceVM(t, src, fmt.Sprintf("vm%d", i), "P40-4Q", 4*GiB, 3*GiB, vgpu.InceptionV3(), uint64(i+1)))
	}
	must(t, src.Advance(time.Second))
	sameClock(t, src, dst)
	s, err := NewSim(SimConfig{}, src, dst)
	must(t, err)
	var ms []*Migration
	for _, vm := range vms {
		m, err := s.Start(vm, dst, Config{Fidelity: Model})
		must(t, err)
		ms = append(ms, m)
	}
	goodput := GbE10().GoodputBytesPerSec()
	steps := 0
	for {
		_, ok, err := s.Step()
		must(t, err)
		if !ok {
			break
		}
		steps++
		if _, total := s.LinkRates(GbE10().Name); total > goodput {
			t.Fatalf("link carries %d B/s, goodput %d", total, goodput)
		}
	}
	alone := func() time.Duration {
		src, dst := hostPair(t, memory.Synthetic, 1)
		vm := inferenceVM(t, src, "alone", "P40-4Q", 4*GiB, 3*GiB, vgpu.InceptionV3(), 1)
		must(t, src.Advance(time.Second))
		sameClock(t, src, dst)
		rep, err := Migrate(vm, dst, Config{Fidelity: Model})
		must(t, err)
		return rep.Total
	}()
	for i, m := range ms {
		rep := m.Report()
		if m.Phase() != PhaseDone || rep.VM != vms[i].ID() || !rep.MeetsStandard() {
			t.Errorf("%s: %v, stun %v", rep.VM, m.Phase(), rep.Stun)
		}
		if rep.Total < 3*alone {
			t.Errorf("%s took %v sharing the link, %v alone", rep.VM, rep.Total, alone)
		}
		t.Logf("%s: total %v (alone %v), stun %v", rep.VM, rep.Total, alone, rep.Stun)
	}
	if len(dst.VMs()) != 6 || len(src.VMs()) != 0 {
		t.Fatalf("%d VMs at the destination, %d at the source", len(dst.VMs()), len(src.VMs()))
	}
}

// TestHostConcurrencyLimit: a host takes part in at most MaxPerHost
// migrations at once; one more is refused before anything changes.
func TestHostConcurrencyLimit(t *testing.T) {
	src, dst := hostPair(t, memory.Synthetic, 2)
	sameClock(t, src, dst)
	s, err := NewSim(SimConfig{MaxPerHost: 2}, src, dst)
	must(t, err)
	for i := range 3 {
		vm := inferenceVM(t, src, fmt.Sprintf("vm%d", i), "P40-1Q", 1*GiB, 512*MiB, vgpu.MobileNet(), uint64(i+1))
		_, err := s.Start(vm, dst, Config{Fidelity: Model})
		if i < 2 {
			must(t, err)
			continue
		}
		if !errors.Is(err, ErrBusy) || vm.State() != vgpu.VMRunning {
			t.Fatalf("third migration: %v", err)
		}
		if _, err := s.Start(vm, src, Config{}); !errors.Is(err, ErrConfig) {
			t.Fatalf("migration to its own host: %v", err)
		}
	}
	if _, err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if len(dst.VMs()) != 2 {
		t.Fatalf("%d VMs moved", len(dst.VMs()))
	}
}
