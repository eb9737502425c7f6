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
}

func (s GPUSpec) String() string {
	return fmt.Sprintf("%s (%s, %d CUDA cores, %d GiB %s, PCIe %d.0 x%d)",
		s.Name, s.Chip, s.CUDACores, s.FramebufferBytes/GiB, s.MemoryType, s.PCIeGen, s.PCIeLanes)
}

// pcie3x16DMABytesPerSec is the effective one-direction DMA rate of a PCIe
// 3.0 x16 link. The raw rate is 16 lanes x 8 GT/s x 128/130 = 15.75 GB/s;
// TLP headers and flow control at a 256-byte maximum payload cost about 9 %,
// and DMA setup more, so pinned host-to-device copies reach 12-13 GB/s.
// Assumption: 12 GB/s, the low end, as a vMotion copy is not tuned for the
// link.
const pcie3x16DMABytesPerSec = 12_000_000_000

// nvidiaVendorID is NVIDIA's PCI vendor ID (PCI ID repository).
const nvidiaVendorID = 0x10de

// specTable holds the GPU models. The P40 is the default; T4 and V100 sit
// beside it so that another GPU is one row away.
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
	},
}

// P40 returns the Tesla P40's spec, the default GPU.
func P40() GPUSpec { return specTable[0] }

// T4 returns the Tesla T4's spec.
func T4() GPUSpec { return specTable[1] }

// V100 returns the Tesla V100 PCIe 16GB's spec.
func V100() GPUSpec { return specTable[2] }

// Specs returns every GPU model the package knows, P40 first.
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
