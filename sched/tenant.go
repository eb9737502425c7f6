package sched

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// TenantID names a tenant on one Scheduler. IDs are handed out in
// increasing order from 1 and never reused; 0 is never a valid ID.
type TenantID uint32

// State is a tenant's lifecycle state.
type State uint8

const (
	// Off: the VM is powered off. The tenant gets no turns, holds no jobs
	// and does not count towards equal share.
	Off State = iota
	// On: the VM runs; the tenant takes turns on the GPU when it has work.
	On
	// Paused: the VM is stunned (a migration's switch-over). The tenant
	// gets no turns but keeps its queue, and still counts as powered on for
	// equal share, so its neighbours' shares do not jump for the length of
	// a stun.
	Paused
)

// String returns "off", "on" or "paused".
func (s State) String() string {
	switch s {
	case Off:
		return "off"
	case On:
		return "on"
	case Paused:
		return "paused"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// tenant is one vGPU's scheduling state.
type tenant struct {
	id           TenantID
	maxInstances int
	slice        time.Duration // nominal slice: Config.Slice or the profile's default
	state        State
	q            jobQueue

	// debt is the overshoot not yet repaid by shortened slices.
	debt time.Duration
	// eligible is the earliest time the tenant may start a turn under equal
	// or fixed share (its credit): each turn moves it one period on.
	eligible time.Duration
	// scheduled is the GPU time the tenant has held since it was added,
	// brought up to its neighbours' least when it powers on; the
	// least-scheduled order compares it.
	scheduled time.Duration

	// Totals since the tenant was added.
	granted, overshoot            time.Duration
	submitted, completed, dropped uint64
	ivGranted, ivOvershoot        time.Duration // this Advance
	ivCompleted                   int           // this Advance
}

// TenantInfo describes a tenant: its configuration, state and totals since
// it was added.
type TenantInfo struct {
	ID           TenantID
	MaxInstances int           // the tenant's slot count
	Slice        time.Duration // its nominal time slice
	State        State
	Queued       int           // jobs waiting or in progress
	QueuedWork   time.Duration // work they still need
	Debt         time.Duration // overshoot not yet repaid
	Granted      time.Duration // GPU time received, overshoot included
	Overshoot    time.Duration // time run past the ends of its slices
	Submitted    uint64        // jobs accepted by Submit or restored
	Completed    uint64        // jobs finished
	Dropped      uint64        // jobs discarded by PowerOff
}

// lookup finds a tenant by ID; tenants are kept in ID order.
func (s *Scheduler) lookup(id TenantID) (int, *tenant, error) {
	i := sort.Search(len(s.tenants), func(i int) bool { return s.tenants[i].id >= id })
	if i == len(s.tenants) || s.tenants[i].id != id {
		return -1, nil, fmt.Errorf("%w: %d", ErrUnknownTenant, id)
	}
	return i, s.tenants[i], nil
}

// AddTenant adds a tenant, powered off, whose profile fits maxInstances
// times on the GPU (1 to MaxInstancesLimit): under fixed share it gets
// 1/maxInstances of the GPU's time, and its default slice depends on it.
func (s *Scheduler) AddTenant(maxInstances int) (TenantID, error) {
	if maxInstances < 1 || maxInstances > MaxInstancesLimit {
		return 0, fmt.Errorf("%w: max instances %d outside [1, %d]", ErrInvalidConfig, maxInstances, MaxInstancesLimit)
	}
	if len(s.tenants) >= s.cfg.MaxTenants {
		return 0, fmt.Errorf("%w: limit is %d", ErrTooManyTenants, s.cfg.MaxTenants)
	}
	s.nextID++
	t := &tenant{id: s.nextID, maxInstances: maxInstances, slice: s.cfg.Slice, eligible: s.now}
	if t.slice == 0 {
		t.slice = DefaultSlice(maxInstances)
	}
	s.tenants = append(s.tenants, t)
	return t.id, nil
}

// RemoveTenant removes a tenant that is off.
func (s *Scheduler) RemoveTenant(id TenantID) error {
	i, t, err := s.lookup(id)
	if err != nil {
		return err
	}
	if t.state != Off {
		return &StateError{Op: "remove", Tenant: id, State: t.state}
	}
	s.tenants = append(s.tenants[:i], s.tenants[i+1:]...)
	// Keep the round-robin position: the tenant after the removed one is
	// still the next to be considered.
	if s.last >= i {
		s.last--
	}
	return nil
}

// PowerOn powers an off tenant on. Its scheduled time is brought up to the
// least of the other powered-on tenants', so that under the least-scheduled
// order it does not monopolise the GPU to catch up on time it was off.
// Jobs and overshoot debt it holds (from RestoreTenant) are kept.
func (s *Scheduler) PowerOn(id TenantID) error {
	_, t, err := s.lookup(id)
	if err != nil {
		return err
	}
	if t.state != Off {
		return &StateError{Op: "power on", Tenant: id, State: t.state}
	}
	if base, ok := s.leastScheduledOther(t); ok && t.scheduled < base {
		t.scheduled = base
	}
	t.state = On
	s.nOn++
	if t.q.n > 0 {
		s.wake(t)
	}
	return nil
}

// PowerOff powers a tenant off (from on or paused): it loses the GPU at
// once, its queued jobs are discarded (a powered-off VM has no GPU context
// to resume them in) and its overshoot debt is forgiven. It returns the
// number of jobs discarded.
func (s *Scheduler) PowerOff(id TenantID) (int, error) {
	_, t, err := s.lookup(id)
	if err != nil {
		return 0, err
	}
	if t.state == Off {
		return 0, &StateError{Op: "power off", Tenant: id, State: t.state}
	}
	s.release(t)
	if t.state == On && t.q.n > 0 {
		s.runnable--
	}
	dropped := t.q.n
	t.q.clear()
	t.dropped += uint64(dropped)
	t.debt = 0
	t.state = Off
	s.nOn--
	return dropped, nil
}

// Pause stops an on tenant for a migration's stun: it loses the GPU at
// once and gets no turns until Resume, but keeps its queue, debt and
// credit.
func (s *Scheduler) Pause(id TenantID) error {
	_, t, err := s.lookup(id)
	if err != nil {
		return err
	}
	if t.state != On {
		return &StateError{Op: "pause", Tenant: id, State: t.state}
	}
	s.release(t)
	if t.q.n > 0 {
		s.runnable--
	}
	t.state = Paused
	return nil
}

// Resume lets a paused tenant take turns again.
func (s *Scheduler) Resume(id TenantID) error {
	_, t, err := s.lookup(id)
	if err != nil {
		return err
	}
	if t.state != Paused {
		return &StateError{Op: "resume", Tenant: id, State: t.state}
	}
	t.state = On
	if t.q.n > 0 {
		s.wake(t)
	}
	return nil
}

// Submit queues a job for a tenant that is on or paused, at the current
// simulated time. Jobs of one tenant run, and complete, in submission order.
func (s *Scheduler) Submit(id TenantID, j Job) error {
	_, t, err := s.lookup(id)
	if err != nil {
		return err
	}
	if err := j.validate(); err != nil {
		return err
	}
	if t.state == Off {
		return &StateError{Op: "submit", Tenant: id, State: t.state}
	}
	if t.q.n >= s.cfg.MaxQueue {
		return fmt.Errorf("%w: tenant %d holds %d jobs", ErrQueueFull, id, t.q.n)
	}
	t.q.push(job{tag: j.Tag, work: j.Work, chunk: j.Chunk, submitted: s.now}, s.cfg.MaxQueue)
	t.submitted++
	if t.q.n == 1 && t.state == On {
		s.wake(t)
	}
	return nil
}

// Tenant describes a tenant.
func (s *Scheduler) Tenant(id TenantID) (TenantInfo, error) {
	_, t, err := s.lookup(id)
	if err != nil {
		return TenantInfo{}, err
	}
	return TenantInfo{
		ID:           t.id,
		MaxInstances: t.maxInstances,
		Slice:        t.slice,
		State:        t.state,
		Queued:       t.q.n,
		QueuedWork:   t.q.total(),
		Debt:         t.debt,
		Granted:      t.granted,
		Overshoot:    t.overshoot,
		Submitted:    t.submitted,
		Completed:    t.completed,
		Dropped:      t.dropped,
	}, nil
}

// wake counts t, which has just become runnable (on, with work), and
// brings its eligibility up to now: time it spent idle, paused or off is
// not banked, since under equal and fixed share a slot its tenant leaves
// unused is lost, not owed. A tenant that waits with work keeps its place
// (see startTurn).
func (s *Scheduler) wake(t *tenant) {
	s.runnable++
	t.eligible = max(t.eligible, s.now)
}

// release takes the GPU from t if it holds it; the next turn is decided at
// the next Advance.
func (s *Scheduler) release(t *tenant) {
	if s.cur == t {
		s.endTurn()
	}
}

// leastScheduledOther returns the least scheduled time among the powered-on
// (on or paused) tenants other than t; ok is false when there are none. It
// is the base a tenant's credit is measured from when it powers on or its
// state is saved or restored; leaving t out keeps save and restore exact
// inverses.
func (s *Scheduler) leastScheduledOther(t *tenant) (base time.Duration, ok bool) {
	for _, o := range s.tenants {
		if o == t || o.state == Off {
			continue
		}
		if !ok || o.scheduled < base {
			base, ok = o.scheduled, true
		}
	}
	return base, ok
}
