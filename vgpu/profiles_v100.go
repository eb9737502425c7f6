package vgpu

// Tesla V100 PCIe 16GB (V100-) and 32GB (V100D-) vGPU types (Volta). All
// vGPUs on one V100 are of one type: the release 8.0 user guide (section
// 1.4.3 "Homogeneous Virtual GPUs") allows only homogeneous vGPUs on a
// physical GPU, and the NVIDIA AI Enterprise User Guide v5.0 (2024,
// appendices A.34 and A.35) says these GPUs do not support the mixed-size
// mode of later releases.

// v100Profiles is the Tesla V100 PCIe 16GB's vGPU type table. Sources:
//   - framebuffer, maximum vGPUs per GPU and licence edition of the Q, B
//     and A series: NVIDIA Virtual GPU Software User Guide, release 8.0
//     (2019), section 1.4.1.13 "Tesla V100 PCIe Virtual GPU Types";
//   - the same of the C series: NVIDIA AI Enterprise User Guide v5.0
//     (2024), appendix A.34 "Tesla V100 PCIe Virtual GPU Types" (licence
//     vCS or vWS); Ubuntu Server documentation (Canonical, 2021), in its
//     NVIDIA vGPU how-to, lists V100-8C with max_instance=2;
//   - display heads, maximum resolution, frame-rate limit, CUDA support,
//     multi-vGPU support and the mdev type IDs: the vGPU manager's type
//     table (vgpuConfig.xml of driver 510.47.03, vGPU 14.0), as for the
//     P40, with the same caveat on the older guide's display figures;
//   - PCI subsystem ID of V100-8Q (0x1252): the vGPU manager's log of a
//     V100-8Q VM ("Virtual Device Id: 0x1db4:0x1252") in the same Ubuntu
//     how-to. No public source found gives the other types' subsystem IDs;
//     they are zero.
var v100Profiles = []Profile{
	v100row(SeriesQ, 1, 16, 4, res5K, 60, LicenseVDWS, true, false, 105, 0),
	v100row(SeriesQ, 2, 8, 4, res8K, 60, LicenseVDWS, true, false, 106, 0),
	v100row(SeriesQ, 4, 4, 4, res8K, 60, LicenseVDWS, true, false, 107, 0),
	v100row(SeriesQ, 8, 2, 4, res8K, 60, LicenseVDWS, true, false, 108, 0x1252),
	v100row(SeriesQ, 16, 1, 4, res8K, 60, LicenseVDWS, true, true, 109, 0),
	v100row(SeriesB, 1, 16, 4, res5K, 45, LicenseVPC, false, false, 115, 0),
	v100row(SeriesB, 2, 8, 4, res5K, 45, LicenseVPC, false, false, 163, 0),
	b4(v100row(SeriesB, 1, 16, 4, res5K, 45, LicenseVPC, false, false, 247, 0)),
	b4(v100row(SeriesB, 2, 8, 4, res5K, 45, LicenseVPC, false, false, 217, 0)),
	v100row(SeriesA, 1, 16, 1, res1280, 60, LicenseVApps, false, false, 110, 0),
	v100row(SeriesA, 2, 8, 1, res1280, 60, LicenseVApps, false, false, 111, 0),
	v100row(SeriesA, 4, 4, 1, res1280, 60, LicenseVApps, false, false, 112, 0),
	v100row(SeriesA, 8, 2, 1, res1280, 60, LicenseVApps, false, false, 113, 0),
	v100row(SeriesA, 16, 1, 1, res1280, 60, LicenseVApps, false, false, 114, 0),
	v100row(SeriesC, 4, 4, 1, res4K, 60, LicenseVCS, true, false, 299, 0),
	v100row(SeriesC, 8, 2, 1, res4K, 60, LicenseVCS, true, false, 300, 0),
	v100row(SeriesC, 16, 1, 1, res4K, 60, LicenseVCS, true, true, 301, 0),
}

// v100DProfiles is the Tesla V100 PCIe 32GB's vGPU type table. Sources:
//   - framebuffer, maximum vGPUs per GPU and licence edition of the Q, B
//     and A series: NVIDIA Virtual GPU Software User Guide, release 8.0
//     (2019), section 1.4.1.14 "Tesla V100 PCIe 32GB Virtual GPU Types";
//   - the same of the C series: NVIDIA AI Enterprise User Guide v5.0
//     (2024), appendix A.35 "Tesla V100 PCIe 32GB Virtual GPU Types"
//     (licence vCS or vWS);
//   - display heads, maximum resolution, frame-rate limit, CUDA support,
//     multi-vGPU support and the mdev type IDs: the vGPU manager's type
//     table (vgpuConfig.xml of driver 510.47.03, vGPU 14.0), as for the
//     P40; the mdev IDs and maxima also appear in the mdev type listing of
//     a V100 PCIe 32GB host in the nvidia-dev-ctl tool's documentation;
//   - PCI subsystem IDs (0x12BD-0x12CA, 0x12F7, 0x1342, 0x1377,
//     0x1395-0x1397): the vGPU manager's type table keyed by device 0x1DB6,
//     as the vgpu_unlock project (Jonathan Johansson, 2021) reproduces it.
var v100DProfiles = []Profile{
	v100Drow(SeriesQ, 1, 32, 4, res5K, 60, LicenseVDWS, true, false, 180, 0x12bf),
	v100Drow(SeriesQ, 2, 16, 4, res8K, 60, LicenseVDWS, true, false, 181, 0x12c0),
	v100Drow(SeriesQ, 4, 8, 4, res8K, 60, LicenseVDWS, true, false, 182, 0x12c1),
	v100Drow(SeriesQ, 8, 4, 4, res8K, 60, LicenseVDWS, true, false, 183, 0x12c2),
	v100Drow(SeriesQ, 16, 2, 4, res8K, 60, LicenseVDWS, true, false, 184, 0x12c3),
	v100Drow(SeriesQ, 32, 1, 4, res8K, 60, LicenseVDWS, true, true, 185, 0x12c4),
	v100Drow(SeriesB, 1, 32, 4, res5K, 45, LicenseVPC, false, false, 192, 0x12bd),
	v100Drow(SeriesB, 2, 16, 4, res5K, 45, LicenseVPC, false, false, 193, 0x12be),
	b4(v100Drow(SeriesB, 1, 32, 4, res5K, 45, LicenseVPC, false, false, 249, 0x1342)),
	b4(v100Drow(SeriesB, 2, 16, 4, res5K, 45, LicenseVPC, false, false, 218, 0x12f7)),
	v100Drow(SeriesA, 1, 32, 1, res1280, 60, LicenseVApps, false, false, 186, 0x12c5),
	v100Drow(SeriesA, 2, 16, 1, res1280, 60, LicenseVApps, false, false, 187, 0x12c6),
	v100Drow(SeriesA, 4, 8, 1, res1280, 60, LicenseVApps, false, false, 188, 0x12c7),
	v100Drow(SeriesA, 8, 4, 1, res1280, 60, LicenseVApps, false, false, 189, 0x12c8),
	v100Drow(SeriesA, 16, 2, 1, res1280, 60, LicenseVApps, false, false, 190, 0x12c9),
	v100Drow(SeriesA, 32, 1, 1, res1280, 60, LicenseVApps, false, false, 191, 0x12ca),
	v100Drow(SeriesC, 4, 8, 1, res4K, 60, LicenseVCS, true, false, 311, 0x1395),
	v100Drow(SeriesC, 8, 4, 1, res4K, 60, LicenseVCS, true, false, 312, 0x1396),
	v100Drow(SeriesC, 16, 2, 1, res4K, 60, LicenseVCS, true, false, 313, 0x1397),
	v100Drow(SeriesC, 32, 1, 1, res4K, 60, LicenseVCS, true, true, 314, 0x1377),
}

// v100row and v100Drow build rows of the two V100 tables.
func v100row(s Series, fbGiB, maxInst, heads int, res Resolution, fps int, lic License, cuda, multi bool, mdev int, subsys uint16) Profile {
	return typeRow("V100", s, fbGiB, maxInst, heads, res, fps, lic, cuda, multi, mdev, subsys)
}

func v100Drow(s Series, fbGiB, maxInst, heads int, res Resolution, fps int, lic License, cuda, multi bool, mdev int, subsys uint16) Profile {
	return typeRow("V100D", s, fbGiB, maxInst, heads, res, fps, lic, cuda, multi, mdev, subsys)
}
