package migrate

import (
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
	"github.com/vgpusim/vgpusim/vgpu"
)

// faultPoint is a moment of a migration: a stretch of it, named by its
// phase and pre-copy round, and how far through that stretch, in simulated
// time. The link's rate is steady while one migration uses it, so a
// fraction of a round's time is the same fraction of its bytes.
type faultPoint struct {
	name  string
	phase Phase
	round int // the pre-copy round, -1 outside pre-copy
	frac  float64
}

// faultPoints are the points of failure the reliability suite covers.
var faultPoints = []faultPoint{
	{"before-first-byte", PhaseSetup, -1, 0},
	{"round-0-at-37%", PhasePreCopy, 0, 0.37},
	{"later-round", PhasePreCopy, 1, 0.5},
	{"final-round", PhaseFinalFramebuffer, -1, 0.5},
	{"device-state-record", PhaseDeviceState, -1, 0.5},
	{"restored-not-acknowledged", PhaseResume, -1, 0.5},
}

// faultWorld is a source running the counter oracle, a destination and a
// third host, all in one Sim; the same arguments build the same world.
type faultWorld struct {
	src, dst, third *vgpu.Host
	sim             *Sim
	vm              *vgpu.VM
	w               *counterWorkload
}

func newFaultWorld(t testing.TB, paused bool) *faultWorld {
	t.Helper()
	o := migtest.NewOracleWorld(t, paused)
	s, err := NewSim(SimConfig{}, o.Src, o.Dst, o.Third)
	must(t, err)
	return &faultWorld{src: o.Src, dst: o.Dst, third: o.Third, sim: s, vm: o.VM, w: o.W}
}

// faultMode is how a cell's migration moves pages: its fidelity, and,
// at Bytes fidelity, whether with page filters (shuffled and delta pages,
// a delta cache large enough for every page).
type faultMode struct {
	fid      Fidelity
	filtered bool
}

func (m faultMode) String() string {
	if m.filtered {
		return m.fid.String() + "+filters"
	}
	return m.fid.String()
}

// faultConfig is the migration every cell runs. Its stun target is between
// the expected stun after round 0 (about 126 ms) and the fixed costs
// (100 ms, PreCopyCosts), so that a running VM takes a second round and
// then converges; a short stall timeout keeps the stall cells quick.
func faultConfig(m faultMode) Config {
	c := Config{Policy: Policy{StunTarget: 110 * time.Millisecond}, Fidelity: m.fid, Link: slowLink, Timeout: 2 * time.Second}
	if m.filtered {
		c.Filtering = Filtering{Shuffle: true, DeltaCacheBytes: 64 * MiB}
	}
	return c
}

// cleanRun is the events of a migration run to its end without a fault.
// The Sim is deterministic, so a faulted run of the same world is the same
// run up to its fault.
type cleanRun struct {
	paused bool
	mode   faultMode
}

var cleanRuns = map[cleanRun][]Event{}

func cleanEvents(t *testing.T, paused bool, mode faultMode) []Event {
	t.Helper()
	key := cleanRun{paused, mode}
	if evs, ok := cleanRuns[key]; ok {
		return evs
	}
	fw := newFaultWorld(t, paused)
	m, err := fw.sim.Start(fw.vm, fw.dst, faultConfig(mode))
	must(t, err)
	if _, err := m.Run(); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	cleanRuns[key] = m.Events()
	return cleanRuns[key]
}

// faultTimes returns the moments of the clean run's events and the moment
// of the fault point, on the Sim's clock.
func faultTimes(t *testing.T, p faultPoint, paused bool, mode faultMode) (events []time.Duration, at time.Duration) {
	t.Helper()
	evs := cleanEvents(t, paused, mode)
	first, end := -1, -1
	for i, e := range evs {
		in := e.Phase == p.phase && e.Round == p.round
		if in && first < 0 {
			first = i
		}
		if !in && first >= 0 && end < 0 {
			end = i
		}
		events = append(events, e.At)
	}
	if first < 0 || end < 0 {
		t.Fatalf("the clean run never passed %s (%v round %d)", p.name, p.phase, p.round)
	}
	span := evs[end].At - evs[first].At
	return events, evs[first].At + time.Duration(p.frac*float64(span))
}

// advanceChecking moves the Sim to each of the given moments up to at, and
// then to at, checking after every step that the VM has one owner.
func advanceChecking(t *testing.T, fw *faultWorld, events []time.Duration, at time.Duration) {
	t.Helper()
	for _, e := range append(events, at) {
		if e > at || e < fw.sim.Now() {
			continue
		}
		if _, err := fw.sim.Advance(e - fw.sim.Now()); err != nil {
			t.Fatal(err)
		}
		checkOneOwner(t, fw.vm.ID(), fw.sim.Hosts()...)
	}
}

// stepChecking steps m to its end, checking after every event that the VM
// has one owner.
func stepChecking(t *testing.T, m *Migration, hosts ...*vgpu.Host) {
	t.Helper()
	for {
		_, ok, err := m.Step()
		if err != nil {
			t.Fatal(err)
		}
		checkOneOwner(t, m.VM().ID(), hosts...)
		if !ok {
			return
		}
	}
}
