package migrate

import (
	"fmt"
	"math/bits"
	"time"
)

// Reason says why pre-copy ended.
type Reason uint8

const (
	// Converged: the expected stun fell under the target.
	Converged Reason = iota + 1
	// RoundLimit: the round limit was reached and the policy switched
	// over anyway.
	RoundLimit
	// DirtyRateTooHigh: the dirty rate reached the link's rate and the
	// policy switched over anyway.
	DirtyRateTooHigh
	// ThrottledToLimit: throttling reached its maximum without
	// convergence and the migration switched over.
	ThrottledToLimit
	// NoPreCopy: PostCopy mode, which switches over before any round.
	NoPreCopy
)

var reasonNames = [...]string{Converged: "converged", RoundLimit: "round limit", DirtyRateTooHigh: "dirty rate at or above link rate",
	ThrottledToLimit: "throttle at maximum", NoPreCopy: "post-copy mode"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return "none"
}

// MarshalText writes the reason's name.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// scaleBytes returns n × num / den, rounded up, in 128-bit arithmetic; den 0
// gives n.
func scaleBytes(n, num, den int64) int64 {
	if den <= 0 || n <= 0 {
		return max(n, 0)
	}
	hi, lo := bits.Mul64(uint64(n), uint64(num))
	if hi >= uint64(den) {
		return 1<<63 - 1
	}
	q, r := bits.Div64(hi, lo, uint64(den))
	if r != 0 {
		q++
	}
	return int64(min(q, 1<<63-1))
}

// transferTime is the time n bytes take at rate bytes/s, rounded up.
func transferTime(n, bytesPerSec int64) time.Duration {
	if n <= 0 {
		return 0
	}
	if bytesPerSec <= 0 {
		return 1<<63 - 1
	}
	return time.Duration(scaleBytes(n, int64(time.Second), bytesPerSec))
}

// BytesPerSec is n bytes over d as bytes/s, rounded down; zero for a
// duration that is not positive. Every rate a report shows is taken by it.
func BytesPerSec(n int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(max(n, 0)), uint64(time.Second))
	if hi >= uint64(d) {
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, uint64(d))
	return int64(min(q, 1<<63-1))
}

// judgeRound is the switchover rule, the same in simulated and live
// migrations: after round (0-based), with judged the part of the expected
// stun pre-copy can shrink, it says whether pre-copy stops and why. It
// stops when judged is under target; it gives up converging when the round
// limit is reached, when the dirty rate in wire bytes reaches the rate the
// round was sent at, or when a round stalled.
func judgeRound(judged, target time.Duration, round, maxRounds int, dirtyWireRate, bandwidth int64, stalled bool) (Reason, bool) {
	switch {
	case judged <= target:
		return Converged, true
	case round+1 >= maxRounds:
		return RoundLimit, true
	case dirtyWireRate >= bandwidth, stalled:
		return DirtyRateTooHigh, true
	}
	return 0, false
}

// stalled reports a last round that did not shrink the expected stun by a
// tenth. A workload whose working set is smaller than what a round sends
// re-dirties all of it every round: its measured dirty rate is capped by
// the working set and can stay just under the link's, while pre-copy makes
// no progress.
func stalled(rounds []Round) bool {
	n := len(rounds)
	if n < 2 {
		return false
	}
	prev, cur := rounds[n-2].ExpectedStun, rounds[n-1].ExpectedStun
	return cur > prev-prev/10
}

// onNonConvergence applies policy to pre-copy that did not converge for
// why, with the workload cut by throttle so far. It returns an error
// wrapping ErrNotConverged (Abort), a reason to switch over now, or the
// next, larger cut to pre-copy another round with (Throttle).
func onNonConvergence(policy NonConvergence, steps ThrottleSteps, why Reason, throttle float64) (next float64, switchWhy Reason, err error) {
	switch {
	case policy == Abort:
		return 0, 0, fmt.Errorf("%w: %v", ErrNotConverged, why)
	case policy == SwitchAnyway, policy == SwitchToPostCopy, why == RoundLimit:
		return 0, why, nil
	case throttle >= steps.Max:
		return 0, ThrottledToLimit, nil
	case throttle > 0:
		return min(throttle+steps.Step, steps.Max), 0, nil
	}
	return steps.Start, 0, nil
}
