package vgpusimtest

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
	"pgregory.net/rapid"
)

// The generators draw the library's inputs for property tests. Each
// shrinks towards the plainest value: the first GPU model (the P40), its
// smallest type, the default link (10 GbE), PreCopy in Bytes fidelity with
// every other field at its default, no workload, no fault. A failing run
// therefore shrinks to a scenario in which every value that does not
// matter is the plain one.

// GPUs draws a GPU model the library knows: P40, V100, V100D, T4 or
// A100.
func GPUs() *rapid.Generator[vgpu.GPUSpec] {
	return rapid.SampledFrom([]vgpu.GPUSpec{vgpu.P40(), vgpu.V100(), vgpu.V100D(), vgpu.T4(), vgpu.A100()})
}

// Profiles draws a vGPU type of gpu, the smallest framebuffer first so
// that a failing run shrinks to the smallest type. gpu must be a model
// the library has types for (vgpu.Profiles(gpu.Model) not empty).
func Profiles(gpu vgpu.GPUSpec) *rapid.Generator[vgpu.Profile] {
	ps := slices.Clone(vgpu.Profiles(gpu.Model))
	slices.SortStableFunc(ps, func(a, b vgpu.Profile) int { return cmp.Compare(a.FramebufferBytes, b.FramebufferBytes) })
	return rapid.SampledFrom(ps)
}

// Links draws a link preset: 10 GbE first, then the others slowest first.
func Links() *rapid.Generator[migrate.Link] {
	ls := []migrate.Link{migrate.GbE10()}
	for _, l := range migrate.Links() {
		if l.Name != ls[0].Name {
			ls = append(ls, l)
		}
	}
	return rapid.SampledFrom(ls)
}

// Policies draws a migration policy: the mode (PreCopy, Legacy or
// PostCopy), the stun target (from 10 ms to 2 s, or the default), the
// rounds (1 to 8, or the default) and what to do when pre-copy does not
// converge (throttle, switch over anyway or, in PreCopy, switch to
// post-copy: the hybrid). It shrinks to PreCopy, the default target and
// rounds, and Throttle.
func Policies() *rapid.Generator[migrate.Policy] {
	return rapid.Custom(func(t *rapid.T) migrate.Policy {
		var p migrate.Policy
		p.Mode = rapid.SampledFrom([]migrate.Mode{migrate.PreCopy, migrate.Legacy, migrate.PostCopy}).Draw(t, "mode")
		if rapid.Bool().Draw(t, "customTarget") {
			p.StunTarget = time.Duration(rapid.Int64Range(10, 2000).Draw(t, "stunTargetMS")) * time.Millisecond
		}
		if rapid.Bool().Draw(t, "customRounds") {
			p.MaxRounds = rapid.IntRange(1, 8).Draw(t, "maxRounds")
		}
		choices := []migrate.NonConvergence{migrate.Throttle, migrate.SwitchAnyway}
		if p.Mode == migrate.PreCopy {
			choices = append(choices, migrate.SwitchToPostCopy)
		}
		p.OnNonConvergence = rapid.SampledFrom(choices).Draw(t, "onNonConvergence")
		return p
	})
}

// Configs draws a migration's configuration in Bytes fidelity, so that
// every page really crosses the stream and an Oracle can tell a lost one:
// a Policies policy, a Links link, a codec, a batch size and a stall
// timeout of 0.25 to 2 s, short beside the default so that a stalled link
// costs little simulated (and wall) time.
func Configs() *rapid.Generator[migrate.Config] {
	return rapid.Custom(func(t *rapid.T) migrate.Config {
		return migrate.Config{
			Policy:     Policies().Draw(t, "policy"),
			Fidelity:   migrate.Bytes,
			Link:       Links().Draw(t, "link"),
			Codec:      rapid.SampledFrom([]migrate.Codec{migrate.CodecZstd, migrate.CodecNone, migrate.CodecS2, migrate.CodecAuto}).Draw(t, "codec"),
			BatchBytes: rapid.SampledFrom([]int{1 << 20, 64 << 10}).Draw(t, "batchBytes"),
			Timeout:    time.Duration(rapid.Int64Range(250, 2000).Draw(t, "timeoutMS")) * time.Millisecond,
		}
	})
}

// WorkloadSpec describes a workload small enough for byte-exact runs; Build
// makes it. The zero value is no workload.
type WorkloadSpec struct {
	// Kind is "" (none), "inference", "training", "cad" or "desktop".
	Kind string
	// FramebufferDirtyBytesPerSec is how fast inference rewrites its
	// framebuffer footprint.
	FramebufferDirtyBytesPerSec int64
	Seed                        uint64
}

// Workload sizes: small enough that a byte-exact migration takes
// milliseconds of wall time, large enough to span many pages.
const (
	workloadRAMBytes         = 1 << 20
	workloadFramebufferBytes = 2 << 20
)

// tinyModel is a network whose requests cost microseconds of a GPU;
// trainModel one whose training iterations take tens of milliseconds, so
// that a second of a scenario holds tens of them, not thousands.
var (
	tinyModel  = vgpu.Model{Name: "tiny", MACs: 50_000_000, Layers: 4, Parameters: 100_000, InputBytes: 16 << 10, ActivationBytes: 64 << 10}
	trainModel = vgpu.Model{Name: "small", MACs: 20_000_000_000, Layers: 10, Parameters: 250_000, InputBytes: 64 << 10, ActivationBytes: 256 << 10}
)

// Workloads draws a WorkloadSpec: none first, then inference, training,
// CAD and desktop.
func Workloads() *rapid.Generator[WorkloadSpec] {
	return rapid.Custom(func(t *rapid.T) WorkloadSpec {
		w := WorkloadSpec{Kind: rapid.SampledFrom(workloadKinds).Draw(t, "workload")}
		if w.Kind == "" {
			return w
		}
		if w.Kind == "inference" {
			w.FramebufferDirtyBytesPerSec = rapid.Int64Range(0, 8<<20).Draw(t, "fbDirtyBytesPerSec")
		}
		w.Seed = rapid.Uint64().Draw(t, "workloadSeed")
		return w
	})
}

// Build makes the workload, or returns nil for none; an unknown kind is
// an error wrapping ErrInvalid. Its guest memory lies
// in the first MiB after the guest OS footprint and its framebuffer data
// in each framebuffer's first 2 MiB.
func (w WorkloadSpec) Build() (vgpu.Workload, error) {
	switch w.Kind {
	case "inference":
		return vgpu.NewInference(vgpu.InferenceConfig{Model: tinyModel, RequestsPerSec: 50, FootprintBytes: workloadFramebufferBytes,
			RAMWorkingSetBytes: workloadRAMBytes, FramebufferDirtyBytesPerSec: w.FramebufferDirtyBytesPerSec, Seed: w.Seed})
	case "training":
		// Each iteration rewrites the weights with real bytes: 128 KiB
		// keep a scenario's many iterations cheap.
		return vgpu.NewTraining(vgpu.TrainingConfig{Model: trainModel, BatchSize: 1, WeightsBytes: 128 << 10, Seed: w.Seed})
	case "cad":
		return vgpu.NewCAD(vgpu.CADConfig{FootprintBytes: workloadFramebufferBytes, WidthPixels: 320, HeightPixels: 200,
			RAMWorkingSetBytes: workloadRAMBytes, Seed: w.Seed})
	case "desktop":
		return vgpu.NewDesktop(vgpu.DesktopConfig{SurfaceBytes: workloadFramebufferBytes, RAMWorkingSetBytes: workloadRAMBytes,
			UpdatesPerSec: 20, Seed: w.Seed})
	}
	return nil, w.validate()
}

// workloadKinds are the kinds Build knows, none first.
var workloadKinds = []string{"", "inference", "training", "cad", "desktop"}

// validate reports a kind Build does not know, wrapping ErrInvalid.
func (w WorkloadSpec) validate() error {
	if !slices.Contains(workloadKinds, w.Kind) {
		return fmt.Errorf("%w: workload kind %q (known: %q)", ErrInvalid, w.Kind, workloadKinds[1:])
	}
	return nil
}

// SimFault is a fault to inject into a simulated migration.
type SimFault struct {
	// Fault is the failure.
	Fault migrate.Fault
	// Link, for FaultLinkDown and FaultLinkStall, injects it into every
	// migration over the link of that name (Sim.FailLink) instead of one
	// migration (Migration.Inject).
	Link bool
}

// SimFaults draws a fault of the simulated mode.
func SimFaults() *rapid.Generator[SimFault] {
	return rapid.Custom(func(t *rapid.T) SimFault {
		f := SimFault{Fault: rapid.SampledFrom(migrate.Faults()).Draw(t, "fault")}
		if f.Fault == migrate.FaultLinkDown || f.Fault == migrate.FaultLinkStall {
			f.Link = rapid.Bool().Draw(t, "wholeLink")
		}
		return f
	})
}

// ConnFaults draws a FaultConn plan that breaks within the first limit
// bytes of either direction: a close or a stall, flipped bits, writes
// split into small pieces. It shrinks to the plan that breaks nothing.
func ConnFaults(limit int64) *rapid.Generator[Fault] {
	limit = max(limit, 1)
	return rapid.Custom(func(t *rapid.T) Fault {
		var f Fault
		cut := func(label string) Cut {
			switch rapid.IntRange(0, 2).Draw(t, label) {
			case 1:
				return CloseAfter(rapid.Int64Range(0, limit).Draw(t, label+"After"))
			case 2:
				return StallAfter(rapid.Int64Range(0, limit).Draw(t, label+"After"))
			}
			return Cut{}
		}
		f.Write, f.Read = cut("write"), cut("read")
		f.FlipWriteBits = rapid.SliceOfN(rapid.Int64Range(0, 8*limit-1), 0, 3).Draw(t, "flipWriteBits")
		f.FlipReadBits = rapid.SliceOfN(rapid.Int64Range(0, 8*limit-1), 0, 3).Draw(t, "flipReadBits")
		f.WriteChunkBytes = rapid.SampledFrom([]int{0, 1, 7, 512}).Draw(t, "writeChunkBytes")
		f.Seed = rapid.Uint64().Draw(t, "faultSeed")
		return f
	})
}
