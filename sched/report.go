package sched

import "time"

// Report describes one Advance interval. The caller owns it and passes the
// same Report to every Advance: Advance overwrites it, reusing the capacity
// of its slices, so steady-state reporting allocates nothing. Copy anything
// that must outlive the next Advance.
type Report struct {
	Start, End time.Duration // the interval, on the scheduler's clock

	// Busy is the GPU time granted to tenants in the interval; the rest
	// of the interval the GPU was idle.
	Busy time.Duration

	// Decisions counts slice decisions: each time a tenant's turn started
	// or its slice was renewed, including renewals the scheduler took in
	// one step because nothing else could have run.
	Decisions int64

	// Tenants has one entry per tenant, in ID order.
	Tenants []TenantInterval

	// Completions lists the jobs finished in the interval, in order of
	// completion.
	Completions []Completion
}

// Utilization is the fraction of the interval the GPU was busy, in [0, 1];
// 0 for an empty interval.
func (r *Report) Utilization() float64 {
	if r.End <= r.Start {
		return 0
	}
	return float64(r.Busy) / float64(r.End-r.Start)
}

// Tenant returns the interval entry of a tenant, and false if the report
// has none.
func (r *Report) Tenant(id TenantID) (TenantInterval, bool) {
	for _, t := range r.Tenants {
		if t.ID == id {
			return t, true
		}
	}
	return TenantInterval{}, false
}

// TenantInterval is one tenant's part of a Report.
type TenantInterval struct {
	ID        TenantID
	State     State         // at the end of the interval
	Granted   time.Duration // GPU time received in the interval
	Overshoot time.Duration // the part of Granted run past slice ends
	Completed int           // jobs finished in the interval
	Queued    int           // jobs queued at the end of the interval
}
