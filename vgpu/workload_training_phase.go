package vgpu

import (
	"time"
)

// A training iteration's host phase: the data loading and CPU
// preprocessing of its batch, before its GPU work is submitted.
//
// Training that loads each batch in its own loop, without prefetching,
// leaves its vGPUs idle for the phase every iteration. That idle time is
// what the scheduler policies treat differently: best effort hands it to
// another VM with work, equal and fixed share keep the VM's time slices
// for it; so best effort shows higher GPU utilization and shorter
// training ("GPU Virtualization for Machine Learning Workloads, Part 2",
// Figures 4 and 5, seed 001_322282e416af8153.txt). Without the phase the
// GPU never idles and the policies give the same results.
//
// The source gives no figure for the phase, so it defaults to zero: a
// training whose input is always ready, as before the phase existed.

// Limits of the host phase's configuration.
const (
	maxDataLoad      = time.Hour
	maxDataLoadRatio = 1000
)

// seedDataLoad is the purpose of the seed of the host phases' jitter,
// beside the guest-RAM dirtier's 11.
const seedDataLoad = 12

// hasDataLoad reports whether iterations have a host phase.
func (c TrainingConfig) hasDataLoad() bool { return c.DataLoad != 0 || c.DataLoadRatio != 0 }

// checkDataLoad checks the host phase's fields of c, turning a negative
// zero into a zero, so that the configuration kept has one form.
func checkDataLoad(c *TrainingConfig) error {
	if c.DataLoadRatio == 0 {
		c.DataLoadRatio = 0
	}
	if c.DataLoadJitter == 0 {
		c.DataLoadJitter = 0
	}
	switch {
	case c.DataLoad < 0 || c.DataLoad > maxDataLoad:
		return configError("data load %v outside [0, %v]", c.DataLoad, maxDataLoad)
	case !(c.DataLoadRatio >= 0 && c.DataLoadRatio <= maxDataLoadRatio):
		return configError("data-load ratio %v outside [0, %d]", c.DataLoadRatio, maxDataLoadRatio)
	case c.DataLoad > 0 && c.DataLoadRatio > 0:
		return configError("data load %v and data-load ratio %v: set one", c.DataLoad, c.DataLoadRatio)
	case !(c.DataLoadJitter >= 0 && c.DataLoadJitter <= 1):
		return configError("data-load jitter %v outside [0, 1]", c.DataLoadJitter)
	case c.DataLoadJitter > 0 && !c.hasDataLoad():
		return configError("data-load jitter %v without a data load", c.DataLoadJitter)
	}
	return nil
}

// DataLoad is the host phase of one iteration on a GPU of spec, before
// jitter: DataLoad, or DataLoadRatio times IterationWork(spec).
func (w *Training) DataLoad(spec GPUSpec) time.Duration {
	if w.cfg.DataLoad > 0 {
		return w.cfg.DataLoad
	}
	return ratioPhase(w.cfg.DataLoadRatio, w.IterationWork(spec))
}

// checkPhase refuses a ratio that makes the host phase on spec longer
// than an hour.
func (w *Training) checkPhase(spec GPUSpec) error {
	r := w.cfg.DataLoadRatio
	if work := w.IterationWork(spec); float64(r*float64(work)) > float64(maxDataLoad) {
		return configError("data-load ratio %v of %v of GPU work: a host phase above %v", r, work, maxDataLoad)
	}
	return nil
}

// ratioPhase is r times work, at most maxDataLoad (a decoded state's work
// is not checked against the GPU).
func ratioPhase(r float64, work time.Duration) time.Duration {
	return time.Duration(min(float64(r*float64(work)), float64(maxDataLoad)))
}

// nextPhase draws the host phase of the next iteration.
func (w *Training) nextPhase() time.Duration {
	p := w.cfg.DataLoad
	if p == 0 {
		p = ratioPhase(w.cfg.DataLoadRatio, w.work)
	}
	j := w.cfg.DataLoadJitter
	if p == 0 || j == 0 {
		return p
	}
	// u is uniform in [-1, 1); explicit conversions keep every operation
	// apart, so the result is the same on every machine.
	u := float64(w.loader.Uint64()>>11)/(1<<52) - 1
	f := float64(1 + float64(j*u))
	return max(time.Duration(float64(float64(p)*f)), 0)
}

// Pause freezes the continuous writes and, mid host phase, the phase: the
// rest of it runs once the VM resumes.
func (w *Training) Pause(env *Env) {
	w.base.Pause(env)
	if w.running && w.cfg.hasDataLoad() && w.inFlight == 0 {
		w.loadLeft = max(w.readyAt-env.Now(), 0)
	}
}
