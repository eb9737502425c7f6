package migrate

import "fmt"

// Phase is the state of a Migration. A migration moves through them in
// order, skipping none but PhasePreCopy (Legacy mode still pre-copies
// guest RAM; a VM without dirty memory may switch over after round 0;
// PostCopy mode sends no round) and PhasePostCopy (entered only when the
// migration switched over into post-copy), and ends in PhaseDone or
// PhaseFailed.
type Phase uint8

const (
	// PhaseSetup checks compatibility and reserves the destination.
	PhaseSetup Phase = iota + 1
	// PhasePreCopy sends memory round after round while the VM runs.
	PhasePreCopy
	// PhaseSwitchover decides to stop pre-copying.
	PhaseSwitchover
	// PhaseQuiesce stops the VM's vCPUs and GPU work at the source.
	PhaseQuiesce
	// PhaseDeviceSave saves each vGPU's state over PCIe.
	PhaseDeviceSave
	// PhaseFinalRAM sends the guest RAM pages still dirty.
	PhaseFinalRAM
	// PhaseFinalFramebuffer sends the framebuffer pages still dirty; in
	// Legacy mode every used page, at the pace of the device checkpoint
	// path, as vSphere 6.7 U1 did.
	PhaseFinalFramebuffer
	// PhaseDeviceState sends the device checkpoints.
	PhaseDeviceState
	// PhaseRestore loads the device state into the destination's vGPUs over
	// PCIe.
	PhaseRestore
	// PhaseResume starts the VM at the destination and waits for its
	// acknowledgement; until then the source owns the VM.
	PhaseResume
	// PhasePostCopy: the VM runs at the destination while the pages it
	// lacks are pushed from the source and pulled when it touches them.
	// Neither end alone holds the whole VM: see Core.LinkLost and
	// ErrVMLost.
	PhasePostCopy
	// PhaseRelease frees and scrubs the VM's resources at the source.
	PhaseRelease
	// PhaseDone: the VM runs at the destination.
	PhaseDone
	// PhaseFailed: the VM runs (or stays paused) at the source, unchanged, and
	// the destination holds nothing; after a failure in post-copy, see
	// ErrVMLost.
	PhaseFailed

	numPhases = iota
)

// Phases returns every phase in order, PhaseSetup to PhaseFailed.
func Phases() []Phase {
	out := make([]Phase, 0, numPhases)
	for p := PhaseSetup; p <= PhaseFailed; p++ {
		out = append(out, p)
	}
	return out
}

var phaseNames = [...]string{
	PhaseSetup: "setup", PhasePreCopy: "pre-copy", PhaseSwitchover: "switchover", PhaseQuiesce: "quiesce",
	PhaseDeviceSave: "device save", PhaseFinalRAM: "final RAM", PhaseFinalFramebuffer: "final framebuffer",
	PhaseDeviceState: "device state", PhaseRestore: "restore", PhaseResume: "resume", PhasePostCopy: "post-copy", PhaseRelease: "release",
	PhaseDone: "done", PhaseFailed: "failed",
}

func (p Phase) String() string {
	if int(p) < len(phaseNames) && phaseNames[p] != "" {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// ParsePhase returns the phase whose String is s, spaces and case as
// String writes them ("pre-copy", "final RAM"). Any other name is an
// error wrapping ErrConfig.
func ParsePhase(s string) (Phase, error) { return parseName("phase", s, Phases()) }

// Stunned reports whether the VM is stopped during phase p: from PhaseQuiesce
// to PhaseResume.
func (p Phase) Stunned() bool { return p >= PhaseQuiesce && p <= PhaseResume }

// MarshalText writes the phase's name, so reports marshal to readable JSON.
func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }
