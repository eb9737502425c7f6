package migrate_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
)

// discreteWorld is two hosts serving inference, two of whose VMs migrate
// over one 10 GbE link.
func discreteWorld(t *testing.T) (*migrate.Sim, []*migrate.Migration) {
	t.Helper()
	src, dst, vms := exampleHosts(1, 2, 1)
	sim, err := migrate.NewSim(migrate.SimConfig{}, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	var migs []*migrate.Migration
	for _, vm := range vms[:2] {
		m, err := sim.Start(vm, dst, migrate.Config{Fidelity: migrate.Model, Link: migrate.GbE10()})
		if err != nil {
			t.Fatal(err)
		}
		migs = append(migs, m)
	}
	return sim, migs
}

// A simulator driven from event to event (NextEventAt, AdvanceTo) sees the
// events, reports and host clocks that one Advance over the whole time
// gives; the times it is told never go back, and include the workloads'
// own events besides the migrations'.
func TestSimDiscreteEvents(t *testing.T) {
	whole, wholeMigs := discreteWorld(t)
	horizon := whole.Now() + 12*time.Second
	want, err := whole.Advance(horizon - whole.Now())
	if err != nil {
		t.Fatal(err)
	}

	sim, migs := discreteWorld(t)
	var got []migrate.Event
	steps := 0
	for {
		at, ok := sim.NextEventAt()
		if !ok || at > horizon {
			break
		}
		if at < sim.Now() {
			t.Fatalf("next event at %v, before now (%v)", at, sim.Now())
		}
		events, err := sim.AdvanceTo(at)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, events...)
		steps++
	}
	events, err := sim.AdvanceTo(horizon)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, events...)

	if !reflect.DeepEqual(got, want) {
		t.Errorf("%d events from event to event, %d from one Advance, or they differ", len(got), len(want))
	}
	for i, m := range migs {
		if a, b := m.Report(), wholeMigs[i].Report(); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: reports differ: %+v\nagainst %+v", a.VM, a, b)
		}
	}
	for i, h := range sim.Hosts() {
		if h.Now() != whole.Hosts()[i].Now() {
			t.Errorf("host %s at %v, against %v", h.Name(), h.Now(), whole.Hosts()[i].Now())
		}
	}
	// Three VMs at 20 requests a second for 12 s: hundreds of workload
	// events, where the two migrations have tens.
	if steps < 300 || len(want) > steps {
		t.Errorf("%d steps for %d migration events: the workloads' events are not all told", steps, len(want))
	}

	if _, err := sim.AdvanceTo(sim.Now() - 1); !errors.Is(err, migrate.ErrConfig) {
		t.Errorf("advance to the past: %v, want ErrConfig", err)
	}
	empty, err := migrate.NewSim(migrate.SimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := empty.NextEventAt(); ok {
		t.Errorf("a Sim with nothing to do has an event at %v", at)
	}
}
