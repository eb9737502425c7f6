package vgpu

import (
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/sched"
)

// TestCreateVMRefusesWhatDoesNotFit: a workload too big for its VM, in
// framebuffer or guest memory, is refused by CreateVM with ErrWorkload and
// nothing stays reserved: the host's RAM and its GPU are as before, and the
// whole GPU can be given to another VM.
func TestCreateVMRefusesWhatDoesNotFit(t *testing.T) {
	mk := func(w Workload, err error) Workload { must(t, err); return w }
	for _, tc := range []struct {
		name string
		w    Workload
	}{
		{"inference framebuffer", mk(NewInference(InferenceConfig{FootprintBytes: 3 * GiB}))},
		{"inference RAM", mk(NewInference(InferenceConfig{RAMWorkingSetBytes: 2 * GiB}))},
		{"training framebuffer", mk(NewTraining(TrainingConfig{Model: MobileNet(), FootprintBytes: 3 * GiB}))},
		{"training RAM", mk(NewTraining(TrainingConfig{Model: MobileNet(), OptimizerStateBytes: 2 * GiB}))},
		{"CAD framebuffer", mk(NewCAD(CADConfig{SceneBytes: 3 * GiB}))},
		{"desktop framebuffer", mk(NewDesktop(DesktopConfig{SurfaceBytes: 3 * GiB}))},
		{"desktop RAM", mk(NewDesktop(DesktopConfig{RAMWorkingSetBytes: 2 * GiB}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, HostConfig{GPUs: 1})
			free := h.FreeRAMBytes()
			_, err := h.CreateVM(VMSpec{ID: "vm", RAMBytes: 1 * GiB, Profiles: []string{"P40-2Q"}, Workload: tc.w})
			if !errors.Is(err, ErrWorkload) {
				t.Fatalf("CreateVM: %v, want ErrWorkload", err)
			}
			if h.FreeRAMBytes() != free || len(h.VMs()) != 0 || h.GPUs()[0].VGPUCount() != 0 {
				t.Fatalf("a refused VM left %d bytes reserved, %d VMs, %d vGPUs", free-h.FreeRAMBytes(), len(h.VMs()), h.GPUs()[0].VGPUCount())
			}
			// The same ID and the whole GPU are free for the next VM.
			mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 1 * GiB, Profiles: []string{"P40-24Q"}})
		})
	}
}

// failingStart is a workload that cannot tell whether it fits (it is no
// Fitter) and fails to start.
type failingStart struct{ Workload }

func (failingStart) Start(*Env) error { return errors.New("out of luck") }

// TestStartAllOrNothing: a VM whose workload fails to start stays in the
// state it was in, its vGPUs not running and their scheduler tenants off,
// and can be started again; SetWorkload refuses a workload that does not
// fit, leaving the VM without one.
func TestStartAllOrNothing(t *testing.T) {
	h := newHost(t, HostConfig{GPUs: 1})
	d, err := NewDesktop(DesktopConfig{})
	must(t, err)
	vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 1 * GiB, Profiles: []string{"P40-2Q"}, Workload: failingStart{d}})
	for range 2 {
		err := vm.Start()
		if !errors.Is(err, ErrWorkload) {
			t.Fatalf("Start: %v, want ErrWorkload", err)
		}
		if vm.State() != VMCreated {
			t.Fatalf("after a failed start the VM is %v, want created", vm.State())
		}
		for _, v := range vm.VGPUs() {
			info, err := v.GPU().Scheduler().Tenant(v.Tenant())
			must(t, err)
			if v.State() == DeviceRunning || info.State != sched.Off {
				t.Fatalf("after a failed start vGPU %d is %v, its tenant %v", v.Index(), v.State(), info.State)
			}
		}
		advance(t, h, 100*time.Millisecond) // the host runs on without it
	}

	ok := mustVM(t, h, VMSpec{ID: "ok", RAMBytes: 1 * GiB, Profiles: []string{"P40-2Q"}})
	must(t, ok.Start())
	big, err := NewInference(InferenceConfig{FootprintBytes: 3 * GiB})
	must(t, err)
	if err := ok.SetWorkload(big); !errors.Is(err, ErrWorkload) || ok.Workload() != nil {
		t.Fatalf("SetWorkload of one too big: %v, workload %v", err, ok.Workload())
	}
	small, err := NewInference(InferenceConfig{FootprintBytes: 1 * GiB})
	must(t, err)
	must(t, ok.SetWorkload(small))
	if ok.Workload() != small || ok.State() != VMRunning {
		t.Fatalf("the fitting workload: %v on a %v VM", ok.Workload(), ok.State())
	}
}
