package migrate

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// waterFill is the reference for a single link: flows in increasing order
// of their cap (uncapped last, ties by id), each taking the smaller of its
// cap and an equal split of what is left; idle flows take nothing.
func waterFill(capacity int64, flows []*flow) map[int]int64 {
	order := slices.Clone(flows)
	order = slices.DeleteFunc(order, func(f *flow) bool { return f.remaining <= 0 })
	slices.SortStableFunc(order, func(a, b *flow) int {
		if c := cmp.Compare(capOrMax(a.capBps), capOrMax(b.capBps)); c != 0 {
			return c
		}
		return a.id - b.id
	})
	rates := map[int]int64{}
	left := capacity
	for i, f := range order {
		r := min(left/int64(len(order)-i), capOrMax(f.capBps))
		rates[f.id] = r
		left -= r
	}
	return rates
}

// drawFlows draws n flows over links, each crossing a non-empty run of
// them in a drawn order.
func drawFlows(t *rapid.T, links []*share, n int) []*flow {
	var flows []*flow
	for i := range n {
		perm := rapid.Permutation(links).Draw(t, "path")
		f := &flow{id: i, path: perm[:rapid.IntRange(1, len(links)).Draw(t, "hops")],
			remaining: rapid.Int64Range(0, 1e9).Draw(t, "remaining"),
			capBps:    rapid.Int64Range(0, 5e9).Draw(t, "cap")}
		flows = append(flows, f)
	}
	return flows
}

// TestNetworkOneLinkIsWaterFilling: on a single link the progressive
// filling gives every flow exactly what water-filling does, so adding
// paths changed no figure of a migration over one link.
func TestNetworkOneLinkIsWaterFilling(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := &share{capacity: rapid.Int64Range(1, 20e9).Draw(t, "capacity")}
		var nw network
		flows := drawFlows(t, []*share{l}, rapid.IntRange(1, 12).Draw(t, "flows"))
		for _, f := range flows {
			nw.add(f)
		}
		want := waterFill(l.capacity, flows)
		for _, f := range flows {
			if f.rate != want[f.id] {
				t.Fatalf("flow %d (cap %d, remaining %d): rate %d, water-filling gives %d", f.id, f.capBps, f.remaining, f.rate, want[f.id])
			}
		}
	})
}

// TestNetworkIsMaxMinFair checks the progressive filling against the
// definition of max-min fairness, to within the bytes per second integer
// division leaves: no rate exceeds its cap, no link carries more than its
// capacity, and every flow below its cap crosses a link that is full and
// on which no flow gets more than it (so no flow could gain without taking
// from one that has no more).
func TestNetworkIsMaxMinFair(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var links []*share
		for range rapid.IntRange(1, 4).Draw(t, "links") {
			links = append(links, &share{capacity: rapid.Int64Range(1, 20e9).Draw(t, "capacity")})
		}
		var nw network
		flows := drawFlows(t, links, rapid.IntRange(1, 10).Draw(t, "flows"))
		for _, f := range flows {
			nw.add(f)
		}
		slack := int64(len(flows))
		for _, l := range links {
			if l.total() > l.capacity {
				t.Fatalf("link of %d carries %d", l.capacity, l.total())
			}
		}
		for _, f := range flows {
			switch {
			case f.remaining == 0 && f.rate != 0:
				t.Fatalf("idle flow %d has rate %d", f.id, f.rate)
			case f.remaining == 0 || f.capBps > 0 && f.rate == f.capBps:
				continue
			case f.capBps > 0 && f.rate > f.capBps:
				t.Fatalf("flow %d rate %d above cap %d", f.id, f.rate, f.capBps)
			}
			bottleneck := slices.ContainsFunc(f.path, func(l *share) bool {
				return l.total() >= l.capacity-slack && !slices.ContainsFunc(l.flows, func(g *flow) bool { return g.rate > f.rate+slack })
			})
			if !bottleneck {
				t.Fatalf("flow %d at %d (cap %d) has no full link on which it gets the most", f.id, f.rate, f.capBps)
			}
		}
		// Taking every flow off leaves the links as they were.
		for _, f := range flows {
			nw.remove(f)
		}
		if len(nw.flows) != 0 || len(nw.links) != 0 || slices.ContainsFunc(links, func(l *share) bool { return len(l.flows) != 0 }) {
			t.Fatal("flows left on the network")
		}
	})
}

// TestFlowStepsAddUp checks that a transfer advanced in many steps moves
// the same bytes as one step, and finishes exactly at timeToFinish.
func TestFlowStepsAddUp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Int64Range(1000, 12.5e9).Draw(t, "rate")
		total := rapid.Int64Range(1, 1e10).Draw(t, "bytes")
		a := &flow{remaining: total, rate: rate}
		b := &flow{remaining: total, rate: rate}
		finish := a.timeToFinish()
		steps := rapid.SliceOfN(rapid.Int64Range(0, int64(finish)), 1, 20).Draw(t, "steps")
		var elapsed time.Duration
		for _, st := range steps {
			d := min(time.Duration(st), finish-elapsed)
			a.advance(d)
			elapsed += d
		}
		b.advance(elapsed)
		if a.sent != b.sent || a.remaining != b.remaining {
			t.Fatalf("steps sent %d, one step %d", a.sent, b.sent)
		}
		a.advance(finish - elapsed)
		if a.remaining != 0 || a.sent != total {
			t.Fatalf("at timeToFinish %v: %d bytes remain", finish, a.remaining)
		}
		if finish > 0 {
			c := &flow{remaining: total, rate: rate}
			c.advance(finish - 1)
			if c.remaining == 0 {
				t.Fatalf("finished before timeToFinish %v", finish)
			}
		}
	})
}

func TestLinkPresets(t *testing.T) {
	for _, tc := range []struct {
		name         string
		goodputBytes int64
	}{
		{"10g", 1_176_853_055},   // 10e9/8 × 1448/1538
		{"100g", 11_768_530_559}, // same efficiency, ten times the rate
		{"vmxnet3", 1_000_000_000},
		{"roce", 11_875_000_000},
	} {
		l, err := LinkByName(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.GoodputBytesPerSec(); got != tc.goodputBytes {
			t.Errorf("%s goodput %d B/s, want %d", tc.name, got, tc.goodputBytes)
		}
		if err := l.validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if _, err := LinkByName("10GbE"); err != nil {
		t.Errorf("10GbE: %v", err)
	}
	if _, err := LinkByName("carrier pigeon"); err == nil {
		t.Error("unknown link accepted")
	}
}
