package migrate

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
	"pgregory.net/rapid"
)

var trainModel = vgpu.Model{Name: "small", MACs: 2_000_000_000, Layers: 10, Parameters: 250_000, InputBytes: 64 << 10, ActivationBytes: 256 << 10}

// drawWorkload draws one of the vgpu workloads, small enough for byte-exact
// runs, or the counter oracle.
func drawWorkload(t *rapid.T) vgpu.Workload {
	seed := rapid.Uint64().Draw(t, "wseed")
	var w vgpu.Workload
	var err error
	switch rapid.IntRange(0, 4).Draw(t, "workload") {
	case 0:
		w, err = vgpu.NewInference(vgpu.InferenceConfig{Model: tinyModel, RequestsPerSec: 50, FootprintBytes: 8 * MiB,
			RAMWorkingSetBytes: 4 * MiB, FramebufferDirtyBytesPerSec: rapid.Int64Range(0, 8*MiB).Draw(t, "fbdirty"), Seed: seed})
	case 1:
		// Iterations of a few milliseconds rewriting 1 MiB of weights:
		// real bytes are generated for every rewrite.
		w, err = vgpu.NewTraining(vgpu.TrainingConfig{Model: trainModel, BatchSize: 1, WeightsBytes: 1 * MiB, Seed: seed})
	case 2:
		w, err = vgpu.NewCAD(vgpu.CADConfig{SceneBytes: 4 * MiB, WidthPixels: 320, HeightPixels: 200, RAMWorkingSetBytes: 4 * MiB, Seed: seed})
	case 3:
		w, err = vgpu.NewDesktop(vgpu.DesktopConfig{RAMWorkingSetBytes: 4 * MiB, UpdatesPerSec: 20, Seed: seed})
	default:
		w = &counterWorkload{PagesPerSec: rapid.Int64Range(1, 2000).Draw(t, "pagesPerSec"), Pages: 256}
	}
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestDestinationEqualsSourceProperty is the library's core property: for
// random profiles, workloads, seeds, link speeds and modes, in Bytes
// fidelity, at the instant the destination restores the VM (the source
// paused as it was at the stun) its guest RAM and every framebuffer
// equal the source's, byte for byte and generation for generation, and its
// device states equal the source's field by field but for the generation
// ID a restore renews.
func TestDestinationEqualsSourceProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		profile := rapid.SampledFrom([]string{"P40-1Q", "P40-2Q"}).Draw(rt, "profile")
		fbPage := rapid.SampledFrom([]int{4 << 10, 64 << 10}).Draw(rt, "fbPage")
		mk := func(name string, seed uint64, start time.Duration) *vgpu.Host {
			h, err := vgpu.NewHost(vgpu.HostConfig{Name: name, Memory: memory.Sparse, FramebufferPageSize: fbPage, Seed: seed, RAMBytes: 4 * GiB, Start: start})
			if err != nil {
				rt.Fatal(err)
			}
			return h
		}
		// Both hosts read one clock (a Sim requires it), started anywhere.
		start := time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(rt, "start"))
		src := mk("src", rapid.Uint64().Draw(rt, "srcSeed"), start)
		dst := mk("dst", rapid.Uint64().Draw(rt, "dstSeed"), start)
		vm, err := src.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: 64 * MiB, RAMFootprintBytes: 4 * MiB,
			Profiles: []string{profile}, Workload: drawWorkload(rt), Seed: rapid.Uint64Range(1, 1<<62).Draw(rt, "vmSeed")})
		if err != nil {
			rt.Fatal(err)
		}
		if err := vm.Start(); err != nil {
			rt.Fatal(err)
		}
		if err := src.Advance(time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(rt, "warmup"))); err != nil {
			rt.Fatal(err)
		}
		cfg := Config{Policy: Policy{Mode: rapid.SampledFrom([]Mode{PreCopy, Legacy}).Draw(rt, "mode"), OnNonConvergence: rapid.SampledFrom([]NonConvergence{Throttle, SwitchAnyway}).Draw(rt, "policy"), MaxRounds: rapid.IntRange(1, 5).Draw(rt, "maxRounds")}, Link: rapid.SampledFrom([]Link{GbE1(), GbE10()}).Draw(rt, "link"), Codec: rapid.SampledFrom([]Codec{CodecZstd, CodecNone, CodecS2, CodecAuto}).Draw(rt, "codec"), BatchBytes: rapid.SampledFrom([]int{64 << 10, 1 << 20}).Draw(rt, "batch"), Fidelity: Bytes}
		sameClock(rt, src, dst)
		s, err := NewSim(SimConfig{}, src, dst)
		if err != nil {
			rt.Fatal(err)
		}
		m, err := s.Start(vm, dst, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		runTo(rt, m, PhaseRestore)
		in := m.in
		for i, pair := range [][2]*memory.Region{{vm.RAM(), in.RAM()}, {vm.Framebuffers()[0], in.Framebuffers()[0]}} {
			if p, err := memory.FirstDiff(pair[0], pair[1]); err != nil || p >= 0 {
				rt.Fatalf("region %d differs at page %d (%v)", i, p, err)
			}
		}
		// The states saved at the stun against the destination's at the
		// instant of the restore: a paused tenant's times are kept
		// relative to its scheduler's clock, so both must be taken at
		// their own end's moment.
		var a []vgpu.DeviceState
		for _, blob := range m.states {
			st, err := vgpu.DecodeState(blob)
			if err != nil {
				rt.Fatal(err)
			}
			a = append(a, st)
		}
		b, err := in.Snapshots()
		if err != nil {
			rt.Fatal(err)
		}
		for i := range a {
			if a[i].GenerationID == b[i].GenerationID {
				rt.Fatalf("vGPU %d kept its generation ID across the restore", i)
			}
		}
		if d := cmp.Diff(a, b, cmpopts.IgnoreFields(vgpu.DeviceState{}, "GenerationID")); d != "" {
			rt.Fatalf("device states differ (-source +destination):\n%s", d)
		}
		if _, err := m.Run(); err != nil {
			rt.Fatal(err)
		}
		if w, ok := in.Workload().(*counterWorkload); ok {
			w.Check(rt, in)
		}
	})
}

// TestDeterminism: the same inputs give the same report, event for event,
// with one thread or two.
func TestDeterminism(t *testing.T) {
	run := func(procs int) *Report {
		defer setProcs(procs)()
		src, dst := hostPair(t, memory.Sparse, 1)
		vm := inferenceVM(t, src, "vm", "P40-2Q", 128*MiB, 32*MiB, tinyModel, 9)
		must(t, src.Advance(time.Second))
		sameClock(t, src, dst)
		rep, err := Migrate(vm, dst, Config{Link: GbE1(), Fidelity: Bytes})
		must(t, err)
		return rep
	}
	a, b := run(1), run(2)
	if d := cmp.Diff(a, b); d != "" {
		t.Fatalf("reports differ between GOMAXPROCS 1 and 2:\n%s", d)
	}
	if len(a.Events) < 10 || a.WireBytes == 0 {
		t.Fatalf("suspiciously empty report: %v", a)
	}
}

func TestReportJSON(t *testing.T) {
	src, dst := hostPair(t, memory.Synthetic, 1)
	vm := inferenceVM(t, src, "vm", "P40-2Q", 128*MiB, 64*MiB, vgpu.MobileNet(), 3)
	rep, err := Migrate(vm, dst, Config{Fidelity: Model})
	must(t, err)
	b, err := jsonMarshal(rep)
	must(t, err)
	for _, key := range []string{`"stun_ns":`, `"stun_phases":`, `"dominant":"`, `"wire_bytes":`, `"mode":"pre-copy"`, `"switchover":"converged"`} {
		if !contains(b, key) {
			t.Errorf("JSON lacks %s:\n%s", key, b)
		}
	}
	s := rep.String()
	for _, want := range []string{"stun", "round  0", "dominant", fmt.Sprint(rep.Stun)} {
		if !contains([]byte(s), want) {
			t.Errorf("String lacks %q:\n%s", want, s)
		}
	}
}
