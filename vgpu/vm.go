package vgpu

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// VMState is a VM's run state.
type VMState uint8

// The run states of a VM. Exactly one host owns a running VM: a migration's
// destination holds it as incoming, then paused once its devices are
// restored, and runs it only when the source has let it go; the source is
// paused from the stun until it is destroyed or resumes. During the stun
// both copies may read paused, never both running.
//
//	created  --Start--> running
//	running  --Pause--> paused --Resume--> running
//	running/paused --Stop--> stopped --Start--> running
//	incoming --Restore--> paused, --Commit--> running, --Abort--> destroyed
//	paused/stopped --Restore--> paused (a checkpoint restored in place)
//	any      --Destroy--> destroyed
//
// A running VM may also be stalled (Stall) for a while: it waits as if
// paused but stays running.
const (
	VMCreated VMState = iota + 1
	VMRunning
	VMPaused
	VMStopped
	VMIncoming
	VMDestroyed
)

func (s VMState) String() string {
	switch s {
	case VMCreated:
		return "created"
	case VMRunning:
		return "running"
	case VMPaused:
		return "paused"
	case VMStopped:
		return "stopped"
	case VMIncoming:
		return "incoming"
	case VMDestroyed:
		return "destroyed"
	}
	return fmt.Sprintf("VMState(%d)", uint8(s))
}

// MaxVGPUsPerVM bounds the vGPUs of one VM: four, the most vSphere allows
// from 6.7 Update 3 (VMware vSphere 6.7 documentation, Virtual Machine
// Administration, the page on configuring an NVIDIA GRID vGPU for a
// virtual machine).
const MaxVGPUsPerVM = 4

// VMSpec describes a VM to create.
type VMSpec struct {
	// ID names the VM; it must be unique on the host and stays the same
	// across migrations.
	ID string
	// Seed keys the VM's memory contents (its guest RAM and each vGPU's
	// framebuffer window derive their seeds from it); 0 means one derived
	// from the host's seed and the ID.
	Seed uint64
	// RAMBytes is the guest memory, a positive multiple of the host's RAM
	// page size, reserved in full.
	RAMBytes int64
	// RAMFootprintBytes is the guest memory holding data (guest OS and
	// applications) at the first start, filled with a realistic mix of
	// contents from offset 0; workloads place their own data after it.
	RAMFootprintBytes int64
	// Profiles names the vGPUs, one entry each, all of one type; several
	// only for a type that allows it (MultiVGPU).
	Profiles []string
	// Passthrough gives the VM a whole GPU (DirectPath I/O) instead of
	// vGPUs; Profiles must then be empty. Such a VM cannot be migrated.
	Passthrough bool
	// Remote attaches GPU sessions of other hosts (Host.OpenRemote), as
	// the VM's vGPUs after those of Profiles; a VM may have only these.
	// Each session takes one VM, and its server's clock must be the
	// host's. Such a VM migrates in the simulated mode (its sessions are
	// handed over, VM.HandOverRemote); it is not suspended, and the live
	// mode refuses it.
	Remote []*RemoteGPU
	// Workload, if set, runs while the VM runs.
	Workload Workload
}

// VM is a virtual machine: guest RAM, vGPUs (or one passthrough GPU), a
// run state and a workload. It is driven by its host's Advance.
//
// The dirty logs of a VM's guest memory and framebuffer windows are off
// but while a migration collects them (its source turns them on and off):
// a log on costs a bit a page and a mark a write, for every guest of a
// simulated data centre.
type VM struct {
	host        *Host
	id          string
	seed        uint64
	state       VMState
	ram         *memory.Region
	ramBytes    int64
	footprint   int64
	devices     []*VGPU
	remotes     []*RemoteGPU // remote GPUs, numbered after devices in Env
	passthrough bool
	booted      bool // the RAM footprint has been written (or migrated in)

	workload  Workload
	wlStarted bool
	throttle  float64 // the owner's (SetThrottle), kept across migrations
	env       Env

	// A migration's hold on the VM (see MigrationClaim): its throttle cut,
	// applied above the owner's while it lasts, and the owner's run-state
	// changes counted so that a migration sees any made while it holds the
	// VM stunned, however they net out.
	claim   *MigrationClaim
	changes uint64

	// A stall (Stall): the VM runs but waits, its vGPUs and workload
	// paused as in a pause, from stallFrom until stallUntil (after it,
	// when its latest stall ended). stallTotal is the time of the stalls
	// that have ended.
	stalled bool
	// pageLost: a workload hook met a page that could not come; the host
	// pauses the VM once the step's stage ends (Host.pauseLost).
	pageLost              bool
	stallFrom, stallUntil time.Duration
	stallTotal            time.Duration
}

// ID returns the VM's ID.
func (vm *VM) ID() string { return vm.id }

// Seed returns the seed that keys the VM's memory contents.
func (vm *VM) Seed() uint64 { return vm.seed }

// Host returns the host the VM is on.
func (vm *VM) Host() *Host { return vm.host }

// State returns the VM's run state.
func (vm *VM) State() VMState { return vm.state }

// Passthrough reports whether the VM has a whole GPU in passthrough.
func (vm *VM) Passthrough() bool { return vm.passthrough }

// RAM returns the VM's guest memory.
func (vm *VM) RAM() *memory.Region { return vm.ram }

// RAMFootprintBytes returns the guest memory the guest OS fills at first
// start.
func (vm *VM) RAMFootprintBytes() int64 { return vm.footprint }

// VGPUs returns the VM's vGPUs (for a passthrough VM, its one pseudo-vGPU
// covering the whole GPU).
func (vm *VM) VGPUs() []*VGPU { return append([]*VGPU(nil), vm.devices...) }

// GPUTime returns the GPU time of the work the VM's vGPUs have completed,
// across migrations (see VGPU.GPUTime).
func (vm *VM) GPUTime() time.Duration {
	var t time.Duration
	for _, d := range vm.devices {
		t += d.GPUTime()
	}
	return t
}

// Framebuffers returns each vGPU's framebuffer window, in vGPU order.
func (vm *VM) Framebuffers() []*memory.Region {
	out := make([]*memory.Region, len(vm.devices))
	for i, d := range vm.devices {
		out[i] = d.window
	}
	return out
}

// Profiles returns each vGPU's type, in vGPU order.
func (vm *VM) Profiles() []Profile {
	out := make([]Profile, len(vm.devices))
	for i, d := range vm.devices {
		out[i] = d.profile
	}
	return out
}

// GPUModel returns the model of the VM's GPUs.
func (vm *VM) GPUModel() string { return vm.host.cfg.GPU.Model }

// Workload returns the VM's workload, or nil.
func (vm *VM) Workload() Workload { return vm.workload }

// Snapshots returns the device state of each vGPU as it stands.
func (vm *VM) Snapshots() ([]DeviceState, error) {
	out := make([]DeviceState, len(vm.devices))
	for i, d := range vm.devices {
		s, err := d.Snapshot()
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}
