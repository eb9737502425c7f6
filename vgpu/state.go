package vgpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/vgpusim/vgpusim/sched"
)

// StateVersion is the version of the device state format this package
// writes and reads.
const StateVersion = 1

// Limits of a device state; a decoder refuses anything larger, so hostile
// input costs at most MaxStateBytes.
const (
	MaxChannels        = 64
	MaxContexts        = 64
	maxNameBytes       = 32
	MaxSchedStateBytes = 40 + 48*sched.MaxQueueLimit
	stateHeaderBytes   = 16
	channelBytes       = 24
	contextBytes       = 16
	stateTrailerBytes  = 4
	// MaxStateBytes bounds a saved device state.
	MaxStateBytes = stateHeaderBytes + 2*(1+maxNameBytes) + PCIConfigBytes + 4*NumRegisters +
		2 + MaxChannels*channelBytes + 2 + MaxContexts*contextBytes + 4 + MaxSchedStateBytes + stateTrailerBytes
	minStateBytes = stateHeaderBytes + 2 + PCIConfigBytes + 4*NumRegisters + 2 + 2 + 4 + stateTrailerBytes
)

var (
	stateMagic = [4]byte{'V', 'G', 'P', 'U'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	le         = binary.LittleEndian
)

// DeviceState is a vGPU's device state as a checkpoint carries it. Its
// fields are exported so that two states can be compared field by field
// (Diff, or go-cmp in tests).
//
// The saved form, all integers little-endian:
//
//	offset  size  field
//	0       4     magic "VGPU"
//	4       2     version (StateVersion)
//	6       2     flags, 0
//	8       8     generation ID
//	16      1+n   GPU model, n <= 32 printable ASCII bytes
//	        1+n   profile name, likewise
//	        256   PCI configuration space
//	        256   64 BAR0 registers, uint32 each
//	        2     channel count, <= 64; then 24 bytes each:
//	                id u32, engine u8, 3 zero bytes, GPFIFO offset u64, put u32, get u32
//	        2     context count, <= 64; then 16 bytes each:
//	                id u32, engine u8, 3 zero bytes, page-table root u64
//	              (IDs strictly increasing in both lists)
//	        4+n   scheduler tenant state (sched.SaveTenant), n <= MaxSchedStateBytes
//	        4     CRC-32C (Castagnoli) of everything before it
//
// Every encoding is canonical: DecodeState accepts exactly what EncodeState
// writes, so decoding and encoding again gives back the same bytes.
type DeviceState struct {
	Version      uint16
	GPUModel     string
	Profile      string
	GenerationID uint64
	PCIConfig    [PCIConfigBytes]byte
	Registers    [NumRegisters]uint32
	Channels     []Channel
	Contexts     []Context
	// Sched is the device's scheduler tenant state, from sched.SaveTenant.
	Sched []byte
}

// Diff returns the names of the fields in which s and o differ, in field
// order; nil if they are equal. A migration compares the states at its two
// ends and ignores "GenerationID", which a restore replaces.
func (s DeviceState) Diff(o DeviceState) []string {
	var d []string
	add := func(eq bool, name string) {
		if !eq {
			d = append(d, name)
		}
	}
	add(s.Version == o.Version, "Version")
	add(s.GPUModel == o.GPUModel, "GPUModel")
	add(s.Profile == o.Profile, "Profile")
	add(s.GenerationID == o.GenerationID, "GenerationID")
	add(s.PCIConfig == o.PCIConfig, "PCIConfig")
	add(s.Registers == o.Registers, "Registers")
	add(slices.Equal(s.Channels, o.Channels), "Channels")
	add(slices.Equal(s.Contexts, o.Contexts), "Contexts")
	add(slices.Equal(s.Sched, o.Sched), "Sched")
	return d
}

// EncodeState appends the saved form of s to dst. It fails only for a
// state outside the format's limits.
func EncodeState(dst []byte, s DeviceState) ([]byte, error) {
	switch {
	case s.Version != StateVersion:
		return dst, fmt.Errorf("%w: version %d, this package writes %d", ErrStateVersion, s.Version, StateVersion)
	case !validName(s.GPUModel) || !validName(s.Profile):
		return dst, &CorruptStateError{Reason: "GPU model or profile name is not 1-32 printable ASCII bytes"}
	case len(s.Channels) > MaxChannels || len(s.Contexts) > MaxContexts:
		return dst, &CorruptStateError{Reason: "too many channels or contexts"}
	case len(s.Sched) > MaxSchedStateBytes:
		return dst, &CorruptStateError{Reason: "scheduler state too large"}
	}
	start := len(dst)
	dst = append(dst, stateMagic[:]...)
	dst = le.AppendUint16(dst, s.Version)
	dst = le.AppendUint16(dst, 0)
	dst = le.AppendUint64(dst, s.GenerationID)
	dst = append(append(dst, byte(len(s.GPUModel))), s.GPUModel...)
	dst = append(append(dst, byte(len(s.Profile))), s.Profile...)
	dst = append(dst, s.PCIConfig[:]...)
	for _, r := range s.Registers {
		dst = le.AppendUint32(dst, r)
	}
	dst = le.AppendUint16(dst, uint16(len(s.Channels)))
	for _, c := range s.Channels {
		dst = le.AppendUint32(dst, c.ID)
		dst = append(dst, byte(c.Engine), 0, 0, 0)
		dst = le.AppendUint64(dst, c.GPFIFOOffset)
		dst = le.AppendUint32(dst, c.Put)
		dst = le.AppendUint32(dst, c.Get)
	}
	dst = le.AppendUint16(dst, uint16(len(s.Contexts)))
	for _, c := range s.Contexts {
		dst = le.AppendUint32(dst, c.ID)
		dst = append(dst, byte(c.Engine), 0, 0, 0)
		dst = le.AppendUint64(dst, c.PageTableRoot)
	}
	dst = le.AppendUint32(dst, uint32(len(s.Sched)))
	dst = append(dst, s.Sched...)
	return le.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > maxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// reader walks a saved state, remembering the first error with its offset;
// every read is bounds-checked, so hostile input cannot panic it.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(off int, format string, args ...any) {
	if r.err == nil {
		r.err = &CorruptStateError{Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail(r.off, "truncated %s: need %d bytes, %d left", what, n, len(r.b)-r.off)
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) u8(what string) uint8 {
	if p := r.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if p := r.take(2, what); p != nil {
		return le.Uint16(p)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if p := r.take(4, what); p != nil {
		return le.Uint32(p)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if p := r.take(8, what); p != nil {
		return le.Uint64(p)
	}
	return 0
}

func (r *reader) name(what string) string {
	off := r.off
	n := int(r.u8(what + " length"))
	p := r.take(n, what)
	if r.err == nil && !validName(string(p)) {
		r.fail(off, "%s is not 1-%d printable ASCII bytes", what, maxNameBytes)
	}
	return string(p)
}

func (r *reader) engine(what string) Engine {
	off := r.off
	e := Engine(r.u8(what + " engine"))
	if pad := r.take(3, what+" padding"); pad != nil && (pad[0]|pad[1]|pad[2]) != 0 {
		r.fail(off+1, "%s padding is not zero", what)
	}
	if r.err == nil && (e < EngineCompute || e > EngineGraphics) {
		r.fail(off, "%s engine %d unknown", what, e)
	}
	return e
}

// DecodeState parses a saved device state. Input is treated as hostile:
// framing, version and checksum are checked before any field is read,
// every count and length against its limit, and nothing is allocated
// beyond what the limits allow. Errors are a *CorruptStateError (with the
// offset) or wrap ErrStateVersion.
func DecodeState(b []byte) (DeviceState, error) {
	var s DeviceState
	if len(b) > MaxStateBytes {
		return s, &CorruptStateError{Offset: MaxStateBytes, Reason: fmt.Sprintf("%d bytes exceed the limit of %d", len(b), MaxStateBytes)}
	}
	if len(b) < 6 || [4]byte(b[:4]) != stateMagic {
		if len(b) < 4 {
			return s, &CorruptStateError{Offset: len(b), Reason: "truncated before the magic"}
		}
		return s, &CorruptStateError{Offset: 0, Reason: fmt.Sprintf("bad magic %q", b[:4])}
	}
	if v := le.Uint16(b[4:]); v != StateVersion {
		return s, fmt.Errorf("%w: version %d, this package reads %d", ErrStateVersion, v, StateVersion)
	}
	if len(b) < minStateBytes {
		return s, &CorruptStateError{Offset: len(b), Reason: fmt.Sprintf("truncated: %d bytes, a state has at least %d", len(b), minStateBytes)}
	}
	body := len(b) - stateTrailerBytes
	if crc32.Checksum(b[:body], castagnoli) != le.Uint32(b[body:]) {
		return s, &CorruptStateError{Offset: body, Reason: "checksum mismatch"}
	}
	r := &reader{b: b[:body], off: 6}
	s.Version = StateVersion
	if f := r.u16("flags"); f != 0 {
		r.fail(6, "flags %#x, none are defined", f)
	}
	s.GenerationID = r.u64("generation ID")
	s.GPUModel = r.name("GPU model")
	s.Profile = r.name("profile name")
	copy(s.PCIConfig[:], r.take(PCIConfigBytes, "PCI configuration space"))
	for i := range s.Registers {
		s.Registers[i] = r.u32("register")
	}
	off := r.off
	if n := int(r.u16("channel count")); n > MaxChannels {
		r.fail(off, "%d channels, the limit is %d", n, MaxChannels)
	} else if r.err == nil && n > 0 {
		s.Channels = make([]Channel, n)
		for i := range s.Channels {
			c := &s.Channels[i]
			at := r.off
			c.ID = r.u32("channel ID")
			c.Engine = r.engine("channel")
			c.GPFIFOOffset = r.u64("GPFIFO offset")
			c.Put = r.u32("GPFIFO put")
			c.Get = r.u32("GPFIFO get")
			if r.err == nil && i > 0 && c.ID <= s.Channels[i-1].ID {
				r.fail(at, "channel IDs not increasing")
			}
		}
	}
	off = r.off
	if n := int(r.u16("context count")); n > MaxContexts {
		r.fail(off, "%d contexts, the limit is %d", n, MaxContexts)
	} else if r.err == nil && n > 0 {
		s.Contexts = make([]Context, n)
		for i := range s.Contexts {
			c := &s.Contexts[i]
			at := r.off
			c.ID = r.u32("context ID")
			c.Engine = r.engine("context")
			c.PageTableRoot = r.u64("page-table root")
			if r.err == nil && i > 0 && c.ID <= s.Contexts[i-1].ID {
				r.fail(at, "context IDs not increasing")
			}
		}
	}
	off = r.off
	if n := r.u32("scheduler state length"); n > MaxSchedStateBytes {
		r.fail(off, "scheduler state of %d bytes, the limit is %d", n, MaxSchedStateBytes)
	} else if p := r.take(int(n), "scheduler state"); r.err == nil {
		s.Sched = append([]byte(nil), p...)
	}
	if r.err == nil && r.off != len(r.b) {
		r.fail(r.off, "%d bytes after the last field", len(r.b)-r.off)
	}
	if r.err != nil {
		return DeviceState{}, r.err
	}
	return s, nil
}

// Snapshot returns the vGPU's current device state, in any lifecycle
// state (the scheduler part is read as it stands). SaveState is the
// checkpoint form, which needs a quiesced device.
func (v *VGPU) Snapshot() (DeviceState, error) {
	sch, err := v.gpu.sched.SaveTenant(nil, v.tenant)
	if err != nil {
		return DeviceState{}, err
	}
	return DeviceState{
		Version: StateVersion, GPUModel: v.gpu.spec.Model, Profile: v.profile.Name,
		GenerationID: v.generation, PCIConfig: v.pci, Registers: v.regs,
		Channels: cloneOrNil(v.channels), Contexts: cloneOrNil(v.contexts), Sched: sch,
	}, nil
}

// SaveState appends the vGPU's device state, in its saved form, to dst.
// The device must be paused (a stun) or stopped, so that nothing changes
// while it is saved.
func (v *VGPU) SaveState(dst []byte) ([]byte, error) {
	if v.profile.Passthrough {
		return dst, &NotMigratableError{VM: v.vm.id, Reason: "a passthrough GPU has no device state the hypervisor can save"}
	}
	if v.state != DevicePaused && v.state != DeviceStopped {
		return dst, v.refuse("save")
	}
	s, err := v.Snapshot()
	if err != nil {
		return dst, err
	}
	return EncodeState(dst, s)
}

// RestoreState replaces the vGPU's device state with a saved one. The
// state is decoded and checked completely — version, then GPU model
// (exactly, as the device names it) and profile against this device, the
// PCI identity they imply, then the device's lifecycle (created,
// paused or stopped), then every offset against its window — before
// anything changes; on error the device is untouched. The restored device
// is paused, with a new generation ID.
func (v *VGPU) RestoreState(b []byte) error {
	s, err := v.checkRestore(b)
	if err != nil {
		return err
	}
	if err := v.restoreSched(s.Sched); err != nil {
		return err
	}
	v.apply(s)
	return nil
}

// checkRestore decodes b and checks it against v without changing
// anything.
func (v *VGPU) checkRestore(b []byte) (DeviceState, error) {
	s, err := DecodeState(b)
	if err != nil {
		return s, err
	}
	// The model as the device names it, exactly: a restored device saves
	// its own name, and a state must read back as it was saved.
	if s.GPUModel != v.gpu.spec.Model {
		return s, &IncompatibleStateError{Field: "GPU model", Saved: s.GPUModel, Device: v.gpu.spec.Model}
	}
	if s.Profile != v.profile.Name {
		return s, &IncompatibleStateError{Field: "profile", Saved: s.Profile, Device: v.profile.Name}
	}
	if err := v.checkIdentity(s); err != nil {
		return s, err
	}
	if v.state != DeviceCreated && v.state != DevicePaused && v.state != DeviceStopped {
		return s, v.refuse("restore")
	}
	size := uint64(v.profile.FramebufferBytes)
	for _, c := range s.Channels {
		if c.GPFIFOOffset >= size {
			return s, &CorruptStateError{Reason: fmt.Sprintf("channel %d GPFIFO at %#x outside a %d-byte framebuffer", c.ID, c.GPFIFOOffset, size)}
		}
	}
	for _, c := range s.Contexts {
		if c.PageTableRoot >= size {
			return s, &CorruptStateError{Reason: fmt.Sprintf("context %d page tables at %#x outside a %d-byte framebuffer", c.ID, c.PageTableRoot, size)}
		}
	}
	return s, nil
}

// checkIdentity checks that the identity s gives the guest — PCI IDs and
// the registers that repeat them and the framebuffer size — is the one its
// GPU model and profile give every such device: a state that names one
// profile and shows the guest another is corrupt. (The BARs are the
// guest's to program, and move with it.)
func (v *VGPU) checkIdentity(s DeviceState) error {
	le := binary.LittleEndian
	spec, p := v.gpu.spec, v.profile
	for _, f := range []struct {
		name          string
		saved, device uint32
	}{
		{"PCI vendor ID", uint32(le.Uint16(s.PCIConfig[0x00:])), uint32(spec.PCIVendorID)},
		{"PCI device ID", uint32(le.Uint16(s.PCIConfig[0x02:])), uint32(spec.PCIDeviceID)},
		{"PCI subsystem vendor ID", uint32(le.Uint16(s.PCIConfig[0x2c:])), uint32(spec.PCIVendorID)},
		{"PCI subsystem ID", uint32(le.Uint16(s.PCIConfig[0x2e:])), uint32(p.PCISubsystemID)},
		{"boot register", s.Registers[RegBoot0], uint32(spec.PCIDeviceID)<<16 | uint32(spec.PCIVendorID)},
		{"framebuffer register", s.Registers[RegFramebufferMiB], uint32(p.FramebufferBytes / MiB)},
		{"subsystem register", s.Registers[RegSubsystem], uint32(p.PCISubsystemID)},
	} {
		if f.saved != f.device {
			return &CorruptStateError{Reason: fmt.Sprintf("%s %#x in a %s state, where every %s device has %#x", f.name, f.saved, p.Name, p.Name, f.device)}
		}
	}
	return nil
}

// restoreSched restores the scheduler part; sched checks the bytes fully
// before changing the tenant.
func (v *VGPU) restoreSched(b []byte) error {
	err := v.gpu.sched.RestoreTenant(v.tenant, b)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sched.ErrIncompatibleState), errors.Is(err, sched.ErrQueueFull):
		return fmt.Errorf("%w: scheduler state: %w", ErrIncompatibleState, err)
	case errors.Is(err, sched.ErrUnsupportedVersion):
		return fmt.Errorf("%w: scheduler state: %w", ErrStateVersion, err)
	case errors.Is(err, sched.ErrTenantState):
		return fmt.Errorf("%w: %w", ErrIllegalTransition, err)
	}
	return fmt.Errorf("%w: scheduler state: %w", ErrCorruptState, err)
}

// apply installs a checked state and gives the device its new generation.
func (v *VGPU) apply(s DeviceState) {
	v.pci = s.PCIConfig
	v.regs = s.Registers
	v.channels = slices.Clone(s.Channels)
	v.contexts = slices.Clone(s.Contexts)
	v.booted = true
	v.gpuTimeUS = uint64(v.regs[RegGPUTimeLo]) | uint64(v.regs[RegGPUTimeHi])<<32
	v.generation = v.gpu.host.nextGeneration(s.GenerationID)
	v.state = DevicePaused
}

// cloneOrNil copies s, giving nil for an empty s, as DecodeState does, so
// that a snapshot and a decoded state compare equal with go-cmp.
func cloneOrNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}
