package sched

import "time"

// View is a read-only view of a Scheduler: what it holds and what it
// granted, without the means to change either. A host that owns a
// scheduler hands out a View, so that observing it cannot disturb it.
type View struct{ s *Scheduler }

// View returns a read-only view of the scheduler.
func (s *Scheduler) View() View { return View{s} }

// Config returns the scheduler's configuration, defaults filled in.
func (v View) Config() Config { return v.s.Config() }

// Now returns the scheduler's simulated time.
func (v View) Now() time.Duration { return v.s.now }

// Tenant describes a tenant.
func (v View) Tenant(id TenantID) (TenantInfo, error) { return v.s.Tenant(id) }

// Tenants describes every tenant, in ID order.
func (v View) Tenants() []TenantInfo {
	out := make([]TenantInfo, 0, len(v.s.tenants))
	for _, t := range v.s.tenants {
		info, _ := v.s.Tenant(t.id)
		out = append(out, info)
	}
	return out
}

// Busy returns the GPU time granted to tenants since the scheduler was
// made, tenants since removed included; the rest of the time since its
// start the GPU was idle.
func (v View) Busy() time.Duration { return v.s.busy }
