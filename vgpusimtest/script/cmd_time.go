package script

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vgpusim/vgpusim/migrate"
)

// maxSteps bounds the events one step command takes, so that a script
// waiting for a phase that never comes ends.
const maxSteps = 1 << 20

// cmdAdvance moves simulated time on by a duration, or to a time.
func (w *world) cmdAdvance(a *args) (string, error) {
	by, to := a.dur("by", 0), a.dur("to", 0)
	events := a.flag("events")
	if a.err == nil && a.has("by") == a.has("to") {
		a.fail(fmt.Errorf("%w: advance needs one of by= and to=", errMissingKey))
	}
	if a.err != nil {
		return "", a.err
	}
	s, err := w.ensureSim()
	if err != nil {
		return "", err
	}
	done := w.running()
	var evs []migrate.Event
	if a.has("by") {
		evs, err = s.Advance(by)
	} else {
		evs, err = s.AdvanceTo(to)
	}
	return w.moved(evs, done, events), err
}

// cmdRun runs every migration, or one, to its end.
func (w *world) cmdRun(a *args) (string, error) {
	label := a.str("migration", "")
	events := a.flag("events")
	if a.err != nil {
		return "", a.err
	}
	s, err := w.ensureSim()
	if err != nil {
		return "", err
	}
	done := w.running()
	var evs []migrate.Event
	if label == "" {
		evs, err = s.Run()
		return w.moved(evs, done, events), err
	}
	m, err := w.migration(label)
	if err != nil {
		return "", err
	}
	// Migration.Run returns the migration's failure as its error; the
	// output says it, as for every other migration that ends. Any other
	// error is the Sim's or a host's, and is the command's.
	_, err = m.m.Run()
	if errors.Is(err, m.m.Err()) {
		err = nil
	}
	evs = m.m.Events()[m.seen:]
	return w.moved(evs, done, events), err
}

// running returns the migrations under way, to tell afterwards which
// ended.
func (w *world) running() []*migration {
	var out []*migration
	for _, m := range w.migs {
		if !m.m.Done() {
			out = append(out, m)
		}
	}
	return out
}

// moved prints what a move of time did: every event if asked, each
// migration that ended, and the time now.
func (w *world) moved(evs []migrate.Event, wereRunning []*migration, events bool) string {
	var b strings.Builder
	for _, e := range evs {
		// Every event passes through eventLine, printed or not: it
		// keeps count of whose events have been handed out.
		if line := w.eventLine(e); events {
			b.WriteString(line)
		}
	}
	for _, m := range wereRunning {
		if m.m.Done() {
			b.WriteString(endLine(m))
		}
	}
	fmt.Fprintf(&b, "now %s\n", dur(w.sim.Now()))
	return b.String()
}

// endLine says how a migration ended.
func endLine(m *migration) string {
	if err := m.m.Err(); err != nil {
		return fmt.Sprintf("%s: failed: %v\n", m.label, err)
	}
	return fmt.Sprintf("%s: %v\n", m.label, m.m.Phase())
}

// cmdStep takes events one at a time: n of them, of every migration or of
// one, or, with until=, those of one migration until it enters a phase
// (and with round=, that pre-copy round).
func (w *world) cmdStep(a *args) (string, error) {
	n := a.int("n", 1, 1, maxSteps)
	label := a.str("migration", "")
	until := parsed(a, "until", migrate.Phase(0), "one of "+phaseNames(), named(migrate.ParsePhase, nil))
	rnd := a.int("round", -1, 0, 1<<20)
	quiet := a.flag("quiet")
	if a.err == nil && (a.has("until") || a.has("round")) && label == "" {
		a.fail(fmt.Errorf("%w: step until= or round= needs migration=", errMissingKey))
	}
	if a.err == nil && a.has("round") && !a.has("until") {
		until = migrate.PhasePreCopy
	}
	if a.err != nil {
		return "", a.err
	}
	s, err := w.ensureSim()
	if err != nil {
		return "", err
	}
	var m *migration
	if label != "" {
		if m, err = w.migration(label); err != nil {
			return "", err
		}
	}
	reached := func() bool {
		return m.m.Phase() == until && (rnd < 0 || round(m.m) == rnd)
	}
	var b strings.Builder
	for i := 0; until != 0 || i < n; i++ {
		if until != 0 && reached() {
			break
		}
		if i == maxSteps {
			return b.String(), fmt.Errorf("%w: %s did not reach %v in %d events", errNotReached, label, until, maxSteps)
		}
		var e migrate.Event
		var ok bool
		if m != nil {
			e, ok, err = m.m.Step()
		} else {
			e, ok, err = s.Step()
		}
		if err != nil {
			return b.String(), err
		}
		if !ok {
			if until != 0 {
				return b.String(), fmt.Errorf("%w: %s ended in %v before %v", errNotReached, label, m.m.Phase(), until)
			}
			b.WriteString("no event\n")
			break
		}
		if line := w.eventLine(e); !quiet {
			b.WriteString(line)
		}
	}
	if quiet && m != nil {
		fmt.Fprintf(&b, "%s in %s at %s\n", m.label, where(m.m), dur(s.Now()))
	} else if quiet {
		fmt.Fprintf(&b, "now %s\n", dur(s.Now()))
	}
	return b.String(), nil
}

// eventLine prints an event, the migration it belongs to named by its
// label. It must see every event once, in order, to tell whose it is.
func (w *world) eventLine(e migrate.Event) string {
	label := "?"
	if m := w.owner(e); m != nil {
		label = m.label
	}
	var what string
	switch e.Kind {
	case migrate.PhaseStarted:
		what = fmt.Sprintf("phase %v", e.Phase)
	case migrate.RoundStarted:
		what = fmt.Sprintf("round %d started", e.Round)
	case migrate.RoundSent:
		what = fmt.Sprintf("round %d sent %d B", e.Round, e.WireBytes)
	case migrate.RoundEnded:
		what = fmt.Sprintf("round %d ended: %d B/s, dirtied %d B/s, expected stun %s", e.Round,
			e.BandwidthBytesPerSec, e.DirtyRateBytesPerSec, dur(e.ExpectedStun))
		if e.Throttle > 0 {
			what += fmt.Sprintf(", throttle %.0f %%", 100*e.Throttle)
		}
	case migrate.Throttled:
		what = fmt.Sprintf("throttled %.0f %%", 100*e.Throttle)
	case migrate.SwitchedOver:
		what = fmt.Sprintf("switched over: expected stun %s", dur(e.ExpectedStun))
	case migrate.Failed:
		what = fmt.Sprintf("failed: %v", e.Err)
	case migrate.StunStarted, migrate.Done:
		what = e.Kind.String()
	default:
		what = fmt.Sprintf("%v in %v: %s", e.Kind, e.Phase, e.Detail)
	}
	return fmt.Sprintf("%s %s %s\n", dur(e.At), label, what)
}
