package migrate_test

import (
	"fmt"
	"strings"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// A host enters maintenance: its three VMs move to the other two hosts,
// spread breadth-first, two at a time, and the summary of the migrations
// writes as CSV.
func ExampleSim_Evacuate() {
	src, dst, _ := exampleHosts(1, 2, 1)
	other, _ := vgpu.NewHost(vgpu.HostConfig{Name: "esx-c", Seed: 3, Start: dst.Now()})
	sim, _ := migrate.NewSim(migrate.SimConfig{MaxPerHost: 2}, src, dst, other)
	ev, err := sim.Evacuate(src, []*vgpu.Host{dst, other}, migrate.EvacuateConfig{Placement: vgpu.BreadthFirst})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("started:", len(ev.Migrations()), "waiting:", len(ev.Waiting()))
	if _, err := sim.Run(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("host empty:", ev.Empty(), len(src.VMs()) == 0)

	var reps []*migrate.Report
	for _, m := range ev.Migrations() {
		reps = append(reps, m.Report())
	}
	s := migrate.Summarize(reps)
	for _, h := range s.Hosts {
		fmt.Printf("%s: %d out, %d in\n", h.Name, h.Out, h.In)
	}
	fmt.Println("stun under 1 s at p99:", s.Stun.P99 < 1e9)
	// One CSV row per migration; its first seven columns:
	var csv strings.Builder
	_ = s.WriteCSV(&csv)
	for _, line := range strings.Split(strings.TrimSpace(csv.String()), "\n") {
		fmt.Println(strings.Join(strings.Split(line, ",")[:7], ","))
	}
	// Output:
	// started: 2 waiting: 1
	// host empty: true true
	// esx-a: 3 out, 0 in
	// esx-b: 0 out, 2 in
	// esx-c: 0 out, 1 in
	// stun under 1 s at p99: true
	// vm,source,destination,link,mode,outcome,start_ns
	// vm1,esx-a,esx-b,10g,pre-copy,done,2000000000
	// vm2,esx-a,esx-c,10g,pre-copy,done,2000000000
	// vm3,esx-a,esx-b,10g,pre-copy,done,5071928122
}
