package vgpu

import "fmt"

// MigrationClaim is a migration's hold on its VM, from ClaimMigration
// until Release: at the source, and at a destination on the copy it
// restored until the source's commit gives it the VM (Hold). While it
// lasts:
//   - nobody else can claim the VM, so a VM has at most one migration at a
//     time whichever driver runs it;
//   - the migration pauses, resumes and throttles the VM through the claim,
//     and none of that counts as its owner's doing (Changes);
//   - the migration's throttle cut applies above the owner's throttle, which
//     the owner can still change and which outlives the cut;
//   - once committed (Commit), the owner's run-state and throttle changes
//     are refused with ErrMigrating: the destination is told the VM's state
//     as of the commit and would never see a later change.
//
// A claim is not safe for concurrent use; it is used under whatever lock
// guards its VM.
type MigrationClaim struct {
	vm        *VM
	cut       float64 // the migration's throttle
	committed bool
}

// ClaimMigration takes the VM's migration claim. A VM already claimed is
// refused with ErrMigrating; a destroyed or incoming one with a
// *TransitionError.
func (vm *VM) ClaimMigration() (*MigrationClaim, error) {
	if vm.state == VMDestroyed || vm.state == VMIncoming {
		return nil, vm.refuse("claim for a migration")
	}
	if vm.claim != nil {
		return nil, fmt.Errorf("%w: VM %q already has a migration under way", ErrMigrating, vm.id)
	}
	vm.claim = &MigrationClaim{vm: vm}
	return vm.claim, nil
}

// Migrating reports whether a migration holds the VM's claim.
func (vm *VM) Migrating() bool { return vm.claim != nil }

// Changes counts the run-state changes made through the VM's own methods —
// Start, Pause, Resume, Stop, and Restore in place — which, on a migrating
// VM, are its owner's: a migration's own go through its claim. A migration
// that notes the count when it stuns the VM sees any change since, even a
// resume undone by a pause before it looked at the run state again.
func (vm *VM) Changes() uint64 { return vm.changes }

// held refuses the owner's op on a VM whose migration has committed it to
// the destination.
func (vm *VM) held(op string) error {
	if vm.claim != nil && vm.claim.committed {
		return fmt.Errorf("%w: %s VM %q refused: its migration has committed it to the destination", ErrMigrating, op, vm.id)
	}
	return nil
}

// live reports a claim still held on a VM that exists.
func (c *MigrationClaim) live() bool { return c != nil && c.vm.claim == c }

// errEnded is the error of a claim used after Release.
func (c *MigrationClaim) errEnded() error {
	return fmt.Errorf("%w: migration claim used after its release", ErrConfig)
}

// Pause pauses the VM for the migration's stun, uncounted by Changes.
func (c *MigrationClaim) Pause() error {
	if !c.live() {
		return c.errEnded()
	}
	return c.vm.pause()
}

// Resume resumes the VM the migration paused, uncounted by Changes.
func (c *MigrationClaim) Resume() error {
	if !c.live() {
		return c.errEnded()
	}
	return c.vm.resume()
}

// SetThrottle sets the migration's throttle cut, in [0, 1): the VM's
// workload runs at the larger of it and its owner's throttle until the
// claim is released.
func (c *MigrationClaim) SetThrottle(f float64) error {
	if !c.live() {
		return c.errEnded()
	}
	if !validThrottle(f) {
		return configError("throttle %v outside [0, 1)", f)
	}
	if err := c.vm.applyThrottle(max(c.vm.throttle, f)); err != nil {
		return err
	}
	c.cut = f
	return nil
}

// Commit marks the point after which the destination may run the VM: from
// here on its owner's run-state and throttle changes are refused with
// ErrMigrating until the claim is released. It returns the VM's owner's
// throttle, which the destination applies.
func (c *MigrationClaim) Commit() (float64, error) {
	if err := c.Hold(); err != nil {
		return 0, err
	}
	return c.vm.throttle, nil
}

// Hold refuses the owner's run-state and throttle changes with
// ErrMigrating until the claim is released. A destination holds the copy
// it restored so, until the source's commit makes the VM its own: a copy
// resumed earlier would run beside the source's.
func (c *MigrationClaim) Hold() error {
	if !c.live() {
		return c.errEnded()
	}
	c.committed = true
	return nil
}

// Destroy destroys the VM for the migration, held or not, and ends the
// claim: at the source once the destination has taken the VM over, at a
// destination that gives up the copy it held.
func (c *MigrationClaim) Destroy() error {
	if !c.live() {
		return c.errEnded()
	}
	c.vm.claim = nil
	return c.vm.destroy()
}

// ResolveMigration ends the hold of a migration whose outcome was left in
// doubt (the source sent its commit and never heard back: package
// migrate's ErrInDoubt). The source's copy stays paused and refuses its
// owner's changes, Destroy included, until whoever manages the hosts has
// asked the destination whether it runs the VM: if it does, destinationRuns
// true destroys this copy; if not, false gives it back to its owner,
// paused, to resume. A VM held by no migration, or by one that has not
// committed it, is refused with ErrConfig.
func (vm *VM) ResolveMigration(destinationRuns bool) error {
	c := vm.claim
	if c == nil || !c.committed {
		return configError("VM %q has no migration in doubt to resolve", vm.id)
	}
	if destinationRuns {
		return c.Destroy()
	}
	c.Release()
	return nil
}

// Release ends the claim: the migration's throttle cut is lifted, leaving
// the owner's, and the VM can be claimed again. Releasing twice, or after
// the VM was destroyed, does nothing.
func (c *MigrationClaim) Release() {
	if !c.live() {
		return
	}
	vm := c.vm
	vm.claim = nil
	if c.cut != 0 && vm.state != VMDestroyed {
		// The owner's throttle was valid when set; a workload that
		// refuses it now keeps the cut, which only slows it.
		_ = vm.applyThrottle(vm.throttle)
	}
}
