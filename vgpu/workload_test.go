package vgpu

import (
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

func TestModelWork(t *testing.T) {
	p40 := P40()
	for _, tc := range []struct {
		name string
		ops  int64
		peak int64
		eff  float64
		want time.Duration
	}{
		// Inception V3: 2 x 5000 M ops over a quarter of 11.76 TFLOPS.
		{"InceptionV3 FP32", 2 * InceptionV3().MACs, p40.FP32FlopsPerSec, 0.25, 3401915},
		{"MobileNet FP32", 2 * MobileNet().MACs, p40.FP32FlopsPerSec, 0.25, 387138},
		{"InceptionV3 INT8", 2 * InceptionV3().MACs, p40.INT8OpsPerSec, 0.25, 851063},
		{"zero", 0, p40.FP32FlopsPerSec, 1, 1},
	} {
		if got := GPUWork(tc.ops, tc.peak, tc.eff); got != tc.want {
			t.Errorf("%s: %v (%d ns), want %v", tc.name, got, got, tc.want)
		}
	}
	if InceptionV3().MACs != 5000e6 || InceptionV3().Layers != 48 || MobileNet().MACs != 569e6 || MobileNet().Layers != 28 {
		t.Error("presets differ from the GTC 2019 talk's MLaaS experiment")
	}
	if InceptionV3().WeightsBytes() != 95_600_000 || MobileNet().WeightsBytes() != 17_200_000 {
		t.Errorf("weights %d, %d", InceptionV3().WeightsBytes(), MobileNet().WeightsBytes())
	}
	w, _ := NewInference(InferenceConfig{})
	if c := w.Config(); c.Model.Name != "Inception V3" || c.RequestsPerSec != 50 || c.Efficiency != 0.25 || c.Precision != FP32 {
		t.Errorf("inference defaults %+v", c)
	}
	tr, _ := NewTraining(TrainingConfig{})
	if c := tr.Config(); c.BatchSize != 32 || c.OptimizerStateBytes != 2*InceptionV3().WeightsBytes() || c.QueueDepth != 2 || c.PollInterval != time.Millisecond {
		t.Errorf("training defaults %+v", c)
	}
	if got := tr.IterationWork(p40); got != GPUWork(3*2*5000e6*32, p40.FP32FlopsPerSec, 0.4) {
		t.Errorf("iteration work %v", got)
	}
}

func TestWorkloadConfigErrors(t *testing.T) {
	for name, err := range map[string]error{
		"inference rate":       func() error { _, err := NewInference(InferenceConfig{RequestsPerSec: -1}); return err }(),
		"inference efficiency": func() error { _, err := NewInference(InferenceConfig{Efficiency: 1.5}); return err }(),
		"training batch":       func() error { _, err := NewTraining(TrainingConfig{BatchSize: -3}); return err }(),
		"training depth":       func() error { _, err := NewTraining(TrainingConfig{QueueDepth: 100}); return err }(),
		"cad fps":              func() error { _, err := NewCAD(CADConfig{TargetFPS: 5000}); return err }(),
		"desktop rate":         func() error { _, err := NewDesktop(DesktopConfig{UpdatesPerSec: -1}); return err }(),
	} {
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// run starts w on a fresh host with one vGPU of profile and advances d.
func run(t tb, cfg HostConfig, profile string, w Workload, d time.Duration) (*Host, *VM) {
	h := newHost(t, cfg)
	vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 4 * GiB, Profiles: []string{profile}, Workload: w})
	must(t, vm.Start())
	advance(t, h, d)
	return h, vm
}

func TestInferenceAlone(t *testing.T) {
	w, _ := NewInference(InferenceConfig{RequestsPerSec: 50, Seed: 9})
	h, _ := run(t, HostConfig{}, "P40-24Q", w, 20*time.Second)
	m := w.Metrics(0, h.Now())
	work := w.RequestWork(P40())
	if m.ThroughputPerSec < 45 || m.ThroughputPerSec > 55 {
		t.Errorf("throughput %v at 50 requests/s", m.ThroughputPerSec)
	}
	// At 17 % load most requests find the GPU idle: the median is the
	// work itself, and none is faster.
	if m.LatencyP50 != work || m.LatencyMean < work || m.LatencyP99 <= work || m.LatencyP99 > 10*work {
		t.Errorf("latency %v (work %v)", m, work)
	}
	if m.BusyTime != m.LatencyMean*time.Duration(m.Completed)+m.BusyTime%time.Duration(m.Completed) {
		t.Errorf("busy time %v", m.BusyTime)
	}
}

// TestInferenceSharing: two inference VMs on one GPU share it; under equal
// share a lone tenant gets half, so its latency doubles.
func TestInferenceSharing(t *testing.T) {
	lat := map[sched.Policy]time.Duration{}
	for _, policy := range []sched.Policy{sched.BestEffort, sched.EqualShare} {
		h := newHost(t, HostConfig{Sched: sched.Config{Policy: policy}})
		var ws []*Inference
		for _, id := range []string{"a", "b"} {
			w, _ := NewInference(InferenceConfig{RequestsPerSec: 20, Seed: uint64(len(id) + len(ws))})
			vm := mustVM(t, h, VMSpec{ID: id, RAMBytes: 4 * GiB, Profiles: []string{"P40-12Q"}, Workload: w})
			must(t, vm.Start())
			ws = append(ws, w)
		}
		advance(t, h, 10*time.Second)
		lat[policy] = ws[0].Metrics(0, h.Now()).LatencyP50
	}
	work := GPUWork(2*InceptionV3().MACs, P40().FP32FlopsPerSec, 0.25)
	if lat[sched.BestEffort] != work || lat[sched.EqualShare] < 3*work/2 {
		t.Errorf("median latency best effort %v, equal share %v (work %v)", lat[sched.BestEffort], lat[sched.EqualShare], work)
	}
}

func TestTraining(t *testing.T) {
	w, _ := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 16, FootprintBytes: 320 * MiB, Seed: 1})
	h, vm := run(t, HostConfig{}, "P40-24Q", w, 2*time.Second)
	work := w.IterationWork(P40())
	m := w.Metrics(0, h.Now())
	if want := int64(2 * time.Second / work); m.Completed < want-1 || m.Completed > want {
		t.Errorf("%d iterations in 2 s of %v each", m.Completed, work)
	}
	if m.LatencyP50 != work || m.LatencyMax != work {
		t.Errorf("iteration time %v, work %v: the queue ran dry", m, work)
	}
	// Every iteration rewrote the weights and the optimizer state.
	st, _ := vm.Framebuffers()[0].PageState(0)
	if st.Class != memory.ClassTrainingWeights || int64(st.Gen) != m.Completed+1 {
		t.Errorf("weights page: %+v after %d iterations", st, m.Completed)
	}
	ost, _ := vm.RAM().PageState(int(w.optimizer.off / 4096))
	if int64(ost.Gen) != m.Completed+1 {
		t.Errorf("optimizer page generation %d after %d iterations", ost.Gen, m.Completed)
	}
	// A throttled framework leaves the GPU idle 1-f of the time.
	must(t, vm.SetThrottle(0.5))
	from := h.Now()
	advance(t, h, 2*time.Second)
	if tm := w.Metrics(from+100*time.Millisecond, h.Now()); tm.LatencyP50 < 19*work/10 || tm.LatencyP50 > 21*work/10+2*time.Millisecond {
		t.Errorf("throttled iteration time %v, work %v", tm.LatencyP50, work)
	}
}

func TestCADFrameRate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  sched.Policy
		profile string
		target  float64
		wantFPS float64
	}{
		{"B series limited to 45", sched.BestEffort, "P40-1B", 60, 45},
		{"Q series limited to 60", sched.BestEffort, "P40-2Q", 100, 60},
		{"limiter off under equal share", sched.EqualShare, "P40-1B", 60, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := NewCAD(CADConfig{TargetFPS: tc.target, SceneBytes: 64 * MiB, OpsPerPixel: 1000, RAMWorkingSetBytes: 64 * MiB})
			h, _ := run(t, HostConfig{Sched: sched.Config{Policy: tc.policy}}, tc.profile, w, 4*time.Second)
			m := w.Metrics(0, h.Now())
			if m.ThroughputPerSec < tc.wantFPS-1 || m.ThroughputPerSec > tc.wantFPS+0.5 || m.Dropped != 0 {
				t.Errorf("%v", m)
			}
		})
	}
	// Frames heavier than the frame period are skipped.
	w, _ := NewCAD(CADConfig{TargetFPS: 60, SceneBytes: 64 * MiB, OpsPerPixel: 200000, RAMWorkingSetBytes: 64 * MiB})
	h, vm := run(t, HostConfig{}, "P40-24Q", w, 2*time.Second)
	m := w.Metrics(0, h.Now())
	if m.Dropped == 0 || m.ThroughputPerSec > 30 || m.LatencyP50 != w.FrameWork(P40()) {
		t.Errorf("heavy frames: %v (frame work %v)", m, w.FrameWork(P40()))
	}
	if st, _ := vm.Framebuffers()[0].PageState(int(w.targets.span.off / (64 << 10))); st.Gen < 2 {
		t.Errorf("render target not rewritten: %+v", st)
	}
}

func TestDesktop(t *testing.T) {
	w, _ := NewDesktop(DesktopConfig{Seed: 2, RAMWorkingSetBytes: 64 * MiB})
	h := newHost(t, HostConfig{})
	vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 4 * GiB, Profiles: []string{"P40-1B"}, Workload: w})
	if vm.RAM().DirtyLogging() {
		t.Fatal("a VM not migrating logs dirty pages")
	}
	vm.RAM().StartDirtyLog()
	must(t, vm.Start())
	advance(t, h, 20*time.Second)
	m := w.Metrics(0, h.Now())
	if m.ThroughputPerSec < 4 || m.ThroughputPerSec > 6 || m.LatencyP99 > time.Millisecond {
		t.Errorf("%v", m)
	}
	var set memory.PageSet
	if n := vm.RAM().CollectDirty(&set); n == 0 || n > 20*256+int(64*MiB/4096)+1 {
		t.Errorf("%d RAM pages dirtied", n)
	}
}

// TestFootprint: FootprintBytes sets how much of the framebuffer holds
// data, up to what the guest can use.
func TestFootprint(t *testing.T) {
	h := newHost(t, HostConfig{GPUs: 2})
	w, _ := NewInference(InferenceConfig{FootprintBytes: 5 * GiB})
	vm := mustVM(t, h, VMSpec{ID: "a", RAMBytes: 4 * GiB, Profiles: []string{"P40-12Q"}, Workload: w})
	must(t, vm.Start())
	fb := vm.Framebuffers()[0]
	n := 0
	for p := range fb.Pages() {
		if z, _ := fb.IsZeroPage(p); !z {
			n++
		}
	}
	// The footprint, plus the four pages of page tables and GPFIFOs in the
	// reservation.
	if want := int(5*GiB/(64<<10)) + 4; n != want {
		t.Errorf("%d non-zero pages, want %d", n, want)
	}
	// One that does not fit is refused where the VM is made.
	big, _ := NewInference(InferenceConfig{FootprintBytes: 12 * GiB})
	if _, err := h.CreateVM(VMSpec{ID: "b", RAMBytes: 4 * GiB, Profiles: []string{"P40-12Q"}, Workload: big}); !errors.Is(err, ErrWorkload) {
		t.Errorf("12 GiB on a 12Q (%d usable): %v", vm.VGPUs()[0].UsableFramebufferBytes(), err)
	}
}

func TestMultiVGPUWorkloads(t *testing.T) {
	h := newHost(t, HostConfig{GPUs: 2})
	inf, _ := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 400, Seed: 1})
	a := mustVM(t, h, VMSpec{ID: "a", RAMBytes: 4 * GiB, Profiles: []string{"P40-24Q", "P40-24Q"}, Workload: inf})
	must(t, a.Start())
	advance(t, h, time.Second)
	for i, v := range a.VGPUs() {
		if v.regs[RegCompleted] < 150 {
			t.Errorf("vGPU %d completed %d requests", i, v.regs[RegCompleted])
		}
	}
	must(t, a.Destroy())
	tr, _ := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 8, FootprintBytes: 64 * MiB})
	b := mustVM(t, h, VMSpec{ID: "b", RAMBytes: 4 * GiB, Profiles: []string{"P40-24C", "P40-24C"}, Workload: tr})
	must(t, b.Start())
	advance(t, h, time.Second)
	m := tr.Metrics(h.Now()-time.Second, h.Now())
	if m.Completed == 0 || b.VGPUs()[0].regs[RegCompleted] != b.VGPUs()[1].regs[RegCompleted] {
		t.Errorf("training on two vGPUs: %v, %d vs %d jobs", m, b.VGPUs()[0].regs[RegCompleted], b.VGPUs()[1].regs[RegCompleted])
	}
}

func TestHistory(t *testing.T) {
	h := newHistory(4)
	for i := range 10 {
		h.add(record{start: 0, end: time.Duration(i+1) * time.Second})
	}
	m := h.metrics("x", 0, time.Hour)
	if m.Completed != 4 || !m.Partial || m.LatencyMax != 10*time.Second || m.LatencyP50 != 8*time.Second {
		t.Errorf("%+v", m)
	}
	if m := h.metrics("x", 8*time.Second, time.Hour); m.Partial || m.Completed != 3 {
		t.Errorf("%+v", m)
	}
	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if Percentile(lat, 50) != 5 || Percentile(lat, 99) != 10 || Percentile(lat[:1], 99) != 1 {
		t.Error("percentile")
	}
}

// TestModelPresetsAreCopies checks that changing the Model a preset
// returned leaves the next one, and a workload's default, as published.
func TestModelPresetsAreCopies(t *testing.T) {
	for _, preset := range []func() Model{InceptionV3, MobileNet} {
		want := preset()
		m := preset()
		m.Name, m.MACs, m.Layers, m.Parameters, m.InputBytes, m.ActivationBytes = "changed", 1, 1, 1, 1, 1
		if got := preset(); got != want {
			t.Errorf("after changing a copy the preset is %+v, want %+v", got, want)
		}
	}
	inf, err := NewInference(InferenceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got := inf.Config().Model; got != InceptionV3() {
		t.Errorf("inference default model %+v", got)
	}
}
