package migrate_test

import (
	"errors"
	"fmt"
	"slices"
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

// TestPathThroughBothNICs: two migrations to one host each cross a source
// NIC of their own (two hosts', or one host's two) and the destination's
// NIC (Config.Via). At 10 GbE
// everywhere the destination's NIC is the bottleneck: each flow gets half
// of it, and its source NIC carries only that half; with a 25 GbE
// destination NIC each gets its own NIC whole, as without Via. FailLink on
// the shared NIC hits both; reports and Summarize name every link.
func TestPathThroughBothNICs(t *testing.T) {
	nic := func(name string, bps int64) migrate.Link {
		l := migrate.GbE10()
		l.Name, l.BandwidthBitsPerSec = name, bps
		return l
	}
	setup := func(dstBps int64) (*migrate.Sim, []*migrate.Migration) {
		a, b, vms := exampleHosts(2, 2)
		sim, err := migrate.NewSim(migrate.SimConfig{}, a, b)
		if err != nil {
			t.Fatal(err)
		}
		var migs []*migrate.Migration
		for i, vm := range vms {
			m, err := sim.Start(vm, b, migrate.Config{Link: nic(fmt.Sprintf("nic-a%d", i+1), 10e9), Via: []migrate.Link{nic("nic-b", dstBps)}})
			if err != nil {
				t.Fatal(err)
			}
			migs = append(migs, m)
		}
		if _, err := sim.Advance(300 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		return sim, migs
	}
	goodput := nic("x", 10e9).GoodputBytesPerSec()
	sim, migs := setup(10e9)
	rates, total := sim.LinkRates("nic-b")
	if len(rates) != 2 || total > goodput || rates[0] < goodput/2-2 || rates[1] < goodput/2-2 {
		t.Errorf("destination NIC at 10 GbE: rates %v (total %d, goodput %d)", rates, total, goodput)
	}
	if a, _ := sim.LinkRates("nic-a1"); len(a) != 1 || a[0] != rates[0] {
		t.Errorf("source NIC carries %v, the destination NIC gives the flow %d", a, rates[0])
	}
	if n, err := sim.FailLink("nic-b", migrate.FaultLinkDown); err != nil || n != 2 {
		t.Errorf("FailLink on the shared NIC hit %d migrations (%v), want 2", n, err)
	}
	var reps []*migrate.Report
	for _, m := range migs {
		rep, _ := m.Run()
		reps = append(reps, rep)
	}
	if !slices.Equal(reps[0].Via, []string{"nic-b"}) || reps[0].Link != "nic-a1" {
		t.Errorf("report's path %q via %q", reps[0].Link, reps[0].Via)
	}
	sum := migrate.Summarize(reps)
	var names []string
	for _, g := range sum.Links {
		names = append(names, g.Name)
	}
	if !slices.Equal(names, []string{"nic-a1", "nic-a2", "nic-b"}) || sum.Rows[0].Link != "nic-a1 > nic-b" {
		t.Errorf("summary's links %v, first row's %q", names, sum.Rows[0].Link)
	}

	sim, _ = setup(25e9)
	for _, name := range []string{"nic-a1", "nic-a2"} {
		if r, _ := sim.LinkRates(name); len(r) != 1 || r[0] != goodput {
			t.Errorf("destination NIC at 25 GbE: %s carries %v, want its goodput %d", name, r, goodput)
		}
	}
}

// A path must cross each link once, and every link of it must be valid.
func TestViaRefused(t *testing.T) {
	src, dst, vms := exampleHosts(1, 1)
	sim, err := migrate.NewSim(migrate.SimConfig{}, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	bad := migrate.GbE10()
	bad.Name, bad.Efficiency = "bad", 2
	for _, via := range [][]migrate.Link{{migrate.GbE10()}, {migrate.GbE1(), migrate.GbE1()}, {bad}} {
		if _, err := sim.Start(vms[0], dst, migrate.Config{Link: migrate.GbE10(), Via: via}); !errors.Is(err, migrate.ErrConfig) {
			t.Errorf("via %v: %v, want ErrConfig", via, err)
		}
	}
	// A path whose last link differs from the one the Sim knows by its
	// name declares none of its links.
	if _, err := sim.Start(vms[0], dst, migrate.Config{Link: migrate.GbE1()}); err != nil {
		t.Fatal(err)
	}
	other := migrate.GbE10()
	other.Name = "fresh"
	slow := migrate.GbE1()
	slow.BandwidthBitsPerSec /= 2
	before := sim.Links()
	if _, err := sim.Start(vms[1], dst, migrate.Config{Link: other, Via: []migrate.Link{slow}}); !errors.Is(err, migrate.ErrConfig) {
		t.Errorf("a path through a link that differs from its namesake: %v, want ErrConfig", err)
	}
	if after := sim.Links(); !slices.Equal(after, before) {
		t.Errorf("links %v after a refused path, %v before", after, before)
	}
}
