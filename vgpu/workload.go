package vgpu

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/sched"
)

// NoEvent is what Workload.NextEvent returns when no event is pending.
const NoEvent = time.Duration(math.MaxInt64)

// Workload is what runs in a VM: it writes the VM's guest RAM and vGPU
// framebuffers and submits GPU work, on the host's simulated time. The host
// drives it; a workload never reads a clock of its own.
//
// Within Host.Advance the host repeatedly takes the earliest NextEvent of
// its running workloads, advances the GPU schedulers to it (calling
// Complete for each job finished on the way), calls AdvanceTo on every
// running workload, then Fire on those whose event is due. Complete may
// write memory and record metrics but must not submit work (Env.Submit
// refuses); Fire must leave NextEvent after the current time. Writes that
// can land in the same page must agree on the page's content class, so
// that their order does not matter.
//
// A workload is not safe for concurrent use. It holds no reference to its
// VM: everything comes through the Env of each call, which is what lets
// VM.HandOverWorkload move it, random state and all, to another VM.
type Workload interface {
	// Name names the workload in errors and metrics.
	Name() string
	// Start begins the workload on its VM at env.Now(): it checks that it
	// fits, writes its initial memory footprint and schedules its first
	// event. It is called at the VM's start, and again after a Stop.
	Start(env *Env) error
	// Pause freezes the workload at env.Now() (the VM's stun).
	Pause(env *Env)
	// Resume continues a paused workload at env.Now(), on the same VM or,
	// after a hand-over, another; nothing is written for the time it was
	// paused. Work that fell due meanwhile (requests that arrived) is
	// submitted by the next Fire.
	Resume(env *Env) error
	// Stop ends the workload (the VM powers off); in-flight work is lost.
	Stop(env *Env)
	// AdvanceTo performs the continuous memory writes up to time t.
	AdvanceTo(env *Env, t time.Duration) error
	// NextEvent returns the time of the next event, or NoEvent. A time
	// before the current one means at once.
	NextEvent() time.Duration
	// Fire handles every event due at env.Now().
	Fire(env *Env) error
	// Complete receives a job of vGPU device that finished.
	Complete(env *Env, device int, c sched.Completion) error
	// SetThrottle cuts dirty rates and the rate of GPU work to 1-f of the
	// configured ones; f = 0 restores them.
	SetThrottle(f float64) error
	// Shift moves every time the workload holds by d, when it moves to a
	// host whose clock differs.
	Shift(d time.Duration)
	// Metrics reports what the workload achieved between from and to.
	Metrics(from, to time.Duration) Metrics
}

// Fitter is a Workload that can tell, before it starts, whether it fits a
// VM: Host.CreateVM and VM.SetWorkload ask it, so that a VM whose workload
// could never start is refused where it is made, not found dead once
// running. Every workload of this package is one.
type Fitter interface {
	// Fits returns nil if the workload fits env's VM, else the error Start
	// would return, wrapping ErrWorkload. It changes nothing.
	Fits(env *Env) error
}

// fits asks w whether it fits vm, if w can tell.
func (vm *VM) fits(w Workload) error {
	if f, ok := w.(Fitter); ok {
		if err := f.Fits(&vm.env); err != nil {
			return vm.hookError(w, "fit", err)
		}
	}
	return nil
}

// Metrics is a workload's performance over an interval [From, To). What an
// item is depends on the workload: an inference request, a training
// iteration, a rendered frame, a desktop update.
type Metrics struct {
	Workload string
	From, To time.Duration
	// Completed counts the items finished in the interval.
	Completed int64
	// Dropped counts the items lost in the interval: requests refused by a
	// full queue, frames skipped because the previous one was not done.
	Dropped int64
	// ThroughputPerSec is Completed per second of the interval.
	ThroughputPerSec float64
	// Latency of the completed items: from a request's arrival, a frame's
	// submission or an update's event to completion; for training, the
	// time between an iteration's completion and the previous one's.
	LatencyMean, LatencyP50, LatencyP99, LatencyMax time.Duration
	// BusyTime is the sum of the completed items' latencies; for training
	// it is the training time the interval's iterations took.
	BusyTime time.Duration
	// Partial reports that the interval reaches back before the oldest
	// record kept (see the workloads' HistoryLimit).
	Partial bool
}

func (m Metrics) String() string {
	return fmt.Sprintf("%s: %d done, %d dropped, %.1f/s, latency p50 %v p99 %v",
		m.Workload, m.Completed, m.Dropped, m.ThroughputPerSec,
		m.LatencyP50.Round(time.Microsecond), m.LatencyP99.Round(time.Microsecond))
}

// DefaultHistoryLimit is the number of items a workload remembers for its
// metrics when its configuration says 0.
const DefaultHistoryLimit = 1 << 20

// record is one item in a workload's history.
type record struct {
	start, end time.Duration
	dropped    bool
}

// history is a bounded ring of records in order of their end time.
type history struct {
	buf   []record
	head  int // index of the oldest record
	n     int
	limit int
	// evicted says a record was evicted, and oldest is then the end of
	// the last one; a flag rather than a sentinel time, since times are
	// negative after a Shift to a host whose clock is behind.
	evicted bool
	oldest  time.Duration
}

func newHistory(limit int) history {
	if limit <= 0 {
		limit = DefaultHistoryLimit
	}
	return history{limit: limit}
}

func (h *history) add(r record) {
	if h.n == h.limit {
		h.evicted, h.oldest = true, h.buf[h.head].end
		h.buf[h.head] = r
		h.head = (h.head + 1) % h.limit
		return
	}
	if h.n == len(h.buf) {
		nb := make([]record, min(max(64, 2*len(h.buf)), h.limit))
		for i := range h.n {
			nb[i] = h.buf[(h.head+i)%len(h.buf)]
		}
		h.buf, h.head = nb, 0
	}
	h.buf[(h.head+h.n)%len(h.buf)] = r
	h.n++
}

func (h *history) shift(d time.Duration) {
	for i := range h.n {
		r := &h.buf[(h.head+i)%len(h.buf)]
		r.start += d
		r.end += d
	}
	if h.evicted {
		h.oldest += d
	}
}

// metrics summarises the records ending in [from, to).
func (h *history) metrics(name string, from, to time.Duration) Metrics {
	m := Metrics{Workload: name, From: from, To: to, Partial: h.evicted && h.oldest >= from}
	var lat []time.Duration
	for i := range h.n {
		r := h.buf[(h.head+i)%len(h.buf)]
		if r.end < from || r.end >= to {
			continue
		}
		if r.dropped {
			m.Dropped++
			continue
		}
		lat = append(lat, r.end-r.start)
	}
	m.Completed = int64(len(lat))
	if to > from {
		m.ThroughputPerSec = float64(m.Completed) / (float64(to-from) / float64(time.Second))
	}
	if len(lat) == 0 {
		return m
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	m.BusyTime = sum
	m.LatencyMean = sum / time.Duration(len(lat))
	m.LatencyP50 = Percentile(lat, 50)
	m.LatencyP99 = Percentile(lat, 99)
	m.LatencyMax = lat[len(lat)-1]
	return m
}

// Percentile is the nearest-rank p-th percentile (p in [1, 100]) of
// sorted, a non-empty slice in increasing order: the workloads' latency
// percentiles and a migration summary's stun percentiles alike.
func Percentile(sorted []time.Duration, p int) time.Duration {
	k := (len(sorted)*p + 99) / 100
	return sorted[min(max(k, 1), len(sorted))-1]
}
