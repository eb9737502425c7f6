package migrate

import (
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
)

var reasonNames = [...]string{Converged: "converged", RoundLimit: "round limit", DirtyRateTooHigh: "dirty rate at or above link rate", ThrottledToLimit: "throttle at maximum"}

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

// rateOf is n bytes over d as bytes/s, rounded down.
func rateOf(n int64, d time.Duration) int64 {
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
