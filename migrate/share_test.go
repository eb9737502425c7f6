package migrate

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestShareIsMaxMinFair checks the water-filling against the definition:
// no rate exceeds its cap, the rates never sum past the capacity, and a
// flow below its cap gets at least as much as every other flow (so no
// flow could gain without taking from one that has no more).
func TestShareIsMaxMinFair(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &share{capacity: rapid.Int64Range(1, 20e9).Draw(t, "capacity")}
		n := rapid.IntRange(1, 12).Draw(t, "flows")
		for i := range n {
			s.add(&flow{
				id:        i,
				remaining: rapid.Int64Range(0, 1e9).Draw(t, "remaining"),
				capBps:    rapid.Int64Range(0, 5e9).Draw(t, "cap"),
			})
		}
		if s.total() > s.capacity {
			t.Fatalf("rates sum to %d > capacity %d", s.total(), s.capacity)
		}
		active, capped := 0, 0
		for _, f := range s.flows {
			if f.remaining == 0 {
				if f.rate != 0 {
					t.Fatalf("idle flow %d has rate %d", f.id, f.rate)
				}
				continue
			}
			active++
			if f.capBps > 0 && f.rate > f.capBps {
				t.Fatalf("flow %d rate %d above cap %d", f.id, f.rate, f.capBps)
			}
			if f.capBps > 0 && f.rate == f.capBps {
				capped++
				continue
			}
			for _, g := range s.flows {
				// Integer division leaves at most one byte/s a flow
				// unassigned.
				if g.rate > f.rate+int64(len(s.flows)) {
					t.Fatalf("uncapped flow %d has %d while flow %d has %d", f.id, f.rate, g.id, g.rate)
				}
			}
		}
		if active > capped && s.total() < s.capacity-int64(active) {
			t.Fatalf("capacity %d left unused (total %d) with an unsatisfied flow", s.capacity, s.total())
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
