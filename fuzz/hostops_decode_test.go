package fuzz_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The decoder of FuzzHostOps is total: every byte string, of any length,
// decodes to a valid world and a bounded list of operations. Missing bytes
// read as zero, every choice is taken modulo the number of options, so the
// fuzzer spends its time on operations, never on parse errors.

const (
	hostopsHeaderBytes = 4
	hostopsOpBytes     = 6
	hostopsMaxOps      = 40
	hostopsMaxIDs      = 6
	hostopsHostRAM     = 128 << 20
	// hostopsFootprint is the guest OS a VM's first start writes: small,
	// since generating it is most of what a boot costs.
	hostopsFootprint = 512 << 10
)

// hostopsProfiles are the vGPU types a created VM may have; the 24Q type
// is the only one of them that a VM may attach twice.
var hostopsProfiles = []string{"P40-1Q", "P40-2Q", "P40-4Q", "P40-8Q", "P40-24Q", "P40-1B", "P40-4C"}

// hostopsRAMSizes are the guest memory sizes of a created VM.
var hostopsRAMSizes = []int64{16 << 20, 32 << 20, 48 << 20}

// hostopsLinks are the links migrations take; migrations on one name share
// its bandwidth and fail together under Sim.FailLink.
var hostopsLinks = []migrate.Link{migrate.GbE1(), migrate.GbE10(), migrate.GbE25()}

type hostopsKind uint8

const (
	hostopsCreate hostopsKind = iota
	hostopsDestroy
	hostopsWriteRAM
	hostopsWriteFB
	hostopsPlace
	hostopsMigrate
	hostopsCancel
	hostopsInject
	hostopsFailLink
	hostopsStep
	hostopsAdvance
	hostopsPower
	hostopsRun
	hostopsKinds // the number of kinds
)

var hostopsKindNames = [...]string{"create", "destroy", "write-ram", "write-fb", "place", "migrate",
	"cancel", "inject", "fail-link", "step", "advance", "power", "run"}

// hostopsSetup is the world the operations run in.
type hostopsSetup struct {
	Hosts      int           // 2 or 3
	GPUs       []int         // per host, 1 or 2
	FBPage     int           // framebuffer page size: 256 KiB, or vgpu's 64 KiB default
	Policy     sched.Policy  // every GPU's scheduler
	Slice      time.Duration // 0: the profile's default
	Chunk      time.Duration // preemption granularity of the load's jobs
	MaxPerHost int
	Timeout    time.Duration // the simulated stall timeout
}

// hostopsOp is one operation with its raw arguments; what each means
// depends on the kind (see hostopsOp.String and the world's apply).
type hostopsOp struct {
	Kind          hostopsKind
	A, B, C, D, E byte
}

type hostopsProgram struct {
	Setup hostopsSetup
	Ops   []hostopsOp
}

// hostopsDecode turns any bytes into a program.
func hostopsDecode(data []byte) hostopsProgram {
	at := func(i int) byte {
		if i < len(data) {
			return data[i]
		}
		return 0
	}
	h0, h1, h2, h3 := at(0), at(1), at(2), at(3)
	s := hostopsSetup{
		Hosts:  2 + int(h0%2),
		Policy: []sched.Policy{sched.BestEffort, sched.EqualShare, sched.FixedShare}[(h0>>1)%3],
		Slice:  []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond}[h1%4],
		Chunk:  []time.Duration{0, 200 * time.Microsecond, time.Millisecond}[(h1>>2)%3],
		// Large framebuffer pages keep mapping, scrubbing and copying a
		// 24 GiB GPU cheap; the default size is one bit away.
		FBPage:     []int{256 << 10, vgpu.DefaultFramebufferPageSize}[(h2>>4)&1],
		MaxPerHost: 1 + int(h3%3),
		Timeout:    200 * time.Millisecond * time.Duration(1+(h3>>2)%8),
	}
	for i := range s.Hosts {
		s.GPUs = append(s.GPUs, 1+int(h2>>i)&1)
	}
	p := hostopsProgram{Setup: s}
	for i := hostopsHeaderBytes; i < len(data) && len(p.Ops) < hostopsMaxOps; i += hostopsOpBytes {
		p.Ops = append(p.Ops, hostopsOp{Kind: hostopsKind(at(i) % byte(hostopsKinds)),
			A: at(i + 1), B: at(i + 2), C: at(i + 3), D: at(i + 4), E: at(i + 5)})
	}
	return p
}

// Argument decoding shared by the decoder's String and the world.

func (o hostopsOp) id() string                { return fmt.Sprintf("vm%d", int(o.A)%hostopsMaxIDs) }
func (o hostopsOp) profile() string           { return hostopsProfiles[int(o.C)%len(hostopsProfiles)] }
func (o hostopsOp) ramBytes() int64           { return hostopsRAMSizes[int(o.D)%len(hostopsRAMSizes)] }
func (o hostopsOp) link() migrate.Link        { return hostopsLinks[int(o.C)%len(hostopsLinks)] }
func (o hostopsOp) fault() migrate.Fault      { return migrate.Fault(1 + o.B%4) }
func (o hostopsOp) placement() vgpu.Placement { return vgpu.Placement(o.B & 1) }

// vgpus is how many vGPUs a created VM has: two only for the full-GPU type.
func (o hostopsOp) vgpus() int {
	if o.profile() == "P40-24Q" && o.C&0x80 != 0 {
		return 2
	}
	return 1
}

// offset is a 24-bit number scaled by unit, taken modulo the region later.
func (o hostopsOp) offset(unit int64) int64 {
	return (int64(o.B)<<16 | int64(o.C)<<8 | int64(o.D)) * unit
}

// writeLen is 1 to 64 bytes: long enough to straddle a page boundary.
func (o hostopsOp) writeLen() int { return 1 + int(o.E%64) }

// advance is a duration from 1 ms to 2.56 s of simulated time.
func (o hostopsOp) advance() time.Duration {
	unit := []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond}[o.B%3]
	return time.Duration(1+int(o.A)%25) * unit
}

func (o hostopsOp) mode() migrate.Mode {
	if o.D&1 != 0 {
		return migrate.Legacy
	}
	return migrate.PreCopy
}

func (o hostopsOp) onNonConvergence() migrate.NonConvergence {
	return migrate.NonConvergence(1 + (o.D>>1)%3)
}

var hostopsPowerNames = [...]string{"start", "pause", "resume", "stop"}

func (o hostopsOp) String() string {
	k := hostopsKindNames[o.Kind]
	switch o.Kind {
	case hostopsCreate:
		return fmt.Sprintf("%s %s on host %d: %dx%s, %d MiB, load=%v, start=%v", k, o.id(), o.B, o.vgpus(),
			o.profile(), o.ramBytes()>>20, o.E&1 != 0, o.E&2 == 0)
	case hostopsDestroy:
		return fmt.Sprintf("%s %s", k, o.id())
	case hostopsWriteRAM:
		return fmt.Sprintf("%s %s at %#x (mod size), %d bytes of %#02x", k, o.id(), o.offset(16), o.writeLen(), o.E)
	case hostopsWriteFB:
		return fmt.Sprintf("%s %s vGPU %d at %#x (mod size), %d bytes of %#02x", k, o.id(), o.E>>6, o.offset(4093),
			o.writeLen(), o.E)
	case hostopsPlace:
		return fmt.Sprintf("%s host %d %v", k, o.A, o.placement())
	case hostopsMigrate:
		return fmt.Sprintf("%s %s to host %d over %s, %v, %v", k, o.id(), o.B, o.link().Name, o.mode(), o.onNonConvergence())
	case hostopsCancel:
		return fmt.Sprintf("%s migration #%d", k, o.A)
	case hostopsInject:
		return fmt.Sprintf("%s %v into migration #%d", k, o.fault(), o.A)
	case hostopsFailLink:
		return fmt.Sprintf("%s %s with %v", k, o.link().Name, o.fault())
	case hostopsStep:
		if o.B&1 != 0 {
			return fmt.Sprintf("%s migration #%d x%d", k, o.C, 1+o.A%8)
		}
		return fmt.Sprintf("%s sim x%d", k, 1+o.A%8)
	case hostopsAdvance:
		return fmt.Sprintf("%s %v", k, o.advance())
	case hostopsPower:
		return fmt.Sprintf("%s %s %s", k, hostopsPowerNames[o.B%4], o.id())
	}
	return k
}

func (p hostopsProgram) String() string {
	var b strings.Builder
	s := p.Setup
	fmt.Fprintf(&b, "setup: %d hosts, GPUs %v, %d KiB framebuffer pages, %v, slice %v, chunk %v, %d per host, timeout %v\n",
		s.Hosts, s.GPUs, s.FBPage>>10, s.Policy, s.Slice, s.Chunk, s.MaxPerHost, s.Timeout)
	for i, o := range p.Ops {
		fmt.Fprintf(&b, "%3d: %v\n", i, o)
	}
	return b.String()
}
