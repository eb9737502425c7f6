package vgpu

import (
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// InferenceConfig configures an ML inference service. Zero fields take the
// defaults in brackets.
type InferenceConfig struct {
	// Model is the network served [InceptionV3].
	Model Model
	// RequestsPerSec is the Poisson arrival rate of requests [50;
	// assumption: a steady, moderately loaded service. With the default
	// model and efficiency a request costs 3.4 ms of a whole P40, so 50 a
	// second keep about 17 % of it busy, close to the one-sixth fixed
	// share of a P40-4Q. No published request rate for the GTC 2019
	// talk's MLaaS experiment was found].
	RequestsPerSec float64
	// Precision selects the GPU throughput the work is measured against
	// [FP32].
	Precision Precision
	// Efficiency is the fraction of that peak a batch-1 inference sustains
	// [0.25; assumption: batch-1 convolutions keep a quarter of a P40's
	// peak busy, giving Inception V3 3.4 ms and MobileNet 0.4 ms on a whole
	// P40. No published batch-1 FP32 figure for these models on a P40 was
	// found. For comparison, Dell EMC's HPC Innovation Lab ("Deep Learning
	// Inference on P40 GPUs", blog, March 2017, batch-size figure)
	// measured TensorRT INT8 GoogLeNet on one P40 at 594 images/s at batch
	// 1 against 6,842 at batch 2,048: batch 1 reached under a tenth of the
	// batched rate, so for INT8 0.25 is generous].
	Efficiency float64
	// FootprintBytes, if set, is the framebuffer per vGPU holding data —
	// the "used framebuffer" a migration is calibrated in: the activation
	// arena plus weights (a model cache, several replicas) making up the
	// rest. It overrides WeightsBytes.
	FootprintBytes int64
	// WeightsBytes is the framebuffer holding weights [Model.WeightsBytes].
	WeightsBytes int64
	// ActivationsBytes is the activation arena, reused by every request
	// [Model.ActivationBytes].
	ActivationsBytes int64
	// RAMWorkingSetBytes is the service's memory in the guest, after the
	// guest OS footprint; request inputs cycle through it [256 MiB;
	// assumption: a serving process's buffers and heap, small beside the
	// framebuffer, as the published stun tables, which vary with vGPU
	// memory, take guest memory to be].
	RAMWorkingSetBytes int64
	// RAMDirtyBytesPerSec is background dirtying of that working set by the
	// serving process [4 MiB/s; assumption: well under 1 % of 10 GbE's
	// goodput, so that guest RAM converges in pre-copy and the framebuffer
	// decides the stun; no published dirty rate of such a service was
	// found] in pattern RAMDirtyPattern [memory.Uniform].
	RAMDirtyBytesPerSec int64
	RAMDirtyPattern     memory.PatternKind
	// FramebufferDirtyBytesPerSec is background dirtying of the activation
	// arena (pre- and post-processing kernels) [0].
	FramebufferDirtyBytesPerSec int64
	// HistoryLimit bounds the requests remembered for metrics
	// [DefaultHistoryLimit].
	HistoryLimit int
	// Seed drives arrivals and page choice.
	Seed uint64
}

// Inference is an ML inference service (MLaaS): requests arrive by a
// Poisson process; each writes its input tensor into guest RAM and costs
// the model's MACs (two operations each) divided by the GPU's sustained
// throughput as one GPU job, preemptible at layer boundaries; its
// completion writes its activations into the vGPU's framebuffer. It
// reports requests per second and latency from arrival to completion.
type Inference struct {
	service
	cfg InferenceConfig
}

// NewInference returns an inference service; it starts with its VM.
func NewInference(cfg InferenceConfig) (*Inference, error) {
	if cfg.Model.Name == "" {
		cfg.Model = InceptionV3()
	}
	if cfg.RequestsPerSec == 0 {
		cfg.RequestsPerSec = 50
	}
	if cfg.Efficiency == 0 {
		cfg.Efficiency = 0.25
	}
	if cfg.WeightsBytes == 0 {
		cfg.WeightsBytes = cfg.Model.WeightsBytes()
	}
	if cfg.ActivationsBytes == 0 {
		cfg.ActivationsBytes = cfg.Model.ActivationBytes
	}
	if cfg.FootprintBytes > 0 {
		cfg.ActivationsBytes = min(cfg.ActivationsBytes, cfg.FootprintBytes)
		cfg.WeightsBytes = cfg.FootprintBytes - cfg.ActivationsBytes
	}
	if cfg.RAMWorkingSetBytes == 0 {
		cfg.RAMWorkingSetBytes = 256 * MiB
	}
	if cfg.RAMDirtyBytesPerSec == 0 {
		cfg.RAMDirtyBytesPerSec = 4 * MiB
	}
	switch {
	case cfg.Model.MACs <= 0 || cfg.Model.Layers <= 0:
		return nil, configError("inference model %q needs MACs and layers", cfg.Model.Name)
	case !(cfg.RequestsPerSec > 0 && cfg.RequestsPerSec <= 1e6):
		return nil, configError("request rate %v outside (0, 1e6]", cfg.RequestsPerSec)
	case cfg.Precision != FP32 && cfg.Precision != INT8:
		return nil, configError("unknown precision %v", cfg.Precision)
	case cfg.FootprintBytes < 0 || cfg.WeightsBytes < 0 || cfg.ActivationsBytes < 0 || cfg.RAMWorkingSetBytes < 0:
		return nil, configError("negative memory size")
	}
	if err := checkEfficiency(cfg.Efficiency); err != nil {
		return nil, err
	}
	w := &Inference{service: newService("inference "+cfg.Model.Name, cfg.RequestsPerSec, cfg.Seed, cfg.HistoryLimit), cfg: cfg}
	// On a remote GPU a request's image goes in, its scores come out, and
	// its forward pass waits for its calls.
	w.io = JobIO{InputBytes: cfg.Model.WireInputBytes(), OutputBytes: cfg.Model.OutputBytes, Calls: cfg.Model.RemoteCalls(1)}
	return w, nil
}

// Config returns the configuration, defaults filled in.
func (w *Inference) Config() InferenceConfig { return w.cfg }

// RequestWork is the GPU time of one request with the whole GPU.
func (w *Inference) RequestWork(spec GPUSpec) time.Duration {
	return GPUWork(2*w.cfg.Model.MACs, w.cfg.Precision.peak(spec), w.cfg.Efficiency)
}

// place lays the workload out on env's VM: the weights and activation
// arena in every vGPU's framebuffer, the working set in guest memory.
func (w *Inference) place(env *Env) (weights, arena, ws span, err error) {
	c := w.cfg
	fl, err := fbLayout(env)
	if err != nil {
		return
	}
	weightsBytes := c.WeightsBytes
	if c.FootprintBytes > 0 {
		weightsBytes = firstOfFootprint(c.FootprintBytes, c.ActivationsBytes, fl.page)
	}
	if weights, err = fl.take(weightsBytes, memory.MixWeights(), "weights"); err != nil {
		return
	}
	if arena, err = fl.take(c.ActivationsBytes, memory.MixActivations(), "activation arena"); err != nil {
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
func (w *Inference) Fits(env *Env) error {
	_, _, _, err := w.place(env)
	return err
}

// Start loads the model into every vGPU's framebuffer and starts serving.
func (w *Inference) Start(env *Env) error {
	c := w.cfg
	weights, arena, ws, err := w.place(env)
	if err != nil {
		return err
	}
	if w.ram, err = newDirtier(env.RAM(), ws, c.RAMDirtyPattern, c.RAMDirtyBytesPerSec, derive(c.Seed, 11)); err != nil {
		return err
	}
	w.fb, w.out = nil, nil
	for i := range env.Devices() {
		fb, err := env.Framebuffer(i)
		if err != nil {
			return err
		}
		if err := weights.fill(fb); err != nil {
			return err
		}
		if err := arena.fill(fb); err != nil {
			return err
		}
		d, err := newDirtier(fb, arena, memory.Uniform, c.FramebufferDirtyBytesPerSec, derive(c.Seed, 100+uint64(i)))
		if err != nil {
			return err
		}
		w.fb = append(w.fb, d)
		w.out = append(w.out, sweeper{span: arena})
	}
	if err := ws.fill(env.RAM()); err != nil {
		return err
	}
	w.reqRing = sweeper{span: ws}
	w.work = w.RequestWork(env.GPU())
	w.chunk = max(w.work/time.Duration(c.Model.Layers), 1)
	w.inBytes, w.outBytes = c.Model.InputBytes, c.Model.ActivationBytes
	w.applyThrottle()
	w.begin(env)
	return nil
}
