package vgpu

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// mixedHost builds a host with one VM of each workload; the same seed gives
// the same host.
func mixedHost(t tb, policy sched.Policy) (*Host, []*VM) {
	h := newHost(t, HostConfig{Name: "h", GPUs: 2, Seed: 42, Sched: sched.Config{Policy: policy}, FramebufferPageSize: 256 << 10})
	inf, err := NewInference(InferenceConfig{Model: InceptionV3(), RequestsPerSec: 150, FootprintBytes: 256 * MiB, RAMWorkingSetBytes: 32 * MiB, FramebufferDirtyBytesPerSec: 8 * MiB, Seed: 1})
	must(t, err)
	tr, err := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 16, FootprintBytes: 96 * MiB, Seed: 2})
	must(t, err)
	cad, err := NewCAD(CADConfig{SceneBytes: 64 * MiB, WidthPixels: 1280, HeightPixels: 720, RAMWorkingSetBytes: 32 * MiB, Seed: 3})
	must(t, err)
	desk, err := NewDesktop(DesktopConfig{RAMWorkingSetBytes: 32 * MiB, UpdatesPerSec: 20, Seed: 4})
	must(t, err)
	var vms []*VM
	for i, w := range []Workload{inf, tr, cad, desk} {
		vm := mustVM(t, h, VMSpec{ID: []string{"inf", "train", "cad", "desk"}[i], RAMBytes: 512 * MiB, RAMFootprintBytes: 64 * MiB,
			Profiles: []string{"P40-8Q"}, Workload: w})
		must(t, vm.Start())
		vms = append(vms, vm)
	}
	return h, vms
}

// script is what happens to the mixed host at fixed times, whatever the
// step sizes.
func script(t tb, vms []*VM, at time.Duration) {
	switch at {
	case 3 * time.Second:
		must(t, vms[0].Pause())
		must(t, vms[1].Pause())
	case 4 * time.Second:
		must(t, vms[0].Resume())
		must(t, vms[1].Resume())
	case 5 * time.Second:
		must(t, vms[2].SetThrottle(0.5))
		must(t, vms[1].SetThrottle(0.3))
	case 7 * time.Second:
		must(t, vms[2].SetThrottle(0))
	}
}

var scriptTimes = []time.Duration{3 * time.Second, 4 * time.Second, 5 * time.Second, 7 * time.Second, 10 * time.Second}

// TestAdvanceSplitInvariance: advancing in many small, irregular steps
// gives the same metrics, memory, device states and scheduler state as
// advancing in as few steps as the script allows.
func TestAdvanceSplitInvariance(t *testing.T) {
	for _, policy := range []sched.Policy{sched.BestEffort, sched.EqualShare, sched.FixedShare} {
		t.Run(policy.String(), func(t *testing.T) {
			a, avms := mixedHost(t, policy)
			for _, at := range scriptTimes {
				advance(t, a, at-a.Now())
				script(t, avms, at)
			}
			b, bvms := mixedHost(t, policy)
			rng := rand.New(rand.NewPCG(7, 7))
			for _, at := range scriptTimes {
				for b.Now() < at {
					d := min(time.Duration(rng.Int64N(int64(40*time.Millisecond))), at-b.Now())
					if rng.IntN(10) == 0 {
						d = 0
					}
					advance(t, b, d)
				}
				script(t, bvms, at)
			}
			for i := range avms {
				ma := avms[i].Workload().Metrics(0, 10*time.Second)
				mb := bvms[i].Workload().Metrics(0, 10*time.Second)
				if ma != mb {
					t.Errorf("%s metrics differ:\n%v\n%v", avms[i].ID(), ma, mb)
				}
				if ma.Completed == 0 {
					t.Errorf("%s did nothing: %v", avms[i].ID(), ma)
				}
				if p := samePages(t, avms[i].RAM(), bvms[i].RAM()); p >= 0 {
					t.Errorf("%s RAM differs at page %d", avms[i].ID(), p)
				}
				if p := samePages(t, avms[i].Framebuffers()[0], bvms[i].Framebuffers()[0]); p >= 0 {
					t.Errorf("%s framebuffer differs at page %d", avms[i].ID(), p)
				}
				sa, _ := avms[i].Snapshots()
				sb, _ := bvms[i].Snapshots()
				if diff := cmp.Diff(sa, sb); diff != "" {
					t.Errorf("%s device state differs:\n%s", avms[i].ID(), diff)
				}
			}
		})
	}
}

// TestPauseLosesNothing: a paused VM writes nothing and its GPU work does
// not run; after resuming, every request that arrived in the meantime is
// served, its latency counting the pause.
func TestPauseLosesNothing(t *testing.T) {
	h := newHost(t, HostConfig{})
	w, err := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 100, FootprintBytes: 64 * MiB, RAMWorkingSetBytes: 16 * MiB, FramebufferDirtyBytesPerSec: 4 * MiB, Seed: 3})
	must(t, err)
	vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 256 * MiB, Profiles: []string{"P40-4Q"}, Workload: w})
	must(t, vm.Start())
	advance(t, h, time.Second)
	must(t, vm.Pause())
	ram, fb := vm.RAM(), vm.Framebuffers()[0]
	ram.StartDirtyLog() // a VM logs only while migrating
	fb.StartDirtyLog()
	before, _ := vm.Snapshots()
	advance(t, h, 5*time.Second)
	if ram.DirtyCount() != 0 || fb.DirtyCount() != 0 {
		t.Fatalf("paused VM dirtied %d RAM and %d framebuffer pages", ram.DirtyCount(), fb.DirtyCount())
	}
	after, _ := vm.Snapshots()
	// The scheduler part holds job ages, which grow; the rest must not
	// change, and the tenant must neither run nor lose work.
	if diff := cmp.Diff(before, after, cmpopts.IgnoreFields(DeviceState{}, "Sched")); diff != "" {
		t.Fatalf("paused device changed:\n%s", diff)
	}
	if m := w.Metrics(time.Second+time.Millisecond, 6*time.Second); m.Completed != 0 {
		t.Fatalf("paused VM completed %d requests", m.Completed)
	}
	must(t, vm.Resume())
	advance(t, h, 2*time.Second)
	all := w.Metrics(0, h.Now()+1)
	if all.Dropped != 0 || len(w.inflight) > 5 {
		t.Fatalf("requests lost: %v, %d in flight", all, len(w.inflight))
	}
	// About 100/s for 8 s: the 500 that arrived during the pause are
	// served after it.
	if all.Completed < 700 || all.Completed > 900 {
		t.Errorf("%d requests served in 8 s at 100/s", all.Completed)
	}
	if m := w.Metrics(6*time.Second, 6*time.Second+100*time.Millisecond); m.LatencyMax < 4*time.Second {
		t.Errorf("the pause does not show in latency: %v", m)
	}
}

// TestThrottle: a throttle cuts dirtying and GPU work to 1-f and is undone
// by 0.
func TestThrottle(t *testing.T) {
	h := newHost(t, HostConfig{})
	w, err := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 400, FootprintBytes: 64 * MiB, RAMWorkingSetBytes: 64 * MiB,
		RAMDirtyBytesPerSec: 64 * MiB, FramebufferDirtyBytesPerSec: 32 * MiB, Seed: 3})
	must(t, err)
	vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 256 * MiB, Profiles: []string{"P40-4Q"}, Workload: w})
	must(t, vm.Start())
	measure := func() (ram, fb int64, done int64) {
		r0, f0 := w.ram.written(), w.fb[0].written()
		from := h.Now()
		advance(t, h, 2*time.Second)
		return w.ram.written() - r0, w.fb[0].written() - f0, w.Metrics(from, h.Now()).Completed
	}
	r1, f1, d1 := measure()
	if r1 != 2*64*MiB/4096 || f1 != 2*32*MiB/(64<<10) {
		t.Fatalf("unthrottled: %d RAM pages, %d framebuffer pages in 2 s", r1, f1)
	}
	if err := vm.SetThrottle(1); !errors.Is(err, ErrConfig) {
		t.Errorf("throttle 1: %v", err)
	}
	must(t, vm.SetThrottle(0.75))
	r2, f2, d2 := measure()
	if r2 != r1/4 || f2 != f1/4 {
		t.Errorf("throttled 0.75: %d/%d RAM pages, %d/%d framebuffer pages", r2, r1, f2, f1)
	}
	if d2 < d1/4-60 || d2 > d1/4+60 {
		t.Errorf("throttled 0.75: %d requests, unthrottled %d", d2, d1)
	}
	must(t, vm.SetThrottle(0))
	if r3, _, _ := measure(); r3 != r1 {
		t.Errorf("after the throttle: %d RAM pages, want %d", r3, r1)
	}
}

// migrate moves vm to dst the way a migration does, copying all memory at
// the stun, and returns the destination VM running.
func migrate(t tb, vm *VM, dst *Host) *VM {
	t.Helper()
	must(t, vm.CheckMigratable())
	must(t, dst.CheckIncoming(vm.IncomingSpec()))
	in, err := dst.PrepareIncoming(vm.IncomingSpec())
	must(t, err)
	copyRegion(t, in.RAM(), vm.RAM())
	must(t, vm.Pause())
	copyRegion(t, in.RAM(), vm.RAM())
	for i, fb := range vm.Framebuffers() {
		copyRegion(t, in.Framebuffers()[i], fb)
	}
	states, err := vm.SaveDeviceStates()
	must(t, err)
	must(t, vm.HandOverWorkload(in))
	must(t, in.Restore(states))
	a, _ := vm.Snapshots()
	b, _ := in.Snapshots()
	for i := range a {
		if d := a[i].Diff(b[i]); len(d) != 1 || d[0] != "GenerationID" {
			t.Fatalf("vGPU %d: device states differ in %v", i, d)
		}
	}
	must(t, in.Resume())
	return in
}

// tinyModel keeps byte-exact (Sparse) tests fast: generating real bytes for
// megabytes of activations per request is what makes Sparse slow.
var tinyModel = Model{Name: "tiny", MACs: 50_000_000, Layers: 10, Parameters: 1_000_000, InputBytes: 64 << 10, ActivationBytes: 256 << 10}

func TestMigrationFlow(t *testing.T) {
	src := newHost(t, HostConfig{Name: "src", GPUs: 2, Seed: 1, Memory: memory.Sparse})
	dst := newHost(t, HostConfig{Name: "dst", GPUs: 2, Seed: 2, Memory: memory.Sparse, Start: time.Hour})
	mustVM(t, dst, VMSpec{ID: "other", Profiles: []string{"P40-1Q"}})
	w, err := NewInference(InferenceConfig{Model: tinyModel, RequestsPerSec: 200, FootprintBytes: 32 * MiB, RAMWorkingSetBytes: 8 * MiB, Seed: 3})
	must(t, err)
	vm := mustVM(t, src, VMSpec{ID: "vm", RAMBytes: 64 * MiB, RAMFootprintBytes: 8 * MiB, Profiles: []string{"P40-1Q"}, Workload: w})
	must(t, vm.Start())
	advance(t, src, 2*time.Second)
	must(t, dst.Advance(2*time.Second))
	spec := vm.IncomingSpec()
	in, err := dst.PrepareIncoming(spec)
	must(t, err)
	if in.State() != VMIncoming || in.Seed() != vm.Seed() || in.RAM().Seed() != vm.RAM().Seed() ||
		in.Framebuffers()[0].Seed() != vm.Framebuffers()[0].Seed() {
		t.Fatal("incoming VM not keyed by the source's seeds")
	}
	if info, _ := in.VGPUs()[0].GPU().Scheduler().Tenant(in.VGPUs()[0].Tenant()); info.State != sched.Off {
		t.Fatalf("incoming tenant is %v", info.State)
	}
	if err := in.Destroy(); err != nil {
		t.Fatal(err)
	}
	// The real move.
	moved := migrate(t, vm, dst)
	if moved.State() != VMRunning || vm.State() != VMPaused || vm.Workload() != nil || moved.Workload() != Workload(w) {
		t.Fatalf("after switch-over: source %v, destination %v", vm.State(), moved.State())
	}
	if p, err := memory.FirstDiff(vm.RAM(), moved.RAM()); err != nil || p >= 0 {
		t.Fatalf("RAM differs at page %d: %v", p, err)
	}
	if p, err := memory.FirstDiff(vm.Framebuffers()[0], moved.Framebuffers()[0]); err != nil || p >= 0 {
		t.Fatalf("framebuffer differs at page %d: %v", p, err)
	}
	oldGPU, oldSlot := vm.VGPUs()[0].GPU(), vm.VGPUs()[0].Slot()
	must(t, vm.Destroy())
	if oldGPU.VGPUCount() != 0 || src.FreeRAMBytes() != src.RAMBytes() || len(src.VMs()) != 0 {
		t.Error("the source still holds the VM")
	}
	_ = oldSlot
	advance(t, dst, 2*time.Second)
	m := w.Metrics(time.Hour, time.Hour+4*time.Second)
	if m.Completed < 600 || m.Dropped != 0 {
		t.Errorf("metrics across the migration (destination clock): %v", m)
	}
	if after := w.Metrics(time.Hour+2*time.Second, time.Hour+4*time.Second); after.Completed < 300 {
		t.Errorf("destination served %d requests", after.Completed)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	src := newHost(t, HostConfig{Name: "src"})
	dst := newHost(t, HostConfig{Name: "dst", Memory: memory.Sparse, RAMBytes: 4 * GiB})
	vm := busyVM(t, src, "vm", "P40-6Q")
	in, err := dst.PrepareIncoming(vm.IncomingSpec())
	must(t, err)
	if dst.FreeRAMBytes() != 4*GiB-256*MiB || dst.GPU(0).VGPUCount() != 1 {
		t.Fatal("nothing reserved")
	}
	// Pre-copy wrote into the destination.
	fb := in.Framebuffers()[0]
	must(t, fb.Fill(0, 16, memory.ClassRandom))
	_, err = fb.WriteAt([]byte("secret"), 5<<20)
	must(t, err)
	must(t, in.RAM().Fill(0, 16, memory.ClassText))
	if err := in.Commit([][]byte{[]byte("garbage")}); !errors.Is(err, ErrCorruptState) || in.State() != VMIncoming {
		t.Fatalf("commit of garbage: %v, %v", err, in.State())
	}
	must(t, in.Abort())
	if dst.FreeRAMBytes() != 4*GiB || dst.GPU(0).VGPUCount() != 0 || len(dst.GPU(0).Framebuffer().Windows()) != 0 || len(dst.VMs()) != 0 {
		t.Fatal("the destination still holds something")
	}
	if n := dst.GPU(0).Framebuffer().ResidentBytes(); n != 0 {
		t.Errorf("%d bytes of framebuffer still resident", n)
	}
	if err := in.Abort(); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("second abort: %v", err)
	}
	// The source is untouched and runs on.
	must(t, vm.Resume())
	advance(t, src, time.Second)
}

func TestIncomingChecks(t *testing.T) {
	src := newHost(t, HostConfig{Name: "src"})
	vm := mustVM(t, src, VMSpec{ID: "vm", Profiles: []string{"P40-12Q"}})
	spec := vm.IncomingSpec()
	for _, tc := range []struct {
		name string
		host HostConfig
		want error
	}{
		{"page size", HostConfig{RAMPageSize: 8192}, ErrIncompatibleHost},
		{"framebuffer page", HostConfig{FramebufferPageSize: 2 << 20}, ErrIncompatibleHost},
		{"model", HostConfig{GPU: T4()}, ErrIncompatibleHost},
		{"RAM", HostConfig{RAMBytes: 512 * MiB}, ErrInsufficientRAM},
	} {
		dst := newHost(t, tc.host)
		if err := dst.CheckIncoming(spec); !errors.Is(err, tc.want) {
			t.Errorf("%s: CheckIncoming %v, want %v", tc.name, err, tc.want)
		}
		if _, err := dst.PrepareIncoming(spec); !errors.Is(err, tc.want) {
			t.Errorf("%s: PrepareIncoming %v, want %v", tc.name, err, tc.want)
		}
	}
	full := newHost(t, HostConfig{})
	mustVM(t, full, VMSpec{ID: "a", Profiles: []string{"P40-12Q"}})
	mustVM(t, full, VMSpec{ID: "b", Profiles: []string{"P40-12Q"}})
	if err := full.CheckIncoming(spec); !errors.Is(err, ErrNoCapacity) {
		t.Errorf("full destination: %v", err)
	}
	same := newHost(t, HostConfig{})
	mustVM(t, same, VMSpec{ID: "vm", Profiles: []string{"P40-1Q"}})
	if err := same.CheckIncoming(spec); !errors.Is(err, ErrDuplicateVM) {
		t.Errorf("duplicate ID: %v", err)
	}
	// Hand-over rules.
	w, _ := NewDesktop(DesktopConfig{RAMWorkingSetBytes: 8 * MiB})
	must(t, vm.SetWorkload(w))
	must(t, vm.Start())
	dst := newHost(t, HostConfig{})
	in, err := dst.PrepareIncoming(spec)
	must(t, err)
	if err := vm.HandOverWorkload(in); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("hand-over from a running VM: %v", err)
	}
	must(t, vm.Pause())
	other := mustVM(t, dst, VMSpec{ID: "x", Profiles: []string{"P40-12Q"}, RAMBytes: 2 * GiB})
	if err := vm.HandOverWorkload(other); !errors.Is(err, ErrIncompatibleHost) {
		t.Errorf("hand-over to a different VM: %v", err)
	}
	must(t, vm.HandOverWorkload(in))
	if err := vm.HandOverWorkload(in); !errors.Is(err, ErrWorkload) {
		t.Errorf("second hand-over: %v", err)
	}
	must(t, in.HandOverWorkload(vm)) // back, as after a failed switch-over
	must(t, vm.Resume())
	advance(t, src, time.Second)
	if m := w.Metrics(0, src.Now()+1); m.Completed == 0 {
		t.Errorf("workload handed back does not run: %v", m)
	}
}

// submitter submits from its completion handler, which the contract
// forbids.
type submitter struct{ *Desktop }

func (s submitter) Complete(env *Env, dev int, c sched.Completion) error {
	return env.Submit(dev, sched.Job{Work: 1})
}

func TestWorkloadContract(t *testing.T) {
	h := newHost(t, HostConfig{})
	d, _ := NewDesktop(DesktopConfig{RAMWorkingSetBytes: 8 * MiB, UpdatesPerSec: 100})
	vm := mustVM(t, h, VMSpec{ID: "vm", Profiles: []string{"P40-1B"}, Workload: submitter{d}})
	must(t, vm.Start())
	if err := h.Advance(time.Second); !errors.Is(err, ErrWorkload) {
		t.Errorf("submission from a completion handler: %v", err)
	}
	if err := h.Advance(-1); !errors.Is(err, ErrInvalidDuration) {
		t.Errorf("negative advance: %v", err)
	}
}
