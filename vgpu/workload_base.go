package vgpu

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// base is what every workload of the package shares: the clock of its
// continuous writes, background dirtying of guest RAM and of each
// framebuffer, the throttle and the metrics history.
type base struct {
	name     string
	hist     history
	throttle float64
	last     time.Duration // time the continuous writes have reached
	running  bool          // started and not stopped
	paused   bool
	ram      dirtier
	fb       []dirtier // one per vGPU
}

// Name returns the workload's name.
func (b *base) Name() string { return b.name }

// Metrics reports the workload's performance over [from, to).
func (b *base) Metrics(from, to time.Duration) Metrics { return b.hist.metrics(b.name, from, to) }

// Pause freezes the continuous writes.
func (b *base) Pause(env *Env) { b.paused = true }

// AdvanceTo performs the background dirtying from the last time to t.
func (b *base) AdvanceTo(env *Env, t time.Duration) error {
	if !b.running || b.paused || t <= b.last {
		b.last = max(b.last, t)
		return nil
	}
	dt := t - b.last
	b.last = t
	if err := b.ram.advance(env.RAM(), dt); err != nil {
		return err
	}
	for i := range b.fb {
		if i < env.Devices() {
			fb, err := env.Framebuffer(i)
			if err != nil {
				return err
			}
			if err := b.fb[i].advance(fb, dt); err != nil {
				return err
			}
		}
	}
	return nil
}

// resume restarts the continuous writes at the current time: nothing is
// written for the time the workload was paused.
func (b *base) resume(env *Env) {
	b.paused = false
	b.last = env.Now()
}

// validThrottle reports whether f is a throttle: a fraction in [0, 1) of
// a workload's rates cut, where 1 would stop it for good.
func validThrottle(f float64) bool { return f >= 0 && f < 1 }

// setThrottle applies f to the background dirtying.
func (b *base) setThrottle(f float64) error {
	if !validThrottle(f) {
		return configError("throttle %v outside [0, 1)", f)
	}
	b.throttle = f
	b.applyThrottle()
	return nil
}

// applyThrottle applies the stored throttle to the dirtiers, which Start
// recreates.
func (b *base) applyThrottle() {
	b.ram.throttle(b.throttle)
	for i := range b.fb {
		b.fb[i].throttle(b.throttle)
	}
}

// shift moves the base's times by d.
func (b *base) shift(d time.Duration) {
	b.last += d
	b.hist.shift(d)
}

// expGap draws an exponential inter-arrival time for rate events per
// second. It uses -ln(U) with explicit conversions, so no operation can be
// fused and the result is the same on every machine.
func expGap(rng *rand.PCG, rate float64) time.Duration {
	u := float64(rng.Uint64()>>11+1) / (1 << 53)
	e := float64(-math.Log(u))
	ns := float64(e * float64(time.Second))
	return max(time.Duration(float64(ns/rate)), 1)
}

// ramMix is the content of a guest's working memory: the realistic mix of
// zero, weight-like, text and random pages.
func ramMix() memory.Mix { return memory.MixRealistic() }

// textMix is the content of desktop surfaces and documents.
func textMix() memory.Mix { return memory.MixText() }

// renderMix is the content of rendered frames: half smooth-shaded,
// moderately compressible surfaces, half noisy texture detail.
// Assumption: an even split, because no published measurement of how
// render targets compress was found; the frames then compress between
// activations (about 1.7:1 at zstd's fastest) and random bytes (1:1).
func renderMix() memory.Mix {
	return memory.Mix{Name: "render", Parts: []memory.MixPart{
		{Class: memory.ClassActivations, Weight: 1}, {Class: memory.ClassRandom, Weight: 1}}}
}
