package migrate_test

import (
	"testing"

	"github.com/vgpusim/vgpusim/vgpusimtest"
	"pgregory.net/rapid"
)

// TestScenarioInvariants is the library's property on the public test
// kit: in every scenario the kit draws — hosts of any GPU model, VMs of
// any type running any workload under the kit's memory oracle,
// migrations of any configuration, faults, cancels, pauses and the
// user's own writes — every invariant holds after every step: one owner
// per VM, nothing lost by content, nothing readable after a scrub, the
// schedulers' conservation of time, consistent reports, and a failed
// migration's VM on its source as the steps left it. The tests of
// package migrate itself cannot import the kit (it imports migrate), so
// this one lives in the external test package.
func TestScenarioInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w, err := vgpusimtest.NewWorld(vgpusimtest.Scenario(rt))
		if err != nil {
			rt.Fatal(err)
		}
		w.Run(rt)
	})
}
