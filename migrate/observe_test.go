package migrate_test

import (
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
)

// TestGPUTimeSurvivesMigration: a VM's GPU time goes on from where it was
// at the source, while the destination's scheduler tenant counts only what
// it granted there.
func TestGPUTimeSurvivesMigration(t *testing.T) {
	src, dst, vms := exampleHosts(1)
	vm := vms[0]
	before := vm.GPUTime()
	if before <= 0 {
		t.Fatalf("a VM serving for 2 s has %v of GPU time", before)
	}
	sim, err := migrate.NewSim(migrate.SimConfig{}, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.Start(vm, dst, migrate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Advance(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	moved := m.VM()
	v := moved.VGPUs()[0]
	info, err := v.GPU().Scheduler().Tenant(v.Tenant())
	if err != nil {
		t.Fatal(err)
	}
	if moved.GPUTime() <= before || moved.GPUTime() < before+info.Granted-time.Millisecond {
		t.Errorf("GPU time %v after the migration, %v before it, %v granted at the destination", moved.GPUTime(), before, info.Granted)
	}
	if info.Granted >= moved.GPUTime() {
		t.Errorf("the destination's tenant was granted %v, the VM's whole GPU time is %v", info.Granted, moved.GPUTime())
	}
}
