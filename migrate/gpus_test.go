package migrate_test

import (
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// TestMigrateOnEveryGPU migrates a VM serving inference between two hosts
// of the same GPU model, for each model after the P40: the VM ends on the
// destination, running, with a vGPU of the same type on a GPU of the same
// model, and keeps being scheduled there.
func TestMigrateOnEveryGPU(t *testing.T) {
	for _, tc := range []struct {
		spec    vgpu.GPUSpec
		profile string
	}{
		{vgpu.V100(), "V100-8Q"},
		{vgpu.V100D(), "V100D-8C"},
		{vgpu.T4(), "T4-4C"},
		{vgpu.A100(), "A100-10C"},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			host := func(name string, seed uint64) *vgpu.Host {
				h, err := vgpu.NewHost(vgpu.HostConfig{Name: name, GPU: tc.spec, RAMBytes: 2 << 30,
					Memory: memory.Synthetic, Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			src, dst := host("src", 1), host("dst", 2)
			w, err := vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.MobileNet(), RequestsPerSec: 20, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			vm, err := src.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: 512 << 20, RAMFootprintBytes: 128 << 20,
				Profiles: []string{tc.profile}, Workload: w})
			if err != nil {
				t.Fatal(err)
			}
			if err := vm.Start(); err != nil {
				t.Fatal(err)
			}
			for _, h := range []*vgpu.Host{src, dst} {
				if err := h.Advance(time.Second); err != nil {
					t.Fatal(err)
				}
			}
			before := vm.GPUTime()
			rep, err := migrate.Migrate(vm, dst, migrate.Config{Fidelity: migrate.Model, Link: migrate.GbE10()})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != migrate.PhaseDone || !rep.MeetsStandard() {
				t.Fatalf("%v, stun %v", rep.Outcome, rep.Stun)
			}
			moved, ok := dst.VM("vm")
			if !ok || moved.State() != vgpu.VMRunning || len(src.VMs()) != 0 {
				t.Fatalf("after the migration: on dst %v, source holds %d VMs", ok, len(src.VMs()))
			}
			v := moved.VGPUs()[0]
			if v.Profile().Name != tc.profile || moved.GPUModel() != tc.spec.Model {
				t.Errorf("destination vGPU %s on %s", v.Profile().Name, moved.GPUModel())
			}
			if moved.GPUTime() < before {
				t.Errorf("GPU time %v after the migration, %v before", moved.GPUTime(), before)
			}
			at := moved.GPUTime()
			if err := dst.Advance(time.Second); err != nil {
				t.Fatal(err)
			}
			if moved.GPUTime() <= at {
				t.Errorf("no GPU time at the destination: %v then %v", at, moved.GPUTime())
			}
		})
	}
}
