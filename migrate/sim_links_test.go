package migrate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
)

// TestSetLinkCapacity: a link slowed to 1 Gbit/s mid-migration carries its
// flows at no more than the new goodput from then on, and the migration
// takes longer than on the link left alone; a migration started later
// with the link as first declared joins it at its new rate; a link in use
// cannot be removed, an idle one can.
func TestSetLinkCapacity(t *testing.T) {
	run := func(slow bool) (*migrate.Sim, *migrate.Report) {
		src, dst, vms := exampleHosts(2, 1)
		sim, err := migrate.NewSim(migrate.SimConfig{}, src, dst)
		if err != nil {
			t.Fatal(err)
		}
		m, err := sim.Start(vms[0], dst, migrate.Config{Link: migrate.GbE10()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sim.Advance(500 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if slow {
			if err := sim.SetLinkCapacity("10g", 1e9); err != nil {
				t.Fatal(err)
			}
			if _, total := sim.LinkRates("10g"); total > migrate.GbE1().GoodputBytesPerSec()*10/9 {
				t.Fatalf("%d B/s on a link slowed to 1 Gbit/s", total)
			}
			if err := sim.RemoveLink("10g"); !errors.Is(err, migrate.ErrBusy) {
				t.Fatalf("removing a link in use: %v, want ErrBusy", err)
			}
			late, err := sim.Start(vms[1], dst, migrate.Config{Link: migrate.GbE10()})
			if err != nil {
				t.Fatalf("a migration with the link as first declared: %v", err)
			}
			defer func() {
				if _, err := late.Run(); err != nil {
					t.Fatal(err)
				}
			}()
		}
		rep, err := m.Run()
		if err != nil {
			t.Fatal(err)
		}
		return sim, rep
	}
	_, fast := run(false)
	sim, slow := run(true)
	if slow.Total <= fast.Total {
		t.Errorf("slowed to 1 Gbit/s: %v, left at 10 Gbit/s: %v", slow.Total, fast.Total)
	}
	if ls := sim.Links(); len(ls) != 1 || ls[0].BandwidthBitsPerSec != 1e9 || ls[0].Efficiency != migrate.GbE10().Efficiency {
		t.Errorf("links %v", ls)
	}
	if err := sim.RemoveLink("10g"); err != nil || len(sim.Links()) != 0 {
		t.Errorf("removing the idle link: %v, %d left", err, len(sim.Links()))
	}
	if err := sim.SetLinkCapacity("10g", 1e9); !errors.Is(err, migrate.ErrConfig) {
		t.Errorf("a removed link: %v, want ErrConfig", err)
	}
}

// A link's rate must stay a Link's: zero is a stall, FailLink's to make.
func TestSetLinkCapacityRefusesZero(t *testing.T) {
	src, dst, vms := exampleHosts(1)
	sim, err := migrate.NewSim(migrate.SimConfig{}, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Start(vms[0], dst, migrate.Config{}); err != nil {
		t.Fatal(err)
	}
	for _, bits := range []int64{0, 8} { // 8 bit/s is no whole byte of goodput
		if err := sim.SetLinkCapacity("10g", bits); !errors.Is(err, migrate.ErrConfig) {
			t.Errorf("%d bit/s: %v, want ErrConfig", bits, err)
		}
	}
}
