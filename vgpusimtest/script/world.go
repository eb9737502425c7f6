package script

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// world is what a script acts on: one Sim, the hosts it drives, the links
// the script declared and the migrations it started, each under a label.
type world struct {
	simCfg migrate.SimConfig
	sim    *migrate.Sim // made by the first command that needs it
	hosts  []*vgpu.Host
	links  map[string]migrate.Link
	migs   []*migration
	vms    []string // the VMs the script made, in order
}

// migration is a migration the script started, and how many of its events
// the world has handed out, to tell whose an event is.
type migration struct {
	label    string
	vm       string
	src, dst string
	route    []string // the names of the links it crosses
	m        *migrate.Migration
	seen     int
}

func newWorld() *world { return &world{links: map[string]migrate.Link{}} }

// command is one of the language's commands: the keys it takes and what
// it does. run returns the output; an error that is not a script error is
// printed after it.
type command struct {
	keys []string
	run  func(w *world, a *args) (string, error)
}

// commands is the language: every command by its name.
var commands = map[string]command{
	"sim":      {[]string{"max-per-host", "host-workers"}, (*world).cmdSim},
	"reset":    {nil, (*world).cmdReset},
	"host":     {[]string{"name", "gpus", "gpu", "memory", "ram", "fb-page", "ram-page", "seed", "placement", "ecc"}, (*world).cmdHost},
	"vm":       {[]string{"id", "host", "profile", "profiles", "ram", "footprint", "seed", "start", "paused", "passthrough"}, (*world).cmdVM},
	"workload": {workloadKeys, (*world).cmdWorkload},
	"pause":    {[]string{"vm"}, (*world).cmdPause},
	"resume":   {[]string{"vm"}, (*world).cmdResume},
	"link":     {[]string{"name", "from", "capacity", "efficiency", "latency"}, (*world).cmdLink},
	"capacity": {[]string{"link", "rate"}, (*world).cmdCapacity},
	"migrate":  {migrateKeys, (*world).cmdMigrate},
	"cancel":   {[]string{"migration"}, (*world).cmdCancel},
	"inject":   {[]string{"fault", "link", "migration"}, (*world).cmdInject},
	"advance":  {[]string{"by", "to", "events"}, (*world).cmdAdvance},
	"step":     {[]string{"n", "migration", "until", "round", "quiet"}, (*world).cmdStep},
	"run":      {[]string{"migration", "events"}, (*world).cmdRun},
	"report":   {[]string{"migration", "rounds", "metrics", "published"}, (*world).cmdReport},
	"state":    {nil, (*world).cmdState},
	"hosts":    {nil, (*world).cmdHosts},
	"rates":    {[]string{"link"}, (*world).cmdRates},
	"check":    {nil, (*world).cmdCheck},
}

func commandNames() []string {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ensureSim makes the Sim if no command has yet.
func (w *world) ensureSim() (*migrate.Sim, error) {
	if w.sim == nil {
		s, err := migrate.NewSim(w.simCfg)
		if err != nil {
			return nil, err
		}
		w.sim = s
	}
	return w.sim, nil
}

func (w *world) host(name string) (*vgpu.Host, error) {
	for _, h := range w.hosts {
		if h.Name() == name {
			return h, nil
		}
	}
	return nil, fmt.Errorf("%w: no host %q", errNotFound, name)
}

// vm returns the copy of VM id that its owner drives: under a migration,
// the migration's (the source's until the switch-over); otherwise the one
// copy a host holds.
func (w *world) vm(id string) (*vgpu.VM, error) {
	for _, m := range w.migs {
		if m.vm == id && !m.m.Done() {
			return m.m.VM(), nil
		}
	}
	for _, h := range w.hosts {
		if vm, ok := h.VM(id); ok {
			return vm, nil
		}
	}
	return nil, fmt.Errorf("%w: no VM %q on any host", errNotFound, id)
}

func (w *world) migration(label string) (*migration, error) {
	for _, m := range w.migs {
		if m.label == label {
			return m, nil
		}
	}
	return nil, fmt.Errorf("%w: no migration %q", errNotFound, label)
}

// link returns the link named name: one the script declared, else a
// preset.
func (w *world) link(name string) (migrate.Link, error) {
	if l, ok := w.links[name]; ok {
		return l, nil
	}
	l, err := migrate.LinkByName(name)
	if err != nil {
		return migrate.Link{}, fmt.Errorf("%w: %w", errNotFound, err)
	}
	return l, nil
}

// owner returns the migration an event belongs to: the first of its VM's
// migrations with an event not yet handed out, that event being this one.
func (w *world) owner(e migrate.Event) *migration {
	for _, m := range w.migs {
		if m.vm != e.VM {
			continue
		}
		evs := m.m.Events()
		if m.seen < len(evs) && sameEvent(evs[m.seen], e) {
			m.seen++
			return m
		}
	}
	return nil
}

func sameEvent(a, b migrate.Event) bool {
	return a.Kind == b.Kind && a.At == b.At && a.Phase == b.Phase && a.Round == b.Round && a.Detail == b.Detail
}

// where says where a migration is: its phase, and its round in
// pre-copy.
func where(m *migrate.Migration) string {
	p := m.Phase()
	if p != migrate.PhasePreCopy {
		return p.String()
	}
	return fmt.Sprintf("%v round %d", p, round(m))
}

// round returns the pre-copy round a migration is in: the last one
// started.
func round(m *migrate.Migration) int {
	evs := m.Events()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == migrate.RoundStarted {
			return evs[i].Round
		}
	}
	return -1
}

// named reads a name of package migrate as a script writes it: an alias
// of the language's, or the name the value's String prints, a space in it
// written as a hyphen, since a value holds no space unquoted (final-RAM
// for "final RAM"). The rule of which names there are stays with
// migrate's parser.
func named[T any](parse func(string) (T, error), aliases map[string]string) func(string) (T, error) {
	return func(s string) (T, error) {
		if name, ok := aliases[s]; ok {
			s = name
		}
		v, err := parse(s)
		if err != nil {
			if v, err := parse(strings.ReplaceAll(s, "-", " ")); err == nil {
				return v, nil
			}
		}
		return v, err
	}
}

// phaseNames lists the phases as a script writes them.
func phaseNames() string {
	var names []string
	for _, p := range migrate.Phases() {
		names = append(names, strings.ReplaceAll(p.String(), " ", "-"))
	}
	return strings.Join(names, ", ")
}

// dur prints a duration at a microsecond's resolution: stable, and finer
// than any figure the library is calibrated to.
func dur(d time.Duration) string { return d.Round(time.Microsecond).String() }

// bytesOf prints a byte count exactly and, from a KiB on, in binary units.
func bytesOf(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size {
			return fmt.Sprintf("%d B (%.2f %s)", n, float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// gib prints a size in GiB where it is whole, else in bytes.
func gib(n int64) string {
	if n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}
