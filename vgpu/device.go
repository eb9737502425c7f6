package vgpu

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// DeviceLifecycle is the state of a vGPU device.
type DeviceLifecycle uint8

// The lifecycle of a vGPU, as a hypervisor drives it:
//
//	created --start--> running --pause--> paused --resume--> running
//	running/paused --stop--> stopped --start--> running
//	created/paused/stopped --restore--> paused
//	any --destroy--> destroyed
//
// Saving needs a quiesced device (paused or stopped).
const (
	DeviceCreated DeviceLifecycle = iota + 1
	DeviceRunning
	DevicePaused
	DeviceStopped
	DeviceDestroyed
)

func (s DeviceLifecycle) String() string {
	switch s {
	case DeviceCreated:
		return "created"
	case DeviceRunning:
		return "running"
	case DevicePaused:
		return "paused"
	case DeviceStopped:
		return "stopped"
	case DeviceDestroyed:
		return "destroyed"
	}
	return fmt.Sprintf("DeviceLifecycle(%d)", uint8(s))
}

// Engine names a GPU engine a channel or context feeds.
type Engine uint8

// The engines of a vGPU.
const (
	EngineCompute Engine = iota + 1
	EngineCopy
	EngineGraphics
)

func (e Engine) String() string {
	switch e {
	case EngineCompute:
		return "compute"
	case EngineCopy:
		return "copy"
	case EngineGraphics:
		return "graphics"
	}
	return fmt.Sprintf("Engine(%d)", uint8(e))
}

// Channel is a GPU channel: a GPFIFO ring in the framebuffer through which
// the guest driver submits work to an engine. Put counts entries written
// by the guest, Get entries consumed by the engine.
type Channel struct {
	ID           uint32
	Engine       Engine
	GPFIFOOffset uint64 // byte offset of the ring in the vGPU's framebuffer
	Put, Get     uint32
}

// Context is a GPU context: an address space whose page tables start at
// PageTableRoot, a byte offset in the vGPU's framebuffer.
type Context struct {
	ID            uint32
	Engine        Engine
	PageTableRoot uint64
}

// PCIConfigBytes is the size of a PCI function's configuration space.
const PCIConfigBytes = 256

// NumRegisters is the number of 32-bit registers in the model of a vGPU's
// BAR0 register file.
const NumRegisters = 64

// Registers of the BAR0 register file that the model uses; the others
// read as zero and are carried unchanged by save and restore.
const (
	RegBoot0          = iota // PCI device ID << 16 | vendor ID
	RegControl               // bit 0 enabled, bit 1 paused
	RegDoorbell              // the last GPFIFO put written to channel 0
	RegSubmitted             // jobs submitted, low 32 bits
	RegCompleted             // jobs completed, low 32 bits
	RegFence                 // low 32 bits of the tag of the last completed job
	RegGPUTimeLo             // GPU work completed, microseconds, low word
	RegGPUTimeHi             // ... high word
	RegFramebufferMiB        // the vGPU's framebuffer in MiB
	RegSubsystem             // the PCI subsystem ID of the vGPU type
)

const (
	controlEnabled = 1 << 0
	controlPaused  = 1 << 1
)

// VGPU is a virtual GPU device: a window of its physical GPU's framebuffer,
// a tenant of the GPU's scheduler, and a device state (PCI configuration
// space, BAR0 registers, channels and contexts) that moves with its VM.
type VGPU struct {
	gpu     *GPU
	slot    int
	profile Profile
	window  *memory.Region
	tenant  sched.TenantID
	vm      *VM
	index   int

	state      DeviceLifecycle
	generation uint64
	pci        [PCIConfigBytes]byte
	regs       [NumRegisters]uint32
	channels   []Channel
	contexts   []Context
	gpuTimeUS  uint64
	booted     bool // channels and contexts exist (first start or restore)

	remote *RemoteGPU // the session the vGPU serves, for a remote GPU's
}

// Profile returns the vGPU's type.
func (v *VGPU) Profile() Profile { return v.profile }

// GPU returns the physical GPU the vGPU lives on.
func (v *VGPU) GPU() *GPU { return v.gpu }

// Slot returns the vGPU's slot on its GPU: its window starts at Slot times
// the type's framebuffer size.
func (v *VGPU) Slot() int { return v.slot }

// VM returns the VM the vGPU is attached to, or nil for a remote GPU
// session's (Remote), whose VM is on another host.
func (v *VGPU) VM() *VM { return v.vm }

// Remote returns the session the vGPU serves, for a remote GPU's (see
// Host.OpenRemote), or nil.
func (v *VGPU) Remote() *RemoteGPU { return v.remote }

// Index returns the vGPU's position in its VM.
func (v *VGPU) Index() int { return v.index }

// GPUTime returns the GPU time of the work the vGPU has completed since it
// was created: its device's counter (RegGPUTimeLo/Hi, whole microseconds
// a job), which its device state carries, so that it survives a migration
// or a checkpoint, where a scheduler tenant's Granted starts again at the
// destination.
func (v *VGPU) GPUTime() time.Duration { return time.Duration(v.gpuTimeUS) * time.Microsecond }

// Framebuffer returns the vGPU's framebuffer: a window of the GPU's, with
// its own dirty log. Nothing done through it reaches outside it.
func (v *VGPU) Framebuffer() *memory.Region { return v.window }

// UsableFramebufferBytes is the part of the framebuffer the guest can use,
// from offset 0; the vGPU manager's reservation follows it.
func (v *VGPU) UsableFramebufferBytes() int64 {
	return v.profile.FramebufferBytes - v.profile.ReservedFramebufferBytes(v.gpu.ecc)
}

// Tenant returns the vGPU's tenant ID on its GPU's scheduler.
func (v *VGPU) Tenant() sched.TenantID { return v.tenant }

// State returns the vGPU's lifecycle state.
func (v *VGPU) State() DeviceLifecycle { return v.state }

// GenerationID identifies this incarnation of the device: it is set when
// the device is created and replaced by every restore, so that two copies
// resumed from one checkpoint are told apart.
func (v *VGPU) GenerationID() uint64 { return v.generation }

// ReadAt reads the vGPU's framebuffer at off, as the guest does through
// BAR1. An access not wholly inside the framebuffer reads nothing and
// returns an error wrapping memory.ErrOutOfRange.
func (v *VGPU) ReadAt(p []byte, off int64) (int, error) { return v.window.ReadAt(p, off) }

// WriteAt writes the vGPU's framebuffer at off; an access not wholly inside
// it writes nothing and returns an error wrapping memory.ErrOutOfRange.
func (v *VGPU) WriteAt(p []byte, off int64) (int, error) { return v.window.WriteAt(p, off) }

func (v *VGPU) refuse(op string) error {
	name := ""
	if v.vm != nil {
		name = v.vm.id
	}
	return &TransitionError{Op: op, VM: name, Device: v.index, From: v.state.String()}
}

// initConfig fills the PCI configuration space and the fixed registers.
// BAR addresses are the guest's, assigned by its firmware; the model gives
// each vGPU of a VM its own by index, so a migrated device keeps them.
// Assumed layout of a GP102 function: BAR0 16 MiB of registers, BAR1 a
// 256 MiB framebuffer aperture and BAR3 32 MiB, both 64-bit prefetchable.
// Class 0x0302 is "3D controller" (PCI-SIG, PCI Code and ID Assignment
// Specification: base class 03h display controller, sub-class 02h), the
// class lspci shows for NVIDIA's data-centre GPUs; revision 0xA1 is the one
// lspci shows for a Pascal Tesla P4 in NVIDIA AI Enterprise User Guide
// v5.0 (2024), section 7.6 (assumption: the P40's GP102 has the same).
func (v *VGPU) initConfig() {
	le := binary.LittleEndian
	c := v.pci[:]
	clear(c)
	le.PutUint16(c[0x00:], v.gpu.spec.PCIVendorID)
	le.PutUint16(c[0x02:], v.gpu.spec.PCIDeviceID)
	le.PutUint16(c[0x06:], 0x0010) // status: capability list
	c[0x08] = 0xa1                 // revision
	c[0x0a], c[0x0b] = 0x02, 0x03  // class 0x0302: 3D controller
	i := uint64(v.index)
	le.PutUint32(c[0x10:], uint32(0xf000_0000+i*0x0100_0000))
	bar1 := 0x3800_0000_0000 + i*0x1_0000_0000
	le.PutUint64(c[0x14:], bar1|0xc)
	le.PutUint64(c[0x1c:], bar1+0x1000_0000|0xc)
	le.PutUint16(c[0x2c:], v.gpu.spec.PCIVendorID)
	le.PutUint16(c[0x2e:], v.profile.PCISubsystemID)
	c[0x34] = 0x60 // capabilities pointer
	c[0x3d] = 1    // interrupt pin A
	v.regs[RegBoot0] = uint32(v.gpu.spec.PCIDeviceID)<<16 | uint32(v.gpu.spec.PCIVendorID)
	v.regs[RegFramebufferMiB] = uint32(v.profile.FramebufferBytes / MiB)
	v.regs[RegSubsystem] = uint32(v.profile.PCISubsystemID)
}

// reservedBase is the byte offset of the vGPU manager's reservation, where
// the model keeps page tables and GPFIFO rings.
func (v *VGPU) reservedBase() int64 {
	ps := int64(v.window.PageSize())
	base := v.UsableFramebufferBytes()
	if v.profile.FramebufferBytes-base < 4*ps {
		base = v.profile.FramebufferBytes - 4*ps
	}
	return base
}

// initContexts creates, at a device's first start, the channels and the
// context the guest driver sets up, and writes their pages.
func (v *VGPU) initContexts() error {
	base := uint64(v.reservedBase())
	ps := uint64(v.window.PageSize())
	v.booted = true
	v.contexts = []Context{{ID: 1, Engine: EngineCompute, PageTableRoot: base}}
	v.channels = []Channel{
		{ID: 0, Engine: EngineCompute, GPFIFOOffset: base + ps},
		{ID: 1, Engine: EngineCopy, GPFIFOOffset: base + 2*ps},
		{ID: 2, Engine: EngineGraphics, GPFIFOOffset: base + 3*ps},
	}
	return v.window.Fill(int(base/ps), 4, memory.ClassRandom)
}

func (v *VGPU) setControl(enabled, paused bool) {
	c := uint32(0)
	if enabled {
		c |= controlEnabled
	}
	if paused {
		c |= controlPaused
	}
	v.regs[RegControl] = c
	cmd := uint16(0)
	if enabled {
		cmd = 0x0006 // memory space, bus master
	}
	binary.LittleEndian.PutUint16(v.pci[0x04:], cmd)
}

// start powers the device on: from created (first boot) or stopped.
func (v *VGPU) start() error {
	if v.state != DeviceCreated && v.state != DeviceStopped {
		return v.refuse("start")
	}
	if !v.booted {
		if err := v.initContexts(); err != nil {
			return err
		}
	}
	if err := v.gpu.sched.PowerOn(v.tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrIllegalTransition, err)
	}
	v.setControl(true, false)
	v.state = DeviceRunning
	return nil
}

// pause stuns the device: its scheduler tenant gets no turns but keeps its
// queue.
func (v *VGPU) pause() error {
	if v.state != DeviceRunning {
		return v.refuse("pause")
	}
	if err := v.gpu.sched.Pause(v.tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrIllegalTransition, err)
	}
	v.setControl(true, true)
	v.state = DevicePaused
	return nil
}

// resume runs a paused device again; a device restored from a checkpoint
// has its tenant off, and is powered on with the restored queue.
func (v *VGPU) resume() error {
	if v.state != DevicePaused {
		return v.refuse("resume")
	}
	info, err := v.gpu.sched.Tenant(v.tenant)
	if err != nil {
		return err
	}
	if info.State == sched.Off {
		err = v.gpu.sched.PowerOn(v.tenant)
	} else {
		err = v.gpu.sched.Resume(v.tenant)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIllegalTransition, err)
	}
	v.setControl(true, false)
	v.state = DeviceRunning
	return nil
}

// stop powers the device off: queued work is dropped, as a powered-off VM
// has no context to resume it in.
func (v *VGPU) stop() error {
	if v.state != DeviceRunning && v.state != DevicePaused {
		return v.refuse("stop")
	}
	if info, err := v.gpu.sched.Tenant(v.tenant); err == nil && info.State != sched.Off {
		if _, err := v.gpu.sched.PowerOff(v.tenant); err != nil {
			return err
		}
	}
	for i := range v.channels {
		v.channels[i].Get = v.channels[i].Put
	}
	v.setControl(false, false)
	v.state = DeviceStopped
	return nil
}

// destroy removes the device: its tenant leaves the scheduler and its
// window is unmapped, which scrubs it before any other vGPU can map it.
func (v *VGPU) destroy() error {
	if v.state == DeviceDestroyed {
		return v.refuse("destroy")
	}
	s := v.gpu.sched
	if info, err := s.Tenant(v.tenant); err == nil {
		if info.State != sched.Off {
			if _, err := s.PowerOff(v.tenant); err != nil {
				return err
			}
		}
		if err := s.RemoveTenant(v.tenant); err != nil {
			return err
		}
	}
	delete(v.gpu.byTenant, v.tenant)
	if err := v.window.Unmap(); err != nil {
		return err
	}
	v.gpu.release(v)
	v.state = DeviceDestroyed
	return nil
}

// submit queues a job on channel 0 of a running device.
func (v *VGPU) submit(j sched.Job) error {
	if v.state != DeviceRunning {
		return v.refuse("submit")
	}
	if err := v.gpu.sched.Submit(v.tenant, j); err != nil {
		return err
	}
	if len(v.channels) > 0 {
		ch := &v.channels[0]
		ch.Put++
		v.regs[RegDoorbell] = ch.Put
	}
	v.regs[RegSubmitted]++
	return nil
}

// complete records a finished job and hands it to the VM's workload.
func (v *VGPU) complete(c sched.Completion) error {
	if len(v.channels) > 0 {
		v.channels[0].Get++
	}
	v.regs[RegCompleted]++
	v.regs[RegFence] = uint32(c.Tag)
	v.gpuTimeUS += uint64(c.Work / time.Microsecond)
	v.regs[RegGPUTimeLo] = uint32(v.gpuTimeUS)
	v.regs[RegGPUTimeHi] = uint32(v.gpuTimeUS >> 32)
	if v.remote != nil {
		v.remote.partDone(c)
		return nil
	}
	if v.vm != nil {
		return v.vm.completed(v.index, c)
	}
	return nil
}
