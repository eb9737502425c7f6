package live

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

// DefaultRunnerTick is how often a Runner advances its host.
const DefaultRunnerTick = time.Millisecond

// RunnerMaxStepTicks bounds one step of a Runner: it advances its host by
// at most this many ticks at a time, so that it holds its lock for a
// bounded time however far behind wall time the host has fallen.
const RunnerMaxStepTicks = 10

// Runner runs a host's VMs on wall time, for live migrations: a goroutine
// advances the host's simulated clock by the wall time that passed, every
// tick, so that each VM's workload writes its memory at its configured
// rates while the copy engine streams it. This is the live mode's one
// departure from simulated time.
//
// A Runner is a sync.Locker: holding it holds the host still. Give it as
// SendConfig.Lock or ReceiveConfig.Lock, and hold it around anything else
// that touches the host while it runs.
//
// A host whose Advance takes longer than the simulated time it covers
// cannot keep up with wall time. Rather than run back to back with the
// lock held, each step a longer one than the last, a Runner advances the
// host by at most RunnerMaxStepTicks ticks per step, lets go of the lock
// for a tick between steps so that Send, Receive and the caller get their
// turn, and drops the wall time it could not cover: the host's clock then
// runs slower than wall time, and Lag says by how much in all.
type Runner struct {
	advance func(time.Duration) error // the host's Advance
	tick    time.Duration
	maxStep time.Duration

	mu      sync.Mutex // the host's lock, and the fields below
	stop    chan struct{}
	done    chan struct{}
	err     error
	running bool

	lag atomic.Int64 // ns of wall time dropped since Start; read without mu
}

// NewRunner returns a stopped Runner for host; tick 0 means
// DefaultRunnerTick.
func NewRunner(host *vgpu.Host, tick time.Duration) *Runner {
	return newRunner(host.Advance, tick)
}

// newRunner returns a Runner that steps with advance: a host's Advance,
// or, in tests, a stand-in as slow as they need.
func newRunner(advance func(time.Duration) error, tick time.Duration) *Runner {
	if tick <= 0 {
		tick = DefaultRunnerTick
	}
	return &Runner{advance: advance, tick: tick, maxStep: RunnerMaxStepTicks * tick}
}

// Lock holds the host still.
func (r *Runner) Lock() { r.mu.Lock() }

// Unlock lets the Runner advance the host again.
func (r *Runner) Unlock() { r.mu.Unlock() }

// Start starts the goroutine that advances the host, and sets Lag to zero;
// it is a no-op if it runs already.
func (r *Runner) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return
	}
	r.running, r.err = true, nil
	r.lag.Store(0)
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go r.run(r.stop, r.done)
}

// Stop stops the goroutine, waits for it, and returns the first error the
// host's Advance returned, if any.
func (r *Runner) Stop() error {
	r.mu.Lock()
	if !r.running {
		err := r.err
		r.mu.Unlock()
		return err
	}
	r.running = false
	close(r.stop)
	done := r.done
	r.mu.Unlock()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Err returns the error that stopped the Runner, if any.
func (r *Runner) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Lag returns how much wall time the Runner has dropped since it was last
// started because the host could not keep up: the host's clock is behind
// wall time by that much, and its workloads wrote that much less than
// their rates say. It stays zero for a host that keeps up. It does not
// wait for the lock, so it may be called while the Runner advances.
func (r *Runner) Lag() time.Duration { return time.Duration(r.lag.Load()) }

func (r *Runner) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	// A timer started after each step, not a ticker: a ticker's next tick
	// is already due when a step overruns it, and the Runner would take
	// the lock back at once, leaving its waiters no turn.
	t := time.NewTimer(r.tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := time.Now()
		d := now.Sub(last)
		last = now
		if d > r.maxStep {
			r.lag.Add(int64(d - r.maxStep))
			d = r.maxStep
		}
		if d > 0 {
			r.mu.Lock()
			err := r.advance(d)
			if err != nil {
				r.err = errors.Join(r.err, err)
			}
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
		t.Reset(r.tick)
	}
}
