package vgpu

import "github.com/vgpusim/vgpusim/memory"

// DesktopConfig configures a knowledge worker's desktop. Zero fields take
// the defaults in brackets; the defaults are assumptions describing office
// work on a 1920x1080 desktop, for which no published per-update figures
// were found. Together they make an update cost about 35 us of a whole
// P40, a load far below any vGPU type's share, as office work is.
type DesktopConfig struct {
	// UpdatesPerSec is the Poisson rate of screen updates (typing,
	// scrolling, a window redrawn) [5: a few keystrokes or scroll steps a
	// second].
	UpdatesPerSec float64
	// UpdatePixels is the area each update redraws [a tenth of 1920x1080:
	// a paragraph or a window region, not the whole screen].
	UpdatePixels int64
	// OpsPerPixel is the GPU work per redrawn pixel [500 FLOP: composition
	// and font rendering, a small fraction of CAD's 20000].
	OpsPerPixel int64
	// Efficiency is the fraction of the GPU's FP32 peak sustained [0.25,
	// as for batch-1 inference: small, short kernels].
	Efficiency float64
	// SurfaceBytes is the framebuffer holding the desktop's surfaces and
	// window contents (its footprint) [64 MiB: about eight full-screen 1080p
	// surfaces of 8 MB each, well within the smallest 1 GB types].
	SurfaceBytes int64
	// RAMWorkingSetBytes is the applications' memory after the guest OS
	// footprint [1 GiB: a browser and office documents].
	RAMWorkingSetBytes int64
	// RAMDirtyBytesPerSec is the applications' background dirtying [1 MiB/s:
	// the lightest of the package's workloads] in pattern RAMDirtyPattern
	// (memory.HotSet with the default rate; memory.Uniform when a rate is
	// given without one).
	RAMDirtyBytesPerSec int64
	RAMDirtyPattern     memory.PatternKind
	// HistoryLimit bounds the updates remembered for metrics.
	HistoryLimit int
	Seed         uint64
}

// Desktop is a knowledge worker or an idle desktop: occasional screen
// updates, each a little GPU work whose completion rewrites the redrawn
// part of the surfaces, and light background dirtying of guest RAM. It
// reports updates per second and their latency.
type Desktop struct {
	service
	cfg DesktopConfig
}

// NewDesktop returns a desktop workload; it starts with its VM.
func NewDesktop(cfg DesktopConfig) (*Desktop, error) {
	if cfg.UpdatesPerSec == 0 {
		cfg.UpdatesPerSec = 5
	}
	if cfg.UpdatePixels == 0 {
		cfg.UpdatePixels = 1920 * 1080 / 10
	}
	if cfg.OpsPerPixel == 0 {
		cfg.OpsPerPixel = 500
	}
	if cfg.Efficiency == 0 {
		cfg.Efficiency = 0.25
	}
	if cfg.SurfaceBytes == 0 {
		cfg.SurfaceBytes = 64 * MiB
	}
	if cfg.RAMWorkingSetBytes == 0 {
		cfg.RAMWorkingSetBytes = 1 * GiB
	}
	if cfg.RAMDirtyBytesPerSec == 0 {
		cfg.RAMDirtyBytesPerSec = 1 * MiB
		cfg.RAMDirtyPattern = memory.HotSet
	}
	switch {
	case !(cfg.UpdatesPerSec > 0 && cfg.UpdatesPerSec <= 1e5):
		return nil, configError("update rate %v outside (0, 1e5]", cfg.UpdatesPerSec)
	case cfg.UpdatePixels < 0 || cfg.OpsPerPixel < 0 || cfg.SurfaceBytes < 0 || cfg.RAMWorkingSetBytes < 0:
		return nil, configError("negative desktop size")
	}
	if err := checkEfficiency(cfg.Efficiency); err != nil {
		return nil, err
	}
	return &Desktop{service: newService("desktop", cfg.UpdatesPerSec, cfg.Seed, cfg.HistoryLimit), cfg: cfg}, nil
}

// Config returns the configuration, defaults filled in.
func (w *Desktop) Config() DesktopConfig { return w.cfg }

// place lays the workload out on env's VM: the surfaces in every vGPU's
// framebuffer, the working set in guest memory.
func (w *Desktop) place(env *Env) (surf, ws span, err error) {
	fl, err := fbLayout(env)
	if err != nil {
		return
	}
	if surf, err = fl.take(w.cfg.SurfaceBytes, textMix(), "surfaces"); err != nil {
		return
	}
	rl, err := ramLayout(env)
	if err != nil {
		return
	}
	ws, err = rl.take(w.cfg.RAMWorkingSetBytes, ramMix(), "working set")
	return
}

// Fits reports whether the workload fits env's VM (see Fitter).
func (w *Desktop) Fits(env *Env) error {
	_, _, err := w.place(env)
	return err
}

// Start draws the desktop and starts the updates.
func (w *Desktop) Start(env *Env) error {
	c := w.cfg
	surf, ws, err := w.place(env)
	if err != nil {
		return err
	}
	if w.ram, err = newDirtier(env.RAM(), ws, c.RAMDirtyPattern, c.RAMDirtyBytesPerSec, derive(c.Seed, 11)); err != nil {
		return err
	}
	if err := ws.fill(env.RAM()); err != nil {
		return err
	}
	w.fb, w.out = nil, nil
	for i := range env.Devices() {
		fb, err := env.Framebuffer(i)
		if err != nil {
			return err
		}
		if err := surf.fill(fb); err != nil {
			return err
		}
		w.out = append(w.out, sweeper{span: surf})
	}
	w.reqRing = sweeper{span: ws}
	w.work = GPUWork(c.UpdatePixels*c.OpsPerPixel, env.GPU().FP32FlopsPerSec, c.Efficiency)
	w.chunk = 0
	w.inBytes, w.outBytes = 0, 4*c.UpdatePixels
	w.applyThrottle()
	w.begin(env)
	return nil
}
