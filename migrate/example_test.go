package migrate_test

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// Migrate a P40-8Q VM serving Inception V3 from all of its framebuffer,
// in PreCopy mode over 10 GbE, and compare with the Legacy estimate.
func Example() {
	src, _ := vgpu.NewHost(vgpu.HostConfig{Name: "esx-a"})
	dst, _ := vgpu.NewHost(vgpu.HostConfig{Name: "esx-b"})
	p, _ := vgpu.ParseProfile("P40-8Q")
	inf, _ := vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.InceptionV3(), FootprintBytes: p.UsableFramebufferBytes(), Seed: 1})
	vm, _ := src.CreateVM(vgpu.VMSpec{ID: "inference-1", RAMBytes: 8 << 30, RAMFootprintBytes: 2 << 30,
		Profiles: []string{p.Name}, Workload: inf})
	_ = vm.Start()
	_ = src.Advance(5 * time.Second)
	_ = dst.Advance(5 * time.Second) // a migration's hosts read one clock

	legacy, _ := migrate.EstimateStun(vm, migrate.Config{Policy: migrate.Policy{Mode: migrate.Legacy}, Link: migrate.GbE10()})
	fmt.Printf("legacy estimate: %.0f s\n", legacy.Total.Seconds())

	rep, err := migrate.Migrate(vm, dst, migrate.Config{Policy: migrate.Policy{Mode: migrate.PreCopy}, Fidelity: migrate.Model, Link: migrate.GbE10()})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("outcome:", rep.Outcome, "after", len(rep.Rounds), "round(s),", rep.Switchover)
	fmt.Println("stun under 1 s:", rep.MeetsStandard())
	fmt.Println("now on:", rep.Destination)
	// Output:
	// legacy estimate: 57 s
	// outcome: done after 1 round(s), converged
	// stun under 1 s: true
	// now on: esx-b
}
