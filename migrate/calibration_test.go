package migrate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// calibrationVM is the VM of the published measurements: a P40 VM serving
// Inception V3 whose framebuffer holds usedBytes of data. A P40-24Q leaves
// room for every size in the table.
func calibrationVM(t testing.TB, h *vgpu.Host, profile string, usedBytes int64) *vgpu.VM {
	t.Helper()
	w, err := vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.InceptionV3(), RequestsPerSec: 100, FootprintBytes: usedBytes, Seed: 7})
	must(t, err)
	vm, err := h.CreateVM(vgpu.VMSpec{ID: "vm-" + profile, RAMBytes: 4 * GiB, RAMFootprintBytes: 1 * GiB, Profiles: []string{profile}, Workload: w})
	must(t, err)
	must(t, vm.Start())
	must(t, h.Advance(2*time.Second))
	return vm
}

// legacyFitTolerance is how far Legacy stun may stray from a published
// figure its constants were fitted to. Measured: +0.31 % at 1 GiB, the
// others within 0.16 % (the fit's own residuals, plus the final RAM pages
// and device state the table has no term for).
const legacyFitTolerance = 0.005

// legacyLOOTolerance is how far Legacy stun may stray from a published
// figure left out of the fit. Measured: +0.33 % predicting 1 GiB from the
// other five, the others within 0.17 %.
const legacyLOOTolerance = 0.005

// TestLegacyFitsPublishedStun: in Legacy mode over 10 GbE, the stun for
// each used framebuffer size of VMware's vSphere 6.7 U1 table is within
// legacyFitTolerance of the published figure. The constants were fitted to
// these six figures, so this checks that the model carries the fit
// through; TestLegacyLeaveOneOut checks that it predicts.
func TestLegacyFitsPublishedStun(t *testing.T) {
	for _, p := range PublishedStun() {
		t.Run(fmt.Sprintf("used=%dGiB", p.UsedGiB), func(t *testing.T) {
			src, dst := hostPair(t, memory.Synthetic, 1)
			vm := calibrationVM(t, src, "P40-24Q", int64(p.UsedGiB)*GiB)
			sameClock(t, src, dst)
			est, err := EstimateStun(vm, Config{Policy: Policy{Mode: Legacy}, Link: GbE10()})
			must(t, err)
			rep, err := Migrate(vm, dst, Config{Policy: Policy{Mode: Legacy, StunLimit: VSphere67U1StunLimit}, Fidelity: Model})
			must(t, err)
			dev := float64(rep.Stun-p.Stun) / float64(p.Stun)
			t.Logf("published %v, simulated %v (%+.2f %%), estimated %v, dominant %v", p.Stun, rep.Stun, 100*dev, est.Total, rep.Dominant)
			if dev < -legacyFitTolerance || dev > legacyFitTolerance {
				t.Errorf("stun %v is %+.2f %% off the published %v", rep.Stun, 100*dev, p.Stun)
			}
			if rep.Dominant != PhaseFinalFramebuffer {
				t.Errorf("dominant phase %v, want the framebuffer's copy", rep.Dominant)
			}
		})
	}
}

// fitLine is the least-squares line through points: stun = fixed +
// perGiB x used GiB.
func fitLine(points []StunPoint) (fixed, perGiB time.Duration) {
	return fitLineBy(points, func(p StunPoint) float64 { return float64(p.UsedGiB) })
}

// fitLineBy is the least-squares line through points with x(p) for each
// point's size: stun = fixed + perUnit x x(p).
func fitLineBy(points []StunPoint, x func(StunPoint) float64) (fixed, perUnit time.Duration) {
	var sx, sy, sxx, sxy float64
	for _, p := range points {
		x, y := x(p), p.Stun.Seconds()
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(points))
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	icept := (sy - slope*sx) / n
	return time.Duration(icept * float64(time.Second)), time.Duration(slope * float64(time.Second))
}

// TestLegacyFitIsPublished: the constants are the least-squares line
// through the six published figures, rounded to the millisecond.
func TestLegacyFitIsPublished(t *testing.T) {
	fixed, perGiB := fitLine(PublishedStun())
	checkFitConstants(t, "Legacy67U1Costs", fixed, perGiB, PublishedFitFixedStun, PublishedFitStunPerGiB, Legacy67U1Costs())
}

// checkFitConstants fails t unless a fit's fixed stun and slope are the
// constants written for them, to the millisecond, and the costs' fixed
// parts add up to the fixed stun.
func checkFitConstants(t *testing.T, costsName string, fixed, slope, wantFixed, wantSlope time.Duration, c StunCosts) {
	t.Helper()
	if d := fixed - wantFixed; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("fit's fixed stun %v, constant %v", fixed, wantFixed)
	}
	if d := slope - wantSlope; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("fit's slope %v, constant %v", slope, wantSlope)
	}
	if c.Quiesce+c.DeviceCheckpoint+c.Resume != wantFixed {
		t.Errorf("%s' fixed costs %v, the fit's %v", costsName, c.Quiesce+c.DeviceCheckpoint+c.Resume, wantFixed)
	}
}

// TestLegacyLeaveOneOut: for each figure of the published table, Legacy
// mode with its constants fitted the same way to the other five figures
// (quiesce and resume 100 ms, the rest of the fixed stun the device
// checkpoint's, the checkpoint path at 1 GiB per fitted second) predicts
// it within legacyLOOTolerance.
func TestLegacyLeaveOneOut(t *testing.T) {
	published := PublishedStun()
	worst := 0.0
	for i, p := range published {
		t.Run(fmt.Sprintf("used=%dGiB", p.UsedGiB), func(t *testing.T) {
			fixed, perGiB := fitLine(slices.Delete(slices.Clone(published), i, i+1))
			base := Legacy67U1Costs()
			costs := StunCosts{Quiesce: base.Quiesce, Resume: base.Resume,
				DeviceCheckpoint:          fixed - base.Quiesce - base.Resume,
				CheckpointPathBytesPerSec: GiB * int64(time.Second) / int64(perGiB)}
			src, dst := hostPair(t, memory.Synthetic, 1)
			vm := calibrationVM(t, src, "P40-24Q", int64(p.UsedGiB)*GiB)
			sameClock(t, src, dst)
			rep, err := Migrate(vm, dst, Config{Policy: Policy{Mode: Legacy, StunLimit: VSphere67U1StunLimit}, Fidelity: Model, Costs: costs})
			must(t, err)
			dev := float64(rep.Stun-p.Stun) / float64(p.Stun)
			worst = max(worst, math.Abs(dev))
			t.Logf("fitted to the other five: %v + %v/GiB; published %v, predicted %v (%+.2f %%)", fixed, perGiB, p.Stun, rep.Stun, 100*dev)
			if math.Abs(dev) > legacyLOOTolerance {
				t.Errorf("predicted stun %v is %+.2f %% off the published %v", rep.Stun, 100*dev, p.Stun)
			}
		})
	}
	t.Logf("worst prediction %.2f %% off", 100*worst)
}

// TestLegacyRefusesOverLimit: with 16 GB used the estimate passes 6.7 U1's
// 100 s limit, so the migration is refused and the VM stays, running, on
// the source.
func TestLegacyRefusesOverLimit(t *testing.T) {
	src, dst := hostPair(t, memory.Synthetic, 1)
	vm := calibrationVM(t, src, "P40-24Q", 16*GiB)
	sameClock(t, src, dst)
	_, err := Migrate(vm, dst, Config{Policy: Policy{Mode: Legacy, StunLimit: VSphere67U1StunLimit}, Fidelity: Model})
	var pe *PhaseError
	if !errors.Is(err, ErrStunLimit) || !errors.As(err, &pe) || pe.Phase != PhaseSetup {
		t.Fatalf("err = %v, want ErrStunLimit in setup", err)
	}
	if vm.State() != vgpu.VMRunning || vm.Host() != src || len(dst.VMs()) != 0 || dst.FreeRAMBytes() != dst.RAMBytes() {
		t.Fatalf("VM %v on %s; destination holds %d VMs", vm.State(), vm.Host().Name(), len(dst.VMs()))
	}
}

// TestPreCopyMeetsStandard: in PreCopy mode every P40 Q profile's VM,
// serving Inception V3 with its whole usable framebuffer in use, migrates
// over 10 GbE with a stun under one second.
func TestPreCopyMeetsStandard(t *testing.T) {
	for _, p := range vgpu.Profiles("P40") {
		if p.Series != vgpu.SeriesQ {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			src, dst := hostPair(t, memory.Synthetic, 1)
			vm := calibrationVM(t, src, p.Name, p.FramebufferBytes-p.ReservedFramebufferBytes(false))
			sameClock(t, src, dst)
			rep, err := Migrate(vm, dst, Config{Policy: Policy{Mode: PreCopy}, Fidelity: Model})
			must(t, err)
			t.Logf("stun %v, total %v, %d rounds, %v", rep.Stun, rep.Total, len(rep.Rounds), rep.Switchover)
			if !rep.MeetsStandard() || rep.Switchover != Converged {
				t.Errorf("stun %v (%v), want under 1 s", rep.Stun, rep.Switchover)
			}
		})
	}
}

// TestEstimateMatchesFit: the Legacy estimate is the fitted line itself.
func TestEstimateMatchesFit(t *testing.T) {
	src, _ := hostPair(t, memory.Synthetic, 1)
	vm := calibrationVM(t, src, "P40-24Q", 4*GiB)
	est, err := EstimateStun(vm, Config{Policy: Policy{Mode: Legacy}, Link: GbE10()})
	must(t, err)
	fit := PublishedFitFixedStun + 4*PublishedFitStunPerGiB
	if d := est.Total - fit; d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Errorf("estimate %v, fit %v", est.Total, fit)
	}
	pre, err := EstimateStun(vm, Config{Link: GbE10()})
	must(t, err)
	if pre.Total >= time.Second || pre.CheckpointPath != 0 {
		t.Errorf("pre-copy floor %+v", pre)
	}
}
