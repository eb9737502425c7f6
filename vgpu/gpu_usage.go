package vgpu

import (
	"fmt"
	"time"
)

// DefaultUsageResolution and DefaultUsageRetention are the resolution and
// the span of a GPU's utilization history when HostConfig leaves them zero:
// a second, for an hour.
const (
	DefaultUsageResolution = time.Second
	DefaultUsageRetention  = time.Hour
	// maxUsageBuckets bounds a history's buckets, and so its memory: 8 MB
	// a GPU.
	maxUsageBuckets = 1 << 20
)

// usageHistory is the GPU time a GPU's scheduler granted in each bucket of
// res of the host's clock (bucket k covers [k*res, (k+1)*res)), the last
// len(busy) buckets, as a ring: oldest is the index of the oldest bucket.
// The host stops at every bucket boundary, so every scheduler interval
// lies within one bucket and the history is exact.
type usageHistory struct {
	res    time.Duration
	busy   []time.Duration
	first  int64 // bucket number of busy[oldest]
	oldest int
	n      int // buckets in use
}

// newUsageHistory keeps a bucket more than retention holds, so that the
// history reaches retention back from any instant within the newest one.
func newUsageHistory(res, retention time.Duration) usageHistory {
	return usageHistory{res: res, busy: make([]time.Duration, int(retention/res)+1)}
}

// nextBoundary returns the first bucket boundary after t.
func (u *usageHistory) nextBoundary(t time.Duration) time.Duration {
	return (t/u.res + 1) * u.res
}

// add counts busy granted in [from, to), which lies within one bucket.
func (u *usageHistory) add(from, to, busy time.Duration) {
	if to <= from {
		return
	}
	k := int64(from / u.res)
	if u.n == 0 {
		u.first, u.n = k, 1
	}
	for last := u.first + int64(u.n) - 1; last < k; last++ {
		// A new bucket: the oldest goes once the ring is full.
		if u.n == len(u.busy) {
			u.busy[u.oldest] = 0
			u.oldest = (u.oldest + 1) % len(u.busy)
			u.first++
		} else {
			u.n++
		}
		u.busy[(u.oldest+u.n-1)%len(u.busy)] = 0
	}
	u.busy[(u.oldest+int(k-u.first))%len(u.busy)] += busy
}

// Utilization returns the fraction of [from, to) the GPU was busy running
// vGPU work, from its history: exact when from and to fall on multiples of
// the host's UsageResolution (or are its start or now), and prorated
// within a bucket otherwise. The interval must lie within the retained
// history (HostConfig.UsageRetention back from now) and not in the
// future; an error wrapping ErrInvalidDuration says otherwise.
func (g *GPU) Utilization(from, to time.Duration) (float64, error) {
	u := &g.usage
	start, now := g.host.cfg.Start, g.host.now
	oldest := max(start, time.Duration(u.first)*u.res)
	if u.n == 0 {
		oldest = start
	}
	if from < oldest || to > now || from >= to {
		return 0, fmt.Errorf("%w: utilization over [%v, %v): the GPU's history covers [%v, %v)", ErrInvalidDuration, from, to, oldest, now)
	}
	var busy float64
	for k := int64(from / u.res); k < u.first+int64(u.n) && time.Duration(k)*u.res < to; k++ {
		if k < u.first {
			continue
		}
		// The part of bucket k that has passed, and of it the part the
		// interval covers.
		lo, hi := max(time.Duration(k)*u.res, start), min(time.Duration(k+1)*u.res, now)
		a, b := max(lo, from), min(hi, to)
		if b <= a || hi <= lo {
			continue
		}
		busy += float64(u.busy[(u.oldest+int(k-u.first))%len(u.busy)]) * float64(b-a) / float64(hi-lo)
	}
	return busy / float64(to-from), nil
}
