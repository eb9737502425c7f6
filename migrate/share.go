package migrate

import (
	"math/bits"
	"slices"
	"time"
)

// share divides a link's goodput among the flows on it, max-min fairly: a
// flow that wants less than an equal share gets what it wants, and the rest
// is split equally among the others. Rates are whole bytes per second and
// bytes moved are carried in byte-nanoseconds, so the arithmetic is exact
// and the same on every machine.
type share struct {
	capacity int64 // bytes/s
	flows    []*flow
	order    []*flow // scratch for water-filling
}

// flow is one stream on a link.
type flow struct {
	id        int
	remaining int64  // bytes still to send in the current transfer
	capBps    int64  // the most it can use, bytes/s; 0 means no limit
	rate      int64  // bytes/s, set by share.allocate
	carry     uint64 // byte-nanoseconds not yet making up a byte
	sent      int64  // bytes moved in total
	busy      bool   // a transfer is under way; cleared by the Sim when it ends
}

// start begins a transfer of n bytes at no more than capBps (0: no cap).
func (s *share) start(f *flow, n, capBps int64) {
	f.remaining, f.capBps, f.carry, f.busy = n, capBps, 0, n > 0
	s.allocate()
}

func (s *share) add(f *flow) {
	s.flows = append(s.flows, f)
	s.allocate()
}

func (s *share) remove(f *flow) {
	s.flows = slices.DeleteFunc(s.flows, func(x *flow) bool { return x == f })
	s.allocate()
}

// allocate sets every flow's rate by water-filling: flows in increasing
// order of their cap (uncapped last, ties by id), each taking the smaller of
// its cap and an equal split of what is left. Idle flows (nothing
// remaining) take nothing.
func (s *share) allocate() {
	s.order = s.order[:0]
	for _, f := range s.flows {
		f.rate = 0
		if f.remaining > 0 {
			s.order = append(s.order, f)
		}
	}
	slices.SortFunc(s.order, func(a, b *flow) int {
		ca, cb := capOrMax(a.capBps), capOrMax(b.capBps)
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		return a.id - b.id
	})
	left := s.capacity
	for i, f := range s.order {
		fair := left / int64(len(s.order)-i)
		f.rate = min(fair, capOrMax(f.capBps))
		left -= f.rate
	}
}

func capOrMax(c int64) int64 {
	if c <= 0 {
		return 1<<63 - 1
	}
	return c
}

// total returns the sum of the flows' rates.
func (s *share) total() int64 {
	var t int64
	for _, f := range s.flows {
		t += f.rate
	}
	return t
}

// untilNext returns the time until the first flow finishes its transfer at
// the current rates, and false if no flow is moving.
func (s *share) untilNext() (time.Duration, bool) {
	best, ok := time.Duration(0), false
	for _, f := range s.flows {
		if f.rate == 0 || f.remaining == 0 {
			continue
		}
		if d := f.timeToFinish(); !ok || d < best {
			best, ok = d, true
		}
	}
	return best, ok
}

// advance moves every flow forward by d at its current rate. A flow never
// sends more than it has remaining.
func (s *share) advance(d time.Duration) {
	for _, f := range s.flows {
		f.advance(d)
	}
}

// timeToFinish is the least t with carry + rate×t >= remaining×1e9.
func (f *flow) timeToFinish() time.Duration {
	hi, lo := bits.Mul64(uint64(f.remaining), uint64(time.Second))
	lo, b := bits.Sub64(lo, f.carry, 0)
	hi -= b
	if hi >= uint64(f.rate) {
		return 1<<63 - 1 // beyond any simulated horizon
	}
	q, r := bits.Div64(hi, lo, uint64(f.rate))
	if r != 0 {
		q++
	}
	if q > 1<<63-1 {
		return 1<<63 - 1
	}
	return time.Duration(q)
}

func (f *flow) advance(d time.Duration) {
	if f.rate == 0 || f.remaining == 0 || d <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(f.rate), uint64(d))
	lo, c := bits.Add64(lo, f.carry, 0)
	hi += c
	var n, rem uint64
	if hi < uint64(time.Second) {
		n, rem = bits.Div64(hi, lo, uint64(time.Second))
	} else {
		n = 1<<64 - 1 // more than any transfer
	}
	if n >= uint64(f.remaining) {
		f.sent += f.remaining
		f.remaining, f.carry = 0, 0
		return
	}
	f.remaining -= int64(n)
	f.sent += int64(n)
	f.carry = rem
}
