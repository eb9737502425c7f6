package vgpusimtest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// TB is what World.Run needs of a *testing.T or a *rapid.T.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// World is a Spec built: its hosts in one Sim, its VMs running the
// Oracle's workloads, and the migrations its steps started. Play it step
// by step with Do and Check, or whole with Run.
type World struct {
	Spec   *Spec
	Sim    *migrate.Sim
	Hosts  []*vgpu.Host
	Oracle *Oracle
	// IDs are the VMs of the Spec that were placed; a VM whose host had
	// no room for it is left out (its refusal is in Refusals), and steps
	// that name it do nothing.
	IDs []string
	// Migrations are those the steps started, in order.
	Migrations []*migrate.Migration
	// Refusals are what the library turned down, a line each: a
	// migration it would not start, a fault or a cancel that came too
	// late, a pause of a migrating VM. They are the library's answers,
	// not failures.
	Refusals []string
	// OnEvent, if set, sees every event the steps return, in order,
	// before the checks: the place for the caller's own code that reacts
	// to migrations, which the checks then hold to the invariants. Code
	// that pauses or resumes a VM there must say so with SetRunState, as
	// the steps do, since a failed migration must leave the VM as its
	// owner last set it.
	OnEvent func(w *World, ev migrate.Event) error

	placed  map[int]string
	runAs   map[string]vgpu.VMState // the run state the steps left each VM in
	settled map[*migrate.Migration]bool
}

// NewWorld builds s: its hosts at one hour of simulated time, in a Sim,
// its VMs created, started and, if they say so, paused.
func NewWorld(s *Spec) (*World, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	w := &World{Spec: s, Oracle: NewOracle(), placed: map[int]string{},
		runAs: map[string]vgpu.VMState{}, settled: map[*migrate.Migration]bool{}}
	for i, hs := range s.Hosts {
		h, err := vgpu.NewHost(vgpu.HostConfig{Name: fmt.Sprintf("host%d", i), GPUs: hs.GPUs, GPU: s.GPU, ECC: s.GPU.ECCWithVGPU,
			Memory: memory.Sparse, FramebufferPageSize: hs.FramebufferPageSize, RAMBytes: scenarioHostRAMBytes, Seed: hs.Seed, Start: time.Hour})
		if err != nil {
			return nil, err
		}
		w.Hosts = append(w.Hosts, h)
	}
	for i, vs := range s.VMs {
		inner, err := vs.Workload.Build()
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("vm%d", i)
		vm, err := w.Hosts[vs.Host].CreateVM(vgpu.VMSpec{ID: id, Seed: vs.Seed, RAMBytes: scenarioVMRAMBytes,
			RAMFootprintBytes: scenarioVMRAMFootprintBytes, Profiles: []string{vs.Profile},
			Workload: w.Oracle.Workload(OracleConfig{PagesPerSec: vs.OraclePagesPerSec, Seed: vs.Seed, Inner: inner})})
		if err != nil {
			w.Refusals = append(w.Refusals, fmt.Sprintf("create %s: %v", id, err))
			continue
		}
		if err := vm.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", id, err)
		}
		if vs.Paused {
			if err := vm.Pause(); err != nil {
				return nil, err
			}
		}
		w.placed[i] = id
		w.runAs[id] = vm.State()
		w.IDs = append(w.IDs, id)
	}
	var err error
	if w.Sim, err = migrate.NewSim(migrate.SimConfig{HostWorkers: s.HostWorkers}, w.Hosts...); err != nil {
		return nil, err
	}
	return w, nil
}

// SetRunState records that the owner left VM id running or paused
// (vgpu.VMRunning or vgpu.VMPaused), for the check of a failed migration.
func (w *World) SetRunState(id string, s vgpu.VMState) { w.runAs[id] = s }

// VM returns the live copy of VM i of the Spec: the one that holds its
// workload, else the one live copy.
func (w *World) VM(i int) (*vgpu.VM, bool) {
	id, ok := w.placed[i]
	if !ok {
		return nil, false
	}
	var found *vgpu.VM
	for _, h := range w.Hosts {
		if vm, ok := h.VM(id); ok && live(vm.State()) {
			if vm.Workload() != nil {
				return vm, true
			}
			found = vm
		}
	}
	return found, found != nil
}

func (w *World) refused(st Step, err error) {
	w.Refusals = append(w.Refusals, fmt.Sprintf("%v: %v", st, err))
}

// Do plays one step. What the library refuses is noted in Refusals; the
// error is one the Sim returned, or the OnEvent hook's.
func (w *World) Do(st Step) error {
	var evs []migrate.Event
	var err error
	switch st.Kind {
	case StepAdvance:
		evs, err = w.Sim.Advance(st.Duration)
	case StepEvent:
		var ev migrate.Event
		var ok bool
		if ev, ok, err = w.Sim.Step(); ok {
			evs = []migrate.Event{ev}
		}
	case StepMigrate:
		if st.To < 0 || st.To >= len(w.Hosts) {
			return fmt.Errorf("%w: step %v: no host%d", ErrInvalid, st, st.To)
		}
		vm, ok := w.VM(st.VM)
		if !ok {
			return nil
		}
		m, err := w.Sim.Start(vm, w.Hosts[st.To], st.Config)
		if err != nil {
			w.refused(st, err)
			return nil
		}
		w.Migrations = append(w.Migrations, m)
	case StepInject, StepCancel:
		if len(w.Migrations) == 0 {
			return nil
		}
		m := w.Migrations[max(st.Migration, 0)%len(w.Migrations)]
		var err error
		switch {
		case st.Kind == StepCancel:
			err = m.Cancel()
		case st.Fault.Link:
			_, err = w.Sim.FailLink(m.Report().Link, st.Fault.Fault)
		default:
			err = m.Inject(st.Fault.Fault)
		}
		if err != nil {
			w.refused(st, err)
		}
	case StepWrite:
		vm, ok := w.VM(st.VM)
		if !ok {
			return nil
		}
		p := make([]byte, vm.RAM().PageSize())
		for i := range p {
			p[i] = st.Value
		}
		if err := w.Oracle.WriteAt(vm, 0, int64(st.Page)*int64(len(p)), p); err != nil {
			w.refused(st, err)
		}
	case StepPauseResume:
		vm, ok := w.VM(st.VM)
		if !ok {
			return nil
		}
		var err error
		if vm.State() == vgpu.VMPaused {
			err = vm.Resume()
		} else {
			err = vm.Pause()
		}
		if err != nil {
			w.refused(st, err)
		} else {
			w.runAs[vm.ID()] = vm.State()
		}
	default:
		return fmt.Errorf("%w: unknown step kind %v", ErrInvalid, st.Kind)
	}
	if err != nil {
		return err
	}
	return w.events(evs)
}

func (w *World) events(evs []migrate.Event) error {
	if w.OnEvent == nil {
		return nil
	}
	for _, ev := range evs {
		if err := w.OnEvent(w, ev); err != nil {
			return err
		}
	}
	return nil
}

// Finish runs the Sim until no migration is under way, recovering each
// post-copy that waits for its lost link (migrate.Migration.Recover): the
// link is taken to have come back. A migration that still has not ended
// then is an error wrapping ErrInvariant.
func (w *World) Finish() error {
	for {
		evs, err := w.Sim.Run()
		if err != nil {
			return err
		}
		if err := w.events(evs); err != nil {
			return err
		}
		var waiting []error
		for _, m := range w.Migrations {
			if !m.Done() {
				if err := m.Recover(); err != nil {
					waiting = append(waiting, broken("finished", "migration of %s did not end (%v in %v) and cannot be recovered: %v", m.VM().ID(), m.Phase(), m.Err(), err))
				}
			}
		}
		if len(waiting) > 0 {
			return errors.Join(waiting...)
		}
		if !slices.ContainsFunc(w.Migrations, func(m *migrate.Migration) bool { return !m.Done() }) {
			return nil
		}
	}
}

// Check holds the world to every invariant: one owner per VM, nothing
// lost (the Oracle against the live copies), nothing readable after a
// scrub, the schedulers' conservation of time, and, once for each
// migration that ended, a consistent report and — if it failed — the VM
// on its source, running or paused as the steps left it; or, for a
// post-copy that lost it (migrate.ErrVMLost), the rule of that loss, after
// which the VM is given back to its owner paused and the Oracle forgets
// it (see lost).
func (w *World) Check() error {
	// A lost VM first: the copy left is the source's as of the stun, and
	// the Oracle, which saw the writes made at the destination after it,
	// must forget them before it checks anything.
	for _, m := range w.Migrations {
		if m.Done() && !w.settled[m] && errors.Is(m.Err(), migrate.ErrVMLost) {
			rep := m.Report()
			if err := CheckReport(rep); err != nil {
				return err
			}
			if err := w.lost(m, w.Hosts[hostIndex(w.Hosts, rep.Source)]); err != nil {
				return err
			}
			w.settled[m] = true
		}
	}
	if err := CheckOneOwner(w.Hosts, w.IDs...); err != nil {
		return err
	}
	if err := w.Oracle.CheckHosts(w.Hosts...); err != nil {
		return err
	}
	if err := CheckScrubbed(w.Hosts...); err != nil {
		return err
	}
	if err := CheckScheduler(w.Hosts...); err != nil {
		return err
	}
	for _, m := range w.Migrations {
		if !m.Done() || w.settled[m] {
			continue
		}
		rep := m.Report()
		if err := CheckReport(rep); err != nil {
			return err
		}
		if m.Err() == nil {
			w.settled[m] = true
			continue
		}
		src := w.Hosts[hostIndex(w.Hosts, rep.Source)]
		vm, ok := src.VM(rep.VM)
		if !ok || vm.State() != w.runAs[rep.VM] {
			state := "no copy"
			if ok {
				state = vm.State().String()
			}
			return broken("failed migration", "migration of %s failed (%v) and its source holds %s, not the %v VM the steps left", rep.VM, m.Err(), state, w.runAs[rep.VM])
		}
		w.settled[m] = true
	}
	return nil
}

// lost checks the rule of a post-copy that lost its VM (migrate.ErrVMLost):
// the destination holds no copy and the source its copy as of the stun,
// paused and held; it then gives that copy back to its owner, paused
// (vgpu.VM.ResolveMigration), and the oracle forgets the VM, whose writes
// made at the destination are gone with it.
func (w *World) lost(m *migrate.Migration, src *vgpu.Host) error {
	rep := m.Report()
	dst := w.Hosts[hostIndex(w.Hosts, rep.Destination)]
	if in, ok := dst.VM(rep.VM); ok {
		return broken("lost VM", "post-copy of %s lost the VM (%v) and its destination still holds a copy, %v", rep.VM, m.Err(), in.State())
	}
	vm, ok := src.VM(rep.VM)
	if !ok {
		return broken("lost VM", "post-copy of %s lost the VM (%v) and its source holds no copy", rep.VM, m.Err())
	}
	if vm.State() != vgpu.VMPaused || !vm.Migrating() {
		return broken("lost VM", "post-copy of %s lost the VM (%v) and its source's copy is %v, held %t, not paused and held", rep.VM, m.Err(), vm.State(), vm.Migrating())
	}
	if err := vm.ResolveMigration(false); err != nil {
		return err
	}
	w.Oracle.Forget(rep.VM)
	w.runAs[rep.VM] = vgpu.VMPaused
	return nil
}

func hostIndex(hosts []*vgpu.Host, name string) int {
	for i, h := range hosts {
		if h.Name() == name {
			return i
		}
	}
	return 0
}

// Run plays every step, checking the world after each and at the end,
// and fails t with the scenario and the step that broke it.
func (w *World) Run(t TB) {
	t.Helper()
	fail := func(what string, err error) {
		t.Helper()
		t.Fatalf("%s: %v\nscenario:\n%s", what, err, w.Spec)
	}
	if err := w.Check(); err != nil {
		fail("before the first step", err)
	}
	for i, st := range w.Spec.Steps {
		if err := w.Do(st); err != nil {
			fail(fmt.Sprintf("step %d (%v)", i, st), err)
		}
		if err := w.Check(); err != nil {
			fail(fmt.Sprintf("after step %d (%v)", i, st), err)
		}
	}
	if err := w.Finish(); err != nil {
		fail("finishing", err)
	}
	if err := w.Check(); err != nil {
		fail("after the last migration ended", err)
	}
}
