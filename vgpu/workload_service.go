package vgpu

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/vgpusim/vgpusim/sched"
)

// service is the core of the open-loop workloads (inference, desktop):
// requests arrive by a Poisson process of the clients', independent of the
// VM; each is written into guest RAM and submitted as one GPU job to the
// vGPUs in turn, and its completion writes the vGPU's framebuffer. While
// the VM is paused requests keep arriving and wait; they are submitted
// when it resumes, with their latency counted from arrival, so a stun
// shows in the latency percentiles.
type service struct {
	base
	rate     float64 // configured arrivals per second
	arrivals *rand.PCG
	next     time.Duration // next arrival
	seq      uint64
	rr       int
	inflight map[uint64]time.Duration // tag -> arrival
	work     time.Duration
	chunk    time.Duration
	inBytes  int64 // guest RAM written per request
	outBytes int64 // framebuffer written per completion
	io       JobIO // what a request moves on a remote GPU
	reqRing  sweeper
	out      []sweeper // one per vGPU
}

func newService(name string, rate float64, seed uint64, historyLimit int) service {
	return service{
		base:     base{name: name, hist: newHistory(historyLimit)},
		rate:     rate,
		arrivals: rand.NewPCG(seed, 0x14057b7ef767814f),
		inflight: make(map[uint64]time.Duration),
	}
}

// begin starts the arrivals at env.Now(); the caller has laid out memory.
func (s *service) begin(env *Env) {
	clear(s.inflight)
	s.running, s.paused, s.last = true, false, env.Now()
	s.next = env.Now() + expGap(s.arrivals, s.effectiveRate())
}

func (s *service) effectiveRate() float64 {
	return max(float64(s.rate*(1-s.throttle)), 1e-9)
}

// NextEvent returns the next arrival.
func (s *service) NextEvent() time.Duration {
	if !s.running {
		return NoEvent
	}
	return s.next
}

// Fire submits every request that has arrived by now.
func (s *service) Fire(env *Env) error {
	now := env.Now()
	for s.running && s.next <= now {
		arrival := s.next
		if err := s.submit(env, arrival); err != nil {
			return err
		}
		s.next = arrival + expGap(s.arrivals, s.effectiveRate())
	}
	return nil
}

func (s *service) submit(env *Env, arrival time.Duration) error {
	dev := s.rr % env.Devices()
	s.rr = (s.rr + 1) % env.Devices()
	tag := s.seq
	s.seq++
	err := env.SubmitIO(dev, sched.Job{Work: s.work, Chunk: s.chunk, Tag: tag}, s.io)
	if errors.Is(err, sched.ErrQueueFull) {
		s.hist.add(record{start: arrival, end: env.Now(), dropped: true})
		return nil
	}
	if err != nil {
		return err
	}
	s.inflight[tag] = arrival
	return s.reqRing.write(env.RAM(), s.inBytes)
}

// Complete records a finished request and writes its output.
func (s *service) Complete(env *Env, dev int, c sched.Completion) error {
	arrival, ok := s.inflight[c.Tag]
	if !ok {
		return nil
	}
	delete(s.inflight, c.Tag)
	s.hist.add(record{start: arrival, end: c.Finished})
	if dev < len(s.out) {
		fb, err := env.Framebuffer(dev)
		if err != nil {
			return err
		}
		return s.out[dev].write(fb, s.outBytes)
	}
	return nil
}

// Resume continues after a pause or a hand-over.
func (s *service) Resume(env *Env) error {
	s.resume(env)
	return nil
}

// Stop ends the service; requests in flight are lost with the VM's power.
func (s *service) Stop(env *Env) {
	s.running = false
	clear(s.inflight)
}

// SetThrottle scales the arrival rate and the background dirtying.
func (s *service) SetThrottle(f float64) error { return s.setThrottle(f) }

// Shift moves the service's times by d.
func (s *service) Shift(d time.Duration) {
	s.shift(d)
	if s.running {
		s.next += d
	}
	for k := range s.inflight {
		s.inflight[k] += d
	}
}
