package vgpu

// NVIDIA A100 PCIe 40GB (Ampere) time-sliced vGPU types. NVIDIA defines
// only C-series types for the A100 (NVIDIA AI Enterprise User Guide v5.0,
// 2024, appendix A.4; the driver's type table below has no others), so a
// Q-, B- or A-series name is unknown. Its MIG-backed types (A100-1-5C to
// A100-7-40C) are not modelled. A GPU in the default equal-size mode holds
// only vGPUs of one framebuffer size (the same guide, section 2.1.3.1),
// which with C-series types only is one type; the mixed-size mode that
// release offers is not modelled, so all vGPUs on one A100 are of one type.

// a100Profiles is the A100 PCIe 40GB's time-sliced vGPU type table.
// Sources:
//   - framebuffer, maximum vGPUs per GPU (in equal-size mode) and licence
//     edition (vCS or vWS): NVIDIA AI Enterprise User Guide v5.0 (2024),
//     appendix A.4, "Time-Sliced C-Series Virtual GPU Types for NVIDIA
//     A100 PCIe 40GB";
//   - display heads, maximum resolution, frame-rate limit, CUDA support,
//     multi-vGPU support and the mdev type IDs: the vGPU manager's type
//     table (vgpuConfig.xml of driver 510.47.03, vGPU 14.0), as for the
//     P40 (the later guide gives 3840x2400 for the one display);
//   - PCI subsystem IDs: no public source found; they are zero.
var a100Profiles = []Profile{
	a100row(4, 10, false, 468),
	a100row(5, 8, false, 469),
	a100row(8, 5, false, 470),
	a100row(10, 4, false, 471),
	a100row(20, 2, false, 472),
	a100row(40, 1, true, 473),
}

// a100row builds an A100 table row: a C-series type with one 4096x2160
// display at 60 FPS and CUDA.
func a100row(fbGiB, maxInst int, multi bool, mdev int) Profile {
	return typeRow("A100", SeriesC, fbGiB, maxInst, 1, res4K, 60, LicenseVCS, true, multi, mdev, 0)
}
