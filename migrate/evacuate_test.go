package migrate_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// evacuationWorld is a source host with three P40s running six P40-4Q VMs
// serving inference, a passthrough VM and a P40-24Q VM, and two
// destinations with one P40 each, the second holding a P40-2Q VM, so that
// neither can take the P40-24Q once the P40-4Qs arrive.
func evacuationWorld(t *testing.T) (src *vgpu.Host, dsts []*vgpu.Host) {
	t.Helper()
	mk := func(name string, gpus int, seed uint64) *vgpu.Host {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: name, GPUs: gpus, Seed: seed, RAMBytes: 256 << 30, Placement: vgpu.DepthFirst})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	src = mk("src", 3, 1)
	dsts = []*vgpu.Host{mk("dst-a", 1, 2), mk("dst-b", 1, 3)}
	vm := func(h *vgpu.Host, spec vgpu.VMSpec) {
		v, err := h.CreateVM(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		inf, err := vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.MobileNet(), RequestsPerSec: 50, FootprintBytes: 1 << 30, Seed: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		vm(src, vgpu.VMSpec{ID: fmt.Sprintf("vm%d", i), RAMBytes: 4 << 30, RAMFootprintBytes: 512 << 20, Profiles: []string{"P40-4Q"}, Workload: inf})
	}
	vm(src, vgpu.VMSpec{ID: "pass", RAMBytes: 4 << 30, Passthrough: true})
	vm(src, vgpu.VMSpec{ID: "whole", RAMBytes: 4 << 30, Profiles: []string{"P40-24Q"}})
	vm(dsts[1], vgpu.VMSpec{ID: "resident", RAMBytes: 4 << 30, Profiles: []string{"P40-4Q"}})
	return src, dsts
}

// evacuate runs an evacuation from event to event and returns it, with the
// most migrations seen under way at once.
func evacuate(t *testing.T, cfg migrate.EvacuateConfig) (*migrate.Evacuation, int) {
	src, dsts := evacuationWorld(t)
	sim, err := migrate.NewSim(migrate.SimConfig{MaxPerHost: 2}, append([]*vgpu.Host{src}, dsts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := sim.Evacuate(src, dsts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for !sim.Idle() {
		running := 0
		for _, m := range ev.Migrations() {
			if !m.Done() {
				running++
			}
		}
		most = max(most, running)
		at, ok := sim.NextEventAt()
		if !ok {
			t.Fatal("an evacuation under way has no next event")
		}
		if _, err := sim.AdvanceTo(at); err != nil {
			t.Fatal(err)
		}
	}
	return ev, most
}

// TestEvacuate: an evacuation moves every VM it can, never more at once
// than MaxPerHost, each next migration starting at the instant one ends;
// breadth-first placement spreads them; a passthrough VM and one no
// destination can take are left, each with its reason; and the same
// evacuation gives the same reports.
func TestEvacuate(t *testing.T) {
	ev, most := evacuate(t, migrate.EvacuateConfig{Placement: vgpu.BreadthFirst})
	if !ev.Done() || ev.Empty() || len(ev.Waiting()) != 0 {
		t.Fatalf("done %v, empty %v, %d waiting", ev.Done(), ev.Empty(), len(ev.Waiting()))
	}
	if most != 2 {
		t.Errorf("%d migrations at once, want MaxPerHost, 2", most)
	}
	per := map[string]int{}
	ends := map[time.Duration]bool{}
	for i, m := range ev.Migrations() {
		rep := m.Report()
		if m.Err() != nil || m.VM().State() != vgpu.VMRunning {
			t.Fatalf("%s: %v, %v", rep.VM, m.Err(), m.VM().State())
		}
		per[rep.Destination]++
		if i >= 2 && !ends[rep.Start] {
			t.Errorf("%s started at %v, when no migration ended", rep.VM, rep.Start)
		}
		ends[rep.End] = true
	}
	if len(ev.Migrations()) != 6 || per["dst-a"] != 4 || per["dst-b"] != 2 {
		t.Errorf("destinations %v, want the six spread to 4 and 2 (dst-b held one already)", per)
	}
	left := ev.Left()
	var nm *vgpu.NotMigratableError
	var nh *vgpu.NoHostError
	if len(left) != 2 || left[0].VM.ID() != "pass" || !errors.As(left[0].Err, &nm) ||
		left[1].VM.ID() != "whole" || !errors.As(left[1].Err, &nh) {
		t.Fatalf("left %v, want the passthrough VM and the P40-24Q", left)
	}
	if n := len(ev.Host().VMs()); n != 2 {
		t.Errorf("the source holds %d VMs, want the two left", n)
	}

	again, _ := evacuate(t, migrate.EvacuateConfig{Placement: vgpu.BreadthFirst})
	for i, m := range again.Migrations() {
		if a, b := m.Report(), ev.Migrations()[i].Report(); !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: a second evacuation differs", a.VM)
		}
	}
}

// TestEvacuatePath: with EvacuateConfig.Path every migration crosses the
// evacuated host's NIC and its destination's; an empty path leaves the
// VMs, with ErrConfig.
func TestEvacuatePath(t *testing.T) {
	nic := func(h string) migrate.Link {
		l := migrate.GbE10()
		l.Name = "nic-" + h
		return l
	}
	ev, _ := evacuate(t, migrate.EvacuateConfig{Path: func(dst *vgpu.Host) []migrate.Link {
		return []migrate.Link{nic("src"), nic(dst.Name())}
	}})
	for _, m := range ev.Migrations() {
		rep := m.Report()
		if m.Err() != nil || rep.Link != "nic-src" || len(rep.Via) != 1 || rep.Via[0] != "nic-"+rep.Destination {
			t.Errorf("%s to %s: %v, over %q via %q", rep.VM, rep.Destination, m.Err(), rep.Link, rep.Via)
		}
	}
	if len(ev.Migrations()) != 6 {
		t.Errorf("%d migrations, want 6", len(ev.Migrations()))
	}
	ev, _ = evacuate(t, migrate.EvacuateConfig{Path: func(*vgpu.Host) []migrate.Link { return nil }})
	if len(ev.Migrations()) != 0 || len(ev.Left()) != 8 || !errors.Is(ev.Left()[0].Err, migrate.ErrConfig) {
		t.Errorf("no path: %d migrations, left %v", len(ev.Migrations()), ev.Left())
	}
}

func TestEvacuateRefuses(t *testing.T) {
	src, dsts := evacuationWorld(t)
	sim, err := migrate.NewSim(migrate.SimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		from *vgpu.Host
		to   []*vgpu.Host
	}{
		{"no host", nil, dsts},
		{"no destination", src, nil},
		{"to itself", src, append(dsts, src)},
		{"a nil destination", src, []*vgpu.Host{nil}},
	} {
		if _, err := sim.Evacuate(tc.from, tc.to, migrate.EvacuateConfig{}); !errors.Is(err, migrate.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
	late, err := vgpu.NewHost(vgpu.HostConfig{Name: "late", Start: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Evacuate(src, []*vgpu.Host{late}, migrate.EvacuateConfig{}); !errors.Is(err, migrate.ErrConfig) {
		t.Errorf("to a host on another clock: %v, want ErrConfig", err)
	}
}
