package migrate

import (
	"math/bits"
	"slices"
	"time"
)

// network divides the goodput of the Sim's links among the flows crossing
// them, max-min fairly by progressive filling: every flow's rate rises
// together until a link is full or a flow reaches its cap; those flows
// keep their rate and the rest rise on. A flow that crosses several links
// (the source's NIC, a switch, the destination's NIC) is held back by the
// fullest. Rates are whole bytes per second and bytes moved are carried in
// byte-nanoseconds, so the arithmetic is exact and the same on every
// machine; on a single link it is water-filling, a flow at a time.
type network struct {
	flows []*flow // in the order they joined
	order []*flow // scratch for allocate
	links []*share
}

// share is one link: its goodput and the flows crossing it.
type share struct {
	capacity int64 // bytes/s
	flows    []*flow
	left     int64 // allocate's scratch: capacity not yet given
	rising   int   // allocate's scratch: flows on it whose rate is not set
}

// flow is one stream and the links it crosses.
type flow struct {
	id        int
	path      []*share
	remaining int64  // bytes still to send in the current transfer
	capBps    int64  // the most it can use, bytes/s; 0 means no limit
	rate      int64  // bytes/s, set by network.allocate
	carry     uint64 // byte-nanoseconds not yet making up a byte
	sent      int64  // bytes moved in total
	busy      bool   // a transfer is under way; cleared by the Sim when it ends
	set       bool   // allocate's scratch: rate set
}

// start begins a transfer of n bytes at no more than capBps (0: no cap).
func (nw *network) start(f *flow, n, capBps int64) {
	f.remaining, f.capBps, f.carry, f.busy = n, capBps, 0, n > 0
	nw.allocate()
}

// extend adds n bytes to f's transfer, ahead of what it has left (a
// demand fetch in post-copy), or starts one of n bytes if f is idle.
func (nw *network) extend(f *flow, n int64) {
	if !f.busy {
		nw.start(f, n, 0)
		return
	}
	f.remaining += n
	nw.allocate()
}

// add puts f, its path set, on the network.
func (nw *network) add(f *flow) {
	nw.flows = append(nw.flows, f)
	for _, l := range f.path {
		l.flows = append(l.flows, f)
		if !slices.Contains(nw.links, l) {
			nw.links = append(nw.links, l)
		}
	}
	nw.allocate()
}

// remove takes f off the network.
func (nw *network) remove(f *flow) {
	nw.flows = slices.DeleteFunc(nw.flows, func(x *flow) bool { return x == f })
	for _, l := range f.path {
		l.flows = slices.DeleteFunc(l.flows, func(x *flow) bool { return x == f })
	}
	nw.links = slices.DeleteFunc(nw.links, func(l *share) bool { return len(l.flows) == 0 })
	nw.allocate()
}

// allocate sets every flow's rate. The flows with something remaining are
// taken in increasing order of their cap (uncapped last, ties by id). At
// each step the lowest level is found, the least of every link's equal
// split of what it has left among its flows still rising; if the first
// flow's cap is no more than that, it gets its cap, else every rising flow
// of that link is set, in order, each to the smaller of its cap and the
// equal split of what is left of every link it crosses. On a single link
// that is the water-filling of a flow at a time; idle flows take nothing.
func (nw *network) allocate() {
	nw.order = nw.order[:0]
	for _, f := range nw.flows {
		f.rate, f.set = 0, f.remaining <= 0
		if !f.set {
			nw.order = append(nw.order, f)
		}
	}
	slices.SortFunc(nw.order, func(a, b *flow) int {
		ca, cb := capOrMax(a.capBps), capOrMax(b.capBps)
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		return a.id - b.id
	})
	for _, l := range nw.links {
		l.left, l.rising = l.capacity, 0
	}
	for _, f := range nw.order {
		for _, l := range f.path {
			l.rising++
		}
	}
	for next := 0; next < len(nw.order); {
		var low *share
		for _, l := range nw.links {
			if l.rising > 0 && (low == nil || l.left/int64(l.rising) < low.left/int64(low.rising)) {
				low = l
			}
		}
		first := nw.order[next]
		if low == nil || capOrMax(first.capBps) <= low.left/int64(low.rising) {
			nw.fix(first)
		} else {
			for _, f := range nw.order[next:] {
				if !f.set && slices.Contains(f.path, low) {
					nw.fix(f)
				}
			}
		}
		for next < len(nw.order) && nw.order[next].set {
			next++
		}
	}
}

// fix sets f's rate to the smaller of its cap and the equal split of what
// every link it crosses has left, and takes it from them.
func (nw *network) fix(f *flow) {
	r := capOrMax(f.capBps)
	for _, l := range f.path {
		r = min(r, l.left/int64(l.rising))
	}
	if len(f.path) == 0 {
		r = 0
	}
	f.rate, f.set = r, true
	for _, l := range f.path {
		l.left -= r
		l.rising--
	}
}

func capOrMax(c int64) int64 {
	if c <= 0 {
		return 1<<63 - 1
	}
	return c
}

// total returns the sum of the rates of the flows on the link.
func (s *share) total() int64 {
	var t int64
	for _, f := range s.flows {
		t += f.rate
	}
	return t
}

// untilNext returns the time until the first flow finishes its transfer at
// the current rates, and false if no flow is moving.
func (nw *network) untilNext() (time.Duration, bool) {
	best, ok := time.Duration(0), false
	for _, f := range nw.flows {
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
func (nw *network) advance(d time.Duration) {
	for _, f := range nw.flows {
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
