package sched

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestViewBusy: a View's Busy is the sum of every Advance's Busy, removed
// tenants' time included, and its Tenants are Tenant's answers in ID
// order.
func TestViewBusy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, err := New(drawConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		v := s.View()
		var ids []TenantID
		var tag uint64
		var rep Report
		var sum time.Duration
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 5).Draw(t, "op"); {
			case op == 0 || len(ids) == 0:
				id, err := s.AddTenant(drawSlots(t, "slots"))
				if err == nil {
					_ = s.PowerOn(id)
					ids = append(ids, id)
				}
			case op <= 2:
				tag++
				_ = s.Submit(rapid.SampledFrom(ids).Draw(t, "tenant"), drawJob(t, tag, true))
			case op == 3:
				i := rapid.IntRange(0, len(ids)-1).Draw(t, "removed")
				_, _ = s.PowerOff(ids[i])
				if s.RemoveTenant(ids[i]) == nil {
					ids = append(ids[:i], ids[i+1:]...)
				}
			default:
				d := time.Duration(rapid.Int64Range(0, int64(50*time.Millisecond)).Draw(t, "d"))
				if err := s.Advance(d, &rep); err != nil {
					t.Fatal(err)
				}
				sum += rep.Busy
			}
			if v.Busy() != sum || v.Now() != s.Now() {
				t.Fatalf("view: busy %v at %v; reports %v at %v", v.Busy(), v.Now(), sum, s.Now())
			}
			ts := v.Tenants()
			if len(ts) != len(ids) {
				t.Fatalf("%d tenants in the view, %d added", len(ts), len(ids))
			}
			for i, info := range ts {
				if want, _ := s.Tenant(ids[i]); info != want {
					t.Fatalf("tenant %d: %+v, want %+v", ids[i], info, want)
				}
			}
		}
	})
}
