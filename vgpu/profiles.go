package vgpu

import (
	"fmt"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/sched"
)

// Series is the class of workload a vGPU type is built for; it is the last
// letter of the type name.
type Series uint8

// The series of vGPU types (NVIDIA vGPU user guide, "Virtual GPU Types").
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

// The licence editions the types need.
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
	// VM; in the tables here only the full-GPU Q- and C-series types allow
	// it.
	MultiVGPU bool
	// MdevType is the Linux mediated-device type ("nvidia-51"); the mdev
	// name is "GRID " + Name. Empty where no source gives it.
	MdevType string
	// PCISubsystemID is the vGPU's PCI subsystem device ID, which tells the
	// guest driver its type. Zero where no source gives it.
	PCISubsystemID uint16
	// Passthrough marks the pseudo-profile of a whole GPU given to one VM;
	// ParseProfile never returns it.
	Passthrough bool
}

func (p Profile) String() string { return p.Name }

// MdevName returns the name the vGPU manager gives the type, "GRID P40-8Q".
func (p Profile) MdevName() string { return "GRID " + p.Name }

// DefaultTimeSlice is the time slice the equal share and fixed share
// schedulers give a vGPU of the type unless configured otherwise: 2 ms when
// at most 8 fit on the GPU, 1 ms above that (NVIDIA AI Enterprise User
// Guide v5.0, section 7.3 "RmPVMRL Registry Key", table "Default Time Slice
// Length and Scheduling Frequency by vGPU Density", for every GPU after
// Maxwell). It is sched.DefaultSlice of MaxInstances, which a GPU's
// scheduler applies to the vGPU's tenant.
func (p Profile) DefaultTimeSlice() time.Duration { return sched.DefaultSlice(p.MaxInstances) }

// reservationAlign is the granularity the reservation is rounded up to:
// the framebuffer's 64 KiB page, so that the guest-usable part of a window
// is whole pages.
const reservationAlign = 64 << 10

// compressionReservationMiB is the compression-adjustment term of the
// reservation: frame buffer kept for the higher compression overhead of
// vGPU types with 12 GB or more on Turing GPUs, zero for every other type
// and architecture (NVIDIA AI Enterprise release 6 documentation (2025),
// appendix "NVIDIA AI Enterprise and NVIDIA vGPU (C-Series)", known issue
// "Total Frame Buffer for vGPUs is Less Than the Total Frame Buffer on the
// Physical GPU", table 36: T4-16C, 28 MB). That table lists C-series types
// only; T4-16Q and T4-16A, which the rule's wording (any type of 12 GB or
// more on Turing) covers, take the T4-16C's figure: assumption, the same
// framebuffer on the same GPU.
var compressionReservationMiB = map[string]int64{"T4-16C": 28, "T4-16Q": 28, "T4-16A": 28}

// ReservedFramebufferBytes is the part of the vGPU's framebuffer that the
// vGPU manager keeps for itself (allocations the guest driver would
// otherwise make: page tables, channel buffers), which the guest cannot
// use. NVIDIA gives it, in MiB, as
//
//	profile/16 + 16 + ecc + 128/maxInstances + compression
//
// where ecc is profile/16 when ECC is on and the framebuffer is not HBM2
// (so on the P40 and T4, never on the V100 or A100), 128/maxInstances is
// the page-retirement allocation of post-Maxwell GPUs (all of these) and
// compression is the Turing term of compressionReservationMiB, zero on
// Pascal, Volta and Ampere (NVIDIA vGPU user guide, "Total Frame Buffer for
// vGPUs is Less Than the Total Frame Buffer on the Physical GPU"; the same
// formula and terms in the NVIDIA AI Enterprise documentation cited at
// compressionReservationMiB). The result is rounded up to 64 KiB. A
// passthrough GPU reserves nothing.
func (p Profile) ReservedFramebufferBytes(ecc bool) int64 {
	if p.Passthrough || p.MaxInstances <= 0 {
		return 0
	}
	r := p.FramebufferBytes/16 + 16*MiB + 128*MiB/int64(p.MaxInstances)
	if spec, err := SpecByModel(p.GPUModel); ecc && (err != nil || !spec.HBM2) {
		r += p.FramebufferBytes / 16
	}
	r += compressionReservationMiB[p.Name] * MiB
	return (r + reservationAlign - 1) / reservationAlign * reservationAlign
}

// UsableFramebufferBytes is the framebuffer a guest can use with ECC off
// (VGPU.UsableFramebufferBytes accounts for its GPU's ECC state).
func (p Profile) UsableFramebufferBytes() int64 {
	return p.FramebufferBytes - p.ReservedFramebufferBytes(false)
}

// typeRow builds a row of a type table; fbGiB is the framebuffer in GiB,
// mdev the number of the mdev type (0 when unknown, giving no MdevType) and
// subsys the PCI subsystem ID (0 when unknown).
func typeRow(model string, s Series, fbGiB, maxInst, heads int, res Resolution, fps int, lic License, cuda, multi bool, mdev int, subsys uint16) Profile {
	p := Profile{
		Name:     fmt.Sprintf("%s-%d%s", model, fbGiB, s),
		GPUModel: model, Series: s, FramebufferBytes: int64(fbGiB) * GiB,
		MaxInstances: maxInst, Heads: heads, MaxResolution: res, FrameRateLimitFPS: fps,
		License: lic, CUDA: cuda, MultiVGPU: multi, PCISubsystemID: subsys,
	}
	if mdev > 0 {
		p.MdevType = fmt.Sprintf("nvidia-%d", mdev)
	}
	return p
}

// b4 renames a B-series row to its four-head variant ("P40-1B4").
func b4(p Profile) Profile {
	p.Name += "4"
	return p
}

// Display limits of the vGPU manager's type tables.
var (
	res1280 = Resolution{1280, 1024}
	res4K   = Resolution{4096, 2160}
	res5K   = Resolution{5120, 2880}
	res8K   = Resolution{7680, 4320}
)

// profileTables are the type tables, in the order of Specs.
var profileTables = [][]Profile{p40Profiles, t4Profiles, v100Profiles, v100DProfiles, a100Profiles}

// allProfiles is every row of profileTables, in order.
var allProfiles = func() []Profile {
	var out []Profile
	for _, t := range profileTables {
		out = append(out, t...)
	}
	return out
}()

// Profiles returns the vGPU types of a GPU model ("P40", "V100D"), in table
// order; none for a model the package does not know.
func Profiles(model string) []Profile {
	var out []Profile
	for _, p := range allProfiles {
		if strings.EqualFold(p.GPUModel, model) {
			out = append(out, p)
		}
	}
	return out
}

// ProfileNames returns the names ParseProfile accepts in their canonical
// form: every model's types, the models in the order of Specs.
func ProfileNames() []string {
	names := make([]string, len(allProfiles))
	for i, p := range allProfiles {
		names[i] = p.Name
	}
	return names
}

// ParseProfile returns the vGPU type named name, in any of the forms a
// hypervisor shows: the type name "P40-8Q", the vGPU manager's "GRID
// P40-8Q" (or "NVIDIA A100-4C", as later drivers name types), or the mdev
// type "nvidia-51" where the table knows it; case and surrounding space
// are ignored ("P40-1q" as VMware's papers on vGPU write it). An unknown
// name is an *UnknownProfileError listing the valid names.
func ParseProfile(name string) (Profile, error) {
	n := strings.TrimSpace(name)
	for _, prefix := range []string{"GRID ", "NVIDIA "} {
		if len(n) > len(prefix) && strings.EqualFold(n[:len(prefix)], prefix) {
			n = strings.TrimSpace(n[len(prefix):])
			break
		}
	}
	for _, p := range allProfiles {
		if strings.EqualFold(p.Name, n) || p.MdevType != "" && strings.EqualFold(p.MdevType, n) {
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
