package vgpu

import (
	"errors"
	"fmt"
	"testing"
)

func TestSpecTable(t *testing.T) {
	tests := []struct {
		spec                   GPUSpec
		model, chip, mem       string
		fbBytes, bwBytesPerSec int64
		cores, sms, gen, lanes int
		fp32, int8             int64
		deviceID               uint16
		hbm2                   bool
		dma                    int64
		eccWithVGPU            bool
	}{
		{P40(), "P40", "GP102", "GDDR5", 24 * GiB, 346e9, 3840, 30, 3, 16, 11_758_080_000_000, 47e12, 0x1b38, false, 12e9, false},
		{T4(), "T4", "TU104", "GDDR6", 16 * GiB, 320e9, 2560, 40, 3, 16, 8.1e12, 130e12, 0x1eb8, false, 12e9, true},
		{V100(), "V100", "GV100", "HBM2", 16 * GiB, 900e9, 5120, 80, 3, 16, 14e12, 56e12, 0x1db4, true, 12e9, true},
		// Tesla V100 PCIe datasheet (2018): the 16 GB card with 32 GB.
		{V100D(), "V100D", "GV100", "HBM2", 32 * GiB, 900e9, 5120, 80, 3, 16, 14e12, 56e12, 0x1db6, true, 12e9, true},
		// A100 datasheet (2021): PCIe 40GB, 1,555 GB/s, PCIe 4.0 x16,
		// 19.5 TFLOPS FP32, 624 TOPS INT8; 108 SMs of 64 cores.
		{A100(), "A100", "GA100", "HBM2", 40 * GiB, 1555e9, 6912, 108, 4, 16, 19.5e12, 624e12, 0x20f1, true, 24e9, true},
	}
	for _, tc := range tests {
		s := tc.spec
		t.Run(tc.model, func(t *testing.T) {
			if s.Model != tc.model || s.Chip != tc.chip || s.MemoryType != tc.mem || s.HBM2 != tc.hbm2 {
				t.Errorf("identity %s/%s/%s/%v", s.Model, s.Chip, s.MemoryType, s.HBM2)
			}
			if s.FramebufferBytes != tc.fbBytes || s.FramebufferBandwidthBytesPerSec != tc.bwBytesPerSec {
				t.Errorf("memory %d bytes at %d B/s", s.FramebufferBytes, s.FramebufferBandwidthBytesPerSec)
			}
			if s.CUDACores != tc.cores || s.SMs != tc.sms || s.CUDACores%s.SMs != 0 {
				t.Errorf("%d cores in %d SMs", s.CUDACores, s.SMs)
			}
			if s.PCIeGen != tc.gen || s.PCIeLanes != tc.lanes || s.PCIeDMABytesPerSec != tc.dma {
				t.Errorf("PCIe %d x%d at %d B/s", s.PCIeGen, s.PCIeLanes, s.PCIeDMABytesPerSec)
			}
			if s.FP32FlopsPerSec != tc.fp32 || s.INT8OpsPerSec != tc.int8 {
				t.Errorf("throughput %d FP32, %d INT8", s.FP32FlopsPerSec, s.INT8OpsPerSec)
			}
			if s.PCIVendorID != 0x10de || s.PCIDeviceID != tc.deviceID {
				t.Errorf("PCI %04x:%04x", s.PCIVendorID, s.PCIDeviceID)
			}
			if s.ECCWithVGPU != tc.eccWithVGPU {
				t.Errorf("ECC with vGPU %v", s.ECCWithVGPU)
			}
			if err := s.validate(); err != nil {
				t.Error(err)
			}
		})
	}
	// The P40's FP32 peak is its cores at two FLOP a cycle at 1531 MHz, the
	// datasheet's "12 TFLOPS".
	if got := int64(P40().CUDACores) * 2 * 1531e6; got != P40().FP32FlopsPerSec {
		t.Errorf("P40 FP32 = %d, cores x 2 x boost = %d", P40().FP32FlopsPerSec, got)
	}
}

func TestSpecByModel(t *testing.T) {
	for _, name := range []string{"P40", "p40", "Tesla P40", " tesla p40 "} {
		s, err := SpecByModel(name)
		if err != nil || s.Model != "P40" {
			t.Errorf("SpecByModel(%q) = %v, %v", name, s.Model, err)
		}
	}
	if _, err := SpecByModel("K80"); !errors.Is(err, ErrUnknownGPU) {
		t.Errorf("K80: %v, want ErrUnknownGPU", err)
	}
	var models []string
	for _, s := range Specs() {
		models = append(models, s.Model)
	}
	if fmt.Sprint(models) != "[P40 T4 V100 V100D A100]" {
		t.Errorf("Specs() = %v", models)
	}
	for _, name := range []string{"V100D", "v100d", "Tesla V100D", "A100", "a100"} {
		if _, err := SpecByModel(name); err != nil {
			t.Errorf("SpecByModel(%q): %v", name, err)
		}
	}
}
