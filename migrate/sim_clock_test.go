package migrate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// A Sim and its hosts share one clock: it refuses a host whose clock
// differs or that another driver holds, holds the clock of each it drives
// (the host's own Advance is refused) until RemoveHost, which refuses a
// host a migration uses; the one-call Migrate gives both hosts back.
func TestSimHostClock(t *testing.T) {
	src, dst, vms := exampleHosts(1, 1)
	if _, err := migrate.NewSim(migrate.SimConfig{Start: time.Second}, src, dst); !errors.Is(err, migrate.ErrConfig) {
		t.Fatalf("NewSim at 1 s with hosts at %v: %v, want ErrConfig", src.Now(), err)
	}
	if _, held := src.Driver(); held {
		t.Fatal("a refused NewSim kept a host's clock")
	}
	if _, err := migrate.NewSim(migrate.SimConfig{Start: -time.Second}); !errors.Is(err, migrate.ErrConfig) {
		t.Fatalf("a negative start: %v, want ErrConfig", err)
	}
	sim, err := migrate.NewSim(migrate.SimConfig{}, src)
	if err != nil {
		t.Fatal(err)
	}
	if sim.Now() != src.Now() {
		t.Fatalf("a Sim made with a host at %v reads %v", src.Now(), sim.Now())
	}
	if err := src.Advance(time.Second); !errors.Is(err, vgpu.ErrDriven) {
		t.Fatalf("a host the Sim drives advanced by another: %v, want vgpu.ErrDriven", err)
	}
	if _, err := migrate.NewSim(migrate.SimConfig{}, src); !errors.Is(err, vgpu.ErrDriven) {
		t.Fatalf("a second Sim took a driven host: %v, want vgpu.ErrDriven", err)
	}

	late, err := vgpu.NewHost(vgpu.HostConfig{Name: "late", Start: src.Now() - time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.AddHost(late); !errors.Is(err, migrate.ErrConfig) {
		t.Fatalf("AddHost of a host a second behind: %v, want ErrConfig", err)
	}
	if err := sim.AddHost(nil); !errors.Is(err, migrate.ErrConfig) {
		t.Fatalf("AddHost(nil): %v, want ErrConfig", err)
	}
	// Start adds the destination, but not one whose clock differs.
	if _, err := sim.Start(vms[0], late, migrate.Config{Fidelity: migrate.Model}); !errors.Is(err, migrate.ErrConfig) {
		t.Fatalf("a migration to a host a second behind: %v, want ErrConfig", err)
	}
	m, err := sim.Start(vms[0], dst, migrate.Config{Fidelity: migrate.Model})
	if err != nil {
		t.Fatal(err)
	}
	if d, held := dst.Driver(); !held || len(sim.Hosts()) != 2 {
		t.Fatalf("Start did not take the destination's clock: %q %v, %d hosts", d, held, len(sim.Hosts()))
	}
	if err := sim.RemoveHost(dst); !errors.Is(err, migrate.ErrBusy) {
		t.Fatalf("RemoveHost of a migration's destination: %v, want ErrBusy", err)
	}
	if _, err := m.Run(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*vgpu.Host{src, dst} {
		if h.Now() != sim.Now() {
			t.Errorf("host %s reads %v, the Sim %v", h.Name(), h.Now(), sim.Now())
		}
	}
	if err := sim.RemoveHost(dst); err != nil {
		t.Fatal(err)
	}
	if err := sim.RemoveHost(dst); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	if err := dst.Advance(time.Second); err != nil {
		t.Fatalf("a removed host refused to advance: %v", err)
	}
	if _, err := sim.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	if src.Now() != dst.Now() || len(sim.Hosts()) != 1 {
		t.Fatalf("after removing one: src at %v, dst at %v, %d hosts", src.Now(), dst.Now(), len(sim.Hosts()))
	}
	if err := sim.RemoveHost(src); err != nil {
		t.Fatal(err)
	}

	// The one-call form takes both clocks and gives them back.
	vm := dst.VMs()[0]
	if _, err := migrate.Migrate(vm, src, migrate.Config{Fidelity: migrate.Model}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*vgpu.Host{src, dst} {
		if d, held := h.Driver(); held {
			t.Errorf("after Migrate host %s is still driven by %s", h.Name(), d)
		}
	}
}
