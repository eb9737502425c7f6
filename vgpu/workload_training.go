package vgpu

import (
	"math/rand/v2"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// TrainingConfig configures ML training. Zero fields take the defaults in
// brackets.
type TrainingConfig struct {
	// Model is the network trained [InceptionV3].
	Model Model
	// BatchSize is the samples per iteration and vGPU [32; the default
	// batch size of Keras's Model.fit, and the size "GPU Virtualization for
	// Machine Learning Workloads, Part 2" (VMware blog, 2020) does not
	// give, so an assumption].
	BatchSize int
	// Precision and Efficiency measure the work against the GPU's peak
	// [FP32, 0.4; assumption: large-batch training keeps more of the GPU
	// busy than batch-1 inference].
	Precision  Precision
	Efficiency float64
	// FootprintBytes, if set, is the framebuffer per vGPU holding data:
	// the activations plus weights making up the rest. It overrides
	// WeightsBytes.
	FootprintBytes int64
	// WeightsBytes is the framebuffer holding weights, rewritten by every
	// optimizer step [Model.WeightsBytes].
	WeightsBytes int64
	// ActivationsBytes is the framebuffer holding the batch's activations
	// and gradients, rewritten every iteration [BatchSize x
	// Model.ActivationBytes, capped at what fits].
	ActivationsBytes int64
	// OptimizerStateBytes is the optimizer state kept in guest RAM and
	// rewritten every iteration [2 x WeightsBytes: the two moment
	// estimates Adam keeps per weight (Diederik P. Kingma, Jimmy Ba, "Adam:
	// A Method for Stochastic Optimization", ICLR 2015, Algorithm 1)].
	OptimizerStateBytes int64
	// RAMDirtyBytesPerSec is the input pipeline's background dirtying of
	// the optimizer's region [0].
	RAMDirtyBytesPerSec int64
	// QueueDepth is how many iterations the framework keeps queued on the
	// GPU ahead of the one running [2; assumption: enough that the GPU
	// never waits for a launch, which is what asynchronous launches are
	// for, and no more, so that a throttle takes effect within two
	// iterations].
	QueueDepth int
	// PollInterval is how often the framework's launch thread tops the
	// queue up [1 ms; assumption: a launch thread's wake-up, well under an
	// iteration of a few milliseconds].
	PollInterval time.Duration
	HistoryLimit int
	Seed         uint64
	// DataLoad is every iteration's host phase: the time the input
	// pipeline takes on the VM's CPUs to load and preprocess the batch
	// before the iteration's GPU work is submitted, during which the VM
	// gives its vGPUs no work [0: none, the batch is always ready; at
	// most an hour]. As in a training loop without prefetching, the next
	// batch is loaded only once the iteration is done, so one iteration
	// is in flight at a time (QueueDepth is not used). The phase is
	// frozen while the VM is paused: a stunned VM's CPUs do not run.
	// The default is 0 because the source documents give no figure for
	// it (seed 001 shows its effect, not its length).
	DataLoad time.Duration
	// DataLoadRatio sets the host phase instead as a multiple of the
	// iteration's GPU work on the whole GPU (IterationWork) [0; at most
	// 1000]. At most one of DataLoad and DataLoadRatio is set.
	DataLoadRatio float64
	// DataLoadJitter spreads each iteration's host phase uniformly over
	// [1-j, 1+j] times its length, drawn from Seed, so that VMs sharing a
	// GPU do not load in lockstep [0: every phase alike; at most 1].
	DataLoadJitter float64
}

// Training runs iterations back to back: each is one GPU job per vGPU of
// three times the forward pass's MACs for the batch (the backward pass
// costs about twice the forward one: Jared Kaplan et al., "Scaling Laws for
// Neural Language Models", arXiv 2001.08361, 2020, section 2.1); when it finishes, the optimizer step rewrites the weights in the
// framebuffer and the optimizer state in guest RAM. With a host phase
// (DataLoad, DataLoadRatio) each iteration first loads its batch on the
// host, leaving its vGPUs idle meanwhile. It reports iterations per second
// and iteration time (its training time, host phase included).
type Training struct {
	base
	cfg       TrainingConfig
	work      time.Duration
	clock     time.Duration // latest time seen
	nextIter  uint64
	remaining map[uint64]int // iteration -> vGPU jobs still running
	inFlight  int
	readyAt   time.Duration // when a queue slot became free
	lastDone  time.Duration
	weights   span
	acts      span
	optimizer span
	loader    *rand.PCG     // draws the host phases' jitter
	loadLeft  time.Duration // the host phase left at a pause mid-phase, else 0
}

// NewTraining returns a training workload; it starts with its VM.
func NewTraining(cfg TrainingConfig) (*Training, error) {
	if cfg.Model.Name == "" {
		cfg.Model = InceptionV3()
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 32
	}
	if cfg.Efficiency == 0 {
		cfg.Efficiency = 0.4
	}
	if cfg.WeightsBytes == 0 {
		cfg.WeightsBytes = cfg.Model.WeightsBytes()
	}
	if cfg.ActivationsBytes == 0 {
		cfg.ActivationsBytes = int64(cfg.BatchSize) * cfg.Model.ActivationBytes
	}
	if cfg.FootprintBytes > 0 {
		cfg.ActivationsBytes = min(cfg.ActivationsBytes, cfg.FootprintBytes)
		cfg.WeightsBytes = cfg.FootprintBytes - cfg.ActivationsBytes
	}
	if cfg.OptimizerStateBytes == 0 {
		cfg.OptimizerStateBytes = 2 * cfg.WeightsBytes
	}
	if cfg.QueueDepth == 0 {
		cfg.QueueDepth = 2
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Millisecond
	}
	switch {
	case cfg.Model.MACs <= 0 || cfg.Model.Layers <= 0:
		return nil, configError("training model %q needs MACs and layers", cfg.Model.Name)
	case cfg.BatchSize < 1 || cfg.BatchSize > 1<<16:
		return nil, configError("batch size %d outside [1, 65536]", cfg.BatchSize)
	case cfg.Precision != FP32 && cfg.Precision != INT8:
		return nil, configError("unknown precision %v", cfg.Precision)
	case cfg.QueueDepth < 1 || cfg.QueueDepth > 64:
		return nil, configError("queue depth %d outside [1, 64]", cfg.QueueDepth)
	case cfg.PollInterval < time.Microsecond || cfg.PollInterval > time.Second:
		return nil, configError("poll interval %v outside [1µs, 1s]", cfg.PollInterval)
	case cfg.FootprintBytes < 0 || cfg.WeightsBytes < 0 || cfg.ActivationsBytes < 0 || cfg.OptimizerStateBytes < 0:
		return nil, configError("negative memory size")
	}
	if err := checkEfficiency(cfg.Efficiency); err != nil {
		return nil, err
	}
	if err := checkDataLoad(&cfg); err != nil {
		return nil, err
	}
	return &Training{base: base{name: "training " + cfg.Model.Name, hist: newHistory(cfg.HistoryLimit)},
		cfg: cfg, remaining: make(map[uint64]int), loader: rand.NewPCG(derive(cfg.Seed, seedDataLoad), 0)}, nil
}

// Config returns the configuration, defaults filled in.
func (w *Training) Config() TrainingConfig { return w.cfg }

// IterationWork is the GPU time of one iteration on one vGPU with the
// whole GPU.
func (w *Training) IterationWork(spec GPUSpec) time.Duration {
	ops := 3 * 2 * w.cfg.Model.MACs * int64(w.cfg.BatchSize)
	return GPUWork(ops, w.cfg.Precision.peak(spec), w.cfg.Efficiency)
}

// place lays the workload out on env's VM: the weights and activations in
// every vGPU's framebuffer, the optimizer state in guest memory.
func (w *Training) place(env *Env) (weights, acts, optimizer span, err error) {
	c := w.cfg
	fl, err := fbLayout(env)
	if err != nil {
		return
	}
	weightsBytes := c.WeightsBytes
	if c.FootprintBytes > 0 {
		weightsBytes = firstOfFootprint(c.FootprintBytes, c.ActivationsBytes, fl.page)
	}
	if weights, err = fl.take(weightsBytes, memory.MixTrainingWeights(), "weights"); err != nil {
		return
	}
	if acts, err = fl.take(c.ActivationsBytes, memory.MixActivations(), "activations"); err != nil {
		return
	}
	rl, err := ramLayout(env)
	if err != nil {
		return
	}
	optimizer, err = rl.take(c.OptimizerStateBytes, memory.MixWeights(), "optimizer state")
	return
}

// Fits reports whether the workload fits env's VM (see Fitter).
func (w *Training) Fits(env *Env) error {
	if err := w.checkPhase(env.GPU()); err != nil {
		return err
	}
	_, _, _, err := w.place(env)
	return err
}

// Start loads the model and queues the first iterations.
func (w *Training) Start(env *Env) error {
	c := w.cfg
	if err := w.checkPhase(env.GPU()); err != nil {
		return err
	}
	var err error
	if w.weights, w.acts, w.optimizer, err = w.place(env); err != nil {
		return err
	}
	if w.ram, err = newDirtier(env.RAM(), w.optimizer, memory.Sweep, c.RAMDirtyBytesPerSec, derive(c.Seed, 11)); err != nil {
		return err
	}
	for i := range env.Devices() {
		fb, err := env.Framebuffer(i)
		if err != nil {
			return err
		}
		if err := w.weights.fill(fb); err != nil {
			return err
		}
		if err := w.acts.fill(fb); err != nil {
			return err
		}
	}
	if err := w.optimizer.fill(env.RAM()); err != nil {
		return err
	}
	w.fb = nil
	w.applyThrottle()
	w.work = w.IterationWork(env.GPU())
	clear(w.remaining)
	w.inFlight = 0
	now := env.Now()
	w.running, w.paused, w.last, w.clock, w.readyAt, w.lastDone = true, false, now, now, now, now
	w.loadLeft = 0
	if c.hasDataLoad() {
		// The first batch is loaded before the first iteration: the
		// launch thread submits it at the first poll after.
		w.readyAt += w.nextPhase()
		return nil
	}
	return w.topUp(env)
}

// depth is the queue depth in force: a throttled framework, or one that
// loads each batch before its iteration, keeps one iteration in flight and
// waits between iterations.
func (w *Training) depth() int {
	if w.throttle > 0 || w.cfg.hasDataLoad() {
		return 1
	}
	return w.cfg.QueueDepth
}

// grid rounds t up to the launch thread's poll times.
func (w *Training) grid(t time.Duration) time.Duration {
	p := w.cfg.PollInterval
	return (t + p - 1) / p * p
}

// NextEvent returns the poll at which the queue is topped up, or, while it
// is full, the next poll, at which completions are looked at. Polls fall on
// multiples of PollInterval, so the times do not depend on how the host's
// time is divided.
func (w *Training) NextEvent() time.Duration {
	if !w.running {
		return NoEvent
	}
	if w.inFlight < w.depth() {
		return max(w.grid(w.readyAt), w.grid(w.clock))
	}
	return w.grid(w.clock + 1)
}

// AdvanceTo performs the background dirtying and notes the time.
func (w *Training) AdvanceTo(env *Env, t time.Duration) error {
	w.clock = max(w.clock, t)
	return w.base.AdvanceTo(env, t)
}

// Fire tops the queue up.
func (w *Training) Fire(env *Env) error {
	w.clock = max(w.clock, env.Now())
	if w.inFlight < w.depth() && w.grid(w.readyAt) <= env.Now() {
		return w.topUp(env)
	}
	return nil
}

func (w *Training) topUp(env *Env) error {
	for w.running && w.inFlight < w.depth() {
		it := w.nextIter
		w.nextIter++
		for dev := range env.Devices() {
			tag := it<<8 | uint64(dev)
			if err := env.SubmitIO(dev, sched.Job{Work: w.work, Chunk: max(w.work/time.Duration(3*w.cfg.Model.Layers), 1), Tag: tag}, w.io()); err != nil {
				return err
			}
		}
		w.remaining[it] = env.Devices()
		w.inFlight++
	}
	return nil
}

// io is what an iteration moves and waits for on a remote GPU: the
// batch's images in, the loss (a float32) out, a forward and a backward
// pass of calls.
func (w *Training) io() JobIO {
	m := w.cfg.Model
	return JobIO{InputBytes: int64(w.cfg.BatchSize) * m.WireInputBytes(), OutputBytes: 4, Calls: m.RemoteCalls(2)}
}

// Complete counts a vGPU's part of an iteration; the optimizer step
// rewrites that vGPU's weights and activations, and the last part the
// optimizer state in RAM.
func (w *Training) Complete(env *Env, dev int, c sched.Completion) error {
	it := c.Tag >> 8
	n, ok := w.remaining[it]
	if !ok {
		return nil
	}
	fb, err := env.Framebuffer(dev)
	if err != nil {
		return err
	}
	if err := w.weights.fill(fb); err != nil {
		return err
	}
	if err := w.acts.fill(fb); err != nil {
		return err
	}
	if n > 1 {
		w.remaining[it] = n - 1
		return nil
	}
	delete(w.remaining, it)
	w.inFlight--
	w.hist.add(record{start: w.lastDone, end: c.Finished})
	w.lastDone = c.Finished
	w.readyAt = c.Finished
	if w.cfg.hasDataLoad() {
		// The next batch is loaded before the next iteration goes out.
		w.readyAt += w.nextPhase()
	}
	if w.throttle > 0 {
		// A throttled framework waits between iterations so that the GPU
		// is busy 1-f of the time (less, with a host phase).
		w.readyAt += time.Duration(float64(float64(w.work) * w.throttle / (1 - w.throttle)))
	}
	return w.optimizer.fill(env.RAM())
}

// Resume continues after a pause or a hand-over: the queue is topped up at
// the first poll, or once the rest of a host phase the pause froze is
// done.
func (w *Training) Resume(env *Env) error {
	w.resume(env)
	w.clock = max(w.clock, env.Now())
	w.readyAt = max(w.readyAt, env.Now())
	if w.loadLeft > 0 {
		w.readyAt = env.Now() + w.loadLeft
		w.loadLeft = 0
	}
	return nil
}

// Stop ends training; queued iterations and a batch being loaded are
// lost.
func (w *Training) Stop(env *Env) {
	w.running = false
	clear(w.remaining)
	w.inFlight = 0
	w.loadLeft = 0
}

// SetThrottle slows training: one iteration at a time with a pause after
// each, and slower dirtying.
func (w *Training) SetThrottle(f float64) error { return w.setThrottle(f) }

// Shift moves the workload's times by d.
func (w *Training) Shift(d time.Duration) {
	w.shift(d)
	w.clock += d
	w.readyAt += d
	w.lastDone += d
}
