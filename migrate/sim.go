package migrate

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
	"golang.org/x/sync/errgroup"
)

// DefaultMaxPerHost is the number of migrations a host may take part in at
// once: 8, vCenter's limit of concurrent vMotions per host on a 10 GbE
// vMotion network (VMware vSphere 6.7 documentation, vCenter Server and
// Host Management, "Limits on Simultaneous Migrations": table "Network
// Limits for Migration with vMotion", 10GigE maximum cost 8, each vMotion
// costing 1, and the host limit of 8 vMotions, for ESXi 5.0 to 6.7; 1GigE
// allows 4). Later releases are assumed to keep it.
const DefaultMaxPerHost = 8

// SimConfig configures a Sim. The zero value is valid.
type SimConfig struct {
	// MaxPerHost bounds the migrations a host is the source or destination
	// of at once; 0 means DefaultMaxPerHost.
	MaxPerHost int
	// Start is the Sim's clock when it is made; zero means the clock of
	// the hosts given to NewSim (zero if none). Every host the Sim drives
	// reads the same time: NewSim and AddHost refuse one whose clock
	// differs.
	Start time.Duration
	// HostWorkers is how many hosts the Sim advances at once, on as many
	// goroutines, each time it moves on: hosts share nothing while their
	// clocks move, so a data centre of many hosts runs on several cores.
	// 0 or 1 advances them one after another on the caller's goroutine.
	// It pays when the Sim moves in steps each of many workload events
	// (Advance by a tenth of a second: 1.7 times as fast on 2 cores for
	// ten hosts, BenchmarkSimSteps); driven event by event (NextEventAt,
	// AdvanceTo), the hosts have too little to do between two events, and
	// handing them to the workers costs more than it saves (0.6 to 0.7
	// times as fast, BenchmarkCluster/hosts=10). The events, reports and stream bytes are the
	// same whatever it is; but with more than one, workloads of different
	// hosts run at the same time, so workloads that share anything of
	// their own (a counter, a random source) must guard it.
	HostWorkers int
}

// Sim is the world migrations happen in: the hosts they move VMs between,
// the links they share, and one simulated clock. The caller drives it —
// Step to the next event, Advance by a duration, Run to the end — and it
// drives its hosts: every host it knows is advanced by exactly the time the
// Sim moves on, so the VMs' workloads run while their memory is copied.
// The Sim and its hosts share one clock: a host joins only if it reads the
// Sim's time, and the Sim holds its clock (vgpu.Host.TakeClock) until
// RemoveHost, so that the host refuses to be advanced by anyone else.
//
// Every event is returned once, to whichever asks first: Sim.Step,
// Advance or Run, which return the events of every migration, or its
// migration's Step or Run, which return only that migration's. Until then
// it waits in the Sim (Pending counts them); once returned, the Sim holds
// nothing of it, and the migration keeps its own in Events and its Report.
// A Sim whose migrations are each run by their own Run, one after another,
// holds no event between them however many it runs. An event's At is the
// Sim's time when it happened, and the Sim hands events out in the order
// they happened: one Sim.Step after another, and within each Advance and
// Run, the events come in time order.
//
// A Sim is not safe for concurrent use, and starts no goroutines but the
// HostWorkers that advance its hosts, which end before the call that
// started them returns. Given the same hosts, configurations and calls, it
// produces the same events, reports and stream bytes on every machine.
type Sim struct {
	cfg    SimConfig
	now    time.Duration
	hosts  []*vgpu.Host
	clocks []*vgpu.Clock // of hosts, index for index
	links  []*linkState
	net    network // the flows of the active migrations over links
	active []*Migration
	nextID int
	costs  WireModel
	queue  []queued // events not yet returned, in the order they happened
	stale  int      // entries of queue whose event a migration's Step took

	evacs   []*Evacuation // those with VMs waiting
	pumpDue bool          // a migration ended: an evacuation may start the next
}

// queued is an event waiting in the Sim, the i-th of its migration's. Its
// entry is stale once the migration's Step took it (i < *taken). It holds
// the count, not the migration, so that an event nobody takes keeps only
// itself.
type queued struct {
	e     Event
	i     int
	taken *int // the migration's events returned
}

// linkState is one link and the flows that share it: link as first
// declared, against which later migrations' links are checked, and its
// line rate now, which SetLinkCapacity may have changed.
type linkState struct {
	link       Link
	bitsPerSec int64
	share      share
}

// NewSim returns a Sim that drives the given hosts. Hosts that migrations
// use are added when the migrations start.
func NewSim(cfg SimConfig, hosts ...*vgpu.Host) (*Sim, error) {
	if cfg.MaxPerHost == 0 {
		cfg.MaxPerHost = DefaultMaxPerHost
	}
	if cfg.MaxPerHost < 1 || cfg.MaxPerHost > 1024 {
		return nil, fmt.Errorf("%w: MaxPerHost %d outside [1, 1024]", ErrConfig, cfg.MaxPerHost)
	}
	if cfg.HostWorkers < 0 || cfg.HostWorkers > 4096 {
		return nil, fmt.Errorf("%w: HostWorkers %d outside [0, 4096]", ErrConfig, cfg.HostWorkers)
	}
	if cfg.Start < 0 {
		return nil, fmt.Errorf("%w: start %v before zero", ErrConfig, cfg.Start)
	}
	if cfg.Start == 0 && len(hosts) > 0 && hosts[0] != nil {
		cfg.Start = hosts[0].Now()
	}
	s := &Sim{cfg: cfg, now: cfg.Start}
	for _, h := range hosts {
		if err := s.AddHost(h); err != nil {
			s.releaseAll()
			return nil, err
		}
	}
	return s, nil
}

// Now returns the Sim's clock: SimConfig.Start plus the time it advanced,
// the time every host it drives reads.
func (s *Sim) Now() time.Duration { return s.now }

// AddHost makes the Sim drive h, taking its clock. It refuses, with an
// error wrapping ErrConfig, a nil host or one whose clock differs from the
// Sim's, and, wrapping vgpu.ErrDriven, a host another driver holds.
// Adding a host twice does nothing. Sim.Start adds a migration's hosts.
func (s *Sim) AddHost(h *vgpu.Host) error {
	if h == nil {
		return fmt.Errorf("%w: nil host", ErrConfig)
	}
	if slices.Contains(s.hosts, h) {
		return nil
	}
	if err := s.checkHost(h); err != nil {
		return err
	}
	c, err := h.TakeClock(simDriver)
	if err != nil {
		return err
	}
	s.hosts = append(s.hosts, h)
	s.clocks = append(s.clocks, c)
	return nil
}

// simDriver is the name a Sim takes its hosts' clocks by.
const simDriver = "a migrate.Sim"

// checkHost returns the error AddHost would return for h, a host the Sim
// does not drive yet.
func (s *Sim) checkHost(h *vgpu.Host) error {
	if d, held := h.Driver(); held {
		return fmt.Errorf("%w: host %q is driven by %s", vgpu.ErrDriven, h.Name(), d)
	}
	if h.Now() != s.now {
		return fmt.Errorf("%w: host %q reads %v, the Sim %v: a Sim and its hosts share one clock", ErrConfig, h.Name(), h.Now(), s.now)
	}
	return nil
}

// checkNew returns the error AddHost would return for the first of hosts
// the Sim does not drive yet that it would refuse.
func (s *Sim) checkNew(hosts ...*vgpu.Host) error {
	for _, h := range hosts {
		if !slices.Contains(s.hosts, h) {
			if err := s.checkHost(h); err != nil {
				return err
			}
		}
	}
	return nil
}

// RemoveHost stops driving h and gives its clock back. It refuses, with an
// error wrapping ErrBusy, a host a migration under way uses, or an
// evacuation with VMs still waiting. Removing a
// host the Sim does not drive does nothing.
func (s *Sim) RemoveHost(h *vgpu.Host) error {
	i := slices.Index(s.hosts, h)
	if i < 0 {
		return nil
	}
	if n := s.busy(h); n > 0 {
		return fmt.Errorf("%w: host %q takes part in %d migrations", ErrBusy, h.Name(), n)
	}
	for _, ev := range s.evacs {
		if ev.from == h || slices.Contains(ev.to, h) {
			return fmt.Errorf("%w: host %q takes part in the evacuation of %q", ErrBusy, h.Name(), ev.from.Name())
		}
	}
	s.clocks[i].Release()
	s.hosts = slices.Delete(s.hosts, i, i+1)
	s.clocks = slices.Delete(s.clocks, i, i+1)
	return nil
}

// releaseAll gives back the clock of every host.
func (s *Sim) releaseAll() {
	for _, c := range s.clocks {
		c.Release()
	}
	s.hosts, s.clocks = nil, nil
}

// Hosts returns the hosts the Sim drives, in the order they were added.
func (s *Sim) Hosts() []*vgpu.Host { return slices.Clone(s.hosts) }

// Active returns the migrations under way, in the order they started.
func (s *Sim) Active() []*Migration { return slices.Clone(s.active) }

// Idle reports whether no migration is under way, none of an evacuation
// waits to start (see Evacuate) and every event has been returned.
func (s *Sim) Idle() bool { return len(s.active) == 0 && s.Pending() == 0 && !s.pumpDue }

// Pending returns the number of events that happened and that neither
// Sim.Step, Advance or Run nor their migration's Step or Run has returned
// yet: all the Sim holds of events.
func (s *Sim) Pending() int { return len(s.queue) - s.stale }

func (s *Sim) link(l Link) (*linkState, error) {
	for _, ls := range s.links {
		if ls.link.Name == l.Name {
			if ls.link != l {
				return nil, fmt.Errorf("%w: two links named %q differ", ErrConfig, l.Name)
			}
			return ls, nil
		}
	}
	ls := &linkState{link: l, bitsPerSec: l.BandwidthBitsPerSec, share: share{capacity: l.GoodputBytesPerSec()}}
	s.links = append(s.links, ls)
	return ls, nil
}

// path returns the links of cfg's route, declaring those the Sim does
// not know yet, as a migration's Link always was: all of them, or, if one
// differs from the link the Sim knows by its name, none.
func (s *Sim) path(cfg Config) ([]*share, error) {
	for _, l := range cfg.route() {
		if i := s.linkIndex(l.Name); i >= 0 && s.links[i].link != l {
			return nil, fmt.Errorf("%w: two links named %q differ", ErrConfig, l.Name)
		}
	}
	var path []*share
	for _, l := range cfg.route() {
		ls, err := s.link(l)
		if err != nil {
			return nil, err
		}
		path = append(path, &ls.share)
	}
	return path, nil
}

// LinkRates returns, for the link named name, the rate in bytes per second
// each active migration's flow has on it now, in start order, and their
// sum, which never exceeds the link's goodput.
func (s *Sim) LinkRates(name string) (rates []int64, total int64) {
	for _, ls := range s.links {
		if ls.link.Name == name {
			for _, f := range ls.share.flows {
				rates = append(rates, f.rate)
			}
			return rates, ls.share.total()
		}
	}
	return nil, 0
}

func (s *Sim) busy(h *vgpu.Host) int {
	n := 0
	for _, m := range s.active {
		if m.srcHost == h || m.dst == h {
			n++
		}
	}
	return n
}

// enqueue has the Sim hold e, the i-th event of the migration whose count
// of events returned is taken, until it is returned.
func (s *Sim) enqueue(e Event, i int, taken *int) { s.queue = append(s.queue, queued{e, i, taken}) }

// pop returns the earliest event nobody has taken, and takes it, or false.
func (s *Sim) pop() (Event, bool) {
	for len(s.queue) > 0 {
		q := s.queue[0]
		s.queue[0] = queued{} // the Sim keeps nothing of a returned event
		s.queue = s.queue[1:]
		if q.i < *q.taken {
			s.stale--
			continue
		}
		// A migration's events are queued in order, so the first of
		// its entries not taken is its next event.
		*q.taken = q.i + 1
		s.tidy()
		return q.e, true
	}
	return Event{}, false
}

// took records that a migration's own Step took an event still queued.
func (s *Sim) took() {
	s.stale++
	s.tidy()
}

// tidy drops the stale entries once they are more than half the queue, so
// that the queue never holds more than twice the events nobody took, and
// each entry costs amortized constant time.
func (s *Sim) tidy() {
	if 2*s.stale > len(s.queue) {
		s.queue = slices.DeleteFunc(s.queue, func(q queued) bool { return q.i < *q.taken })
		s.stale = 0
	}
}

// errNoEvent is returned by next when nothing is scheduled.
var errNoEvent = errors.New("migrate: no event")

// nextAt returns the time of the earliest thing scheduled: a migration's
// timer or the end of a transfer on a link.
func (s *Sim) nextAt() (time.Duration, bool) {
	best, ok := time.Duration(0), false
	for _, m := range s.active {
		if m.timerSet && (!ok || m.timerAt < best) {
			best, ok = m.timerAt, true
		}
	}
	if d, moving := s.net.untilNext(); moving && (!ok || s.now+d < best) {
		best, ok = s.now+d, true
	}
	return best, ok
}

// inStep reports whether every host is at the Sim's time. A host behind
// (a workload failed part-way) catches up alone, and the horizon is not
// asked then: the hosts' clocks differ.
func (s *Sim) inStep() bool {
	for _, h := range s.hosts {
		if h.Now() != s.now {
			return false
		}
	}
	return true
}

// advanceTo moves the hosts and the links on to t, or to an earlier
// event a sub-step made (a fetch restarting a flow, a failure changing
// the links' shares): the caller handles what is due at the Sim's time.
func (s *Sim) advanceTo(t time.Duration) error {
	if !s.inStep() {
		// A host behind (a workload failed part-way) catches up first,
		// so that joined hosts move on together below.
		if err := s.advanceHosts(); err != nil {
			return err
		}
	}
	for s.now < t {
		// Hosts joined by remote GPUs go no further at a time than a
		// message between them takes (vgpu.Horizon); the links and the
		// Sim's clock go with them, so that post-copy faults are served
		// at the time the hosts are at.
		to := t
		if s.inStep() {
			limit, err := vgpu.Horizon(s.hosts)
			if err != nil {
				return wrap(ErrConfig, err)
			}
			to = max(min(to, limit), s.now)
		}
		if to == s.now {
			// A zero-length step: the hosts fire what is due now,
			// which moves the horizon on.
			if err := s.advanceHosts(); err != nil {
				return err
			}
			continue
		}
		s.net.advance(to - s.now)
		s.now = to
		if err := s.advanceHosts(); err != nil {
			return err
		}
		if n, ok := s.nextAt(); ok && n < t {
			t = max(n, s.now)
		}
	}
	return nil
}

// advanceHosts advances every host to the Sim's time; a host there
// already fires the workload events overdue (those a VM's pause held
// back). A host is taken to the Sim's time rather than by the time the Sim
// moved, so that one a failing workload stopped part-way catches up at the
// next advance instead of staying behind for good.
func (s *Sim) advanceHosts() error {
	errs := make([]error, len(s.hosts)) // by host, so that their order is the hosts'
	advance := func(i int) {
		h := s.hosts[i]
		if err := s.clocks[i].Advance(s.now - h.Now()); err != nil {
			errs[i] = fmt.Errorf("host %s: %w", h.Name(), err)
		}
	}
	if w := min(s.cfg.HostWorkers, len(s.hosts)); w > 1 {
		// A worker a run of hosts, not a goroutine a host: between two
		// events most hosts have little to do.
		var g errgroup.Group
		for k := range w {
			g.Go(func() error {
				for i := k * len(s.hosts) / w; i < (k+1)*len(s.hosts)/w; i++ {
					advance(i)
				}
				return nil
			})
		}
		_ = g.Wait() // each host's error is in errs
	} else {
		for i := range s.hosts {
			advance(i)
		}
	}
	if err := errors.Join(errs...); err != nil {
		// A workload failed: the migrations from or to that host cannot
		// trust its memory any more. The others go on: a post-copy's VM
		// would be lost for a host it does not touch.
		err := wrap(ErrSource, err)
		for _, m := range slices.Clone(s.active) {
			for i, h := range s.hosts {
				if errs[i] != nil && (h == m.srcHost || h == m.dst) {
					m.fail(err)
					break
				}
			}
		}
		return err
	}
	// The pages VMs in post-copy touched while the hosts moved on are
	// fetched now, each migration's in one request.
	for _, m := range slices.Clone(s.active) {
		if err := m.serveFaults(); err != nil {
			m.fail(err)
		}
	}
	return nil
}

// fire handles everything due now: transfers that ended, then timers, each
// in the migrations' start order.
func (s *Sim) fire() {
	done := false
	for _, f := range s.net.flows {
		if f.busy && f.remaining == 0 {
			f.busy = false
			done = true
		}
	}
	if done {
		s.net.allocate()
	}
	for _, m := range slices.Clone(s.active) {
		if m.flow != nil && m.transferring && !m.flow.busy {
			m.transferring = false
			m.setTimer(s.now + m.cfg.latency()) // the last byte's flight
		}
	}
	for _, m := range slices.Clone(s.active) {
		if m.timerSet && m.timerAt <= s.now {
			m.timerSet = false
			m.wake()
		}
	}
}

// step advances to the next scheduled moment, if it is no later than limit,
// and handles it.
func (s *Sim) step(limit time.Duration) error {
	if s.pumpDue {
		s.pump()
	}
	t, ok := s.nextAt()
	if !ok {
		return errNoEvent
	}
	if t > limit {
		return s.advanceTo(limit)
	}
	if err := s.advanceTo(t); err != nil {
		return err
	}
	s.fire()
	return nil
}

// Step returns the earliest event of any migration not yet returned (see
// Sim), advancing simulated time to the next event if none is waiting.
// With no migration under way and no event waiting it returns false; so
// it does when the only migrations under way are post-copies waiting for
// their lost link (Migration.Recover), which nothing but time and the
// caller moves on.
func (s *Sim) Step() (Event, bool, error) {
	for {
		if e, ok := s.pop(); ok {
			return e, true, nil
		}
		if err := s.step(maxTime); err == errNoEvent {
			return Event{}, false, nil
		} else if err != nil {
			return Event{}, false, err
		}
	}
}

// Advance moves simulated time on by d, handling every event on the way,
// and returns the events not yet returned, in time order: those that
// waited and those of the way. Hosts are advanced by exactly d; by 0,
// they fire what is due now (workload events a VM's pause held back).
func (s *Sim) Advance(d time.Duration) ([]Event, error) {
	if d < 0 {
		return nil, fmt.Errorf("%w: negative duration %v", ErrConfig, d)
	}
	end := s.now + d
	if d == 0 {
		// The hosts too fire what is due now: workload events a VM's
		// pause held back.
		if err := s.advanceHosts(); err != nil {
			return s.drain(), err
		}
	}
	for s.now < end {
		if err := s.step(end); err == errNoEvent {
			if err := s.advanceTo(end); err != nil {
				return s.drain(), err
			}
		} else if err != nil {
			return s.drain(), err
		}
	}
	// Timers due exactly at end fire before returning, and evacuations
	// start the migrations whose slot freed at end.
	for {
		if s.pumpDue {
			s.pump()
		}
		t, ok := s.nextAt()
		if !ok || t > end {
			break
		}
		s.fire()
	}
	return s.drain(), nil
}

// NextEventAt returns when, on the Sim's clock (Now), its next event is
// due: a migration's (a transfer ending, a timer) or a workload's on any
// of its hosts (vgpu.Host.NextEventAt); Now if events wait to be returned,
// an evacuation may start its next migration (a slot freed) or a host is
// behind (a workload failed part-way); and false if nothing is pending, when only an Advance by a time of the
// caller's choosing moves the simulation on. A discrete-event simulator
// alternates NextEventAt and AdvanceTo: the events, reports and host
// states are those one Advance over the whole time gives.
func (s *Sim) NextEventAt() (time.Duration, bool) {
	if s.Pending() > 0 || s.pumpDue {
		return s.now, true
	}
	best, ok := s.nextAt()
	for _, h := range s.hosts {
		// A host behind the Sim (a workload failed part-way) is due now.
		if t, due := h.NextEventAt(); due && (!ok || t < best) {
			best, ok = max(t, s.now), true
		} else if h.Now() < s.now {
			best, ok = s.now, true
		}
	}
	return best, ok
}

// AdvanceTo advances simulated time to t on the Sim's clock, as
// Advance(t - Now()) does. A t before Now is an error wrapping ErrConfig.
func (s *Sim) AdvanceTo(t time.Duration) ([]Event, error) {
	if t < s.now {
		return nil, fmt.Errorf("%w: advance to %v, before now (%v)", ErrConfig, t, s.now)
	}
	return s.Advance(t - s.now)
}

// Run advances until no migration is under way, or only post-copies
// waiting for their lost link (Migration.Recover) are, and returns the events not
// yet returned, in time order.
func (s *Sim) Run() ([]Event, error) {
	var all []Event
	for {
		e, ok, err := s.Step()
		if err != nil || !ok {
			return all, err
		}
		all = append(all, e)
	}
}

// drain returns every event waiting, and takes them.
func (s *Sim) drain() []Event {
	var out []Event
	for {
		e, ok := s.pop()
		if !ok {
			return out
		}
		out = append(out, e)
	}
}

func (s *Sim) remove(m *Migration) {
	s.active = slices.DeleteFunc(s.active, func(x *Migration) bool { return x == m })
	// Its slot is free: an evacuation may start its next VM, which the
	// next step does, at this instant.
	s.pumpDue = len(s.evacs) > 0
}

// maxTime is beyond any simulated horizon.
const maxTime = time.Duration(1<<63 - 1)
