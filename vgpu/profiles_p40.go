package vgpu

// Tesla P40 (Pascal) vGPU types. All vGPUs on one P40 are of one type: the
// release 8.0 user guide (section 1.4.3 "Homogeneous Virtual GPUs") allows
// only homogeneous vGPUs on a physical GPU.

// p40row builds a P40 table row; fbGiB is the framebuffer in GiB.
func p40row(s Series, fbGiB, maxInst, heads int, res Resolution, fps int, lic License, cuda, multi bool, mdev int, subsys uint16) Profile {
	return typeRow("P40", s, fbGiB, maxInst, heads, res, fps, lic, cuda, multi, mdev, subsys)
}

// p40Profiles is the Tesla P40's vGPU type table. Sources:
//   - framebuffer, maximum vGPUs per GPU and licence edition of the Q, B
//     and A series: NVIDIA Virtual GPU Software User Guide, release 8.0,
//     section 1.4.1.7 "Tesla P40 Virtual GPU Types"; the same maxima appear
//     as max_instance in the mdev descriptions of a P40 host (`mdevctl
//     types`); "GPU Virtualization for Machine Learning Workloads, Part 2"
//     (Uday Kurkure, Lan Vu, Hari Sivaraman; VMware blog, 2020) states
//     P40-1Q scales to 24 VMs and P40-12Q to 2, and "vMotion for NVIDIA
//     GRID vGPU Virtual Machines: Case Study of vMotion Using MLaaS" (Hari
//     Sivaraman, Dimitrios Skarlatos, Lan Vu, Uday Kurkure; NVIDIA GTC
//     2019) P40-1q = 1 GB, 24 per GPU;
//   - display heads, maximum resolution, frame-rate limit, CUDA support,
//     multi-vGPU support, the C series and the mdev type IDs: the vGPU
//     manager's type table (vgpuConfig.xml of driver 510.47.03, vGPU 14.0)
//     as listed by `mdevctl types` (num_heads, max_resolution, frl_config,
//     max_instance) on a P40 host. Older releases give other head and
//     resolution figures (release 8.0: 2 heads of 4096x2160 for P40-1Q);
//     the driver's table is the one a host enforces.
//   - frame-rate limits: release 8.0 user guide, 45 FPS for B series, 60
//     for Q and A;
//   - C-series maximum instances: assumption, the whole framebuffer divided
//     by the type's, as every other P40 series does; C-series licence:
//     Virtual Compute Server (NVIDIA vGPU 12.0 licensing user guide lists
//     C-series vGPUs under vCS);
//   - PCI subsystem IDs (0x11E7-0x11F7, 0x1287, 0x12EF, 0x133A, 0x137E,
//     0x1381-0x1384): the vGPU manager's type table keyed by device 0x1B38.
var p40Profiles = []Profile{
	p40row(SeriesQ, 1, 24, 4, res5K, 60, LicenseVDWS, true, false, 46, 0x11e8),
	p40row(SeriesQ, 2, 12, 4, res8K, 60, LicenseVDWS, true, false, 47, 0x11e9),
	p40row(SeriesQ, 3, 8, 4, res8K, 60, LicenseVDWS, true, false, 48, 0x11ea),
	p40row(SeriesQ, 4, 6, 4, res8K, 60, LicenseVDWS, true, false, 49, 0x11eb),
	p40row(SeriesQ, 6, 4, 4, res8K, 60, LicenseVDWS, true, false, 50, 0x11ec),
	p40row(SeriesQ, 8, 3, 4, res8K, 60, LicenseVDWS, true, false, 51, 0x11ed),
	p40row(SeriesQ, 12, 2, 4, res8K, 60, LicenseVDWS, true, false, 52, 0x11ee),
	p40row(SeriesQ, 24, 1, 4, res8K, 60, LicenseVDWS, true, true, 53, 0x11ef),
	p40row(SeriesB, 1, 24, 4, res5K, 45, LicenseVPC, false, false, 62, 0x11e7),
	p40row(SeriesB, 2, 12, 4, res5K, 45, LicenseVPC, false, false, 156, 0x1287),
	b4(p40row(SeriesB, 1, 24, 4, res5K, 45, LicenseVPC, false, false, 241, 0x133a)),
	b4(p40row(SeriesB, 2, 12, 4, res5K, 45, LicenseVPC, false, false, 215, 0x12ef)),
	p40row(SeriesA, 1, 24, 1, res1280, 60, LicenseVApps, false, false, 54, 0x11f0),
	p40row(SeriesA, 2, 12, 1, res1280, 60, LicenseVApps, false, false, 55, 0x11f1),
	p40row(SeriesA, 3, 8, 1, res1280, 60, LicenseVApps, false, false, 56, 0x11f2),
	p40row(SeriesA, 4, 6, 1, res1280, 60, LicenseVApps, false, false, 57, 0x11f3),
	p40row(SeriesA, 6, 4, 1, res1280, 60, LicenseVApps, false, false, 58, 0x11f4),
	p40row(SeriesA, 8, 3, 1, res1280, 60, LicenseVApps, false, false, 59, 0x11f5),
	p40row(SeriesA, 12, 2, 1, res1280, 60, LicenseVApps, false, false, 60, 0x11f6),
	p40row(SeriesA, 24, 1, 1, res1280, 60, LicenseVApps, false, false, 61, 0x11f7),
	p40row(SeriesC, 4, 6, 1, res4K, 60, LicenseVCS, true, false, 283, 0x1381),
	p40row(SeriesC, 6, 4, 1, res4K, 60, LicenseVCS, true, false, 284, 0x1382),
	p40row(SeriesC, 8, 3, 1, res4K, 60, LicenseVCS, true, false, 285, 0x1383),
	p40row(SeriesC, 12, 2, 1, res4K, 60, LicenseVCS, true, false, 286, 0x1384),
	p40row(SeriesC, 24, 1, 1, res4K, 60, LicenseVCS, true, true, 287, 0x137e),
}
