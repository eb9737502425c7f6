package vgpusimtest_test

import (
	"errors"
	"fmt"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// A scenario written by hand rather than drawn: two P40 hosts, one VM
// whose guest the kit's oracle follows, and one migration. A host agent
// of the caller's own (here the balloon double, which reclaims a page of
// every VM that arrives) reacts to the migration's events; the checks
// after each step find the page it lost.
func ExampleWorld() {
	spec := &vgpusimtest.Spec{
		GPU:   vgpu.P40(),
		Hosts: []vgpusimtest.HostSpec{{GPUs: 1, Seed: 1}, {GPUs: 1, Seed: 2}},
		VMs:   []vgpusimtest.VMSpec{{Host: 0, Profile: "P40-1Q", OraclePagesPerSec: 200, Seed: 7}},
		Steps: []vgpusimtest.Step{{Kind: vgpusimtest.StepMigrate, VM: 0, To: 1, Config: migrate.Config{Fidelity: migrate.Bytes}}},
	}
	w, err := vgpusimtest.NewWorld(spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	w.OnEvent = balloonDouble
	for _, st := range spec.Steps {
		if err := w.Do(st); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := w.Finish(); err != nil {
		fmt.Println(err)
		return
	}
	err = w.Check()
	fmt.Println("oracle pages of vm0:", w.Oracle.Pages("vm0"))
	fmt.Println("lost:", errors.Is(err, vgpusimtest.ErrLost))
	var me *vgpusimtest.MemoryError
	if errors.As(err, &me) {
		fmt.Printf("%s on %s, region %d, page %d\n", me.VM, me.Host, me.Region, me.Page)
	}
	// Output:
	// oracle pages of vm0: 32
	// lost: true
	// vm0 on host1, region 0, page 4095
}
