package migrate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// failOnce is a workload whose first event at or after at fails.
type failOnce struct {
	vgpu.Workload
	at     time.Duration
	failed bool
}

var errOnce = errors.New("once")

func (w *failOnce) Fire(env *vgpu.Env) error {
	if !w.failed && env.Now() >= w.at {
		w.failed = true
		return errOnce
	}
	return w.Workload.Fire(env)
}

// A host a failing workload stopped part-way through a Sim's advance is
// due at once (NextEventAt) and catches up at the next advance: the Sim
// and its hosts read one clock again.
func TestSimHostCatchesUp(t *testing.T) {
	h, err := vgpu.NewHost(vgpu.HostConfig{Name: "h"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := vgpu.NewDesktop(vgpu.DesktopConfig{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := h.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: 4 << 30, Profiles: []string{"P40-1Q"}, Workload: &failOnce{Workload: d, at: 1500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.Start(); err != nil {
		t.Fatal(err)
	}
	sim, err := migrate.NewSim(migrate.SimConfig{}, h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Advance(3 * time.Second); !errors.Is(err, errOnce) {
		t.Fatalf("advance over the failure: %v", err)
	}
	if h.Now() >= sim.Now() {
		t.Fatalf("the host is at %v, the Sim at %v: the failure did not stop it part-way", h.Now(), sim.Now())
	}
	if at, ok := sim.NextEventAt(); !ok || at != sim.Now() {
		t.Fatalf("next event at %v (%v), want now, %v", at, ok, sim.Now())
	}
	for sim.Now() < 4*time.Second {
		at, _ := sim.NextEventAt()
		if _, err := sim.AdvanceTo(min(at, 4*time.Second)); err != nil {
			t.Fatal(err)
		}
		if h.Now() != sim.Now() {
			t.Fatalf("the host is at %v, the Sim at %v", h.Now(), sim.Now())
		}
	}
}
