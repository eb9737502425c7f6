package migrate

import "time"

// StunTable is one of VMware's published tables of vMotion stun times of
// vGPU VMs, as the presets are fitted to and compared with
// (docs/CALIBRATION.md).
type StunTable struct {
	// Name identifies the table.
	Name string
	// Source is the publisher, document and table.
	Source string
	// GPUModel is the GPU measured, as its vGPU types are named ("P40",
	// "V100D"), and Link the network, as LinkByName knows it.
	GPUModel, Link string
	// AllInUse says the sizes are vGPU types' framebuffers with all of
	// each in use (a type's usable framebuffer); otherwise they are the
	// framebuffer in use.
	AllInUse bool
	// VMRAMGiB is the VM's memory, where the table gives it.
	VMRAMGiB int
	// Resolution is the published figures' rounding: a figure stands for
	// any stun within half of it.
	Resolution time.Duration
	// Points are the figures, smallest size first.
	Points []StunPoint
	// Preset names the preset fitted to the table; empty if none was.
	Preset string
}

// PublishedStunTables returns VMware's published stun tables of vGPU
// vMotion, oldest release first: a new slice on every call.
func PublishedStunTables() []StunTable {
	s := func(v ...float64) []StunPoint {
		sizes := []int{1, 2, 4, 8, 16, 32}
		ps := make([]StunPoint, len(v))
		for i, x := range v {
			ps[i] = StunPoint{UsedGiB: sizes[i], Stun: time.Duration(x * float64(time.Second))}
		}
		return ps
	}
	return []StunTable{
		{Name: "vsphere-6.7u1-p40", GPUModel: "P40", Link: "10g", Resolution: 100 * time.Millisecond,
			Source: "VMware vSphere 6.7 documentation, vCenter Server and Host Management, Table 1 \"Expected Stun Times for vMotion of vGPU VMs\" (Tesla P40, 10 Gb network; the vSphere 6.7 U1 release)",
			Points: PublishedStun(), Preset: "vsphere-6.7u1"},
		{Name: "vsphere-6.7-v100", GPUModel: "V100D", Link: "10g", Resolution: 10 * time.Millisecond,
			Source: "VMware vSphere 6.7 documentation, vCenter Server and Host Management, later revision of Table 1 \"Expected Stun Times for vMotion of vGPU VMs\" (Tesla V100 PCIe 32 GB, 10 Gb network)",
			Points: s(2.17, 4.03, 7.02, 14.48, 27.79, 50.81)},
		{Name: "vsphere-7.0-v100-expected", GPUModel: "V100D", Link: "10g", Resolution: time.Second,
			Source: "VMware vSphere 7.0 documentation, vCenter Server and Host Management, Table 1 \"Expected Stun Times for vMotion of vGPU VMs\" (Tesla V100 PCIe 32 GB, 10 Gb network)",
			Points: s(2, 4, 6, 12, 22, 39)},
		{Name: "vsphere-7.0-v100-worst", GPUModel: "V100D", Link: "10g", AllInUse: true, VMRAMGiB: 4, Resolution: time.Second,
			Source: "VMware vSphere 7.0 documentation, vCenter Server and Host Management, Table 2 \"Estimated Worst-Case Stun Times\", 4 GB VM column (Tesla V100 PCIe 32 GB, 10 Gb network)",
			Points: s(5, 7, 13, 24, 47, 91), Preset: "vsphere-7.0"},
	}
}
