package vgpu

// Tesla T4 (Turing) vGPU types. All vGPUs on one T4 are of one type: the
// release 8.0 user guide (section 1.4.3 "Homogeneous Virtual GPUs") allows
// only homogeneous vGPUs on a physical GPU, and the NVIDIA AI Enterprise
// User Guide v5.0 (2024, appendix A.31) says the T4 does not support the
// mixed-size mode of later releases. On Turing the reservation has a
// compression term (see compressionReservationMiB).

// t4Profiles is the Tesla T4's vGPU type table. Sources:
//   - framebuffer, maximum vGPUs per GPU and licence edition of the Q, B
//     and A series: NVIDIA Virtual GPU Software User Guide, release 8.0
//     (2019), section 1.4.1.10 "Tesla T4 Virtual GPU Types";
//   - the same of the C series: NVIDIA AI Enterprise User Guide v5.0
//     (2024), appendix A.31 "Tesla T4 Virtual GPU Types" (licence vCS or
//     vWS);
//   - display heads, maximum resolution, frame-rate limit, CUDA support,
//     multi-vGPU support and the mdev type IDs: the vGPU manager's type
//     table (vgpuConfig.xml of driver 510.47.03, vGPU 14.0), as for the
//     P40, with the same caveat on the older guide's display figures;
//   - PCI subsystem IDs (0x1309-0x1315, 0x1345, 0x1375, 0x139A, 0x139B):
//     the vGPU manager's type table keyed by device 0x1EB8, as the
//     vgpu_unlock project (Jonathan Johansson, 2021) reproduces it.
var t4Profiles = []Profile{
	t4row(SeriesQ, 1, 16, 4, res5K, 60, LicenseVDWS, true, false, 230, 0x130c),
	t4row(SeriesQ, 2, 8, 4, res8K, 60, LicenseVDWS, true, false, 231, 0x130d),
	t4row(SeriesQ, 4, 4, 4, res8K, 60, LicenseVDWS, true, false, 232, 0x130e),
	t4row(SeriesQ, 8, 2, 4, res8K, 60, LicenseVDWS, true, false, 233, 0x130f),
	t4row(SeriesQ, 16, 1, 4, res8K, 60, LicenseVDWS, true, true, 234, 0x1310),
	t4row(SeriesB, 1, 16, 4, res5K, 45, LicenseVPC, false, false, 222, 0x1309),
	t4row(SeriesB, 2, 8, 4, res5K, 45, LicenseVPC, false, false, 223, 0x130a),
	b4(t4row(SeriesB, 1, 16, 4, res5K, 45, LicenseVPC, false, false, 252, 0x1345)),
	b4(t4row(SeriesB, 2, 8, 4, res5K, 45, LicenseVPC, false, false, 224, 0x130b)),
	t4row(SeriesA, 1, 16, 1, res1280, 60, LicenseVApps, false, false, 225, 0x1311),
	t4row(SeriesA, 2, 8, 1, res1280, 60, LicenseVApps, false, false, 226, 0x1312),
	t4row(SeriesA, 4, 4, 1, res1280, 60, LicenseVApps, false, false, 227, 0x1313),
	t4row(SeriesA, 8, 2, 1, res1280, 60, LicenseVApps, false, false, 228, 0x1314),
	t4row(SeriesA, 16, 1, 1, res1280, 60, LicenseVApps, false, false, 229, 0x1315),
	t4row(SeriesC, 4, 4, 1, res4K, 60, LicenseVCS, true, false, 319, 0x139a),
	t4row(SeriesC, 8, 2, 1, res4K, 60, LicenseVCS, true, false, 320, 0x139b),
	t4row(SeriesC, 16, 1, 1, res4K, 60, LicenseVCS, true, true, 321, 0x1375),
}

// t4row builds a T4 table row.
func t4row(s Series, fbGiB, maxInst, heads int, res Resolution, fps int, lic License, cuda, multi bool, mdev int, subsys uint16) Profile {
	return typeRow("T4", s, fbGiB, maxInst, heads, res, fps, lic, cuda, multi, mdev, subsys)
}
