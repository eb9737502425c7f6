package fuzz_test

import (
	"errors"
	"fmt"

	"github.com/vgpusim/vgpusim/migrate"
)

// The migration operations of FuzzHostOps and the outcome each documents.

func (w *hostopsWorld) migrate(o hostopsOp) error {
	id := o.id()
	vm := w.owner(id)
	if vm == nil {
		w.logf("migrate %s: no such VM", id)
		return nil
	}
	src := vm.Host()
	dst := w.hosts[int(o.B)%len(w.hosts)]
	if dst == src {
		dst = w.hosts[(w.hostIndex(src)+1)%len(w.hosts)]
	}
	cfg := migrate.Config{Policy: migrate.Policy{Mode: o.mode(), OnNonConvergence: o.onNonConvergence()}, Fidelity: migrate.Bytes, Link: o.link(), Timeout: w.setup.Timeout}
	before := vm.State()
	m, err := w.sim.Start(vm, dst, cfg)
	what := fmt.Sprintf("migrate %s %s -> %s over %s", id, src.Name(), dst.Name(), cfg.Link.Name)
	if err != nil {
		// A refusal is a *PhaseError in PhaseSetup with nothing changed.
		var pe *migrate.PhaseError
		if !errors.As(err, &pe) || pe.Phase != migrate.PhaseSetup {
			return fmt.Errorf("%s: refusal %v is not a *PhaseError in setup", what, err)
		}
		if vm.State() != before {
			return fmt.Errorf("%s: refused, yet the VM went %v -> %v", what, before, vm.State())
		}
		return w.migrateOutcome(what, err)
	}
	w.migs = append(w.migs, &hostopsMig{m: m, id: id, src: src, dst: dst, link: cfg.Link.Name,
		before: before, stallAt: -1})
	w.logf("%s: migration #%d", what, len(w.migs)-1)
	return nil
}

// hostopsFaultErr is the sentinel each fault's failure wraps.
var hostopsFaultErr = map[migrate.Fault]error{
	migrate.FaultLinkDown:        migrate.ErrConnection,
	migrate.FaultLinkStall:       migrate.ErrConnection,
	migrate.FaultRefused:         migrate.ErrRefused,
	migrate.FaultDestinationGone: migrate.ErrDestination,
}

// fail cancels a migration or injects a fault into it.
func (w *hostopsWorld) fail(o hostopsOp) error {
	if len(w.migs) == 0 {
		w.logf("%v: no migration", hostopsKindNames[o.Kind])
		return nil
	}
	mg := w.migs[int(o.A)%len(w.migs)]
	phase, done := mg.m.Phase(), mg.m.Done()
	var err error
	var f migrate.Fault
	sentinel := migrate.ErrCanceled
	if o.Kind == hostopsCancel {
		err = mg.m.Cancel()
	} else {
		f = o.fault()
		sentinel = hostopsFaultErr[f]
		err = mg.m.Inject(f)
	}
	what := fmt.Sprintf("%v %v migration #%d of %s in %v", hostopsKindNames[o.Kind], f, int(o.A)%len(w.migs), mg.id, phase)
	w.logf("%s: %v", what, err)
	return w.hit(mg, what, err, phase, done, f, sentinel)
}

// hit checks the answer of a cancel (f zero) or a fault against the documented one:
// nothing on an ended migration, ErrTooLate from the acknowledgement on,
// else an immediate failure in the phase it was in (a stall only arms
// the timeout).
func (w *hostopsWorld) hit(mg *hostopsMig, what string, err error, phase migrate.Phase, done bool,
	f migrate.Fault, sentinel error) error {
	switch {
	case done:
		// Canceling a completed migration is too late; anything else on an
		// ended migration does nothing.
		tooLate := f == 0 && phase == migrate.PhaseDone && errors.Is(err, migrate.ErrTooLate)
		if err != nil && !tooLate || mg.m.Phase() != phase {
			return fmt.Errorf("%s: on an ended migration it returned %v and moved to %v", what, err, mg.m.Phase())
		}
	case phase >= migrate.PhaseRelease:
		if !errors.Is(err, migrate.ErrTooLate) {
			return fmt.Errorf("%s: after the acknowledgement it returned %v, want ErrTooLate", what, err)
		}
	case err != nil:
		return fmt.Errorf("%s: before the acknowledgement it returned %v", what, err)
	case f == migrate.FaultLinkStall:
		if mg.m.Done() {
			return fmt.Errorf("%s: a stall failed the migration at once: %v", what, mg.m.Err())
		}
		if mg.stallAt < 0 {
			mg.stallAt = w.sim.Now()
		}
		if mg.expect == nil {
			mg.expect = sentinel
		}
	default:
		var pe *migrate.PhaseError
		if !mg.m.Done() || mg.m.Phase() != migrate.PhaseFailed {
			return fmt.Errorf("%s: the migration did not fail at once (phase %v)", what, mg.m.Phase())
		}
		if !errors.As(mg.m.Err(), &pe) || pe.Phase != phase || !errors.Is(mg.m.Err(), sentinel) {
			return fmt.Errorf("%s: failure %v, want a *PhaseError in %v wrapping %v", what, mg.m.Err(), phase, sentinel)
		}
		mg.expect = sentinel
	}
	return nil
}

// failLink drops or stalls a link: it hits every migration on the link
// that has not reached the acknowledgement; any other fault is refused.
func (w *hostopsWorld) failLink(o hostopsOp) error {
	name, f := o.link().Name, o.fault()
	type state struct {
		mg    *hostopsMig
		phase migrate.Phase
	}
	var hit []state
	for _, mg := range w.migs {
		if mg.link == name && !mg.m.Done() && mg.m.Phase() < migrate.PhaseRelease {
			hit = append(hit, state{mg, mg.m.Phase()})
		}
	}
	n, err := w.sim.FailLink(name, f)
	what := fmt.Sprintf("fail-link %s with %v", name, f)
	w.logf("%s: hit %d, %v", what, n, err)
	if f != migrate.FaultLinkDown && f != migrate.FaultLinkStall {
		if !errors.Is(err, migrate.ErrConfig) || n != 0 {
			return fmt.Errorf("%s: returned %d, %v; want 0 and ErrConfig", what, n, err)
		}
		return nil
	}
	if err != nil || n != len(hit) {
		return fmt.Errorf("%s: returned %d, %v; want %d migrations hit", what, n, err, len(hit))
	}
	for _, s := range hit {
		if e := w.hit(s.mg, what, nil, s.phase, false, f, hostopsFaultErr[f]); e != nil {
			return e
		}
	}
	return nil
}

// step moves the Sim to its next events, or one migration to its own,
// checking the invariants after each.
func (w *hostopsWorld) step(o hostopsOp) error {
	for range 1 + int(o.A)%8 {
		var ev migrate.Event
		var ok bool
		var err error
		what := "step sim"
		if o.B&1 != 0 && len(w.migs) > 0 {
			k := int(o.C) % len(w.migs)
			what = fmt.Sprintf("step migration #%d", k)
			ev, ok, err = w.migs[k].m.Step()
		} else {
			ev, ok, err = w.sim.Step()
		}
		if !ok && err == nil {
			w.logf("%s: nothing to do", what)
			return nil
		}
		if e := w.migrateOutcome(fmt.Sprintf("%s: %v", what, ev), err); e != nil {
			return e
		}
		if e := w.check(); e != nil {
			return e
		}
	}
	return nil
}
