package migrate

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// heapFlatMigrations is how many migrations TestSimHeapFlat runs through
// one Sim: 100,000, or 5,000 under the race detector, which makes each
// twenty times slower.
func heapFlatMigrations() int {
	if raceEnabled {
		return 5_000
	}
	return 100_000
}

// heapFlatSlackBytes is what the heap may grow by between a tenth of
// TestSimHeapFlat's migrations and all of them: 256 KiB, under 3 bytes a
// migration over 90,000, where keeping one Event of each would take 120.
const heapFlatSlackBytes = 256 << 10

// liveHeapBytes returns the bytes of live heap objects after a full
// collection.
func liveHeapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// tinyWorld returns two Synthetic hosts with 2 MiB pages, in one Sim, and
// on the first a running VM of one page of guest RAM and a P40-1Q, with no
// workload: the cheapest migration there is, whose cost is the Sim's.
func tinyWorld(t *testing.T) (*Sim, [2]*vgpu.Host, *vgpu.VM) {
	t.Helper()
	var hosts [2]*vgpu.Host
	for i := range hosts {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: fmt.Sprintf("h%d", i), Memory: memory.Synthetic, Seed: uint64(i + 1),
			RAMBytes: GiB, FramebufferPageSize: 2 << 20, RAMPageSize: 2 << 20})
		must(t, err)
		hosts[i] = h
	}
	vm, err := hosts[0].CreateVM(vgpu.VMSpec{ID: "tiny", RAMBytes: 2 * MiB, RAMFootprintBytes: 2 * MiB, Profiles: []string{"P40-1Q"}})
	must(t, err)
	must(t, vm.Start())
	s, err := NewSim(SimConfig{}, hosts[0], hosts[1])
	must(t, err)
	return s, hosts, vm
}

// TestSimHeapFlat: one Sim runs 100,000 migrations of one VM back and
// forth between two hosts, nine in ten driven by Migration.Run and one in
// ten by Sim.Step, and holds no event after each; the live heap after all
// of them is within heapFlatSlackBytes of the heap after the first tenth.
// Before, every event of a migration driven by its own Run stayed queued
// in the Sim (16 Events, 1.9 KB, a migration here), and Sim.Step then
// returned them, the first migration's setup first.
func TestSimHeapFlat(t *testing.T) {
	n := heapFlatMigrations()
	s, hosts, vm := tinyWorld(t)
	var heap10, heap100 uint64
	var start time.Time
	events := 0
	for i := range n {
		if i == n/10 {
			heap10, start = liveHeapBytes(), time.Now()
		}
		began := s.Now()
		m, err := s.Start(vm, hosts[(i+1)%2], Config{Fidelity: Model})
		must(t, err)
		if i%10 == 9 {
			for {
				e, ok, err := s.Step()
				must(t, err)
				if !ok {
					break
				}
				if e.At < began || e.At > s.Now() {
					t.Fatalf("migration %d, begun at %v: Sim.Step returned %v at %v", i, began, e, s.Now())
				}
				events++
			}
		} else {
			_, err = m.Run()
			must(t, err)
		}
		if m.Phase() != PhaseDone || s.Pending() != 0 || len(s.queue) != 0 {
			t.Fatalf("migration %d: %v (%v), the Sim holds %d events in %d entries", i, m.Phase(), m.Err(), s.Pending(), len(s.queue))
		}
		vm = m.VM()
	}
	elapsed := time.Since(start)
	heap100 = liveHeapBytes()
	if e, ok, err := s.Step(); ok || err != nil {
		t.Fatalf("Sim.Step after every migration ended: %v, %v", e, err)
	}
	if events == 0 {
		t.Fatal("Sim.Step returned no event")
	}
	growth := int64(heap100) - int64(heap10)
	t.Logf("%d migrations: live heap %d B after %d, %d B after %d (%+d B, %.2f B a migration); %.0f migrations/s",
		n, heap10, n/10, heap100, n, growth, float64(growth)/float64(n-n/10), float64(n-n/10)/elapsed.Seconds())
	if growth > heapFlatSlackBytes {
		t.Fatalf("live heap grew by %d B over %d migrations, more than %d B", growth, n-n/10, heapFlatSlackBytes)
	}
	runtime.KeepAlive(s)
}

// eventFields is an Event without its error, which == cannot compare.
func eventFields(e Event) Event {
	e.Err = nil
	return e
}

// fleet is four VMs of different sizes, serving inference, that move
// together between two hosts of one Sim, over one link.
type fleet struct {
	s     *Sim
	hosts [2]*vgpu.Host
	vms   []*vgpu.VM
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	src, dst := hostPair(t, memory.Synthetic, 4)
	sameClock(t, src, dst)
	s, err := NewSim(SimConfig{}, src, dst)
	must(t, err)
	f := &fleet{s: s, hosts: [2]*vgpu.Host{src, dst}}
	for i := range 4 {
		f.vms = append(f.vms, inferenceVM(t, src, fmt.Sprintf("vm%d", i), "P40-1Q", int64(i+1)*256*MiB, int64(i+1)*128*MiB, tinyModel, uint64(i+1)))
	}
	return f
}

// start begins moving every VM to the other host: from the first host in
// even rounds, back in odd ones.
func (f *fleet) start(t *testing.T, round int) []*Migration {
	t.Helper()
	var ms []*Migration
	for _, vm := range f.vms {
		m, err := f.s.Start(vm, f.hosts[(round+1)%2], Config{Fidelity: Model})
		must(t, err)
		ms = append(ms, m)
	}
	return ms
}

// end records where the round left the VMs.
func (f *fleet) end(ms []*Migration) {
	for i, m := range ms {
		f.vms[i] = m.VM()
	}
}

// fleetRounds is how many times TestSimStepInterleaved moves its fleet in
// each interleaving.
const fleetRounds = 4

// TestSimStepInterleaved: four migrations of different sizes share a Sim
// and a link, four times over (there and back, twice), and a seeded draw
// interleaves Sim.Step, Sim.Advance, Migration.Step and Migration.Run. The
// events the Sim returns are in time order, none later than the Sim's
// clock; every event is returned exactly once, by the Sim or by its
// migration, and each migration's events, in the order they were
// returned, are its history; without Advance, whose ticks split the hosts'
// time differently, the histories equal those of the same fleet moved by
// Sim.Run alone.
func TestSimStepInterleaved(t *testing.T) {
	ref := newFleet(t)
	var want [fleetRounds][][]Event
	total := 0
	for round := range fleetRounds {
		ms := ref.start(t, round)
		if _, err := ref.s.Run(); err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			want[round] = append(want[round], m.Events())
			total += len(m.Events())
		}
		ref.end(ms)
	}

	seeds := uint64(12)
	if raceEnabled {
		seeds = 2
	}
	var bySim, byAdvance, byStep, byRun int
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 17))
		advance := seed%2 == 1
		f := newFleet(t)
		s := f.s
		var last time.Duration // the At of the Sim's last event
		for round := range fleetRounds {
			ms := f.start(t, round)
			index := map[*Migration]int{}
			for i, m := range ms {
				index[m] = i
			}
			got := make([][]Event, len(ms)) // each migration's, as returned
			simEvent := func(e Event, how string) {
				if e.At < last || e.At > s.Now() {
					t.Fatalf("seed %d: %s returned %v after an event at %v, at %v", seed, how, e, last, s.Now())
				}
				last = e.At
				i := int(e.VM[2] - '0')
				got[i] = append(got[i], e)
			}
			for calls := 0; !s.Idle(); calls++ {
				if calls > 10_000 {
					t.Fatalf("seed %d: not idle after %d calls", seed, calls)
				}
				m := ms[rng.IntN(len(ms))]
				switch op := rng.IntN(10); {
				case op < 4:
					e, ok, err := s.Step()
					must(t, err)
					if ok {
						simEvent(e, "Sim.Step")
						bySim++
					}
				case op < 5 && advance:
					evs, err := s.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
					must(t, err)
					for _, e := range evs {
						simEvent(e, "Sim.Advance")
					}
					byAdvance += len(evs)
				case op < 9:
					e, ok, err := m.Step()
					must(t, err)
					if ok {
						got[index[m]] = append(got[index[m]], e)
						byStep++
					} else if !m.Done() {
						t.Fatalf("seed %d: Migration.Step returned nothing in %v", seed, m.Phase())
					}
				default:
					taken := *m.taken
					if _, err := m.Run(); err != nil || !m.Done() {
						t.Fatalf("seed %d: Run left %s in %v: %v", seed, m.VM().ID(), m.Phase(), err)
					}
					// Run returns none of the events: they are those
					// of its history it took.
					got[index[m]] = append(got[index[m]], m.Events()[taken:]...)
					byRun += len(m.Events()) - taken
				}
				if p := s.Pending(); p < 0 || len(s.queue) > 2*p {
					t.Fatalf("seed %d: the Sim holds %d entries for %d events", seed, len(s.queue), p)
				}
			}
			for i, m := range ms {
				hist := m.Events()
				if len(got[i]) != len(hist) {
					t.Fatalf("seed %d, round %d: %s: %d events returned, %d happened", seed, round, m.VM().ID(), len(got[i]), len(hist))
				}
				for k := range hist {
					if eventFields(got[i][k]) != eventFields(hist[k]) {
						t.Fatalf("seed %d, round %d: %s: event %d returned as %v, happened as %v", seed, round, m.VM().ID(), k, got[i][k], hist[k])
					}
				}
				if !advance && !slices.EqualFunc(hist, want[round][i], func(a, b Event) bool { return eventFields(a) == eventFields(b) }) {
					t.Fatalf("seed %d, round %d: %s: events\n%v\nby Sim.Run alone\n%v", seed, round, m.VM().ID(), hist, want[round][i])
				}
				if e, ok, err := m.Step(); ok || err != nil {
					t.Fatalf("seed %d, round %d: %s: Step after the end: %v, %v", seed, round, m.VM().ID(), e, err)
				}
			}
			if e, ok, err := s.Step(); ok || err != nil || len(s.queue) != 0 {
				t.Fatalf("seed %d, round %d: Sim.Step after the end: %v, %v; %d entries", seed, round, e, err, len(s.queue))
			}
			f.end(ms)
		}
	}
	t.Logf("%d interleavings of %d rounds of 4 migrations (%d events in all, by Sim.Run alone): events returned by Sim.Step %d, Sim.Advance %d, Migration.Step %d, Migration.Run %d",
		seeds, fleetRounds, total, bySim, byAdvance, byStep, byRun)
}
