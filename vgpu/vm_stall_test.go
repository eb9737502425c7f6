package vgpu

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/sched"
)

// stallVM is a running VM with a light inference service on one P40-4Q,
// its clock moved on a little so that stalls start at no round time.
func stallVM(t *testing.T) (*Host, *VM) {
	t.Helper()
	h := newHost(t, HostConfig{Name: "h", Seed: 5})
	w, err := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 100, FootprintBytes: 64 * MiB,
		RAMWorkingSetBytes: 16 * MiB, FramebufferDirtyBytesPerSec: 4 * MiB, Seed: 3})
	must(t, err)
	vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 256 * MiB, Profiles: []string{"P40-4Q"}, Workload: w})
	must(t, vm.Start())
	advance(t, h, 100*time.Millisecond+4321)
	return h, vm
}

// devicesIn reports whether every vGPU of vm is in state s.
func devicesIn(vm *VM, s DeviceLifecycle) bool {
	for _, d := range vm.VGPUs() {
		if d.State() != s {
			return false
		}
	}
	return true
}

// TestStallRefusals: only a running VM can be stalled, whatever the
// duration, and a negative duration or one past the scheduler's last time
// is refused; a refused stall changes nothing.
func TestStallRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, h *Host, vm *VM) *VM
		d     time.Duration
		want  error
	}{
		{"created", func(t *testing.T, h *Host, _ *VM) *VM {
			return mustVM(t, h, VMSpec{ID: "new", Profiles: []string{"P40-4Q"}})
		}, time.Millisecond, ErrIllegalTransition},
		{"paused", func(t *testing.T, _ *Host, vm *VM) *VM { must(t, vm.Pause()); return vm }, time.Millisecond, ErrIllegalTransition},
		{"paused, zero", func(t *testing.T, _ *Host, vm *VM) *VM { must(t, vm.Pause()); return vm }, 0, ErrIllegalTransition},
		{"stopped", func(t *testing.T, _ *Host, vm *VM) *VM { must(t, vm.Stop()); return vm }, time.Millisecond, ErrIllegalTransition},
		{"destroyed", func(t *testing.T, _ *Host, vm *VM) *VM { must(t, vm.Destroy()); return vm }, time.Millisecond, ErrIllegalTransition},
		{"incoming", func(t *testing.T, _ *Host, vm *VM) *VM {
			in, err := newHost(t, HostConfig{Name: "dst"}).PrepareIncoming(vm.IncomingSpec())
			must(t, err)
			return in
		}, time.Millisecond, ErrIllegalTransition},
		{"negative", nil, -1, ErrInvalidDuration},
		{"past the last time", nil, sched.MaxTime, ErrInvalidDuration},
		{"extended past the last time", func(t *testing.T, h *Host, vm *VM) *VM {
			must(t, vm.Stall(sched.MaxTime-h.Now()-time.Second))
			return vm
		}, 2 * time.Second, ErrInvalidDuration},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, vm := stallVM(t)
			if tc.setup != nil {
				vm = tc.setup(t, h, vm)
			}
			state, changes := vm.State(), vm.Changes()
			until, stalled := vm.StalledUntil()
			err := vm.Stall(tc.d)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Stall(%v): %v, want %v", tc.d, err, tc.want)
			}
			var te *TransitionError
			if tc.want == ErrIllegalTransition && (!errors.As(err, &te) || te.Op != "stall" || te.VM != vm.ID()) {
				t.Errorf("Stall(%v): %#v, want a *TransitionError for the stall", tc.d, err)
			}
			u, s := vm.StalledUntil()
			if vm.State() != state || vm.Changes() != changes || u != until || s != stalled {
				t.Errorf("a refused stall changed the VM: %v/%v, %d/%d changes, until %v/%v %v/%v",
					vm.State(), state, vm.Changes(), changes, u, until, s, stalled)
			}
		})
	}
}

// TestStallRules: what a stall does, and what the VM's other operations do
// to a stalled VM.
func TestStallRules(t *testing.T) {
	const d = 40 * time.Millisecond
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, h *Host, vm *VM, t0 time.Duration)
	}{
		{"zero does nothing", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			must(t, vm.Stall(0))
			if u, s := vm.StalledUntil(); s || u != 0 || vm.StallTime() != 0 || !devicesIn(vm, DeviceRunning) {
				t.Fatalf("Stall(0): until %v, stalled %v, stall time %v", u, s, vm.StallTime())
			}
			if e, _ := h.NextEventAt(); e == t0 {
				t.Fatalf("Stall(0) made an event now")
			}
		}},
		{"the owner sees no change", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			changes := vm.Changes()
			must(t, vm.Stall(d))
			if vm.State() != VMRunning || vm.Changes() != changes {
				t.Fatalf("stalled VM: %v, %d changes, want running and %d", vm.State(), vm.Changes(), changes)
			}
			if !devicesIn(vm, DevicePaused) {
				t.Fatal("a stalled VM's vGPUs run")
			}
			var te *TransitionError
			if err := vm.Resume(); !errors.As(err, &te) || te.From != "running" {
				t.Fatalf("Resume of a stalled VM: %v", err)
			}
			advance(t, h, d)
			if vm.State() != VMRunning || vm.Changes() != changes || !devicesIn(vm, DeviceRunning) {
				t.Fatalf("after the stall: %v, %d changes", vm.State(), vm.Changes())
			}
		}},
		{"stalls add up", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			must(t, vm.Stall(d))
			must(t, vm.Stall(5*time.Millisecond))
			if u, s := vm.StalledUntil(); !s || u != t0+d+5*time.Millisecond {
				t.Fatalf("two stalls: until %v, %v; want %v", u, s, t0+d+5*time.Millisecond)
			}
			advance(t, h, 3*time.Millisecond)
			must(t, vm.Stall(2*time.Millisecond))
			must(t, vm.Stall(0))
			if u, _ := vm.StalledUntil(); u != t0+d+7*time.Millisecond {
				t.Fatalf("three stalls: until %v, want %v", u, t0+d+7*time.Millisecond)
			}
			advance(t, h, d+4*time.Millisecond-1)
			if _, s := vm.StalledUntil(); !s || !devicesIn(vm, DevicePaused) {
				t.Fatal("the stall ended early")
			}
			advance(t, h, 1)
			if u, s := vm.StalledUntil(); s || u != t0+d+7*time.Millisecond || !devicesIn(vm, DeviceRunning) {
				t.Fatalf("at its end: until %v, stalled %v", u, s)
			}
			if vm.StallTime() != d+7*time.Millisecond {
				t.Fatalf("stall time %v, want %v", vm.StallTime(), d+7*time.Millisecond)
			}
		}},
		{"stalled until, stall time", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			must(t, vm.Stall(d))
			for _, step := range []time.Duration{0, d / 4, d / 2, d / 4, d} {
				advance(t, h, step)
				el := min(h.Now()-t0, d)
				u, s := vm.StalledUntil()
				if u != t0+d || s != (el < d) || vm.StallTime() != el {
					t.Fatalf("at %v: until %v, stalled %v, stall time %v; want %v, %v, %v",
						h.Now()-t0, u, s, vm.StallTime(), t0+d, el < d, el)
				}
			}
			must(t, vm.Stall(d/2))
			advance(t, h, d)
			if vm.StallTime() != d+d/2 {
				t.Fatalf("two stalls: stall time %v, want %v", vm.StallTime(), d+d/2)
			}
		}},
		{"next event at the stall's end", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			// A VM with no workload has no event but its stall's end.
			idle := mustVM(t, h, VMSpec{ID: "idle", Profiles: []string{"P40-4Q"}})
			must(t, idle.Start())
			must(t, vm.Pause())
			if _, ok := h.NextEventAt(); ok {
				t.Fatal("an event with nothing running")
			}
			must(t, idle.Stall(d))
			if e, ok := h.NextEventAt(); !ok || e != t0+d {
				t.Fatalf("NextEventAt %v, %v; want the stall's end %v", e, ok, t0+d)
			}
			// A stalled VM's workload holds its events back.
			must(t, vm.Resume())
			must(t, vm.Stall(2*d))
			if e, ok := h.NextEventAt(); !ok || e != t0+d {
				t.Fatalf("NextEventAt %v, %v; want %v", e, ok, t0+d)
			}
			advance(t, h, d)
			if e, ok := h.NextEventAt(); !ok || e != t0+2*d {
				t.Fatalf("NextEventAt %v, %v; want %v", e, ok, t0+2*d)
			}
			advance(t, h, d)
			if e, ok := h.NextEventAt(); !ok || e <= t0+2*d || e != vm.Workload().NextEvent() {
				t.Fatalf("after the stalls: NextEventAt %v, %v; workload's %v", e, ok, vm.Workload().NextEvent())
			}
		}},
		{"pause while stalled", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			must(t, vm.Stall(d))
			advance(t, h, d/4)
			changes := vm.Changes()
			must(t, vm.Pause())
			if u, s := vm.StalledUntil(); s || u != t0+d/4 || vm.StallTime() != d/4 || vm.State() != VMPaused ||
				vm.Changes() != changes+1 || !devicesIn(vm, DevicePaused) {
				t.Fatalf("paused: until %v, stalled %v, stall time %v, %v, %d changes", u, s, vm.StallTime(), vm.State(), vm.Changes()-changes)
			}
			advance(t, h, d) // past the stall's end: nothing resumes
			if vm.State() != VMPaused || !devicesIn(vm, DevicePaused) {
				t.Fatal("the dropped stall resumed the VM")
			}
			must(t, vm.Resume())
			if !devicesIn(vm, DeviceRunning) {
				t.Fatal("vGPUs not running after Resume")
			}
			advance(t, h, d)
			if m := vm.Workload().Metrics(h.Now()-d, h.Now()); m.Completed == 0 {
				t.Fatalf("nothing served after the resume: %v", m)
			}
		}},
		{"a migration's pause while stalled", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			c, err := vm.ClaimMigration()
			must(t, err)
			must(t, vm.Stall(d))
			changes := vm.Changes()
			must(t, c.Pause())
			if _, s := vm.StalledUntil(); s || vm.State() != VMPaused || vm.Changes() != changes {
				t.Fatalf("claim's pause: stalled %v, %v, %d changes", s, vm.State(), vm.Changes()-changes)
			}
			must(t, c.Resume())
			advance(t, h, d)
			if !devicesIn(vm, DeviceRunning) {
				t.Fatal("vGPUs not running")
			}
		}},
		{"stop while stalled", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			must(t, vm.Stall(d))
			advance(t, h, d/2)
			must(t, vm.Stop())
			if _, s := vm.StalledUntil(); s || vm.StallTime() != d/2 || !devicesIn(vm, DeviceStopped) {
				t.Fatalf("stopped: stalled %v, stall time %v", s, vm.StallTime())
			}
			if _, ok := h.NextEventAt(); ok {
				t.Fatal("a stopped VM has an event")
			}
			advance(t, h, d)
			must(t, vm.Start())
			advance(t, h, d)
			if !devicesIn(vm, DeviceRunning) || vm.StallTime() != d/2 {
				t.Fatalf("restarted: stall time %v", vm.StallTime())
			}
		}},
		{"destroy while stalled", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			must(t, vm.Stall(d))
			must(t, vm.Destroy())
			if _, s := vm.StalledUntil(); s || len(h.VMs()) != 0 {
				t.Fatalf("destroyed: stalled %v, %d VMs", s, len(h.VMs()))
			}
			if _, ok := h.NextEventAt(); ok {
				t.Fatal("a destroyed VM's stall is an event")
			}
			advance(t, h, 2*d)
		}},
		{"hand-over refused", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			other := mustVM(t, h, VMSpec{ID: "other", RAMBytes: 256 * MiB, Profiles: []string{"P40-4Q"}})
			must(t, vm.Stall(d))
			if err := vm.HandOverWorkload(other); !errors.Is(err, ErrIllegalTransition) {
				t.Fatalf("hand-over from a stalled VM: %v", err)
			}
			if _, err := vm.SaveDeviceStates(); !errors.Is(err, ErrIllegalTransition) {
				t.Fatalf("saving a stalled VM's devices: %v", err)
			}
			must(t, vm.Pause()) // as a migration does first
			must(t, vm.HandOverWorkload(other))
		}},
		{"held by a committed migration", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			c, err := vm.ClaimMigration()
			must(t, err)
			_, err = c.Commit()
			must(t, err)
			must(t, vm.Stall(d))
			if err := vm.Pause(); !errors.Is(err, ErrMigrating) {
				t.Fatalf("owner's pause of a held VM: %v", err)
			}
			advance(t, h, d)
			if _, s := vm.StalledUntil(); s || !devicesIn(vm, DeviceRunning) {
				t.Fatal("the held VM's stall did not end")
			}
		}},
		{"a migration's destination", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			dst := newHost(t, HostConfig{Name: "dst", Seed: 6})
			advance(t, dst, t0)
			in, err := dst.PrepareIncoming(vm.IncomingSpec())
			must(t, err)
			must(t, vm.Pause())
			copyRegion(t, in.RAM(), vm.RAM())
			for i, fb := range vm.Framebuffers() {
				copyRegion(t, in.Framebuffers()[i], fb)
			}
			states, err := vm.SaveDeviceStates()
			must(t, err)
			must(t, vm.HandOverWorkload(in))
			must(t, in.Restore(states))
			c, err := in.ClaimMigration()
			must(t, err)
			must(t, c.Hold())
			must(t, c.Resume())
			// Post-copy: the destination runs while pages are still at the
			// source, and waits for the ones it touches.
			must(t, in.Stall(d))
			if err := in.Pause(); !errors.Is(err, ErrMigrating) {
				t.Fatalf("owner's pause of the held destination: %v", err)
			}
			advance(t, dst, d/2)
			must(t, in.Stall(d))
			advance(t, dst, d+d/2)
			c.Release()
			if in.StallTime() != 2*d || !devicesIn(in, DeviceRunning) {
				t.Fatalf("destination: stall time %v", in.StallTime())
			}
			advance(t, dst, d)
			if m := in.Workload().Metrics(dst.Now()-d, dst.Now()); m.Completed == 0 {
				t.Fatalf("the destination serves nothing: %v", m)
			}
		}},
		{"throttle while stalled", func(t *testing.T, h *Host, vm *VM, t0 time.Duration) {
			must(t, vm.Stall(d))
			must(t, vm.SetThrottle(0.5))
			advance(t, h, d)
			if vm.EffectiveThrottle() != 0.5 || !devicesIn(vm, DeviceRunning) {
				t.Fatal("throttle lost")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, vm := stallVM(t)
			tc.run(t, h, vm, h.Now())
		})
	}
}

// TestStallWritesNothing: a stalled VM writes no memory and its GPU work
// does not run; its vGPUs' tenants are paused, not off.
func TestStallWritesNothing(t *testing.T) {
	h, vm := stallVM(t)
	w := vm.Workload()
	ram, fb := vm.RAM(), vm.Framebuffers()[0]
	ram.StartDirtyLog()
	fb.StartDirtyLog()
	gpuTime := vm.GPUTime()
	t0 := h.Now()
	must(t, vm.Stall(300*time.Millisecond))
	advance(t, h, 300*time.Millisecond-1)
	if ram.DirtyCount() != 0 || fb.DirtyCount() != 0 || vm.GPUTime() != gpuTime {
		t.Fatalf("stalled VM dirtied %d RAM and %d framebuffer pages, ran %v on the GPU",
			ram.DirtyCount(), fb.DirtyCount(), vm.GPUTime()-gpuTime)
	}
	d := vm.VGPUs()[0]
	if info, _ := d.GPU().Scheduler().Tenant(d.Tenant()); info.State != sched.Paused {
		t.Fatalf("a stalled VM's tenant is %v", info.State)
	}
	if m := w.Metrics(t0+time.Millisecond, h.Now()); m.Completed != 0 {
		t.Fatalf("stalled VM completed %d requests", m.Completed)
	}
	advance(t, h, 100*time.Millisecond)
	if ram.DirtyCount() == 0 || vm.GPUTime() == gpuTime {
		t.Fatal("the VM did not run on after the stall")
	}
	if m := w.Metrics(0, h.Now()); m.Dropped != 0 {
		t.Fatalf("requests dropped: %v", m)
	}
}

// TestStallInferenceLatency: requests that arrive while a VM is stalled
// wait for the rest of the stall, and those in flight when it starts for
// all of it; the window's metrics show it. The arrivals are the same with
// and without the stall (the same seed), so request by request the
// latency grows by the wait, plus the queue the stall built up.
func TestStallInferenceLatency(t *testing.T) {
	const d = 200 * time.Millisecond
	runInf := func(stall bool) (*Inference, time.Duration) {
		h := newHost(t, HostConfig{Name: "h"})
		w, err := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 200, FootprintBytes: 64 * MiB, RAMWorkingSetBytes: 16 * MiB, Seed: 8})
		must(t, err)
		vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 256 * MiB, Profiles: []string{"P40-24Q"}, Workload: w})
		must(t, vm.Start())
		advance(t, h, time.Second)
		// On to a moment with a request in flight, the same in both runs.
		for i := 0; i < 100000 && len(w.inflight) == 0; i++ {
			advance(t, h, 10*time.Microsecond)
		}
		at := h.Now()
		if stall {
			must(t, vm.Stall(d))
		}
		advance(t, h, time.Second)
		return w, at
	}
	plain, at := runInf(false)
	stalled, at2 := runInf(true)
	if at != at2 {
		t.Fatalf("the runs stall at %v and %v", at, at2)
	}
	work := plain.RequestWork(P40())
	ends := map[time.Duration]time.Duration{} // arrival -> completion, without the stall
	for i := range plain.hist.n {
		r := plain.hist.buf[i]
		ends[r.start] = r.end
	}
	arrivedDuring, inFlight := 0, 0
	for i := range stalled.hist.n {
		r := stalled.hist.buf[i]
		if r.dropped {
			t.Fatalf("request dropped: %+v", r)
		}
		pe, ok := ends[r.start]
		if !ok {
			t.Fatalf("request arriving at %v served only with the stall", r.start)
		}
		grew := (r.end - r.start) - (pe - r.start)
		var wait time.Duration
		switch {
		case r.start >= at && r.start < at+d:
			arrivedDuring++
			wait = at + d - r.start
			if r.end < at+d+work {
				t.Errorf("request arriving at %v in the stall done at %v, before the stall's end and its work", r.start-at, r.end-at)
			}
		case r.start < at && pe > at:
			inFlight++
			wait = d
			if grew < d || grew > d+work {
				t.Errorf("the request in flight at the stall's start: latency grew by %v, the stall is %v", grew, d)
			}
		case pe <= at:
			if grew != 0 {
				t.Errorf("request done before the stall changed: %v", grew)
			}
			continue
		default:
			continue
		}
		// About the wait: more by at most the burst queued at the
		// stall's end (some 40 requests at 200/s) and less by at most
		// the time the request would have queued anyway.
		if grew < wait-pe+r.start+work-time.Millisecond || grew > wait+60*work {
			t.Errorf("request arriving at %v+%v: latency grew by %v, the wait is %v", at, r.start-at, grew, wait)
		}
	}
	t.Logf("%d requests arrived in the stall, %d in flight at its start", arrivedDuring, inFlight)
	if arrivedDuring < 20 || inFlight != 1 {
		t.Fatalf("%d requests arrived in the stall, %d in flight at its start", arrivedDuring, inFlight)
	}
	mp, ms := plain.Metrics(at, at+d+100*time.Millisecond), stalled.Metrics(at, at+d+100*time.Millisecond)
	if ms.LatencyMax < 3*d/4 || ms.LatencyMean < mp.LatencyMean+d/4 || mp.LatencyMax > 20*work {
		t.Errorf("the stall does not show in the window's metrics:\n without %v max %v\n with    %v max %v",
			mp, mp.LatencyMax, ms, ms.LatencyMax)
	}
	if a, b := plain.Metrics(0, at+2*time.Second), stalled.Metrics(0, at+2*time.Second); a.Completed != b.Completed {
		t.Errorf("%d requests served with the stall, %d without", b.Completed, a.Completed)
	}
}

// TestStallTrainingIteration: the training iteration a stall falls in
// takes the stall longer, the others none; with a host phase, a stall in
// the phase lengthens it too.
func TestStallTrainingIteration(t *testing.T) {
	const d = 37 * time.Millisecond
	for _, tc := range []struct {
		name string
		cfg  TrainingConfig
	}{
		{"queued", TrainingConfig{Model: MobileNet(), BatchSize: 16, FootprintBytes: 320 * MiB, Seed: 1}},
		{"host phase", TrainingConfig{Model: MobileNet(), BatchSize: 16, FootprintBytes: 320 * MiB, DataLoad: 20 * time.Millisecond, Seed: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runTr := func(stall time.Duration) (*Training, time.Duration) {
				w, err := NewTraining(tc.cfg)
				must(t, err)
				h, vm := run(t, HostConfig{}, "P40-24Q", w, 500*time.Millisecond)
				if tc.cfg.DataLoad > 0 {
					// Into the next host phase.
					for i := 0; i < 10000 && w.inFlight > 0; i++ {
						advance(t, h, 100*time.Microsecond)
					}
					advance(t, h, 3*time.Millisecond+77)
				} else {
					advance(t, h, 1234567)
				}
				at := h.Now()
				if tc.cfg.DataLoad > 0 && (w.inFlight != 0 || w.readyAt <= at) {
					t.Fatalf("not in a host phase at %v", at)
				}
				if stall > 0 {
					must(t, vm.Stall(stall))
				}
				advance(t, h, time.Second)
				return w, at
			}
			plain, at := runTr(0)
			stalled, at2 := runTr(d)
			if at != at2 {
				t.Fatalf("the runs stall at %v and %v", at, at2)
			}
			recs := func(w *Training) []record {
				var out []record
				for i := range w.hist.n {
					out = append(out, w.hist.buf[(w.hist.head+i)%len(w.hist.buf)])
				}
				return out
			}
			rp, rs := recs(plain), recs(stalled)
			hit := false
			for i := range min(len(rp), len(rs)) {
				lp, ls := rp[i].end-rp[i].start, rs[i].end-rs[i].start
				switch {
				case rp[i].end <= at:
					if rp[i] != rs[i] {
						t.Fatalf("iteration %d, before the stall, differs: %+v %+v", i, rp[i], rs[i])
					}
				case !hit:
					hit = true
					// The poll grid (1 ms) may round the restart up.
					t.Logf("the stalled iteration took %v, without the stall %v", ls, lp)
					if ls < lp+d || ls > lp+d+stalled.Config().PollInterval {
						t.Errorf("the stalled iteration took %v, without the stall %v (stall %v)", ls, lp, d)
					}
				default:
					if ls != lp {
						t.Errorf("iteration %d after the stall took %v, without it %v", i, ls, lp)
					}
				}
			}
			if !hit {
				t.Fatal("no iteration after the stall")
			}
			all := func(w *Training) Metrics { return w.Metrics(0, at+time.Second) }
			if mp, ms := all(plain), all(stalled); ms.LatencyMax < mp.LatencyMax+d || ms.Completed >= mp.Completed {
				t.Errorf("metrics do not show the stall:\n without %v\n with    %v", mp, ms)
			}
		})
	}
}

// TestStallSplitInvariance: a host whose VMs are stalled, their stalls
// extended and cut short by pauses, gives the same metrics, memory, device
// states and stall times whether advanced in as few steps as the script
// allows, in many small irregular ones, or from event to event as a
// discrete-event driver goes.
func TestStallSplitInvariance(t *testing.T) {
	times := []time.Duration{
		1 * time.Second, 1*time.Second + 20*time.Millisecond, 1*time.Second + 300*time.Millisecond,
		2 * time.Second, 2*time.Second + 100*time.Millisecond, 2*time.Second + 400*time.Millisecond,
		3*time.Second + 5, 4 * time.Second,
	}
	script := func(t *testing.T, vms []*VM, at time.Duration) {
		inf, train, cad, desk := vms[0], vms[1], vms[2], vms[3]
		switch at {
		case times[0]:
			must(t, inf.Stall(150*time.Millisecond))
			must(t, train.Stall(70*time.Millisecond+3))
			must(t, cad.Stall(33*time.Millisecond))
		case times[1]:
			must(t, inf.Stall(20*time.Millisecond)) // extends it
			must(t, desk.Stall(time.Second))
		case times[2]:
			must(t, train.Stall(time.Millisecond))
		case times[3]:
			must(t, desk.Pause()) // cuts its stall short
			must(t, cad.Stall(500*time.Millisecond))
		case times[4]:
			must(t, desk.Resume())
			must(t, inf.Stall(7*time.Millisecond+11))
			must(t, inf.SetThrottle(0.3))
		case times[5]:
			must(t, cad.Stop())
			must(t, train.Stall(250*time.Millisecond))
		case times[6]:
			must(t, cad.Start())
			must(t, inf.Stall(400*time.Millisecond))
		}
	}
	type stepper func(h *Host, at time.Duration)
	drive := func(t *testing.T, step stepper) (*Host, []*VM) {
		h, vms := mixedHost(t, sched.EqualShare)
		for _, at := range times {
			for h.Now() < at {
				step(h, at)
			}
			script(t, vms, at)
		}
		return h, vms
	}
	a, avms := drive(t, func(h *Host, at time.Duration) { advance(t, h, at-h.Now()) })
	rng := rand.New(rand.NewPCG(9, 9))
	b, bvms := drive(t, func(h *Host, at time.Duration) {
		d := min(time.Duration(rng.Int64N(int64(30*time.Millisecond))), at-h.Now())
		if rng.IntN(10) == 0 {
			d = 0
		}
		advance(t, h, d)
	})
	stalls := 0
	c, cvms := drive(t, func(h *Host, at time.Duration) {
		e, ok := h.NextEventAt()
		if !ok || e > at {
			e = at
		}
		for _, vm := range h.VMs() {
			if u, s := vm.StalledUntil(); s && u == e {
				stalls++
			}
		}
		advance(t, h, e-h.Now())
	})
	if stalls < 6 {
		t.Errorf("the event-driven run stopped at %d stall ends", stalls)
	}
	if a.Now() != b.Now() || a.Now() != c.Now() {
		t.Fatalf("clocks %v %v %v", a.Now(), b.Now(), c.Now())
	}
	end := a.Now()
	for i, vm := range avms {
		for _, other := range [][]*VM{bvms, cvms} {
			o := other[i]
			for _, win := range [][2]time.Duration{{0, end}, {times[0], times[3]}, {times[3], end}} {
				if ma, mo := vm.Workload().Metrics(win[0], win[1]), o.Workload().Metrics(win[0], win[1]); ma != mo {
					t.Errorf("%s metrics over %v differ:\n%v\n%v", vm.ID(), win, ma, mo)
				}
			}
			if vm.StallTime() != o.StallTime() {
				t.Errorf("%s stall time %v and %v", vm.ID(), vm.StallTime(), o.StallTime())
			}
			ua, sa := vm.StalledUntil()
			uo, so := o.StalledUntil()
			if ua != uo || sa != so {
				t.Errorf("%s stalled until %v %v and %v %v", vm.ID(), ua, sa, uo, so)
			}
			if p := samePages(t, vm.RAM(), o.RAM()); p >= 0 {
				t.Errorf("%s RAM differs at page %d", vm.ID(), p)
			}
			if p := samePages(t, vm.Framebuffers()[0], o.Framebuffers()[0]); p >= 0 {
				t.Errorf("%s framebuffer differs at page %d", vm.ID(), p)
			}
			sa2, _ := vm.Snapshots()
			so2, _ := o.Snapshots()
			if diff := cmp.Diff(sa2, so2); diff != "" {
				t.Errorf("%s device state differs:\n%s", vm.ID(), diff)
			}
		}
		if vm.Workload().Metrics(0, end).Completed == 0 {
			t.Errorf("%s did nothing", vm.ID())
		}
	}
	// The expected stall times: inf 170 ms, 7 ms and the 400 ms under way
	// since 3 s (1 s of it elapsed, all of it); train 70 ms, 1 ms, 250 ms;
	// cad 33 ms and 400 ms of its 500 before the stop; desk 980 ms, cut.
	want := []time.Duration{
		170*time.Millisecond + 7*time.Millisecond + 11 + 400*time.Millisecond,
		70*time.Millisecond + 3 + time.Millisecond + 250*time.Millisecond,
		33*time.Millisecond + 400*time.Millisecond,
		980 * time.Millisecond,
	}
	for i, vm := range avms {
		if vm.StallTime() != want[i] {
			t.Errorf("%s stall time %v, want %v", vm.ID(), vm.StallTime(), want[i])
		}
	}
}

// TestStallSetWorkload: a workload set on a stalled VM starts when the
// stall ends; one that fails to start then fails that Advance and leaves
// the VM without it, running.
func TestStallSetWorkload(t *testing.T) {
	h := newHost(t, HostConfig{Name: "h"})
	vm := mustVM(t, h, VMSpec{ID: "vm", RAMBytes: 1 * GiB, Profiles: []string{"P40-8Q"}})
	must(t, vm.Start())
	advance(t, h, 10*time.Millisecond)
	t0 := h.Now()
	must(t, vm.Stall(50*time.Millisecond))
	w, err := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 16, FootprintBytes: 320 * MiB, Seed: 1})
	must(t, err)
	must(t, vm.SetWorkload(w))
	if w.running {
		t.Fatal("the workload started during the stall")
	}
	advance(t, h, 500*time.Millisecond)
	if m := w.Metrics(0, h.Now()); m.Completed == 0 || !w.running {
		t.Fatalf("the workload did not run after the stall: %v", m)
	}
	if w.hist.buf[0].start != t0+50*time.Millisecond {
		t.Errorf("the workload started at %v, want the stall's end %v", w.hist.buf[0].start, t0+50*time.Millisecond)
	}

	vm2 := mustVM(t, h, VMSpec{ID: "vm2", RAMBytes: 1 * GiB, Profiles: []string{"P40-8Q"}})
	must(t, vm2.Start())
	must(t, vm2.Stall(10*time.Millisecond))
	d, err := NewDesktop(DesktopConfig{})
	must(t, err)
	must(t, vm2.SetWorkload(failingStart{d}))
	if err := h.Advance(20 * time.Millisecond); !errors.Is(err, ErrWorkload) {
		t.Fatalf("advance over a failing start: %v", err)
	}
	if vm2.Workload() != nil || vm2.State() != VMRunning || !devicesIn(vm2, DeviceRunning) {
		t.Fatalf("after the failed start: workload %v, %v", vm2.Workload(), vm2.State())
	}
	advance(t, h, 20*time.Millisecond)
}

// TestStallSuspend: a stalled VM is suspended running, its stall ended; a
// suspend that fails leaves it stalled until the same end.
func TestStallSuspend(t *testing.T) {
	h, vm := stallVM(t)
	t0 := h.Now()
	must(t, vm.Stall(80*time.Millisecond))
	advance(t, h, 30*time.Millisecond)
	if err := vm.Suspend(&failingWriter{n: 100}, SuspendOptions{}); !errors.Is(err, errDiskFull) {
		t.Fatalf("suspend to a full disk: %v", err)
	}
	if u, s := vm.StalledUntil(); !s || u != t0+80*time.Millisecond || vm.State() != VMRunning ||
		vm.StallTime() != 30*time.Millisecond || !devicesIn(vm, DevicePaused) {
		t.Fatalf("after a failed suspend: until %v, stalled %v, %v, stall time %v", u, s, vm.State(), vm.StallTime())
	}
	var file bytes.Buffer
	must(t, vm.Suspend(&file, SuspendOptions{}))
	if _, ok := h.NextEventAt(); ok {
		t.Fatal("the suspended VM's stall is still an event")
	}
	dst := newHost(t, HostConfig{Name: "dst", Seed: 5})
	advance(t, dst, h.Now())
	back, err := dst.Resume(&file, ResumeOptions{})
	must(t, err)
	if _, s := back.StalledUntil(); s || back.State() != VMRunning || !devicesIn(back, DeviceRunning) {
		t.Fatalf("resumed: stalled %v, %v", s, back.State())
	}
	advance(t, dst, 100*time.Millisecond)
	if m := back.Workload().Metrics(dst.Now()-100*time.Millisecond, dst.Now()); m.Completed == 0 {
		t.Fatalf("the resumed VM serves nothing: %v", m)
	}
}

// TestStallPassthrough: a passthrough VM stalls as one with vGPUs.
func TestStallPassthrough(t *testing.T) {
	h := newHost(t, HostConfig{Name: "h"})
	vm := mustVM(t, h, VMSpec{ID: "pt", Passthrough: true})
	must(t, vm.Start())
	must(t, vm.Stall(time.Millisecond))
	if !devicesIn(vm, DevicePaused) {
		t.Fatal("passthrough GPU not paused")
	}
	advance(t, h, time.Millisecond)
	if !devicesIn(vm, DeviceRunning) || vm.StallTime() != time.Millisecond {
		t.Fatal("passthrough GPU not resumed")
	}
}
