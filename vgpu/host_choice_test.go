package vgpu

import (
	"errors"
	"fmt"
	"testing"
)

// TestChooseHost: breadth-first spreads VMs over hosts, depth-first packs
// them and leaves a whole GPU free for another type; a host that cannot
// take a VM is skipped, and when none can, the *NoHostError holds each
// host's reason.
func TestChooseHost(t *testing.T) {
	cluster := func() []*Host {
		var hs []*Host
		for i := range 3 {
			hs = append(hs, newHost(t, HostConfig{Name: fmt.Sprintf("h%d", i), GPUs: 1, RAMBytes: 64 * GiB}))
		}
		return hs
	}
	for _, tc := range []struct {
		p    Placement
		want string // the host of each of four P40-6Q VMs
		big  bool   // whether a P40-24Q then finds a host
	}{
		{BreadthFirst, "h0 h1 h2 h0", false},
		{DepthFirst, "h0 h0 h0 h0", true},
	} {
		t.Run(tc.p.String(), func(t *testing.T) {
			hs := cluster()
			got := ""
			for i := range 4 {
				vm, err := PlaceVM(hs, VMSpec{ID: fmt.Sprint("vm", i), RAMBytes: 4 * GiB, Profiles: []string{"P40-6Q"}}, tc.p)
				must(t, err)
				got += " " + vm.Host().Name()
			}
			if got[1:] != tc.want {
				t.Fatalf("placed on %s, want %s", got[1:], tc.want)
			}
			_, err := ChooseHost(hs, VMSpec{ID: "big", RAMBytes: 4 * GiB, Profiles: []string{"P40-24Q"}}, tc.p)
			if (err == nil) != tc.big {
				t.Fatalf("a P40-24Q after them: %v", err)
			}
			var nh *NoHostError
			var pe *PlacementError
			if err != nil && (!errors.As(err, &nh) || len(nh.Hosts) != 3 || !errors.As(err, &pe) || !errors.Is(err, ErrNoCapacity)) {
				t.Fatalf("no host: %v, want a *NoHostError of three *PlacementErrors", err)
			}
		})
	}

	// A host without the RAM is skipped, the one with it chosen, although
	// it has more vGPUs.
	hs := cluster()
	mustVM(t, hs[1], VMSpec{ID: "a", RAMBytes: 4 * GiB, Profiles: []string{"P40-6Q"}})
	mustVM(t, hs[0], VMSpec{ID: "hog", RAMBytes: 62 * GiB, Profiles: []string{"P40-6Q"}})
	mustVM(t, hs[2], VMSpec{ID: "hog2", RAMBytes: 62 * GiB, Profiles: []string{"P40-6Q"}})
	h, err := ChooseHost(hs, VMSpec{ID: "b", RAMBytes: 8 * GiB, Profiles: []string{"P40-6Q"}}, BreadthFirst)
	must(t, err)
	if h != hs[1] {
		t.Fatalf("chose %s, want h1, the one host with the RAM", h.Name())
	}
	_, err = ChooseHost(hs, VMSpec{ID: "c", RAMBytes: 80 * GiB, Profiles: []string{"P40-6Q"}}, BreadthFirst)
	var ce *CapacityError
	if !errors.As(err, &ce) || !errors.Is(err, ErrInsufficientRAM) {
		t.Fatalf("80 GiB: %v, want a *CapacityError", err)
	}

	// A destination of another GPU model is refused as incompatible.
	t4 := newHost(t, HostConfig{Name: "t4", GPU: T4()})
	src := newHost(t, HostConfig{Name: "src"})
	vm := mustVM(t, src, VMSpec{ID: "m", RAMBytes: 4 * GiB, Profiles: []string{"P40-6Q"}})
	if _, err := ChooseDestination([]*Host{t4}, vm.IncomingSpec(), BreadthFirst); !errors.Is(err, ErrIncompatibleHost) {
		t.Fatalf("to a T4 host: %v, want ErrIncompatibleHost", err)
	}
	d, err := ChooseDestination([]*Host{t4, hs[1]}, vm.IncomingSpec(), DepthFirst)
	must(t, err)
	if d != hs[1] {
		t.Fatalf("destination %s, want h1", d.Name())
	}
	var nh *NoHostError
	if _, err := ChooseHost(nil, VMSpec{ID: "x"}, BreadthFirst); !errors.As(err, &nh) || len(nh.Hosts) != 0 {
		t.Fatalf("no hosts: %v, want a *NoHostError", err)
	}
}
