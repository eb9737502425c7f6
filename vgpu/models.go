package vgpu

import (
	"fmt"
	"time"
)

// Precision is the arithmetic a model runs in, which selects the GPU's peak
// throughput its work is measured against.
type Precision uint8

// The precisions of the P40's inference paths.
const (
	// FP32 runs at GPUSpec.FP32FlopsPerSec.
	FP32 Precision = iota
	// INT8 runs at GPUSpec.INT8OpsPerSec (the P40's DP4A path).
	INT8
)

func (p Precision) String() string {
	switch p {
	case FP32:
		return "FP32"
	case INT8:
		return "INT8"
	}
	return fmt.Sprintf("Precision(%d)", uint8(p))
}

func (p Precision) peak(s GPUSpec) int64 {
	if p == INT8 {
		return s.INT8OpsPerSec
	}
	return s.FP32FlopsPerSec
}

// Model is a neural network in the units its GPU work and memory follow
// from.
type Model struct {
	Name string
	// MACs is the multiply-accumulates of one inference at batch 1.
	MACs int64
	// Layers is the network's depth; a layer's kernel is the unit the GPU
	// can be preempted at.
	Layers int
	// Parameters is the number of weights, stored as float32.
	Parameters int64
	// InputBytes is one request's input tensor, float32.
	InputBytes int64
	// ActivationBytes is what one inference writes in activations: the sum
	// of every layer's float32 output at batch 1.
	ActivationBytes int64
	// ConvLayers is the network's convolution layers, each launched as its
	// own kernels: what its remote calls are counted in (RemoteCalls).
	ConvLayers int
	// OutputBytes is one inference's output: the class scores, float32.
	OutputBytes int64
}

// remoteCallsPerConvLayer is the remote calls that wait for an answer per
// convolution layer and pass (forward, or backward) when the GPU is
// remote. Assumption: two, the layer's launch and the synchronisation
// before the next layer's input is ready, where Bitfusion forwards every
// CUDA call to the server ("the overheads come from CUDA calls remote
// launching and data transfer", seed 002). With the links' round trips
// (RemoteVMXNET3 and the others) it puts the 10 GbE overhead of a
// training iteration of Inception V3 or ResNet-50 at batches 16 to 128
// at 4.4 to 22.0 %, about seed 002's 4 to 20 %; TestRemoteOverheadShapes
// checks the shapes that follow.
const remoteCallsPerConvLayer = 2

// RemoteCalls is the calls of passes forward or backward passes over the
// network that wait for an answer on a remote GPU (JobIO.Calls): an
// inference is one pass, a training iteration two.
func (m Model) RemoteCalls(passes int) int {
	return min(passes*remoteCallsPerConvLayer*max(m.ConvLayers, 1), MaxJobCalls)
}

// WireInputBytes is a sample's input as it crosses the network to a remote
// GPU: the decoded image's 8-bit pixels, a quarter of the float32 tensor
// (InputBytes) the GPU computes on. Assumption: the conversion to float
// happens on the GPU.
func (m Model) WireInputBytes() int64 { return m.InputBytes / 4 }

// WeightsBytes is the size of the model's weights in float32.
func (m Model) WeightsBytes() int64 { return 4 * m.Parameters }

// The model presets. Each call returns a fresh Model, so that a caller
// adjusting the one it was handed changes no other workload's default.
//
// MACs and layers: MLaaS experiment #1 of "vMotion for NVIDIA GRID vGPU
// Virtual Machines: Case Study of vMotion Using MLaaS" (Hari Sivaraman,
// Dimitrios Skarlatos, Lan Vu, Uday Kurkure; NVIDIA GTC 2019 talk). The
// networks' own papers agree: Inception V3 costs about 5 billion
// multiply-adds an inference (Szegedy et al., "Rethinking the Inception
// Architecture for Computer Vision", CVPR 2016, abstract), and is 48
// layers deep as MathWorks' Deep Learning Toolbox documents it
// (inceptionv3 reference page); MobileNet 1.0-224 costs 569 million
// multiply-adds (Howard et al., "MobileNets", arXiv 1704.04861, 2017,
// Table 8) and has 28 layers counting depthwise and pointwise
// convolutions apart (the same paper, section 3.2). Parameter counts:
// Keras Applications' table (keras.io/api/applications). Activation
// bytes: estimates from the published layer shapes, summing every layer's
// float32 output at batch 1, rounded to whole MiB — an assumption, not a
// measurement.

// InceptionV3 is Inception V3 at 299x299x3 float32 input: 48 layers, 5000
// million MACs (the GTC 2019 talk), 23.9 million parameters (Keras), about
// 11.8 million activation floats (45 MiB; estimate), 94 convolution
// layers (Keras's InceptionV3), 1000 class scores out.
func InceptionV3() Model {
	return Model{Name: "Inception V3", MACs: 5_000_000_000, Layers: 48,
		Parameters: 23_900_000, InputBytes: 299 * 299 * 3 * 4, ActivationBytes: 45 * MiB,
		ConvLayers: 94, OutputBytes: 1000 * 4}
}

// MobileNet is MobileNet at 224x224x3 float32 input: 28 layers, 569
// million MACs (the GTC 2019 talk), 4.3 million parameters (Keras), about
// 4.7 million activation floats (18 MiB; estimate), 27 convolution
// layers (Keras's MobileNet), 1000 class scores out.
func MobileNet() Model {
	return Model{Name: "MobileNet", MACs: 569_000_000, Layers: 28,
		Parameters: 4_300_000, InputBytes: 224 * 224 * 3 * 4, ActivationBytes: 18 * MiB,
		ConvLayers: 27, OutputBytes: 1000 * 4}
}

// ResNet50 is ResNet-50 at 224x224x3 float32 input: 50 layers, 3800
// million MACs (He et al., "Deep Residual Learning for Image
// Recognition", CVPR 2016, Table 1, whose FLOPs are multiply-adds), 25.6
// million parameters (Keras), about 23 million activation floats (88 MiB;
// estimate), 53 convolution layers (Keras's ResNet50), 1000 class
// scores out.
func ResNet50() Model {
	return Model{Name: "ResNet-50", MACs: 3_800_000_000, Layers: 50,
		Parameters: 25_600_000, InputBytes: 224 * 224 * 3 * 4, ActivationBytes: 88 * MiB,
		ConvLayers: 53, OutputBytes: 1000 * 4}
}

// GPUWork converts an operation count into GPU time: ops divided by the
// throughput actually sustained, peakOpsPerSec times efficiency. The
// result is the job's Work, the time it takes with the whole GPU. It is
// at least 1 ns.
func GPUWork(ops int64, peakOpsPerSec int64, efficiency float64) time.Duration {
	if ops <= 0 || peakOpsPerSec <= 0 || !(efficiency > 0) {
		return 1
	}
	rate := float64(float64(peakOpsPerSec) * efficiency)
	ns := float64(float64(ops) / rate * float64(time.Second))
	return max(time.Duration(ns), 1)
}

func checkEfficiency(e float64) error {
	if !(e > 0 && e <= 1) {
		return configError("efficiency %v outside (0, 1]", e)
	}
	return nil
}
