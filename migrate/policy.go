package migrate

import (
	"fmt"
	"time"
)

// Policy is what a migration decides by, the same in the simulated and the
// live mode: how vGPU memory moves, the stun it aims under and the one it
// will not exceed, how many pre-copy rounds it tries, and what it does when
// pre-copy does not converge. Config and SendConfig embed it. The zero value
// means every default: PreCopy, a 1 s target, no limit, DefaultMaxRounds
// rounds and the Throttle policy with DefaultThrottle's steps.
type Policy struct {
	Mode Mode
	// StunTarget is the stun pre-copy aims under.
	StunTarget time.Duration
	// StunLimit, if set, refuses a migration whose estimated stun exceeds
	// it, before anything is paused (where the driver knows the link's
	// rate before the first round: the simulator), and fails one whose
	// expected stun at switchover exceeds it, leaving the VM on the source
	// (vSphere 8.0 U2's per-VM limit; VSphere67U1StunLimit is 6.7 U1's
	// fixed timeout).
	StunLimit time.Duration
	// MaxRounds bounds pre-copy rounds, round 0 included.
	MaxRounds int
	// OnNonConvergence is the policy when pre-copy does not converge.
	OnNonConvergence NonConvergence
	// Throttle shapes the Throttle policy; zero means DefaultThrottle.
	Throttle ThrottleSteps
}

// WithDefaults returns p with its defaults filled in, or an error wrapping
// ErrConfig if it is out of range. NewCore and the drivers call it; a
// caller may, to see the policy a migration will run with.
func (p Policy) WithDefaults() (Policy, error) {
	if p.Mode == 0 {
		p.Mode = PreCopy
	}
	if p.StunTarget == 0 {
		p.StunTarget = DefaultStunTarget
	}
	if p.MaxRounds == 0 {
		p.MaxRounds = DefaultMaxRounds
	}
	if p.OnNonConvergence == 0 {
		p.OnNonConvergence = Throttle
	}
	if p.Throttle == (ThrottleSteps{}) {
		p.Throttle = DefaultThrottle()
	}
	switch {
	case p.Mode < PreCopy || p.Mode > PostCopy:
		return p, fmt.Errorf("%w: unknown mode %v", ErrConfig, p.Mode)
	case p.OnNonConvergence < Throttle || p.OnNonConvergence > SwitchToPostCopy:
		return p, fmt.Errorf("%w: unknown policy %v", ErrConfig, p.OnNonConvergence)
	case p.OnNonConvergence == SwitchToPostCopy && p.Mode != PreCopy:
		// Legacy mode moves the framebuffer in the stun, through the
		// device checkpoint path, which cannot be left for later.
		return p, fmt.Errorf("%w: %v only in %v mode", ErrConfig, p.OnNonConvergence, PreCopy)
	case p.StunTarget < 0 || p.StunLimit < 0:
		return p, fmt.Errorf("%w: negative stun target or limit", ErrConfig)
	case p.MaxRounds < 1 || p.MaxRounds > 1000:
		return p, fmt.Errorf("%w: max rounds %d outside [1, 1000]", ErrConfig, p.MaxRounds)
	case !(p.Throttle.Start > 0 && p.Throttle.Step >= 0 && p.Throttle.Max >= p.Throttle.Start && p.Throttle.Max < 1):
		return p, fmt.Errorf("%w: throttle steps %+v", ErrConfig, p.Throttle)
	}
	return p, nil
}

// UsesPostCopy reports whether a migration under p may end in post-copy:
// PostCopy mode, or pre-copy that switches to it when it does not
// converge.
func (p Policy) UsesPostCopy() bool {
	return p.Mode == PostCopy || p.OnNonConvergence == SwitchToPostCopy
}

// tracked returns how many of a VM's regions, guest RAM first, pre-copy
// follows out of regions: guest RAM and, in PreCopy mode, every
// framebuffer.
func (p Policy) tracked(regions int) int {
	if p.Mode == Legacy {
		return min(regions, 1)
	}
	return regions
}
