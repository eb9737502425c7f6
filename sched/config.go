package sched

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Policy is how the GPU's time is divided among tenants.
type Policy uint8

// The three policies NVIDIA's vGPU manager offers. The zero value is best
// effort, the driver's default.
const (
	// BestEffort is work-conserving: the GPU moves to the next tenant with
	// work as soon as the current one has none, and never idles while any
	// tenant has work. It guarantees no share.
	BestEffort Policy = iota
	// EqualShare divides the GPU's time equally among the tenants that are
	// powered on, whether or not they have work: time a tenant does not use
	// is not lent to others.
	EqualShare
	// FixedShare gives each tenant 1/MaxInstances of the GPU's time,
	// whatever other tenants exist or are on.
	FixedShare
)

// String returns the policy's name as the driver prints it.
func (p Policy) String() string {
	switch p {
	case BestEffort:
		return "Best Effort"
	case EqualShare:
		return "Equal Share"
	case FixedShare:
		return "Fixed Share"
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// Limits. Everything a caller or a saved state can make grow is bounded, so
// a scheduler's memory and a saved state's size are bounded too.
//
// MinSlice and MaxSlice, DefaultAveragingFactor and MaxAveragingFactor are
// NVIDIA's (NVIDIA AI Enterprise User Guide v5.0, 2024, section 7.3
// "RmPVMRL Registry Key"): the time slice field TT takes 1 to 30 ms
// (0x01-0x1E), and the averaging factor AA 1 to 60 (0x01-0x3C), 0
// meaning 33. The other limits are this package's.
const (
	MinSlice               = time.Millisecond      // shortest configurable time slice
	MaxSlice               = 30 * time.Millisecond // longest configurable time slice
	DefaultAveragingFactor = 33                    // overshoot averaging factor when none is given
	MaxAveragingFactor     = 60                    // largest averaging factor
	DefaultMaxTenants      = 32                    // Config.MaxTenants when zero
	MaxTenantsLimit        = 64                    // largest Config.MaxTenants
	MaxInstancesLimit      = 64                    // largest slot count of a tenant
	DefaultMaxQueue        = 1024                  // Config.MaxQueue when zero
	MaxQueueLimit          = 1 << 16               // largest Config.MaxQueue
	MaxJobWork             = 24 * time.Hour        // largest Job.Work
	MaxChunk               = time.Second           // largest Job.Chunk
	// MaxOvershootDebt caps a tenant's accumulated overshoot, so that a
	// tenant whose kernels overrun every slice cannot build an unbounded
	// debt (and a saved state cannot claim one).
	MaxOvershootDebt = time.Minute
	// MaxTime is the latest simulated time; Advance refuses to pass it. It
	// leaves headroom so that sums of bounded durations cannot overflow.
	MaxTime = time.Duration(1 << 62)
)

// DefaultSlice returns the time slice NVIDIA's driver uses for a profile
// with the given maximum number of instances per GPU: 2 ms (480 Hz) when at
// most 8 fit on the GPU, 1 ms (960 Hz) above that — small profiles are
// switched more often so that each of their many tenants is served sooner
// (NVIDIA AI Enterprise User Guide v5.0, 2024, section 7.3, Table 1
// "Default Time Slice Length and Scheduling Frequency by vGPU Density").
// The prose of the same guide's section 7.1 draws the line between fewer
// than eight and eight or more vGPUs; the table, which this follows, puts
// exactly eight in the 2 ms row.
func DefaultSlice(maxInstances int) time.Duration {
	if maxInstances > 8 {
		return time.Millisecond
	}
	return 2 * time.Millisecond
}

// Config configures a Scheduler. The zero value is valid: best effort, the
// profile's default slice, averaging factor 33, strict round-robin.
// New fills the defaults and checks the ranges, in one place (validate).
type Config struct {
	// Policy divides the GPU's time; the zero value is BestEffort.
	Policy Policy

	// Slice is the time slice, from MinSlice to MaxSlice. Zero gives each
	// tenant the default of its profile (DefaultSlice of its MaxInstances).
	Slice time.Duration

	// AveragingFactor (1 to MaxAveragingFactor; 0 means
	// DefaultAveragingFactor) spreads the repayment of overshoot: each slice
	// is shortened by the tenant's accumulated overshoot divided by it.
	AveragingFactor int

	// DisableStrictRoundRobin makes equal and fixed share run, among the
	// tenants whose share allows a turn, the one that has spent the least
	// time scheduled, instead of the next in round-robin order — the
	// behaviour before strict round-robin became the default. Best effort
	// always goes round-robin and ignores it.
	DisableStrictRoundRobin bool

	// MaxTenants bounds the tenants on the GPU (1 to MaxTenantsLimit; 0
	// means DefaultMaxTenants).
	MaxTenants int

	// MaxQueue bounds each tenant's queued jobs (1 to MaxQueueLimit; 0 means
	// DefaultMaxQueue).
	MaxQueue int

	// Start is the simulated time at which the scheduler starts, so that a
	// GPU created in the middle of a simulation reports times on the
	// caller's clock. It must lie in [0, MaxTime].
	Start time.Duration
}

// validate fills in defaults and checks every field; it is the only place
// that knows the defaults.
func (c *Config) validate() error {
	switch c.Policy {
	case BestEffort, EqualShare, FixedShare:
	default:
		return fmt.Errorf("%w: unknown policy %d", ErrInvalidConfig, c.Policy)
	}
	if c.Slice != 0 && (c.Slice < MinSlice || c.Slice > MaxSlice) {
		return fmt.Errorf("%w: slice %v outside [%v, %v]", ErrInvalidConfig, c.Slice, MinSlice, MaxSlice)
	}
	if c.AveragingFactor == 0 {
		c.AveragingFactor = DefaultAveragingFactor
	}
	if c.AveragingFactor < 1 || c.AveragingFactor > MaxAveragingFactor {
		return fmt.Errorf("%w: averaging factor %d outside [1, %d]", ErrInvalidConfig, c.AveragingFactor, MaxAveragingFactor)
	}
	if c.MaxTenants == 0 {
		c.MaxTenants = DefaultMaxTenants
	}
	if c.MaxTenants < 1 || c.MaxTenants > MaxTenantsLimit {
		return fmt.Errorf("%w: max tenants %d outside [1, %d]", ErrInvalidConfig, c.MaxTenants, MaxTenantsLimit)
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = DefaultMaxQueue
	}
	if c.MaxQueue < 1 || c.MaxQueue > MaxQueueLimit {
		return fmt.Errorf("%w: max queue %d outside [1, %d]", ErrInvalidConfig, c.MaxQueue, MaxQueueLimit)
	}
	if c.Start < 0 || c.Start > MaxTime {
		return fmt.Errorf("%w: start %v outside [0, %v]", ErrInvalidConfig, c.Start, MaxTime)
	}
	return nil
}

// strictRoundRobin reports whether turns go round-robin (and overshoot is
// repaid by shortening slices) rather than to the least-scheduled tenant.
func (c *Config) strictRoundRobin() bool {
	return c.Policy == BestEffort || !c.DisableStrictRoundRobin
}

// String describes the configuration as a driver's log line would: policy,
// scheduling order and time slice in milliseconds.
func (c Config) String() string {
	order := "least-scheduled first"
	if c.strictRoundRobin() {
		f := c.AveragingFactor
		if f == 0 {
			f = DefaultAveragingFactor
		}
		order = "strict round-robin, averaging factor " + strconv.Itoa(f)
	}
	slice := "profile default (2 ms up to 8 vGPUs per GPU, 1 ms above)"
	if c.Slice != 0 {
		slice = formatMS(c.Slice)
	}
	return "vGPU scheduler: " + c.Policy.String() + ", " + order + ", time slice " + slice
}

// formatMS prints a duration in milliseconds with at most three decimals:
// "2 ms", "1.042 ms".
func formatMS(d time.Duration) string {
	s := strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + " ms"
}
