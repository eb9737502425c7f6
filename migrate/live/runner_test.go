package live

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/vgpu"
)

// A host whose Advance takes three times the simulated time it covers
// cannot keep up with wall time. The Runner must not chase it with ever
// longer steps, the lock held back to back: each step is capped, the time
// it cannot cover is dropped and shown by Lag, and whoever waits for the
// lock gets it within about one capped step.
func TestRunnerSlowHostDoesNotStarveWaiters(t *testing.T) {
	const tick = time.Millisecond
	maxStep := RunnerMaxStepTicks * tick
	var mu sync.Mutex
	var steps []time.Duration
	slow := func(d time.Duration) error {
		mu.Lock()
		steps = append(steps, d)
		mu.Unlock()
		time.Sleep(min(3*d, time.Second))
		return nil
	}
	r := newRunner(slow, tick)
	r.Start()
	var worst time.Duration
	for deadline := time.Now().Add(400 * time.Millisecond); time.Now().Before(deadline); {
		start := time.Now()
		r.Lock()
		worst = max(worst, time.Since(start))
		r.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
	must(t, r.Stop())

	mu.Lock()
	defer mu.Unlock()
	if len(steps) < 5 {
		t.Fatalf("%d steps in 400 ms", len(steps))
	}
	for i, d := range steps {
		if d > maxStep {
			t.Fatalf("step %d advanced the host by %v, cap %v", i, d, maxStep)
		}
	}
	// A waiter waits out at most one step: 3 × maxStep, and some slack
	// for a loaded machine.
	if limit := 3*maxStep + 50*time.Millisecond; worst > limit {
		t.Errorf("a Lock waited %v for the Runner, want at most %v", worst, limit)
	}
	if r.Lag() <= 0 {
		t.Errorf("Lag %v after a host that could not keep up", r.Lag())
	}
	lag := r.Lag()
	time.Sleep(5 * time.Millisecond)
	if r.Lag() != lag {
		t.Error("Lag grew after Stop")
	}
}

// A failing Advance stops the Runner, and Stop and Err return its error.
func TestRunnerStopsOnError(t *testing.T) {
	boom := errors.New("boom")
	r := newRunner(func(time.Duration) error { return boom }, time.Millisecond)
	r.Start()
	deadline := time.Now().Add(5 * time.Second)
	for r.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := r.Stop(); !errors.Is(err, boom) || !errors.Is(r.Err(), boom) {
		t.Fatalf("Stop: %v, Err: %v; want the Advance's error", err, r.Err())
	}
}

// badIndexWorkload asks its Env for the framebuffer of vGPU 3, at its
// first event, 1 ms after its start, from the hook the test names.
type badIndexWorkload struct {
	hook  string // "advance" or "fire"
	next  time.Duration
	fired bool
}

func (w *badIndexWorkload) Name() string { return "bad-index" }

func (w *badIndexWorkload) Start(env *vgpu.Env) error {
	w.next = env.Now() + time.Millisecond
	return nil
}

func (w *badIndexWorkload) Pause(*vgpu.Env)           {}
func (w *badIndexWorkload) Resume(*vgpu.Env) error    { return nil }
func (w *badIndexWorkload) Stop(*vgpu.Env)            {}
func (w *badIndexWorkload) Shift(time.Duration)       {}
func (w *badIndexWorkload) SetThrottle(float64) error { return nil }

func (w *badIndexWorkload) AdvanceTo(env *vgpu.Env, t time.Duration) error {
	if w.hook == "advance" && t >= w.next {
		_, err := env.Framebuffer(3)
		return err
	}
	return nil
}

func (w *badIndexWorkload) NextEvent() time.Duration {
	if w.fired {
		return vgpu.NoEvent
	}
	return w.next
}

func (w *badIndexWorkload) Fire(env *vgpu.Env) error {
	w.fired = true
	if w.hook == "fire" {
		_, err := env.Framebuffer(3)
		return err
	}
	return nil
}

func (w *badIndexWorkload) Complete(*vgpu.Env, int, sched.Completion) error { return nil }

func (w *badIndexWorkload) Metrics(from, to time.Duration) vgpu.Metrics {
	return vgpu.Metrics{Workload: w.Name(), From: from, To: to}
}

// A workload that asks for a vGPU its VM does not have, run by a Runner on
// wall time, stops the Runner with an error wrapping vgpu.ErrWorkload; the
// process goes on, and the VM and its host stay usable.
func TestRunnerWorkloadBadIndex(t *testing.T) {
	for _, hook := range []string{"advance", "fire"} {
		t.Run(hook, func(t *testing.T) {
			host, err := vgpu.NewHost(vgpu.HostConfig{Name: "src"})
			must(t, err)
			vm, err := host.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: 64 << 20, Profiles: []string{"P40-1Q"},
				Workload: &badIndexWorkload{hook: hook}})
			must(t, err)
			must(t, vm.Start())
			r := NewRunner(host, time.Millisecond)
			r.Start()
			deadline := time.Now().Add(5 * time.Second)
			for r.Err() == nil && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			err = r.Stop()
			if !errors.Is(err, vgpu.ErrWorkload) || !errors.Is(r.Err(), vgpu.ErrWorkload) {
				t.Fatalf("Stop: %v, Err: %v; want errors wrapping vgpu.ErrWorkload", err, r.Err())
			}
			if msg := err.Error(); !strings.Contains(msg, `VM "vm"`) || !strings.Contains(msg, "vGPU 3") {
				t.Errorf("%q names neither the VM nor vGPU 3", msg)
			}
			r.Lock()
			defer r.Unlock()
			if vm.State() != vgpu.VMRunning {
				t.Errorf("VM %v after the workload's error", vm.State())
			}
			must(t, vm.Pause())
			must(t, host.Advance(time.Millisecond))
		})
	}
}
