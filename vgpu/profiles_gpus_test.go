package vgpu

import (
	"testing"
	"time"
)

// publishedRow is one vGPU type as its sources give it.
type publishedRow struct {
	name   string
	series Series
	fbGiB  int64
	max    int
	heads  int
	res    string
	fps    int
	lic    License
	multi  bool
	mdev   string
	subsys uint16
}

// publishedTables are the rows of the P40, V100, V100D, T4 and A100 tables
// as the sources state them (see profiles_p40.go, profiles_v100.go,
// profiles_t4.go and profiles_a100.go for the full citations; the P40's
// from the vGPU 8.0 user guide, section 1.4.1.7, and the same driver
// table):
//   - framebuffer, maximum per GPU, licence of Q, B and A: NVIDIA Virtual GPU
//     Software User Guide, release 8.0, sections 1.4.1.13 (V100 PCIe),
//     1.4.1.14 (V100 PCIe 32GB), 1.4.1.10 (T4);
//   - the same of C: NVIDIA AI Enterprise User Guide v5.0, appendices A.34,
//     A.35, A.31 and A.4 (A100 PCIe 40GB, time-sliced, equal-size mode);
//   - heads, resolution, frame-rate limit, multi-vGPU, mdev type: the type
//     table of driver 510.47.03 (vGPU 14.0);
//   - PCI subsystem IDs: vgpu_unlock's copy of the driver's table (V100D,
//     T4), a vGPU manager log in Ubuntu's documentation (V100-8Q), none for
//     the other V100 types and the A100.
var publishedTables = map[string][]publishedRow{
	"P40": {
		{"P40-1Q", SeriesQ, 1, 24, 4, "5120x2880", 60, LicenseVDWS, false, "nvidia-46", 0x11e8},
		{"P40-2Q", SeriesQ, 2, 12, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-47", 0x11e9},
		{"P40-3Q", SeriesQ, 3, 8, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-48", 0x11ea},
		{"P40-4Q", SeriesQ, 4, 6, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-49", 0x11eb},
		{"P40-6Q", SeriesQ, 6, 4, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-50", 0x11ec},
		{"P40-8Q", SeriesQ, 8, 3, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-51", 0x11ed},
		{"P40-12Q", SeriesQ, 12, 2, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-52", 0x11ee},
		{"P40-24Q", SeriesQ, 24, 1, 4, "7680x4320", 60, LicenseVDWS, true, "nvidia-53", 0x11ef},
		{"P40-1B", SeriesB, 1, 24, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-62", 0x11e7},
		{"P40-2B", SeriesB, 2, 12, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-156", 0x1287},
		{"P40-1B4", SeriesB, 1, 24, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-241", 0x133a},
		{"P40-2B4", SeriesB, 2, 12, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-215", 0x12ef},
		{"P40-1A", SeriesA, 1, 24, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-54", 0x11f0},
		{"P40-2A", SeriesA, 2, 12, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-55", 0x11f1},
		{"P40-3A", SeriesA, 3, 8, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-56", 0x11f2},
		{"P40-4A", SeriesA, 4, 6, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-57", 0x11f3},
		{"P40-6A", SeriesA, 6, 4, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-58", 0x11f4},
		{"P40-8A", SeriesA, 8, 3, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-59", 0x11f5},
		{"P40-12A", SeriesA, 12, 2, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-60", 0x11f6},
		{"P40-24A", SeriesA, 24, 1, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-61", 0x11f7},
		{"P40-4C", SeriesC, 4, 6, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-283", 0x1381},
		{"P40-6C", SeriesC, 6, 4, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-284", 0x1382},
		{"P40-8C", SeriesC, 8, 3, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-285", 0x1383},
		{"P40-12C", SeriesC, 12, 2, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-286", 0x1384},
		{"P40-24C", SeriesC, 24, 1, 1, "4096x2160", 60, LicenseVCS, true, "nvidia-287", 0x137e},
	},
	"V100": {
		{"V100-1Q", SeriesQ, 1, 16, 4, "5120x2880", 60, LicenseVDWS, false, "nvidia-105", 0},
		{"V100-2Q", SeriesQ, 2, 8, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-106", 0},
		{"V100-4Q", SeriesQ, 4, 4, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-107", 0},
		{"V100-8Q", SeriesQ, 8, 2, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-108", 0x1252},
		{"V100-16Q", SeriesQ, 16, 1, 4, "7680x4320", 60, LicenseVDWS, true, "nvidia-109", 0},
		{"V100-1B", SeriesB, 1, 16, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-115", 0},
		{"V100-2B", SeriesB, 2, 8, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-163", 0},
		{"V100-1B4", SeriesB, 1, 16, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-247", 0},
		{"V100-2B4", SeriesB, 2, 8, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-217", 0},
		{"V100-1A", SeriesA, 1, 16, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-110", 0},
		{"V100-2A", SeriesA, 2, 8, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-111", 0},
		{"V100-4A", SeriesA, 4, 4, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-112", 0},
		{"V100-8A", SeriesA, 8, 2, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-113", 0},
		{"V100-16A", SeriesA, 16, 1, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-114", 0},
		{"V100-4C", SeriesC, 4, 4, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-299", 0},
		{"V100-8C", SeriesC, 8, 2, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-300", 0},
		{"V100-16C", SeriesC, 16, 1, 1, "4096x2160", 60, LicenseVCS, true, "nvidia-301", 0},
	},
	"V100D": {
		{"V100D-1Q", SeriesQ, 1, 32, 4, "5120x2880", 60, LicenseVDWS, false, "nvidia-180", 0x12bf},
		{"V100D-2Q", SeriesQ, 2, 16, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-181", 0x12c0},
		{"V100D-4Q", SeriesQ, 4, 8, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-182", 0x12c1},
		{"V100D-8Q", SeriesQ, 8, 4, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-183", 0x12c2},
		{"V100D-16Q", SeriesQ, 16, 2, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-184", 0x12c3},
		{"V100D-32Q", SeriesQ, 32, 1, 4, "7680x4320", 60, LicenseVDWS, true, "nvidia-185", 0x12c4},
		{"V100D-1B", SeriesB, 1, 32, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-192", 0x12bd},
		{"V100D-2B", SeriesB, 2, 16, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-193", 0x12be},
		{"V100D-1B4", SeriesB, 1, 32, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-249", 0x1342},
		{"V100D-2B4", SeriesB, 2, 16, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-218", 0x12f7},
		{"V100D-1A", SeriesA, 1, 32, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-186", 0x12c5},
		{"V100D-2A", SeriesA, 2, 16, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-187", 0x12c6},
		{"V100D-4A", SeriesA, 4, 8, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-188", 0x12c7},
		{"V100D-8A", SeriesA, 8, 4, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-189", 0x12c8},
		{"V100D-16A", SeriesA, 16, 2, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-190", 0x12c9},
		{"V100D-32A", SeriesA, 32, 1, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-191", 0x12ca},
		{"V100D-4C", SeriesC, 4, 8, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-311", 0x1395},
		{"V100D-8C", SeriesC, 8, 4, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-312", 0x1396},
		{"V100D-16C", SeriesC, 16, 2, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-313", 0x1397},
		{"V100D-32C", SeriesC, 32, 1, 1, "4096x2160", 60, LicenseVCS, true, "nvidia-314", 0x1377},
	},
	"T4": {
		{"T4-1Q", SeriesQ, 1, 16, 4, "5120x2880", 60, LicenseVDWS, false, "nvidia-230", 0x130c},
		{"T4-2Q", SeriesQ, 2, 8, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-231", 0x130d},
		{"T4-4Q", SeriesQ, 4, 4, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-232", 0x130e},
		{"T4-8Q", SeriesQ, 8, 2, 4, "7680x4320", 60, LicenseVDWS, false, "nvidia-233", 0x130f},
		{"T4-16Q", SeriesQ, 16, 1, 4, "7680x4320", 60, LicenseVDWS, true, "nvidia-234", 0x1310},
		{"T4-1B", SeriesB, 1, 16, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-222", 0x1309},
		{"T4-2B", SeriesB, 2, 8, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-223", 0x130a},
		{"T4-1B4", SeriesB, 1, 16, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-252", 0x1345},
		{"T4-2B4", SeriesB, 2, 8, 4, "5120x2880", 45, LicenseVPC, false, "nvidia-224", 0x130b},
		{"T4-1A", SeriesA, 1, 16, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-225", 0x1311},
		{"T4-2A", SeriesA, 2, 8, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-226", 0x1312},
		{"T4-4A", SeriesA, 4, 4, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-227", 0x1313},
		{"T4-8A", SeriesA, 8, 2, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-228", 0x1314},
		{"T4-16A", SeriesA, 16, 1, 1, "1280x1024", 60, LicenseVApps, false, "nvidia-229", 0x1315},
		{"T4-4C", SeriesC, 4, 4, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-319", 0x139a},
		{"T4-8C", SeriesC, 8, 2, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-320", 0x139b},
		{"T4-16C", SeriesC, 16, 1, 1, "4096x2160", 60, LicenseVCS, true, "nvidia-321", 0x1375},
	},
	"A100": {
		{"A100-4C", SeriesC, 4, 10, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-468", 0},
		{"A100-5C", SeriesC, 5, 8, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-469", 0},
		{"A100-8C", SeriesC, 8, 5, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-470", 0},
		{"A100-10C", SeriesC, 10, 4, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-471", 0},
		{"A100-20C", SeriesC, 20, 2, 1, "4096x2160", 60, LicenseVCS, false, "nvidia-472", 0},
		{"A100-40C", SeriesC, 40, 1, 1, "4096x2160", 60, LicenseVCS, true, "nvidia-473", 0},
	},
}

// TestGPUProfileTables checks every row of the P40, V100, V100D, T4 and
// A100 tables against the published figures, and what the rows imply together.
func TestGPUProfileTables(t *testing.T) {
	for model, want := range publishedTables {
		spec, err := SpecByModel(model)
		must(t, err)
		got := Profiles(model)
		if len(got) != len(want) {
			t.Fatalf("%d %s profiles, want %d", len(got), model, len(want))
		}
		for i, w := range want {
			p := got[i]
			t.Run(w.name, func(t *testing.T) {
				if p.Name != w.name || p.GPUModel != spec.Model || p.Series != w.series {
					t.Errorf("identity %s %s %v", p.Name, p.GPUModel, p.Series)
				}
				if p.FramebufferBytes != w.fbGiB*GiB || p.MaxInstances != w.max {
					t.Errorf("framebuffer %d, %d per GPU", p.FramebufferBytes, p.MaxInstances)
				}
				// Static partitioning: the instances fill the GPU exactly.
				if int64(p.MaxInstances)*p.FramebufferBytes != spec.FramebufferBytes {
					t.Errorf("%d x %d bytes != the %s's framebuffer", p.MaxInstances, p.FramebufferBytes, model)
				}
				if p.Heads != w.heads || p.MaxResolution.String() != w.res || p.FrameRateLimitFPS != w.fps {
					t.Errorf("display %d heads %v %d FPS", p.Heads, p.MaxResolution, p.FrameRateLimitFPS)
				}
				if p.License != w.lic || p.MultiVGPU != w.multi {
					t.Errorf("licence %v multi %v", p.License, p.MultiVGPU)
				}
				if p.MdevType != w.mdev || p.PCISubsystemID != w.subsys || p.MdevName() != "GRID "+w.name {
					t.Errorf("mdev %s %s %#x", p.MdevType, p.MdevName(), p.PCISubsystemID)
				}
				// CUDA runs on the Q and C series only; several vGPUs per
				// VM only of the full-GPU Q and C types.
				qc := p.Series == SeriesQ || p.Series == SeriesC
				if p.CUDA != qc || p.MultiVGPU != (qc && p.MaxInstances == 1) {
					t.Errorf("CUDA %v, MultiVGPU %v", p.CUDA, p.MultiVGPU)
				}
				if p.Passthrough {
					t.Error("a table row is passthrough")
				}
			})
		}
	}
	// The A100 has C-series time-sliced types only.
	for _, p := range Profiles("A100") {
		if p.Series != SeriesC {
			t.Errorf("%s on the A100", p.Name)
		}
	}
	n := 0
	for _, s := range Specs() {
		n += len(Profiles(s.Model))
	}
	if n != len(ProfileNames()) || len(Profiles("P40")) != 25 {
		t.Errorf("%d profiles by model, %d names", n, len(ProfileNames()))
	}
}

// TestDefaultTimeSlice checks the default time slice of every type against
// NVIDIA's table (AI Enterprise User Guide v5.0, section 7.3): 2 ms for
// types of which at most 8 fit on a GPU, 1 ms above.
func TestDefaultTimeSlice(t *testing.T) {
	for _, tc := range []struct {
		name string
		want time.Duration
	}{
		{"P40-1Q", time.Millisecond}, {"P40-3Q", 2 * time.Millisecond}, {"P40-24C", 2 * time.Millisecond},
		{"V100-1Q", time.Millisecond}, {"V100-2Q", 2 * time.Millisecond}, {"V100-16C", 2 * time.Millisecond},
		{"V100D-1A", time.Millisecond}, {"V100D-2B", time.Millisecond}, {"V100D-4C", 2 * time.Millisecond},
		{"T4-1B4", time.Millisecond}, {"T4-2Q", 2 * time.Millisecond}, {"T4-16C", 2 * time.Millisecond},
		{"A100-4C", time.Millisecond}, {"A100-5C", 2 * time.Millisecond}, {"A100-40C", 2 * time.Millisecond},
	} {
		p, err := ParseProfile(tc.name)
		must(t, err)
		if got := p.DefaultTimeSlice(); got != tc.want {
			t.Errorf("%s (%d per GPU): %v, want %v", tc.name, p.MaxInstances, got, tc.want)
		}
	}
	for _, name := range ProfileNames() {
		p, _ := ParseProfile(name)
		want := 2 * time.Millisecond
		if p.MaxInstances > 8 {
			want = time.Millisecond
		}
		if p.DefaultTimeSlice() != want {
			t.Errorf("%s: %v", name, p.DefaultTimeSlice())
		}
	}
}
