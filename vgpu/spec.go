package vgpu

import (
	"fmt"
	"strings"
)

// Units used by the tables.
const (
	// MiB and GiB are binary units; NVIDIA's vGPU documentation gives
	// framebuffers in Mbytes that are MiB (a P40-1Q has 1024 of them).
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)

// GPUSpec describes a physical GPU model. The figures are the vendor's
// published ones; each row below says where they come from.
type GPUSpec struct {
	// Model is the short name used in vGPU type names ("P40" in P40-8Q).
	Model string
	// Name is the product name.
	Name string
	// Chip and Architecture name the silicon.
	Chip, Architecture string
	// MemoryType is the framebuffer's DRAM technology.
	MemoryType string
	// HBM2 is true for HBM2 framebuffers, which carry ECC without the
	// framebuffer reservation GDDR needs (it changes the vGPU
	// reservation formula).
	HBM2 bool
	// FramebufferBytes is the framebuffer size.
	FramebufferBytes int64
	// FramebufferBandwidthBytesPerSec is the peak DRAM bandwidth.
	FramebufferBandwidthBytesPerSec int64
	// CUDACores and SMs are the shader resources.
	CUDACores, SMs int
	// PCIeGen and PCIeLanes describe the host link; PCIeDMABytesPerSec is
	// the rate a DMA between host memory and the framebuffer achieves over
	// it, one direction.
	PCIeGen, PCIeLanes int
	PCIeDMABytesPerSec int64
	// FP32FlopsPerSec and INT8OpsPerSec are peak arithmetic throughputs.
	FP32FlopsPerSec, INT8OpsPerSec int64
	// PCIVendorID and PCIDeviceID identify the physical function.
	PCIVendorID, PCIDeviceID uint16
	// ECCWithVGPU is whether the vGPU manager the model follows creates
	// vGPUs on the GPU while its ECC memory is on. When false, a GPU with
	// ECC on takes no vGPU (RefusedECC); see each row for the source.
	ECCWithVGPU bool
}

func (s GPUSpec) String() string {
	return fmt.Sprintf("%s (%s, %d CUDA cores, %d GiB %s, PCIe %d.0 x%d)",
		s.Name, s.Chip, s.CUDACores, s.FramebufferBytes/GiB, s.MemoryType, s.PCIeGen, s.PCIeLanes)
}

// pcie3x16DMABytesPerSec is the effective one-direction DMA rate of a PCIe
// 3.0 x16 link. The raw rate is 16 lanes x 8 GT/s x 128/130 = 15.75 GB/s
// (PCI-SIG, PCI Express Base Specification 3.0, 2010); TLP headers and
// flow control at a 256-byte maximum payload cost about 9 %, and DMA setup
// more, so pinned host-to-device copies reach 12-13 GB/s: CUDA's
// bandwidthTest on a Tesla P100 PCIe 16GB in a PCIe 3.0 x16 slot, pinned
// 32 MiB transfers from the GPU's own NUMA node, measured 12.15 GB/s host
// to device and 12.89 GB/s device to host (gearshifft project,
// mpicbg-scicomp/gearshifft pull request 82, March 2017; from the other
// node, 3.8 and 2.5 GB/s). Assumption: 12 GB/s, the low end, as a vMotion
// copy is not tuned for the link.
const pcie3x16DMABytesPerSec = 12_000_000_000

// pcie4x16DMABytesPerSec is the same rate over PCIe 4.0 x16, whose raw rate
// (16 GT/s a lane, 128b/130b; PCI Express Base Specification 4.0, 2017) is
// twice PCIe 3.0's. Assumption: the same efficiency as
// pcie3x16DMABytesPerSec, so twice it, 24 GB/s. Published measurements
// bracket it: about 25 GB/s peak on an A100 (the BaM project's
// maintainers, ZaidQureshi/bam issue 54), 18-20 GB/s from one stream on an
// A10 in a PCIe 4.0 x16 slot (drkennetz/cuda_examples pull request 1), and
// about 25 GB/s device to host but 11 GB/s host to device when both
// directions run at once on an A100-SXM4-80GB (NVIDIA/nvbandwidth issue
// 53).
const pcie4x16DMABytesPerSec = 2 * pcie3x16DMABytesPerSec

// nvidiaVendorID is NVIDIA's PCI vendor ID (PCI ID repository).
const nvidiaVendorID = 0x10de

// eccWithVGPU8 and eccWithVGPULater say whether vGPUs start with ECC
// memory on. NVIDIA Virtual GPU Software User Guide, release 8.0 (2019),
// section 1.6.2, lists ECC among the CUDA features NVIDIA vGPU does not
// support, on every GPU. The NVIDIA AI Enterprise User Guide v5.0 (2024),
// section 2.13 "Disabling and Enabling ECC Memory", says GPUs of the Pascal
// architecture and later support ECC memory with NVIDIA vGPU (C- and
// Q-series vGPUs use it; A- and B-series vGPUs still start on such a GPU),
// which the V100, T4 and A100 rows follow. The P40 keeps release 8.0's
// behaviour, which the package modelled first and its 2019 experiments
// assume; by the later guide a P40 too would run vGPUs with ECC on.
const (
	eccWithVGPU8     = false
	eccWithVGPULater = true
)

// specTable holds the GPU models, in the order Specs returns them: the
// P40 (the default), the T4, the V100 PCIe 16GB, the V100 PCIe 32GB and
// the A100 PCIe 40GB.
var specTable = []GPUSpec{
	{
		// NVIDIA Tesla P40 product brief PB-08338-001 (November 2016) and
		// datasheet: GP102, 3840 CUDA cores, 24 GB GDDR5, 346 GB/s, PCIe 3.0
		// x16, 12 TFLOPS FP32 and 47 TOPS INT8 peak. FP32 here is the exact
		// 3840 cores x 2 FLOP x 1531 MHz boost = 11.76 TFLOPS. 30 SMs of 128
		// cores (Pascal GP10x). 24576 MiB: the framebuffer of the P40-24Q
		// type (NVIDIA vGPU 8.0 user guide, Tesla P40 virtual GPU types).
		// PCI device ID 0x1B38 (PCI ID repository; the vGPU manager's type
		// table keys every P40 vGPU type by it).
		Model: "P40", Name: "Tesla P40", Chip: "GP102", Architecture: "Pascal",
		MemoryType: "GDDR5", FramebufferBytes: 24 * GiB,
		FramebufferBandwidthBytesPerSec: 346_000_000_000,
		CUDACores:                       3840, SMs: 30,
		PCIeGen: 3, PCIeLanes: 16, PCIeDMABytesPerSec: pcie3x16DMABytesPerSec,
		FP32FlopsPerSec: 11_758_080_000_000, INT8OpsPerSec: 47_000_000_000_000,
		PCIVendorID: nvidiaVendorID, PCIDeviceID: 0x1b38,
		ECCWithVGPU: eccWithVGPU8,
	},
	{
		// NVIDIA T4 datasheet (2018): TU104, 2560 CUDA cores, 320 Tensor
		// cores, 16 GB GDDR6, 320 GB/s, PCIe 3.0 x16, 8.1 TFLOPS FP32,
		// 130 TOPS INT8; 40 SMs of 64 cores (Turing). PCI device ID 0x1EB8
		// (PCI ID repository).
		Model: "T4", Name: "Tesla T4", Chip: "TU104", Architecture: "Turing",
		MemoryType: "GDDR6", FramebufferBytes: 16 * GiB,
		FramebufferBandwidthBytesPerSec: 320_000_000_000,
		CUDACores:                       2560, SMs: 40,
		PCIeGen: 3, PCIeLanes: 16, PCIeDMABytesPerSec: pcie3x16DMABytesPerSec,
		FP32FlopsPerSec: 8_100_000_000_000, INT8OpsPerSec: 130_000_000_000_000,
		PCIVendorID: nvidiaVendorID, PCIDeviceID: 0x1eb8,
		ECCWithVGPU: eccWithVGPULater,
	},
	{
		// NVIDIA Tesla V100 PCIe datasheet (2017): GV100, 5120 CUDA cores
		// in 80 SMs, 16 GB HBM2, 900 GB/s, PCIe 3.0 x16, 14 TFLOPS FP32 (at
		// the PCIe card's 1370 MHz boost). The datasheet gives no INT8
		// figure; assumption: DP4A at four times FP32, 56 TOPS. PCI device
		// ID 0x1DB4 (PCI ID repository, V100 PCIe 16GB).
		Model: "V100", Name: "Tesla V100 PCIe 16GB", Chip: "GV100", Architecture: "Volta",
		MemoryType: "HBM2", HBM2: true, FramebufferBytes: 16 * GiB,
		FramebufferBandwidthBytesPerSec: 900_000_000_000,
		CUDACores:                       5120, SMs: 80,
		PCIeGen: 3, PCIeLanes: 16, PCIeDMABytesPerSec: pcie3x16DMABytesPerSec,
		FP32FlopsPerSec: 14_000_000_000_000, INT8OpsPerSec: 56_000_000_000_000,
		PCIVendorID: nvidiaVendorID, PCIDeviceID: 0x1db4,
		ECCWithVGPU: eccWithVGPULater,
	},
	{
		// NVIDIA Tesla V100 PCIe datasheet (2018, the 32/16 GB edition):
		// the 16 GB card's GV100 with 32 GB of HBM2, the same 900 GB/s,
		// 5120 CUDA cores in 80 SMs, PCIe 3.0 x16 and 14 TFLOPS FP32; INT8
		// is the same assumption as the 16 GB card's. 32768 MiB: the
		// framebuffer of the V100D-32Q type (NVIDIA vGPU 8.0 user guide,
		// section 1.4.1.14). NVIDIA names its vGPU types V100D-, hence the
		// model name. PCI device ID 0x1DB6 (PCI ID repository, GV100GL
		// [Tesla V100 PCIe 32GB]).
		Model: "V100D", Name: "Tesla V100 PCIe 32GB", Chip: "GV100", Architecture: "Volta",
		MemoryType: "HBM2", HBM2: true, FramebufferBytes: 32 * GiB,
		FramebufferBandwidthBytesPerSec: 900_000_000_000,
		CUDACores:                       5120, SMs: 80,
		PCIeGen: 3, PCIeLanes: 16, PCIeDMABytesPerSec: pcie3x16DMABytesPerSec,
		FP32FlopsPerSec: 14_000_000_000_000, INT8OpsPerSec: 56_000_000_000_000,
		PCIVendorID: nvidiaVendorID, PCIDeviceID: 0x1db6,
		ECCWithVGPU: eccWithVGPULater,
	},
	{
		// NVIDIA A100 Tensor Core GPU datasheet (2021): A100 PCIe 40GB,
		// 40 GB HBM2 at 1,555 GB/s, PCIe Gen4 (x16), 19.5 TFLOPS FP32 and
		// 624 TOPS INT8 (dense; 1,248 with structured sparsity). 6912 CUDA
		// cores in 108 SMs of 64 (NVIDIA A100 Tensor Core GPU Architecture
		// whitepaper, 2020). 40960 MiB: the framebuffer of the A100-40C
		// type (NVIDIA AI Enterprise User Guide v5.0, appendix A.4). PCI
		// device ID 0x20F1 (PCI ID repository, GA100 [A100 PCIe 40GB]).
		Model: "A100", Name: "NVIDIA A100 PCIe 40GB", Chip: "GA100", Architecture: "Ampere",
		MemoryType: "HBM2", HBM2: true, FramebufferBytes: 40 * GiB,
		FramebufferBandwidthBytesPerSec: 1_555_000_000_000,
		CUDACores:                       6912, SMs: 108,
		PCIeGen: 4, PCIeLanes: 16, PCIeDMABytesPerSec: pcie4x16DMABytesPerSec,
		FP32FlopsPerSec: 19_500_000_000_000, INT8OpsPerSec: 624_000_000_000_000,
		PCIVendorID: nvidiaVendorID, PCIDeviceID: 0x20f1,
		ECCWithVGPU: eccWithVGPULater,
	},
}

// P40 returns the Tesla P40's spec, the default GPU.
func P40() GPUSpec { return specTable[0] }

// T4 returns the Tesla T4's spec.
func T4() GPUSpec { return specTable[1] }

// V100 returns the Tesla V100 PCIe 16GB's spec (vGPU types V100-).
func V100() GPUSpec { return specTable[2] }

// V100D returns the Tesla V100 PCIe 32GB's spec; NVIDIA names its vGPU
// types V100D- ("V100D-8Q"), which is its Model.
func V100D() GPUSpec { return specTable[3] }

// A100 returns the NVIDIA A100 PCIe 40GB's spec (time-sliced vGPU types
// A100-4C to A100-40C).
func A100() GPUSpec { return specTable[4] }

// Specs returns every GPU model the package knows: P40, T4, V100, V100D,
// A100, in that order.
func Specs() []GPUSpec { return append([]GPUSpec(nil), specTable...) }

// SpecByModel returns the spec of a model by its short name ("P40"),
// ignoring case and a leading "Tesla ".
func SpecByModel(model string) (GPUSpec, error) {
	m := strings.TrimSpace(model)
	if len(m) > 6 && strings.EqualFold(m[:6], "tesla ") {
		m = strings.TrimSpace(m[6:])
	}
	for _, s := range specTable {
		if strings.EqualFold(s.Model, m) {
			return s, nil
		}
	}
	return GPUSpec{}, fmt.Errorf("%w: %q", ErrUnknownGPU, model)
}

// validate checks the fields a host relies on.
func (s GPUSpec) validate() error {
	switch {
	case s.Model == "":
		return configError("GPU spec has no model name")
	case s.FramebufferBytes <= 0 || s.FramebufferBytes%(64<<10) != 0:
		return configError("GPU %s: framebuffer %d bytes is not a positive multiple of 64 KiB", s.Model, s.FramebufferBytes)
	case s.FP32FlopsPerSec <= 0 || s.INT8OpsPerSec <= 0:
		return configError("GPU %s: throughputs must be positive", s.Model)
	}
	return nil
}
