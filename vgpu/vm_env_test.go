package vgpu

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// envCaller is a workload that makes one call on its Env from one hook —
// "start", "advance", "fire" or "complete" — and returns what it returns.
// Its one event, 1 ms after the start, submits a job when the call is
// made from "complete".
type envCaller struct {
	hook  string
	call  func(env *Env) error
	next  time.Duration
	fired bool
}

func (w *envCaller) Name() string { return "caller" }

func (w *envCaller) Start(env *Env) error {
	w.next, w.fired = env.Now()+time.Millisecond, false
	if w.hook == "start" {
		return w.call(env)
	}
	return nil
}

func (w *envCaller) Pause(*Env)            {}
func (w *envCaller) Resume(*Env) error     { return nil }
func (w *envCaller) Stop(*Env)             {}
func (w *envCaller) Shift(d time.Duration) {}

func (w *envCaller) AdvanceTo(env *Env, t time.Duration) error {
	if w.hook == "advance" && t >= w.next {
		return w.call(env)
	}
	return nil
}

func (w *envCaller) NextEvent() time.Duration {
	if w.fired {
		return NoEvent
	}
	return w.next
}

func (w *envCaller) Fire(env *Env) error {
	w.fired = true
	switch w.hook {
	case "fire":
		return w.call(env)
	case "complete":
		return env.Submit(0, sched.Job{Work: time.Millisecond})
	}
	return nil
}

func (w *envCaller) Complete(env *Env, dev int, c sched.Completion) error {
	if w.hook == "complete" {
		return w.call(env)
	}
	return nil
}

func (w *envCaller) SetThrottle(float64) error { return nil }

func (w *envCaller) Metrics(from, to time.Duration) Metrics {
	return Metrics{Workload: "caller", From: from, To: to}
}

// errCaller is the plain error of a workload's own.
var errCaller = errors.New("caller: the workload's own error")

// A workload that gives its Env an argument out of range, or whose hook
// fails with an error of its own, fails the call that drove it — Host.Advance
// or VM.Start — with an error wrapping ErrWorkload (and the hook's own
// error) that names the VM and the argument; nothing panics. The first row
// is the report that opened the issue: Framebuffer(3) on a VM with one vGPU
// panicked inside Host.Advance.
func TestEnvBadArgumentsFailTheHost(t *testing.T) {
	fb := func(i int) func(*Env) error {
		return func(env *Env) error { _, err := env.Framebuffer(i); return err }
	}
	usable := func(i int) func(*Env) error {
		return func(env *Env) error { _, err := env.UsableFramebufferBytes(i); return err }
	}
	frl := func(i int) func(*Env) error {
		return func(env *Env) error { _, err := env.FrameRateLimitFPS(i); return err }
	}
	submit := func(i int, j sched.Job) func(*Env) error {
		return func(env *Env) error { return env.Submit(i, j) }
	}
	write := func(off int64) func(*Env) error {
		return func(env *Env) error {
			r, err := env.Framebuffer(0)
			if err != nil {
				return err
			}
			_, err = r.WriteAt([]byte{1, 2}, off)
			return err
		}
	}
	cases := []struct {
		name  string
		hook  string
		call  func(*Env) error
		also  error  // a further error the result wraps
		names string // what the message names besides the VM
	}{
		{"Framebuffer(3) in Fire", "fire", fb(3), nil, "vGPU 3"},
		{"Framebuffer(3) in AdvanceTo", "advance", fb(3), nil, "vGPU 3"},
		{"Framebuffer(3) in Complete", "complete", fb(3), nil, "vGPU 3"},
		{"Framebuffer(3) in Start", "start", fb(3), nil, "vGPU 3"},
		{"Framebuffer(-1)", "fire", fb(-1), nil, "vGPU -1"},
		{"Framebuffer(1)", "fire", fb(1), nil, "vGPU 1"},
		{"UsableFramebufferBytes(3)", "fire", usable(3), nil, "vGPU 3"},
		{"FrameRateLimitFPS(3)", "fire", frl(3), nil, "vGPU 3"},
		{"FrameRateLimitFPS(huge)", "advance", frl(1 << 62), nil, "vGPU 4611686018427387904"},
		{"Submit(3)", "fire", submit(3, sched.Job{Work: time.Millisecond}), nil, "vGPU 3"},
		{"Submit of no work", "fire", submit(0, sched.Job{}), sched.ErrInvalidJob, "vGPU 0"},
		{"Submit of a negative chunk", "fire", submit(0, sched.Job{Work: 1, Chunk: -1}), sched.ErrInvalidJob, "vGPU 0"},
		{"Submit from Complete", "complete", submit(0, sched.Job{Work: 1}), nil, "completion handler"},
		{"write past the framebuffer", "fire", write(1<<30 - 1), memory.ErrOutOfRange, "caller"},
		{"write at a negative offset", "advance", write(-1), memory.ErrOutOfRange, "caller"},
		{"the workload's own error in Fire", "fire", func(*Env) error { return errCaller }, errCaller, "caller"},
		{"the workload's own error in Complete", "complete", func(*Env) error { return errCaller }, errCaller, "caller"},
		{"the workload's own error in Start", "start", func(*Env) error { return errCaller }, errCaller, "caller"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, HostConfig{})
			vm := mustVM(t, h, VMSpec{ID: "vm", Profiles: []string{"P40-1Q"}, Workload: &envCaller{hook: tc.hook, call: tc.call}})
			err := vm.Start()
			if tc.hook != "start" {
				must(t, err)
				err = h.Advance(time.Second)
			}
			if !errors.Is(err, ErrWorkload) {
				t.Fatalf("got %v, want an error wrapping ErrWorkload", err)
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Errorf("got %v, want it to wrap %v too", err, tc.also)
			}
			if msg := err.Error(); !strings.Contains(msg, `VM "vm"`) || !strings.Contains(msg, tc.names) {
				t.Errorf("%q names neither the VM nor %q", msg, tc.names)
			}
			// The host is still usable: the next Advance runs.
			if tc.hook != "start" {
				if err := h.Advance(time.Millisecond); err != nil && !errors.Is(err, ErrWorkload) {
					t.Errorf("the next Advance: %v", err)
				}
			}
		})
	}
}

// Every accessor of an Env with vGPU indices in range answers, and out of
// range refuses, whichever the VM: one vGPU, several, a passthrough GPU;
// an Env no host made refuses every call.
func TestEnvAccessorsRange(t *testing.T) {
	specs := []struct {
		host HostConfig
		vm   VMSpec
	}{
		{HostConfig{}, VMSpec{ID: "one", Profiles: []string{"P40-1Q"}}},
		{HostConfig{GPUs: 2}, VMSpec{ID: "two", Profiles: []string{"P40-24Q", "P40-24Q"}}},
		{HostConfig{}, VMSpec{ID: "pt", Passthrough: true}},
		{HostConfig{Sched: sched.Config{Policy: sched.EqualShare}}, VMSpec{ID: "eq", Profiles: []string{"P40-2B"}}},
	}
	for _, s := range specs {
		vm := mustVM(t, newHost(t, s.host), s.vm)
		env := &vm.env
		for _, i := range []int{-1 << 62, -1, 0, 1, 2, 3, 4, 1 << 62} {
			in := i >= 0 && i < len(vm.devices)
			fb, err1 := env.Framebuffer(i)
			n, err2 := env.UsableFramebufferBytes(i)
			fps, err3 := env.FrameRateLimitFPS(i)
			for _, err := range []error{err1, err2, err3} {
				if in != (err == nil) || err != nil && !errors.Is(err, ErrWorkload) {
					t.Errorf("VM %s, vGPU %d of %d: %v", vm.id, i, len(vm.devices), err)
				}
			}
			if in && (fb != vm.devices[i].window || n != vm.devices[i].UsableFramebufferBytes() || fps < 0) {
				t.Errorf("VM %s, vGPU %d: %v, %d, %d", vm.id, i, fb, n, fps)
			}
		}
		if fps, err := env.FrameRateLimitFPS(0); err != nil || s.vm.ID == "eq" && fps != 0 || s.vm.ID == "one" && fps == 0 {
			t.Errorf("VM %s: frame-rate limit %d, %v", vm.id, fps, err)
		}
	}
	for _, env := range []*Env{{}, nil} {
		if env.Now() != 0 || env.VMID() != "" || env.RAM() != nil || env.RAMWorkloadBase() != 0 || env.Devices() != 0 || env.GPU().Model != "" {
			t.Error("an Env without a VM reports a VM")
		}
		_, err1 := env.Framebuffer(0)
		_, err2 := env.UsableFramebufferBytes(0)
		_, err3 := env.FrameRateLimitFPS(0)
		err4 := env.Submit(0, sched.Job{Work: 1})
		for _, err := range []error{err1, err2, err3, err4} {
			if !errors.Is(err, ErrWorkload) {
				t.Errorf("an Env without a VM: %v", err)
			}
		}
		// The workloads provided refuse it too.
		inf, err := NewInference(InferenceConfig{Model: MobileNet()})
		must(t, err)
		if err := inf.Start(env); !errors.Is(err, ErrWorkload) {
			t.Errorf("Inference started on an Env without a VM: %v", err)
		}
	}
}
