package migrate

import (
	"fmt"

	"github.com/vgpusim/vgpusim/checkpoint"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// Source is a migrating VM at its source, as every driver of a Core
// handles it: its regions and dirty logs, the pages each step sends, the
// pause, the throttle, the checks that nobody changed it under the
// migration, the commit, and the roll back that leaves it as it was. Guest
// RAM is region 0 and framebuffer i region i+1, as the Core counts them. A
// Source is made by NewSource (the methods of any other do nothing, or fail
// with ErrConfig) and is not safe for concurrent use. A driver whose host
// another goroutine advances (package live's Runner) holds the host's lock
// around the calls that change or inspect the VM — NewSource, Pause,
// SaveDevices, SetThrottle, Check, Commit, Release, RollBack, StartLogging,
// StopLogging; the page reads (SendRegions, Dirty,
// UsedFramebuffer) go through the memory package's own
// synchronization while the workload writes, as pre-copy must.
//
// # Ownership
//
// A Source holds its VM's migration claim (vgpu.MigrationClaim) from
// NewSource until Release or RollBack, so a VM has one migration at a time
// whichever driver runs it, and a second NewSource fails with
// ErrMigrating. The VM's owner keeps driving it meanwhile. Before the stun
// whatever the owner does is the migration's to carry: a pause (the VM
// arrives paused), a throttle (the destination applies it; a migration's
// own throttle cut is separate and ends with it). From the stun on, the
// VM's change count (vgpu.VM.Changes) must stay as Pause noted it and no
// region may be written (Pause collects what the VM wrote before into the
// final pages): any resume, pause, stop or restore by the owner, or any
// write, fails the migration with
// ErrSource, however the changes net out by the next check, and the VM
// stays at the source as its owner left it.
type Source struct {
	vm    *vgpu.VM
	claim *vgpu.MigrationClaim
	regs  []*memory.Region // guest RAM, then each framebuffer
	sets  []*memory.PageSet

	wasRunning bool   // the VM ran: when the migration started, then when the stun began
	pausedByUs bool   // the stun paused it, and only a roll back resumes it
	stunned    bool   // Pause ran: the owner's changes fail the migration from here on
	stunAt     uint64 // the VM's change count when the stun began
	committed  bool
}

// NewSource checks that vm can be live-migrated, takes its migration claim
// and notes what the migration needs of it. A VM another migration holds,
// in either mode, is refused with ErrMigrating (and vgpu.ErrMigrating).
// The claim lasts until Release or RollBack, which every driver calls when
// the migration ends.
func NewSource(vm *vgpu.VM) (*Source, error) {
	if vm == nil {
		return nil, fmt.Errorf("%w: nil VM", ErrConfig)
	}
	if err := vm.CheckMigratable(); err != nil {
		return nil, wrap(ErrIncompatible, err)
	}
	st := vm.State()
	if st != vgpu.VMRunning && st != vgpu.VMPaused {
		return nil, fmt.Errorf("%w: VM is %v; only a running or paused VM is live-migrated", ErrIncompatible, st)
	}
	claim, err := vm.ClaimMigration()
	if err != nil {
		return nil, wrap(ErrMigrating, err)
	}
	s := &Source{vm: vm, claim: claim, wasRunning: st == vgpu.VMRunning}
	s.regs = append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...)
	for _, r := range s.regs {
		s.sets = append(s.sets, memory.NewPageSet(r.Pages()))
	}
	return s, nil
}

// Regions returns the VM's regions: guest RAM, then each framebuffer.
func (s *Source) Regions() []*memory.Region {
	if !s.ok() {
		return nil
	}
	return s.regs
}

// ok reports a Source that NewSource made.
func (s *Source) ok() bool { return s != nil && s.vm != nil }

// errNoSource is the error of a Source that NewSource did not make.
var errNoSource = fmt.Errorf("%w: a Source not made by NewSource", ErrConfig)

// WasRunning reports whether the VM ran: when the migration started, and
// after Pause, when the stun began. The destination resumes it if so.
func (s *Source) WasRunning() bool { return s.ok() && s.wasRunning }

// OwnerThrottle is the VM's owner's throttle as it stands, without the
// migration's cut: what the destination applies at the commit, and what
// the VM keeps after a failure.
func (s *Source) OwnerThrottle() float64 {
	if !s.ok() {
		return 0
	}
	return s.vm.Throttle()
}

// Metadata declares the VM's regions to a checkpoint stream: guest RAM as
// region 0, then each framebuffer.
func (s *Source) Metadata() checkpoint.Metadata {
	if !s.ok() {
		return checkpoint.Metadata{}
	}
	meta := checkpoint.Metadata{VMID: s.vm.ID(), GPUModel: s.vm.GPUModel()}
	for _, p := range s.vm.Profiles() {
		meta.Profiles = append(meta.Profiles, p.Name)
	}
	for i, r := range s.regs {
		meta.Regions = append(meta.Regions, checkpoint.RegionInfoOf(uint32(i), r))
	}
	return meta
}

// StartLogging turns the regions' dirty logs on.
func (s *Source) StartLogging() {
	if !s.ok() {
		return
	}
	for _, r := range s.regs {
		r.StartDirtyLog()
	}
}

// StopLogging turns the regions' dirty logs off.
func (s *Source) StopLogging() {
	if !s.ok() {
		return
	}
	for _, r := range s.regs {
		r.StopDirtyLog()
	}
}

// SendRegions sends regions [from, to): each region's dirty log is
// collected and cleared, so that a write after this is seen, and send is
// given the pages it collected, or, if all, nil for every page in use.
// sent counts each region's traffic.
func (s *Source) SendRegions(from, to int, all bool, send func(i int, set *memory.PageSet) (Traffic, error), sent func(i int, t Traffic)) error {
	if !s.ok() || send == nil || sent == nil {
		return errNoSource
	}
	for i := max(from, 0); i < min(to, len(s.regs)); i++ {
		if !s.stunned {
			// In the stun the pages are those Pause collected.
			s.regs[i].CollectDirty(s.sets[i])
		}
		set := s.sets[i]
		if all {
			set = nil
		}
		t, err := send(i, set)
		if err != nil {
			return err
		}
		sent(i, t)
	}
	return nil
}

// SaveDevices saves the VM's vGPU states for the stun and returns them
// with their size in bytes.
func (s *Source) SaveDevices() ([][]byte, int64, error) {
	if !s.ok() {
		return nil, 0, errNoSource
	}
	states, err := s.vm.SaveDeviceStates()
	if err != nil {
		return nil, 0, wrap(ErrSource, err)
	}
	n := int64(0)
	for _, st := range states {
		n += int64(len(st))
	}
	return states, n, nil
}

// Pause stops the VM for the stun. The destination resumes the VM as the
// stun finds it: paused, if its owner paused it during pre-copy. From here
// on any change by the owner fails the migration (see Check).
func (s *Source) Pause() error {
	if !s.ok() {
		return errNoSource
	}
	s.wasRunning = s.vm.State() == vgpu.VMRunning
	if s.wasRunning {
		if err := s.claim.Pause(); err != nil {
			return wrap(ErrSource, err)
		}
		s.pausedByUs = true
	}
	// What the VM wrote until now goes with the stun's final pages;
	// anything written from here on is its owner's doing, inside the
	// stun, and fails the migration (Check).
	for i, r := range s.regs {
		r.CollectDirty(s.sets[i])
	}
	s.stunned, s.stunAt = true, s.vm.Changes()
	return nil
}

// SetThrottle applies the migration's cut: the VM's workload runs at the
// larger of it and its owner's throttle, which it leaves as it is.
func (s *Source) SetThrottle(f float64) error {
	if !s.ok() {
		return errNoSource
	}
	return wrap0(ErrSource, s.claim.SetThrottle(f))
}

// Check catches a VM changed under the migration by someone else, once
// the work of phase done is over: stopped or destroyed; paused, resumed,
// stopped or restored by its owner since the stun began (by its change
// count: a resume undone by a pause before this check counts); or written
// since the stun began (by its dirty logs, which Pause emptied into the
// final pages).
func (s *Source) Check(done Phase) error {
	if !s.ok() {
		return errNoSource
	}
	st := s.vm.State()
	switch {
	case st != vgpu.VMRunning && st != vgpu.VMPaused:
		return fmt.Errorf("%w: source VM was %v during the migration", ErrSource, st)
	case st == vgpu.VMRunning && done.Stunned():
		return fmt.Errorf("%w: source VM was resumed during the stun", ErrSource)
	case s.stunned && s.vm.Changes() != s.stunAt:
		return fmt.Errorf("%w: source VM's run state was changed by its owner %d time(s) during the stun", ErrSource, s.vm.Changes()-s.stunAt)
	}
	if s.stunned {
		return writtenInStun(s.regs)
	}
	return nil
}

// writtenInStun returns ErrSource if any of regs, whose dirty pages the
// stun's pause collected, logged a write since.
func writtenInStun(regs []*memory.Region) error {
	for i, r := range regs {
		if n := r.DirtyCount(); n > 0 {
			return fmt.Errorf("%w: %d pages of the source VM's region %d written during the stun", ErrSource, n, i)
		}
	}
	return nil
}

// Commit is the source's last word before the destination may resume the
// VM: it checks the VM as Check does once every page has gone, and, if
// nobody changed it, holds it so that its owner can change its run state
// or throttle no more (vgpu.ErrMigrating) until the migration ends. It
// returns what the destination applies, both read in the same instant as
// the check: whether to resume the VM (it ran when the stun began) and the
// owner's throttle. A migration that fails after Commit rolls back as
// usual: RollBack lets the owner in again.
func (s *Source) Commit() (resume bool, throttle float64, err error) {
	if !s.ok() {
		return false, 0, errNoSource
	}
	if err := s.Check(PhaseResume); err != nil {
		return false, 0, err
	}
	throttle, err = s.claim.Commit()
	if err != nil {
		return false, 0, wrap(ErrSource, err)
	}
	s.committed = true
	return s.wasRunning, throttle, nil
}

// Committed reports whether Commit succeeded: from then on the destination
// may run the VM, and a failure is the destination's or the connection's,
// never the source VM's.
func (s *Source) Committed() bool { return s.ok() && s.committed }

// Release ends a migration that succeeded: dirty logging off, the VM
// destroyed at the source, where the destination has taken it over, and
// its claim dropped.
func (s *Source) Release() error {
	if !s.ok() {
		return errNoSource
	}
	s.StopLogging()
	if s.vm.State() == vgpu.VMDestroyed {
		s.claim.Release()
		return nil
	}
	return s.claim.Destroy()
}

// RollBack leaves the VM as it was before the migration: dirty logging
// off, the migration's throttle cut gone (its owner's throttle stays, as
// the owner last set it), its claim dropped, and resumed if the stun
// paused it — unless its owner changed its run state since (it stays as
// the owner left it). If the outcome is in doubt the VM stays paused and
// held: its owner's changes are refused (vgpu.ErrMigrating) until
// vgpu.VM.ResolveMigration says whether the destination runs it, so that
// there are never two running copies and never none.
func (s *Source) RollBack(inDoubt bool) {
	if !s.ok() {
		return
	}
	s.StopLogging()
	if inDoubt && s.committed {
		return
	}
	defer s.claim.Release()
	if s.vm.State() != vgpu.VMPaused || !s.pausedByUs || inDoubt || s.vm.Changes() != s.stunAt {
		return
	}
	_ = s.claim.Resume()
}
