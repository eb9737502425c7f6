package migrate_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// exampleHosts returns two hosts with one P40 each, the source running a
// VM with a P40-4Q for each size in fbGiB, serving Inception V3 from that
// many GiB of framebuffer.
func exampleHosts(fbGiB ...int64) (src, dst *vgpu.Host, vms []*vgpu.VM) {
	src, _ = vgpu.NewHost(vgpu.HostConfig{Name: "esx-a", Seed: 1})
	dst, _ = vgpu.NewHost(vgpu.HostConfig{Name: "esx-b", Seed: 2})
	for i, gib := range fbGiB {
		inf, _ := vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.InceptionV3(), RequestsPerSec: 20,
			FootprintBytes: gib << 30, Seed: uint64(i + 1)})
		vm, err := src.CreateVM(vgpu.VMSpec{ID: fmt.Sprintf("vm%d", i+1), RAMBytes: 8 << 30, RAMFootprintBytes: 1 << 30,
			Profiles: []string{"P40-4Q"}, Workload: inf})
		if err != nil {
			panic(err)
		}
		_ = vm.Start()
		vms = append(vms, vm)
	}
	// The VMs serve for two seconds before the caller migrates them; the
	// destination's clock keeps pace, as a Sim requires of its hosts.
	_ = src.Advance(2 * time.Second)
	_ = dst.Advance(2 * time.Second)
	return src, dst, vms
}

// A data-centre simulator drives three concurrent migrations from its own
// clock: every tick of it, it advances the Sim by the tick, and the Sim
// advances both hosts, so the VMs keep serving while their memory is
// copied. The three share one 10 GbE link (same Link name) max-min fairly,
// and the smaller VMs' migrations end first.
func ExampleSim_Advance() {
	src, dst, vms := exampleHosts(1, 2, 3)
	sim, _ := migrate.NewSim(migrate.SimConfig{}, src, dst)
	var migs []*migrate.Migration
	for _, vm := range vms {
		m, err := sim.Start(vm, dst, migrate.Config{Fidelity: migrate.Model, Link: migrate.GbE10()})
		if err != nil {
			fmt.Println(err)
			return
		}
		migs = append(migs, m)
	}

	const tick = 500 * time.Millisecond // the caller's clock
	for now := tick; !sim.Idle(); now += tick {
		events, err := sim.Advance(tick)
		if err != nil {
			fmt.Println(err)
			return
		}
		if now == tick {
			rates, total := sim.LinkRates(migrate.GbE10().Name)
			fmt.Printf("%d migrations share 10g: %d MB/s in all\n", len(rates), total/1e6)
		}
		for _, e := range events {
			if e.Phase == migrate.PhaseDone {
				fmt.Printf("tick at %v: %s done\n", now, e.VM)
			}
		}
	}
	for _, m := range migs {
		rep := m.Report()
		fmt.Printf("%s: %v in %.1f s, stun under 1 s: %v, now on %s\n",
			rep.VM, rep.Outcome, rep.Total.Seconds(), rep.MeetsStandard(), m.VM().Host().Name())
	}
	// Output:
	// 3 migrations share 10g: 1176 MB/s in all
	// tick at 5s: vm1 done
	// tick at 6.5s: vm2 done
	// tick at 7.5s: vm3 done
	// vm1: done in 4.6 s, stun under 1 s: true, now on esx-b
	// vm2: done in 6.4 s, stun under 1 s: true, now on esx-b
	// vm3: done in 7.4 s, stun under 1 s: true, now on esx-b
}

// A fault injected into a migration fails it with a typed error, and the
// VM stays on the source, running: the link drops during pre-copy, then
// the destination refuses a second attempt.
func ExampleMigration_Inject() {
	src, dst, vms := exampleHosts(2)
	vm := vms[0]
	sim, _ := migrate.NewSim(migrate.SimConfig{}, src, dst)

	m, _ := sim.Start(vm, dst, migrate.Config{Fidelity: migrate.Model})
	for m.Phase() != migrate.PhasePreCopy {
		if _, ok, err := m.Step(); !ok || err != nil {
			fmt.Println("no pre-copy:", err)
			return
		}
	}
	_ = m.Inject(migrate.FaultLinkDown)
	_, err := m.Run()
	var pe *migrate.PhaseError
	fmt.Println("link down:", errors.Is(err, migrate.ErrConnection), errors.As(err, &pe) && pe.Phase == migrate.PhasePreCopy)
	fmt.Println("VM on", vm.Host().Name(), vm.State())

	m, _ = sim.Start(vm, dst, migrate.Config{Fidelity: migrate.Model})
	_ = m.Inject(migrate.FaultRefused)
	_, err = m.Run()
	fmt.Println("refused:", errors.Is(err, migrate.ErrRefused))

	// Sim.FailLink does it to every migration on a link; a stall fails
	// them only once Config.Timeout of simulated time has passed.
	m, _ = sim.Start(vm, dst, migrate.Config{Fidelity: migrate.Model, Timeout: 5 * time.Second})
	n, _ := sim.FailLink(migrate.GbE10().Name, migrate.FaultLinkStall)
	start := sim.Now()
	_, err = m.Run()
	fmt.Println("stalled:", n, errors.Is(err, migrate.ErrConnection), "after", sim.Now()-start)

	// None of it left a trace: the next migration succeeds.
	m, _ = sim.Start(vm, dst, migrate.Config{Fidelity: migrate.Model})
	rep, err := m.Run()
	fmt.Println("retry:", rep.Outcome, err, "VM on", rep.Destination)
	// Output:
	// link down: true true
	// VM on esx-a running
	// refused: true
	// stalled: 1 true after 5s
	// retry: done <nil> VM on esx-b
}

// A discrete-event simulator moves the Sim from one event to the next, a
// workload's or a migration's, instead of by ticks of its own.
func ExampleSim_NextEventAt() {
	src, dst, vms := exampleHosts(1)
	sim, _ := migrate.NewSim(migrate.SimConfig{}, src, dst)
	m, _ := sim.Start(vms[0], dst, migrate.Config{Fidelity: migrate.Model, Link: migrate.GbE10()})
	start := sim.Now() // the hosts' clock: the VM served 2 s before
	steps := 0
	for !sim.Idle() {
		at, ok := sim.NextEventAt()
		if !ok {
			break
		}
		if _, err := sim.AdvanceTo(at); err != nil {
			fmt.Println(err)
			return
		}
		steps++
	}
	rep := m.Report()
	fmt.Printf("%s: %v after %d events, at %.1f s, %.1f s after it began\n", rep.VM, rep.Outcome, steps, sim.Now().Seconds(), (sim.Now() - start).Seconds())
	// Output:
	// vm1: done after 49 events, at 3.6 s, 1.6 s after it began
}
