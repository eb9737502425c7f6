package migrate

import (
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// hotVM dirties its framebuffer faster than 1 GbE carries: pre-copy over it
// cannot converge without help.
func hotVM(t testing.TB, h *vgpu.Host) *vgpu.VM {
	t.Helper()
	// Training rewrites all its weights every iteration, tens of times a
	// second.
	w, err := vgpu.NewTraining(vgpu.TrainingConfig{Model: vgpu.MobileNet(), FootprintBytes: 512 * MiB, Seed: 5})
	must(t, err)
	vm, err := h.CreateVM(vgpu.VMSpec{ID: "hot", RAMBytes: 2 * GiB, RAMFootprintBytes: 256 * MiB, Profiles: []string{"P40-2Q"}, Workload: w})
	must(t, err)
	must(t, vm.Start())
	must(t, h.Advance(time.Second))
	return vm
}

// TestNonConvergencePolicies: a workload that dirties memory faster than
// the link is throttled in steps (20 %, then 10 % more a round) and
// restored afterwards, switched over anyway, or left on the source.
func TestNonConvergencePolicies(t *testing.T) {
	t.Run("throttle", func(t *testing.T) {
		src, dst := hostPair(t, memory.Synthetic, 1)
		vm := hotVM(t, src)
		sameClock(t, src, dst)
		rep, err := Migrate(vm, dst, Config{Link: GbE1(), Fidelity: Model})
		must(t, err)
		if rep.MaxThrottle < DefaultThrottle().Start {
			t.Fatalf("no throttle applied: %v", rep)
		}
		var cuts []float64
		for _, r := range rep.Rounds {
			cuts = append(cuts, r.Throttle)
		}
		for i := 1; i < len(cuts); i++ {
			capped := cuts[i] == DefaultThrottle().Max
			if d := cuts[i] - cuts[i-1]; cuts[i-1] > 0 && !capped && (d < 0.099 || d > 0.101) {
				t.Fatalf("throttle steps %v", cuts)
			}
		}
		moved, _ := dst.VM("hot")
		if moved.Throttle() != 0 {
			t.Fatalf("throttle %v left on the VM", moved.Throttle())
		}
		t.Logf("throttle per round %v, switchover %v, stun %v", cuts, rep.Switchover, rep.Stun)
	})
	t.Run("switch anyway", func(t *testing.T) {
		src, dst := hostPair(t, memory.Synthetic, 1)
		vm := hotVM(t, src)
		sameClock(t, src, dst)
		rep, err := Migrate(vm, dst, Config{Policy: Policy{OnNonConvergence: SwitchAnyway}, Link: GbE1(), Fidelity: Model})
		must(t, err)
		if rep.Switchover != DirtyRateTooHigh || rep.MaxThrottle != 0 || rep.MeetsStandard() {
			t.Fatalf("switchover %v, throttle %v, stun %v", rep.Switchover, rep.MaxThrottle, rep.Stun)
		}
	})
	t.Run("abort", func(t *testing.T) {
		src, dst := hostPair(t, memory.Synthetic, 1)
		vm := hotVM(t, src)
		sameClock(t, src, dst)
		_, err := Migrate(vm, dst, Config{Policy: Policy{OnNonConvergence: Abort}, Link: GbE1(), Fidelity: Model})
		var pe *PhaseError
		if !errors.Is(err, ErrNotConverged) || !errors.As(err, &pe) || pe.Phase != PhasePreCopy {
			t.Fatalf("err %v", err)
		}
		if vm.State() != vgpu.VMRunning || vm.Throttle() != 0 {
			t.Fatalf("source VM %v, throttle %v", vm.State(), vm.Throttle())
		}
		checkNothingAt(t, dst)
	})
	t.Run("stun limit at switchover", func(t *testing.T) {
		src, dst := hostPair(t, memory.Synthetic, 1)
		vm := hotVM(t, src)
		sameClock(t, src, dst)
		// The floor passes the limit at the start; the dirty framebuffer
		// at switchover does not.
		_, err := Migrate(vm, dst, Config{Policy: Policy{OnNonConvergence: SwitchAnyway, StunLimit: 2 * time.Second}, Link: GbE1(), Fidelity: Model})
		var pe *PhaseError
		if !errors.Is(err, ErrStunLimit) || !errors.As(err, &pe) || pe.Phase != PhasePreCopy {
			t.Fatalf("err %v", err)
		}
		if vm.State() != vgpu.VMRunning || vm.Host() != src {
			t.Fatal("the VM left the source")
		}
		checkNothingAt(t, dst)
	})
}

func TestLinks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bps     int64
		goodput int64
	}{
		{"1g", 1e9, 117_685_305}, {"10g", 10e9, 1_176_853_055}, {"25g", 25e9, 2_942_132_639},
		{"40g", 40e9, 4_707_412_223}, {"100g", 100e9, 11_768_530_559},
		{"vmxnet3", 10e9, 1_000_000_000}, {"roce", 100e9, 11_875_000_000}, {"pvrdma", 100e9, 11_250_000_000},
	} {
		l, err := LinkByName(tc.name)
		must(t, err)
		if l.BandwidthBitsPerSec != tc.bps || l.GoodputBytesPerSec() != tc.goodput || l.Source == "" {
			t.Errorf("%s: %v, goodput %d", tc.name, l, l.GoodputBytesPerSec())
		}
	}
	if l, err := LinkByName("10GbE"); err != nil || l != GbE10() {
		t.Errorf("10GbE: %v %v", l, err)
	}
	if _, err := LinkByName("carrier pigeon"); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown link: %v", err)
	}
	if _, err := Migrate(nil, nil, Config{Link: Link{Name: "x", BandwidthBitsPerSec: 1}}); !errors.Is(err, ErrConfig) {
		t.Errorf("invalid link: %v", err)
	}
}
