package vgpu

import (
	"fmt"
	"strings"
)

// Series is the class of workload a vGPU type is built for; it is the last
// letter of the type name.
type Series uint8

// The series of the P40's vGPU types.
const (
	// SeriesQ: virtual workstations (Quadro features, CUDA).
	SeriesQ Series = iota + 1
	// SeriesB: virtual desktops for business users.
	SeriesB
	// SeriesA: virtual applications (RDSH, app streaming).
	SeriesA
	// SeriesC: compute servers (CUDA only, Linux guests).
	SeriesC
)

func (s Series) String() string {
	switch s {
	case SeriesQ:
		return "Q"
	case SeriesB:
		return "B"
	case SeriesA:
		return "A"
	case SeriesC:
		return "C"
	}
	return fmt.Sprintf("Series(%d)", uint8(s))
}

// License is the NVIDIA vGPU software edition a type needs.
type License uint8

// The licence editions of the P40's types.
const (
	// LicenseVDWS: Quadro Virtual Data Center Workstation.
	LicenseVDWS License = iota + 1
	// LicenseVPC: GRID Virtual PC (a vDWS licence also serves).
	LicenseVPC
	// LicenseVApps: GRID Virtual Applications.
	LicenseVApps
	// LicenseVCS: NVIDIA Virtual Compute Server (a vDWS licence also
	// serves).
	LicenseVCS
)

func (l License) String() string {
	switch l {
	case LicenseVDWS:
		return "Quadro vDWS"
	case LicenseVPC:
		return "GRID Virtual PC"
	case LicenseVApps:
		return "GRID Virtual Applications"
	case LicenseVCS:
		return "NVIDIA Virtual Compute Server"
	}
	return fmt.Sprintf("License(%d)", uint8(l))
}

// Resolution is a display head's maximum resolution.
type Resolution struct {
	WidthPixels, HeightPixels int
}

func (r Resolution) String() string { return fmt.Sprintf("%dx%d", r.WidthPixels, r.HeightPixels) }

// Profile is a vGPU type: a fixed slice of one GPU's framebuffer and a
// share of its engines.
type Profile struct {
	// Name is the type name, "P40-8Q".
	Name string
	// GPUModel is the model of physical GPU the type runs on ("P40").
	GPUModel string
	Series   Series
	// FramebufferBytes is the framebuffer the vGPU is allocated, which is
	// also the size of its window into the GPU's framebuffer.
	FramebufferBytes int64
	// MaxInstances is how many vGPUs of the type fit on one GPU.
	MaxInstances int
	// Heads is the number of virtual display heads, each up to
	// MaxResolution.
	Heads         int
	MaxResolution Resolution
	// FrameRateLimitFPS is the frame-rate limiter's cap, which applies
	// under the best-effort scheduler (the limiter is off under equal and
	// fixed share).
	FrameRateLimitFPS int
	License           License
	// CUDA is whether the type runs CUDA.
	CUDA bool
	// MultiVGPU is whether several vGPUs of the type may be attached to one
	// VM; on the P40 only the full-GPU types allow it.
	MultiVGPU bool
	// MdevType is the Linux mediated-device type ("nvidia-51"); the mdev
	// name is "GRID " + Name.
	MdevType string
	// PCISubsystemID is the vGPU's PCI subsystem device ID, which tells the
	// guest driver its type.
	PCISubsystemID uint16
	// Passthrough marks the pseudo-profile of a whole GPU given to one VM;
	// ParseProfile never returns it.
	Passthrough bool
}

func (p Profile) String() string { return p.Name }

// MdevName returns the name the vGPU manager gives the type, "GRID P40-8Q".
func (p Profile) MdevName() string { return "GRID " + p.Name }

// reservationAlign is the granularity the reservation is rounded up to:
// the framebuffer's 64 KiB page, so that the guest-usable part of a window
// is whole pages.
const reservationAlign = 64 << 10

// ReservedFramebufferBytes is the part of the vGPU's framebuffer that the
// vGPU manager keeps for itself (allocations the guest driver would
// otherwise make: page tables, channel buffers), which the guest cannot
// use. NVIDIA gives it, in MiB, as
//
//	profile/16 + 16 + ecc + 128/maxInstances + compression
//
// where ecc is profile/16 when ECC is on and the framebuffer is not HBM2,
// 128/maxInstances is the page-retirement allocation of post-Maxwell GPUs
// and compression is zero below Turing (NVIDIA vGPU user guide, "Total
// Frame Buffer for vGPUs is Less Than the Total Frame Buffer on the
// Physical GPU"; also in the NVIDIA AI Enterprise user guide). The result is
// rounded up to 64 KiB. A passthrough GPU reserves nothing.
func (p Profile) ReservedFramebufferBytes(ecc bool) int64 {
	if p.Passthrough || p.MaxInstances <= 0 {
		return 0
	}
	r := p.FramebufferBytes/16 + 16*MiB + 128*MiB/int64(p.MaxInstances)
	if spec, err := SpecByModel(p.GPUModel); ecc && (err != nil || !spec.HBM2) {
		r += p.FramebufferBytes / 16
	}
	return (r + reservationAlign - 1) / reservationAlign * reservationAlign
}

// UsableFramebufferBytes is the framebuffer a guest can use, with ECC off
// (a vGPU of this generation cannot be created with ECC on).
func (p Profile) UsableFramebufferBytes() int64 {
	return p.FramebufferBytes - p.ReservedFramebufferBytes(false)
}

// row builds a P40 table row; fbGiB is the framebuffer in GiB.
func p40row(s Series, fbGiB, maxInst, heads int, res Resolution, fps int, lic License, cuda, multi bool, mdev int, subsys uint16) Profile {
	return Profile{
		Name:     fmt.Sprintf("P40-%d%s", fbGiB, s),
		GPUModel: "P40", Series: s, FramebufferBytes: int64(fbGiB) * GiB,
		MaxInstances: maxInst, Heads: heads, MaxResolution: res, FrameRateLimitFPS: fps,
		License: lic, CUDA: cuda, MultiVGPU: multi,
		MdevType: fmt.Sprintf("nvidia-%d", mdev), PCISubsystemID: subsys,
	}
}

var (
	res1280 = Resolution{1280, 1024}
	res4K   = Resolution{4096, 2160}
	res5K   = Resolution{5120, 2880}
	res8K   = Resolution{7680, 4320}
)

// p40Profiles is the Tesla P40's vGPU type table. Sources:
//   - framebuffer, maximum vGPUs per GPU and licence edition of the Q, B
//     and A series: NVIDIA Virtual GPU Software User Guide, release 8.0,
//     section 1.4.1.7 "Tesla P40 Virtual GPU Types"; the same maxima appear
//     as max_instance in the mdev descriptions of a P40 host (`mdevctl
//     types`), and the blog post "GPU Virtualization for Machine Learning
//     Workloads, Part 2" (Kurkure, Vu, Sivaraman; VMware) states P40-1Q
//     scales to 24 VMs and P40-12Q to 2, the GTC 2019 talk "vMotion for
//     NVIDIA GRID vGPU Virtual Machines: Case Study of vMotion Using
//     MLaaS" (Sivaraman, Skarlatos, Vu, Kurkure) P40-1q = 1 GB, 24 per GPU;
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

// b4 renames a B-series row to its four-head variant ("P40-1B4").
func b4(p Profile) Profile {
	p.Name += "4"
	return p
}

// Profiles returns the vGPU types of a GPU model ("P40"), in table order.
// Models without a vGPU table (T4 and V100 here) have none.
func Profiles(model string) []Profile {
	var out []Profile
	for _, p := range p40Profiles {
		if strings.EqualFold(p.GPUModel, model) {
			out = append(out, p)
		}
	}
	return out
}

// ProfileNames returns the names ParseProfile accepts in their canonical
// form, in table order.
func ProfileNames() []string {
	names := make([]string, len(p40Profiles))
	for i, p := range p40Profiles {
		names[i] = p.Name
	}
	return names
}

// ParseProfile returns the vGPU type named name, in any of the forms a
// hypervisor shows: the type name "P40-8Q", the vGPU manager's "GRID
// P40-8Q", or the mdev type "nvidia-51"; case and surrounding space are
// ignored ("P40-1q" as the source documents write it). An unknown name is
// an *UnknownProfileError listing the valid names.
func ParseProfile(name string) (Profile, error) {
	n := strings.TrimSpace(name)
	if len(n) > 5 && strings.EqualFold(n[:5], "GRID ") {
		n = strings.TrimSpace(n[5:])
	}
	for _, p := range p40Profiles {
		if strings.EqualFold(p.Name, n) || strings.EqualFold(p.MdevType, n) {
			return p, nil
		}
	}
	return Profile{}, &UnknownProfileError{Name: name, Valid: ProfileNames()}
}

// passthroughProfile is the pseudo-profile of a whole GPU of spec given to
// one VM: the whole framebuffer, one instance, nothing reserved.
func passthroughProfile(spec GPUSpec) Profile {
	return Profile{
		Name: spec.Model + "-passthrough", GPUModel: spec.Model,
		FramebufferBytes: spec.FramebufferBytes, MaxInstances: 1,
		CUDA: true, Passthrough: true, PCISubsystemID: 0,
	}
}
