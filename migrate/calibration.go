package migrate

import "time"

// The Legacy stun-time fit.
//
// VMware published the expected stun times of vMotion with an NVIDIA vGPU
// in vSphere 6.7 U1, measured over a 10 Gb network with Tesla P40 GPUs, by
// the framebuffer memory in use (VMware vSphere 6.7 documentation, vCenter
// Server and Host Management, table "Expected Stun Times for vMotion of
// vGPU VMs"; ESXi 6.7 U1 and NVIDIA driver 410.68 are also the test bed of
// "vMotion for NVIDIA GRID vGPU Virtual Machines: Case Study of vMotion
// Using MLaaS", Hari Sivaraman, Dimitrios Skarlatos, Lan Vu, Uday Kurkure,
// NVIDIA GTC 2019):
//
//	used framebuffer   1 GB   2 GB   4 GB   8 GB   10 GB   12 GB   16 GB
//	stun time (s)      9.0    16.5   31.4   61.3   76.3    91.2    100+ (vMotion timeout)
//
// The six figures lie on a straight line to within 0.15 %: a least-squares
// fit gives 1.530 s plus 7.474 s for every GiB in use. 7.474 s a GiB is
// 143.7 MB/s, an eighth of what 10 GbE carries, so the network was not the
// bottleneck: in 6.7 U1 the vGPU's memory was copied during the stun as
// part of the device checkpoint, and that path ran at 143.7 MB/s. Legacy
// mode models exactly that: the used framebuffer passes through a
// checkpoint path of LegacyCheckpointPathBytesPerSec during the stun,
// after fixed costs that add up to the fit's 1.53 s.
//
// The constants are a fit to all six published figures, so reproducing
// those figures (within 0.5 %, TestLegacyFitsPublishedStun) shows the
// model carries the fit through, not that it predicts: the check that it
// predicts is a fit to five figures predicting the sixth
// (TestLegacyLeaveOneOut, within 0.5 %).
const (
	// PublishedFitFixedStun and PublishedFitStunPerGiB are the least-squares
	// line through the published table.
	PublishedFitFixedStun  = 1530 * time.Millisecond
	PublishedFitStunPerGiB = 7474 * time.Millisecond

	// LegacyCheckpointPathBytesPerSec is the rate at which 6.7 U1 moved
	// vGPU memory through the device checkpoint: 1 GiB / 7.474 s.
	LegacyCheckpointPathBytesPerSec = (1 << 30) * int64(time.Second) / int64(PublishedFitStunPerGiB)
)

// StunPoint is one figure of VMware's published 6.7 U1 table: the stun of
// a vGPU VM with UsedGiB of framebuffer in use.
type StunPoint struct {
	UsedGiB int
	Stun    time.Duration
}

// PublishedStun returns VMware's 6.7 U1 table, used framebuffer in GiB ->
// stun, smallest first: a new slice on every call.
func PublishedStun() []StunPoint {
	return []StunPoint{
		{1, 9000 * time.Millisecond}, {2, 16500 * time.Millisecond}, {4, 31400 * time.Millisecond},
		{8, 61300 * time.Millisecond}, {10, 76300 * time.Millisecond}, {12, 91200 * time.Millisecond},
	}
}

// VSphere67U1StunLimit is the vMotion stun-time timeout of vSphere 6.7 U1,
// 100 s: the documentation warns that a vGPU whose framebuffer in use would
// take longer "might exceed the 100 second timeout ... resulting in the
// migration process failing", and "if the migration fails, the VM remains
// on the source host". As Config.StunLimit it refuses a migration whose
// estimate exceeds it before anything is paused, and fails one whose
// expected stun at switchover does. The up-front refusal is this package's
// modelling choice, as vSphere 8.0 U2's per-VM stun-time limit does it:
// 6.7 U1 started such a migration and failed at the timeout.
const VSphere67U1StunLimit = 100 * time.Second

// StunCosts are the fixed parts of a stun, and the path vGPU memory takes
// when it is copied during the stun.
type StunCosts struct {
	// Quiesce stops the VM's vCPUs and drains its GPU work.
	Quiesce time.Duration
	// DeviceCheckpoint is the fixed cost of saving and restoring one
	// vGPU's device checkpoint, beyond moving its bytes.
	DeviceCheckpoint time.Duration
	// Resume starts the VM at the destination, including the
	// acknowledgement back to the source.
	Resume time.Duration
	// CheckpointPathBytesPerSec is the rate of the device checkpoint path
	// that framebuffer pages copied during the stun pass through (Legacy
	// mode); 0 means the GPU's PCIe DMA rate.
	CheckpointPathBytesPerSec int64
}

// Legacy67U1Costs returns the stun costs fitted to the published table, the
// default of Legacy mode. Quiesce and resume are 100 ms each, an
// assumption; the remaining 1.33 s of the fit's fixed 1.53 s is attributed
// to the device checkpoint's fixed cost, since the table cannot separate
// them.
func Legacy67U1Costs() StunCosts {
	return StunCosts{
		Quiesce:                   100 * time.Millisecond,
		DeviceCheckpoint:          1330 * time.Millisecond,
		Resume:                    100 * time.Millisecond,
		CheckpointPathBytesPerSec: LegacyCheckpointPathBytesPerSec,
	}
}

// PreCopyCosts returns the assumptions of PreCopy mode, its default: the
// improvement the GTC 2019 talk "vMotion for NVIDIA GRID vGPU Virtual
// Machines: Case Study of vMotion Using MLaaS" (Sivaraman, Skarlatos, Vu,
// Kurkure) names as future work ("pre-copy vGPU memory data to reduce stun
// time to meet or exceed vMotion's standard of 1 second"). With the
// framebuffer pre-copied like guest RAM, the device checkpoint carries only
// device state (registers, channels, contexts, scheduler state), and its
// fixed cost falls to 100 ms. Quiesce and resume stay 100 ms; device state
// moves at the GPU's PCIe DMA rate. All three, 300 ms of the stun in all,
// are assumptions: no measurement of such a release is public.
func PreCopyCosts() StunCosts {
	return StunCosts{
		Quiesce:          100 * time.Millisecond,
		DeviceCheckpoint: 100 * time.Millisecond,
		Resume:           100 * time.Millisecond,
	}
}
