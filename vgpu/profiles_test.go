package vgpu

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestP40ProfileTable checks the P40's published figures the table's rows
// (publishedTables, checked row by row by TestGPUProfileTables) do not
// state alone.
func TestP40ProfileTable(t *testing.T) {
	// The published figures: P40-1q is 1 GB, 24 per GPU (GTC 2019 talk
	// "vMotion for NVIDIA GRID vGPU Virtual Machines"); P40-12q scales to 2
	// VMs (VMware blog "GPU Virtualization for Machine Learning Workloads,
	// Part 2").
	if p, _ := ParseProfile("P40-1q"); p.FramebufferBytes != GiB || p.MaxInstances != 24 {
		t.Errorf("P40-1q: %d bytes, %d per GPU", p.FramebufferBytes, p.MaxInstances)
	}
	if p, _ := ParseProfile("P40-12q"); p.MaxInstances != 2 {
		t.Errorf("P40-12q: %d per GPU", p.MaxInstances)
	}
	if len(Profiles("M60")) != 0 || ProfileNames()[len(publishedTables["P40"])-1] != "P40-24C" {
		t.Error("profile lists")
	}
}

func TestParseProfile(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"P40-8Q", "P40-8Q"},
		{"GRID P40-8Q", "P40-8Q"},
		{"grid p40-8q", "P40-8Q"},
		{"nvidia-51", "P40-8Q"},
		{" NVIDIA-241 ", "P40-1B4"},
		{"P40-1q", "P40-1Q"},
		{"P40-24C", "P40-24C"},
		{"GRID P40-2B4", "P40-2B4"},
		{"V100-8Q", "V100-8Q"},
		{"GRID V100D-32Q", "V100D-32Q"},
		{"nvidia-185", "V100D-32Q"},
		{"t4-16c", "T4-16C"},
		{"GRID T4-1B4", "T4-1B4"},
		{"NVIDIA A100-4C", "A100-4C"},
		{"nvidia A100-40c", "A100-40C"},
		{"nvidia-473", "A100-40C"},
	} {
		p, err := ParseProfile(tc.in)
		if err != nil || p.Name != tc.want {
			t.Errorf("ParseProfile(%q) = %q, %v; want %q", tc.in, p.Name, err, tc.want)
		}
	}
	// The A100 has no Q, B or A types, and its MIG-backed types are not
	// modelled; no V100 type is larger than the GPU.
	for _, bad := range []string{"", "P40-5Q", "P40-8", "M60-8Q", "GRID", "nvidia-999", "P40-8QQ",
		"NVIDIA", "A100-4Q", "A100-1-5C", "V100-32Q", "T4-24Q", "NVIDIA GRID T4-1Q", "nvidia-"} {
		_, err := ParseProfile(bad)
		var ue *UnknownProfileError
		if !errors.Is(err, ErrUnknownProfile) || !errors.As(err, &ue) {
			t.Fatalf("ParseProfile(%q): %v, want *UnknownProfileError", bad, err)
		}
		if ue.Name != bad || !slices.Equal(ue.Valid, ProfileNames()) || !strings.Contains(err.Error(), "P40-24C") {
			t.Errorf("ParseProfile(%q): %v", bad, err)
		}
	}
}

// TestReservedFramebuffer checks NVIDIA's reservation formula: profile/16 +
// 16 MiB + 128 MiB/maxInstances (+ profile/16 with ECC on GDDR), rounded
// up to 64 KiB.
func TestReservedFramebuffer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ecc       bool
		wantBytes int64
	}{
		{"P40-1Q", false, (64+16)*MiB + 5*MiB + 384*1024},   // 85.33 MiB -> 85.375
		{"P40-24Q", false, (1536 + 16 + 128) * MiB},         // 1680 MiB
		{"P40-12Q", false, (768 + 16 + 64) * MiB},           // 848 MiB
		{"P40-8Q", false, (512+16)*MiB + 42*MiB + 704*1024}, // 570.67 -> 570.6875
		{"P40-12Q", true, (768 + 768 + 16 + 64) * MiB},      // ECC doubles the first term
		{"P40-4C", false, (256+16+21)*MiB + 384*1024},       // 293.33 -> 293.375
		// Turing: the compression term of the T4's 16 GB types, 28 MiB,
		// and the ECC term (GDDR6).
		{"T4-16C", false, (1024 + 16 + 128 + 28) * MiB},
		{"T4-16C", true, (1024 + 1024 + 16 + 128 + 28) * MiB},
		{"T4-16Q", false, (1024 + 16 + 128 + 28) * MiB},
		{"T4-8Q", false, (512 + 16 + 64) * MiB},
		{"T4-8Q", true, (512 + 512 + 16 + 64) * MiB},
		// Volta and Ampere: HBM2, so no ECC term; no compression term.
		{"V100-16Q", true, (1024 + 16 + 128) * MiB},
		{"V100D-32Q", true, (2048 + 16 + 128) * MiB},
		{"A100-40C", true, (2560 + 16 + 128) * MiB},
		{"A100-5C", false, (320 + 16 + 16) * MiB},
		{"A100-4C", false, (256+16+12)*MiB + 832*1024}, // 284.8 -> 284.8125
	} {
		p, err := ParseProfile(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		got := p.ReservedFramebufferBytes(tc.ecc)
		if got != tc.wantBytes || got%(64<<10) != 0 {
			t.Errorf("%s ecc=%v: reserved %d bytes (%.4f MiB), want %d", tc.name, tc.ecc, got, float64(got)/float64(MiB), tc.wantBytes)
		}
		if !tc.ecc && p.UsableFramebufferBytes() != p.FramebufferBytes-got {
			t.Errorf("%s usable %d", tc.name, p.UsableFramebufferBytes())
		}
	}
	if passthroughProfile(P40()).ReservedFramebufferBytes(true) != 0 {
		t.Error("passthrough reserves")
	}
}
