package vgpu

import (
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// CADConfig configures an interactive CAD / 3D application (SPECapc for
// 3ds Max, the graphics workload of the GTC 2019 talk "vMotion for NVIDIA
// GRID vGPU Virtual Machines" and of the VMware blog "GPU Virtualization
// for Machine Learning Workloads, Part 2"). Zero fields take the defaults
// in brackets; the defaults are assumptions.
type CADConfig struct {
	// TargetFPS is the frame rate the application aims at [60, the
	// frame-rate limit of the Q-series types (see Profile.FrameRateLimitFPS
	// and its sources)], at least minTargetFPS; the frame-rate limiter caps
	// it under the best-effort scheduler.
	TargetFPS float64
	// WidthPixels and HeightPixels are the viewport [1920x1080;
	// assumption: one full-HD monitor, the common desktop resolution].
	WidthPixels, HeightPixels int64
	// OpsPerPixel is the shading work per pixel and frame [20000 FLOP: a
	// few hundred lit, textured fragments of overdraw; assumption, no
	// published per-pixel cost of the SPECapc scenes was found. With the
	// default efficiency a 1080p frame costs 7 ms of a whole P40, so 60
	// FPS keep about 42 % of it busy: a heavy interactive user who still
	// leaves room to share the GPU].
	OpsPerPixel int64
	// Efficiency is the fraction of the FP32 peak the renderer sustains
	// [0.5; assumption: a frame's large draws occupy the GPU better than
	// batch-1 inference (0.25) but, with state changes between them, not
	// fully; no published figure was found].
	Efficiency float64
	// SceneBytes is the framebuffer holding geometry and textures [1 GiB;
	// assumption: a mid-sized model with its textures, a quarter of a
	// P40-4Q].
	SceneBytes int64
	// RenderBuffers is the number of colour+depth render targets (triple
	// buffering) [3; each 4 bytes of colour and 4 of depth a pixel, the
	// common 8-bit RGBA colour and 24-bit depth with 8-bit stencil].
	RenderBuffers int
	// FootprintBytes, if set, is the framebuffer holding data: render
	// targets plus a scene making up the rest. It overrides SceneBytes.
	FootprintBytes int64
	// RAMWorkingSetBytes is the application's guest memory [2 GiB;
	// assumption: a 3D application with a model open].
	RAMWorkingSetBytes int64
	// RAMDirtyBytesPerSec is its dirtying while the user edits the model
	// [16 MiB/s; assumption: the busiest of the package's workloads, yet
	// under 2 % of 10 GbE's goodput, so that guest RAM converges in
	// pre-copy; no published dirty rate was found] in pattern
	// RAMDirtyPattern (memory.HotSet with the default rate; memory.Uniform
	// when a rate is given without one).
	RAMDirtyBytesPerSec int64
	RAMDirtyPattern     memory.PatternKind
	HistoryLimit        int
	Seed                uint64
}

// CAD renders frames at a target rate on the VM's first vGPU: every frame
// period a frame is submitted unless the previous one is still rendering
// (then the frame is skipped, counted as dropped); a finished frame
// rewrites a render target. It reports frames per second and frame latency
// from submission to completion.
type CAD struct {
	base
	cfg      CADConfig
	fps      float64 // after the limiter, before the throttle
	period   time.Duration
	next     time.Duration
	seq      uint64
	inFlight bool
	tag      uint64
	sentAt   time.Duration
	work     time.Duration
	rtBytes  int64
	targets  sweeper
}

// NewCAD returns a CAD workload; it starts with its VM.
func NewCAD(cfg CADConfig) (*CAD, error) {
	if cfg.TargetFPS == 0 {
		cfg.TargetFPS = 60
	}
	if cfg.WidthPixels == 0 && cfg.HeightPixels == 0 {
		cfg.WidthPixels, cfg.HeightPixels = 1920, 1080
	}
	if cfg.OpsPerPixel == 0 {
		cfg.OpsPerPixel = 20000
	}
	if cfg.Efficiency == 0 {
		cfg.Efficiency = 0.5
	}
	if cfg.SceneBytes == 0 {
		cfg.SceneBytes = 1 * GiB
	}
	if cfg.RenderBuffers == 0 {
		cfg.RenderBuffers = 3
	}
	if cfg.FootprintBytes > 0 {
		cfg.SceneBytes = max(cfg.FootprintBytes-cfg.renderTargetBytes(), 0)
	}
	if cfg.RAMWorkingSetBytes == 0 {
		cfg.RAMWorkingSetBytes = 2 * GiB
	}
	if cfg.RAMDirtyBytesPerSec == 0 {
		cfg.RAMDirtyBytesPerSec = 16 * MiB
		cfg.RAMDirtyPattern = memory.HotSet
	}
	switch {
	case !(cfg.TargetFPS >= minTargetFPS && cfg.TargetFPS <= 1000):
		return nil, configError("target frame rate %v outside [%v, 1000]", cfg.TargetFPS, minTargetFPS)
	case cfg.WidthPixels <= 0 || cfg.HeightPixels <= 0 || cfg.WidthPixels*cfg.HeightPixels > 1<<28:
		return nil, configError("viewport %dx%d out of range", cfg.WidthPixels, cfg.HeightPixels)
	case cfg.OpsPerPixel <= 0 || cfg.RenderBuffers < 1 || cfg.RenderBuffers > 8:
		return nil, configError("ops per pixel must be positive and render buffers 1 to 8")
	case cfg.SceneBytes < 0 || cfg.RAMWorkingSetBytes < 0:
		return nil, configError("negative memory size")
	}
	if err := checkEfficiency(cfg.Efficiency); err != nil {
		return nil, err
	}
	return &CAD{base: base{name: "cad", hist: newHistory(cfg.HistoryLimit)}, cfg: cfg}, nil
}

// renderTargetBytes is the colour (4 bytes) and depth (4 bytes) of every
// render buffer.
func (c CADConfig) renderTargetBytes() int64 {
	return c.WidthPixels * c.HeightPixels * 8 * int64(c.RenderBuffers)
}

// Config returns the configuration, defaults filled in.
func (w *CAD) Config() CADConfig { return w.cfg }

// FrameWork is the GPU time of one frame with the whole GPU.
func (w *CAD) FrameWork(spec GPUSpec) time.Duration {
	return GPUWork(w.cfg.WidthPixels*w.cfg.HeightPixels*w.cfg.OpsPerPixel, spec.FP32FlopsPerSec, w.cfg.Efficiency)
}

// place lays the workload out on env's VM: the scene and render targets
// in the framebuffer, the working set in guest memory.
func (w *CAD) place(env *Env) (scene, rt, ws span, err error) {
	c := w.cfg
	fl, err := fbLayout(env)
	if err != nil {
		return
	}
	sceneBytes := c.SceneBytes
	if c.FootprintBytes > 0 {
		sceneBytes = firstOfFootprint(c.FootprintBytes, c.renderTargetBytes(), fl.page)
	}
	if scene, err = fl.take(sceneBytes, memory.MixWeights(), "scene"); err != nil {
		return
	}
	if rt, err = fl.take(c.renderTargetBytes(), renderMix(), "render targets"); err != nil {
		return
	}
	rl, err := ramLayout(env)
	if err != nil {
		return
	}
	ws, err = rl.take(c.RAMWorkingSetBytes, ramMix(), "working set")
	return
}

// Fits reports whether the workload fits env's VM (see Fitter).
func (w *CAD) Fits(env *Env) error {
	_, _, _, err := w.place(env)
	return err
}

// Start uploads the scene and starts rendering.
func (w *CAD) Start(env *Env) error {
	c := w.cfg
	scene, rt, ws, err := w.place(env)
	if err != nil {
		return err
	}
	if w.ram, err = newDirtier(env.RAM(), ws, c.RAMDirtyPattern, c.RAMDirtyBytesPerSec, derive(c.Seed, 11)); err != nil {
		return err
	}
	fb, err := env.Framebuffer(0)
	if err != nil {
		return err
	}
	if err := scene.fill(fb); err != nil {
		return err
	}
	if err := rt.fill(fb); err != nil {
		return err
	}
	if err := ws.fill(env.RAM()); err != nil {
		return err
	}
	w.targets = sweeper{span: rt}
	w.rtBytes = c.WidthPixels * c.HeightPixels * 8
	w.work = w.FrameWork(env.GPU())
	w.fps = c.TargetFPS
	frl, err := env.FrameRateLimitFPS(0)
	if err != nil {
		return err
	}
	if frl > 0 {
		w.fps = min(w.fps, float64(frl))
	}
	w.fb = nil
	w.applyThrottle()
	w.setPeriod()
	w.inFlight = false
	w.running, w.paused, w.last = true, false, env.Now()
	w.next = env.Now() + w.period
	return nil
}

func (w *CAD) setPeriod() {
	w.period = time.Duration(min(max(float64(float64(time.Second)/float64(w.fps*(1-w.throttle))), 1), maxFramePeriodNS))
}

// minTargetFPS is the lowest frame rate a renderer aims at, a frame a
// quarter of an hour: the period of a throttled one stays far within a
// Duration.
const minTargetFPS = 1.0 / 1000

// maxFramePeriodNS bounds a frame period, whatever a state decoded from a
// file says its rate is: a year.
const maxFramePeriodNS = float64(365 * 24 * time.Hour)

// NextEvent returns the next frame time.
func (w *CAD) NextEvent() time.Duration {
	if !w.running {
		return NoEvent
	}
	return w.next
}

// Fire submits the frame due, or skips it if the previous one is still
// rendering.
func (w *CAD) Fire(env *Env) error {
	for w.running && w.next <= env.Now() {
		tick := w.next
		w.next += w.period
		if w.inFlight {
			w.hist.add(record{start: tick, end: tick, dropped: true})
			continue
		}
		w.seq++
		// A frame can be preempted at every hundredth of its work
		// (assumption: a frame is many draw calls and kernels, each
		// short; no published kernel count was found).
		err := env.Submit(0, sched.Job{Work: w.work, Chunk: max(w.work/100, 1), Tag: w.seq})
		if err != nil {
			return err
		}
		w.inFlight, w.tag, w.sentAt = true, w.seq, env.Now()
	}
	return nil
}

// Complete records a finished frame and rewrites a render target.
func (w *CAD) Complete(env *Env, dev int, c sched.Completion) error {
	if !w.inFlight || c.Tag != w.tag || dev != 0 {
		return nil
	}
	w.inFlight = false
	w.hist.add(record{start: w.sentAt, end: c.Finished})
	fb, err := env.Framebuffer(0)
	if err != nil {
		return err
	}
	return w.targets.write(fb, w.rtBytes)
}

// Resume continues after a pause or a hand-over.
func (w *CAD) Resume(env *Env) error {
	w.resume(env)
	return nil
}

// Stop ends rendering.
func (w *CAD) Stop(env *Env) {
	w.running, w.inFlight = false, false
}

// SetThrottle lowers the frame rate and the dirtying.
func (w *CAD) SetThrottle(f float64) error {
	if err := w.setThrottle(f); err != nil {
		return err
	}
	if w.fps > 0 {
		w.setPeriod()
	}
	return nil
}

// Shift moves the workload's times by d.
func (w *CAD) Shift(d time.Duration) {
	w.shift(d)
	w.next += d
	w.sentAt += d
}
