package script

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vgpusim/vgpusim/migrate"
)

var migrateKeys = []string{"vm", "to", "label", "link", "via", "preset", "mode", "fidelity", "codec", "stun-target",
	"stun-limit", "max-rounds", "on-nonconvergence", "timeout", "batch", "metrics-window", "encode-workers"}

// cmdMigrate starts a migration and names it by a label, m1, m2, ... in
// start order unless label= gives one.
func (w *world) cmdMigrate(a *args) (string, error) {
	id, to := a.need("vm"), a.need("to")
	label := a.str("label", fmt.Sprintf("m%d", len(w.migs)+1))
	linkName := a.str("link", migrate.GbE10().Name)
	via := a.list("via")
	preset := a.str("preset", "")
	var cfg migrate.Config
	cfg.StunTarget = a.dur("stun-target", 0)
	cfg.StunLimit = a.dur("stun-limit", 0)
	cfg.MaxRounds = a.int("max-rounds", 0, 0, 1<<20)
	cfg.Timeout = a.dur("timeout", 0)
	cfg.BatchBytes = int(a.size("batch", 0))
	cfg.MetricsWindow = a.dur("metrics-window", 0)
	cfg.EncodeWorkers = a.int("encode-workers", 0, 0, 1024)
	mode := parsed(a, "mode", migrate.Mode(0), "pre-copy (or precopy), legacy or post-copy", named(migrate.ParseMode, modeAliases))
	cfg.Fidelity = parsed(a, "fidelity", migrate.Model, "model or bytes", named(migrate.ParseFidelity, nil))
	cfg.Codec = parsed(a, "codec", migrate.CodecZstd, "zstd, none, s2 or auto", migrate.ParseCodec)
	cfg.OnNonConvergence = parsed(a, "on-nonconvergence", migrate.NonConvergence(0),
		"throttle, switch-over-anyway (or switch) or abort", named(migrate.ParseNonConvergence, nonConvergenceAliases))
	if a.err != nil {
		return "", a.err
	}
	if _, err := w.migration(label); err == nil {
		return "", fmt.Errorf("%w: migration label %q", errExists, label)
	}
	if preset != "" {
		p, err := migrate.PresetByName(preset)
		if err != nil {
			return "", err
		}
		cfg = p.Apply(cfg)
	}
	if mode != 0 {
		cfg.Mode = mode
	}
	vm, err := w.vm(id)
	if err != nil {
		return "", err
	}
	dst, err := w.host(to)
	if err != nil {
		return "", err
	}
	if cfg.Link, err = w.link(linkName); err != nil {
		return "", err
	}
	route := []string{cfg.Link.Name}
	for _, n := range via {
		l, err := w.link(n)
		if err != nil {
			return "", err
		}
		cfg.Via = append(cfg.Via, l)
		route = append(route, l.Name)
	}
	src := vm.Host().Name()
	m, err := w.sim.Start(vm, dst, cfg)
	if err != nil {
		return "", err
	}
	w.migs = append(w.migs, &migration{label: label, vm: id, src: src, dst: to, route: route, m: m})
	r := m.Report()
	return fmt.Sprintf("%s: %s %s -> %s over %s, %v mode, %v fidelity\n", label, id, src, to,
		strings.Join(route, " > "), r.Mode, r.Fidelity), nil
}

// The names a script writes beyond those package migrate parses: short
// forms the language has always taken, kept so that its scripts still
// run.
var (
	modeAliases           = map[string]string{"precopy": migrate.PreCopy.String()}
	nonConvergenceAliases = map[string]string{"switch": migrate.SwitchAnyway.String()}
)

// cmdCancel gives a migration up, as its source's operator would.
func (w *world) cmdCancel(a *args) (string, error) {
	label := a.need("migration")
	if a.err != nil {
		return "", a.err
	}
	m, err := w.migration(label)
	if err != nil {
		return "", err
	}
	if m.m.Done() {
		return "had ended: " + endLine(m), m.m.Cancel()
	}
	at := where(m.m)
	err = m.m.Cancel()
	return hitLine(m, at), err
}

// cmdInject makes a fault happen now: to every migration on a link
// (link=, link faults only, Sim.FailLink) or to one migration
// (migration=, any fault, Migration.Inject).
func (w *world) cmdInject(a *args) (string, error) {
	a.need("fault")
	f := parsed(a, "fault", migrate.Fault(0), faultNames(), named(migrate.ParseFault, nil))
	link, label := a.str("link", ""), a.str("migration", "")
	if a.err == nil && (link == "") == (label == "") {
		a.fail(fmt.Errorf("%w: inject needs one of link= and migration=", errMissingKey))
	}
	if a.err != nil {
		return "", a.err
	}
	if label != "" {
		m, err := w.migration(label)
		if err != nil {
			return "", err
		}
		if m.m.Done() {
			return "had ended: " + endLine(m), m.m.Inject(f)
		}
		at := where(m.m)
		err = m.m.Inject(f)
		return hitLine(m, at), err
	}
	if w.sim == nil {
		return "", fmt.Errorf("%w: no link %q in use", errNotFound, link)
	}
	// Where each migration on the link was when the fault hit it.
	var b strings.Builder
	var hit []*migration
	var at []string
	for _, m := range w.migs {
		if !m.m.Done() && slices.Contains(m.route, link) {
			hit, at = append(hit, m), append(at, where(m.m))
		}
	}
	n, err := w.sim.FailLink(link, f)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "%s: %v hit %d migration(s)\n", link, f, n)
	for i, m := range hit {
		b.WriteString(hitLine(m, at[i]))
	}
	return b.String(), nil
}

// hitLine says where a fault or a cancel found a migration and where it
// left it: failed, and why, or still under way (a stall, until its
// timeout).
func hitLine(m *migration, at string) string {
	if err := m.m.Err(); err != nil {
		return fmt.Sprintf("%s in %s: failed: %v\n", m.label, at, err)
	}
	return fmt.Sprintf("%s in %s: under way, in %s\n", m.label, at, where(m.m))
}

func faultNames() string {
	var names []string
	for _, f := range migrate.Faults() {
		names = append(names, f.String())
	}
	return strings.Join(names, ", ")
}
