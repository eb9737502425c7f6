package live

import (
	"errors"
	"sync"
	"testing"
	"time"
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
