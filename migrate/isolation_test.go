package migrate

import (
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

// TestMigratedAwayWindowScrubbed: a VM keeping a secret in its framebuffer
// and guest RAM migrates away. The destination holds the secret (the test
// has something to leak); the source holds nothing; the source's stale
// window refuses access and its released RAM reads zeros; and a new
// tenant placed in the source's former window reads zeros in all of it.
func TestMigratedAwayWindowScrubbed(t *testing.T) {
	s, vm, src, dst := newSecretWorld(t)
	at, fb, ram := windowOf(vm.VGPUs()[0]), vm.Framebuffers()[0], vm.RAM()
	m, err := s.Start(vm, dst, isolationConfig())
	must(t, err)
	if _, err := m.Run(); err != nil {
		t.Fatal(err)
	}
	if m.VM().Host() != dst {
		t.Fatalf("the VM ended on %s", m.VM().Host().Name())
	}
	if n := secretPagesIn(t, m.VM().Framebuffers()[0]); n != len(secretPages(fb, true)) {
		t.Fatalf("the destination holds %d of the %d secret pages", n, len(secretPages(fb, true)))
	}
	checkNothingAt(t, src)
	staleHandlesHoldNothing(t, fb, ram)
	nextTenantReadsZeros(t, src, at, nil)
}

// abortPoint is where a migration in is abandoned.
type abortPoint struct {
	name  string
	phase Phase
	round int // the pre-copy round, -1 outside pre-copy
}

var abortPoints = []abortPoint{
	{"round-0", PhasePreCopy, 0},
	{"round-1", PhasePreCopy, 1},
	{"final-round", PhaseFinalFramebuffer, -1},
	{"resume", PhaseResume, -1},
}

// abortKind is how a migration in is abandoned, and the sentinel its
// error wraps.
type abortKind struct {
	name     string
	do       func(*Migration) error
	sentinel error
}

var abortKinds = []abortKind{
	{"cancel", (*Migration).Cancel, ErrCanceled},
	{"link-down", func(m *Migration) error { return m.Inject(FaultLinkDown) }, ErrConnection},
	{"link-stall", func(m *Migration) error { return m.Inject(FaultLinkStall) }, ErrConnection},
	{"refused", func(m *Migration) error { return m.Inject(FaultRefused) }, ErrRefused},
	{"destination-gone", func(m *Migration) error { return m.Inject(FaultDestinationGone) }, ErrDestination},
}

// TestAbortedMigrationInScrubbed abandons a migration in at each point:
// by a cancel and by two faults, each fault at two points. The destination
// applies each batch as it is encoded, so at every point, in round 0 too,
// its window holds the secret when the migration is abandoned. Afterwards
// the destination holds
// nothing resident, the incoming VM's stale window refuses access and its
// released guest RAM reads zeros, and a tenant placed next in the window
// the destination had reserved reads zeros at every page the migrating VM
// uses (everywhere, after the cancel). The source keeps its secret.
func TestAbortedMigrationInScrubbed(t *testing.T) {
	cells, leakable := 0, 0
	faults := abortKinds[1:]
	for i, p := range abortPoints {
		kinds := []abortKind{abortKinds[0], faults[(2*i)%len(faults)], faults[(2*i+1)%len(faults)]}
		if raceEnabled {
			kinds = kinds[:2] // the same steps; under the race detector fewer ways
		}
		for j, k := range kinds {
			t.Run(p.name+"/"+k.name, func(t *testing.T) {
				leakable += abortIn(t, p, k, j == 0)
				cells++
			})
		}
	}
	t.Logf("%d aborted migrations in, the destination holding %d secret pages in all at the aborts, none readable after", cells, leakable)
}

// abortIn runs one cell and returns how many secret pages the destination
// held when it was abandoned.
func abortIn(t *testing.T, p abortPoint, k abortKind, whole bool) int {
	s, vm, src, dst := newSecretWorld(t)
	m, err := s.Start(vm, dst, isolationConfig())
	must(t, err)
	for m.Phase() != p.phase || p.round >= 0 && m.core.Round() != p.round {
		if _, ok, err := m.Step(); err != nil || !ok {
			t.Fatalf("the migration ended in %v before %s: %v", m.Phase(), p.name, m.Err())
		}
	}
	if p.round == 0 {
		// A round is one event: move a little way into it. (Round 1 is
		// abandoned as it starts: it lasts a few milliseconds.)
		if _, err := s.Advance(2 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if m.Phase() != p.phase || m.core.Round() != p.round {
			t.Fatal("round 0 ended within 2 ms")
		}
	}
	in, ok := dst.VM(isolationVMID)
	if !ok || in.State() == vgpu.VMRunning {
		t.Fatalf("the destination holds no VM in %s, or runs it", p.name)
	}
	held := secretPagesIn(t, in.Framebuffers()[0])
	if held == 0 {
		t.Fatalf("the destination holds %d secret pages in %s", held, p.name)
	}
	at, fb, ram := windowOf(in.VGPUs()[0]), in.Framebuffers()[0], in.RAM()
	pages := vmPages(t, vm)
	must(t, k.do(m))
	for !m.Done() {
		if _, _, err := m.Step(); err != nil {
			t.Fatal(err)
		}
	}
	var pe *PhaseError
	if err := m.Err(); !errors.As(err, &pe) || pe.Phase != p.phase || !errors.Is(err, k.sentinel) {
		t.Fatalf("error %v, want a *PhaseError in %v wrapping %v", err, p.phase, k.sentinel)
	}
	if vm.Host() != src || secretPagesIn(t, vm.Framebuffers()[0]) != len(secretPages(vm.Framebuffers()[0], true)) {
		t.Fatal("the source lost its VM's secret")
	}
	checkNothingAt(t, dst)
	staleHandlesHoldNothing(t, fb, ram)
	if whole {
		pages = nil
	}
	nextTenantReadsZeros(t, dst, at, pages)
	return held
}
