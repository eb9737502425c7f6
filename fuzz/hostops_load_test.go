package fuzz_test

import (
	"time"

	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/vgpu"
)

// hostopsLoad is a workload that keeps every vGPU of its VM busy and never
// writes memory: the scheduler has turns to share, and what the fuzz
// target's shadow model says a VM's memory holds stays exactly what the
// target wrote. At every poll it tops each vGPU's queue up to depth jobs.
type hostopsLoad struct {
	work, chunk time.Duration
	depth       int
	poll        time.Duration
	next        time.Duration // the next poll; NoEvent while not running
	queued      []int         // jobs in flight per vGPU
	tag         uint64
	throttle    float64
}

func newHostopsLoad(chunk time.Duration) *hostopsLoad {
	return &hostopsLoad{work: 3 * time.Millisecond, chunk: chunk, depth: 2, poll: 2 * time.Millisecond,
		next: vgpu.NoEvent}
}

func (w *hostopsLoad) Name() string { return "hostops-load" }

func (w *hostopsLoad) Start(env *vgpu.Env) error {
	w.queued = make([]int, env.Devices())
	w.next = env.Now()
	return nil
}

func (w *hostopsLoad) Pause(*vgpu.Env) { w.next = vgpu.NoEvent }

func (w *hostopsLoad) Resume(env *vgpu.Env) error {
	if len(w.queued) != env.Devices() {
		w.queued = make([]int, env.Devices())
	}
	w.next = env.Now()
	return nil
}

// Stop drops the jobs in flight, as the VM's power-off does.
func (w *hostopsLoad) Stop(*vgpu.Env) {
	w.next = vgpu.NoEvent
	clear(w.queued)
}

func (w *hostopsLoad) AdvanceTo(*vgpu.Env, time.Duration) error { return nil }
func (w *hostopsLoad) NextEvent() time.Duration                 { return w.next }

// Fire tops the queues up; a throttled load keeps one job queued.
func (w *hostopsLoad) Fire(env *vgpu.Env) error {
	depth := w.depth
	if w.throttle > 0 {
		depth = 1
	}
	for i := range w.queued {
		for w.queued[i] < depth {
			w.tag++
			if err := env.Submit(i, sched.Job{Work: w.work, Chunk: w.chunk, Tag: w.tag}); err != nil {
				return err
			}
			w.queued[i]++
		}
	}
	w.next = env.Now() + w.poll
	return nil
}

func (w *hostopsLoad) Complete(_ *vgpu.Env, dev int, _ sched.Completion) error {
	if dev < len(w.queued) && w.queued[dev] > 0 {
		w.queued[dev]--
	}
	return nil
}

func (w *hostopsLoad) SetThrottle(f float64) error { w.throttle = f; return nil }

func (w *hostopsLoad) Shift(d time.Duration) {
	if w.next != vgpu.NoEvent {
		w.next += d
	}
}

func (w *hostopsLoad) Metrics(from, to time.Duration) vgpu.Metrics {
	return vgpu.Metrics{Workload: w.Name(), From: from, To: to}
}
