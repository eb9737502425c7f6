package vgpusimtest

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
	"pgregory.net/rapid"
)

// Spec is a scenario: a small cluster of hosts with one GPU model, VMs
// on them running workloads an Oracle follows, and the steps to play in a
// Sim. It is plain data, drawn by Scenario and shrunk by rapid, and
// printed by String; NewWorld builds it.
type Spec struct {
	// GPU is every host's GPU model; the zero value means the P40.
	GPU   vgpu.GPUSpec
	Hosts []HostSpec
	VMs   []VMSpec
	Steps []Step
	// HostWorkers is the Sim's migrate.SimConfig.HostWorkers: above 1,
	// the hosts' workloads, and so the Oracle, run on several goroutines.
	HostWorkers int
}

// HostSpec is host i of a scenario, named "host<i>": Sparse memory, 4
// GiB of guest memory. Zero fields take vgpu.HostConfig's defaults.
type HostSpec struct {
	// GPUs is the number of GPUs; 0 means one.
	GPUs int
	// FramebufferPageSize is the framebuffers' page size; 0 means
	// vgpu.DefaultFramebufferPageSize.
	FramebufferPageSize int
	// Seed keys what the host generates.
	Seed uint64
}

// VMSpec is VM i of a scenario, named "vm<i>": 16 MiB of guest memory, 1
// MiB of it the guest OS, and one vGPU, running the Oracle's workload
// around Workload.
type VMSpec struct {
	// Host is the index of the host it starts on.
	Host int
	// Profile names its one vGPU's type, of the Spec's GPU model.
	Profile string
	// Workload runs inside the oracle's workload.
	Workload WorkloadSpec
	// OraclePagesPerSec is the oracle's own write rate.
	OraclePagesPerSec int64
	// Seed keys the VM's memory and the oracle's choice of pages.
	Seed uint64
	// Paused starts the VM paused.
	Paused bool
}

// Scenario's sizes.
const (
	scenarioHostRAMBytes        = 4 << 30
	scenarioVMRAMBytes          = 16 << 20
	scenarioVMRAMFootprintBytes = 1 << 20
)

// StepKind is what a Step does.
type StepKind uint8

const (
	// StepAdvance advances the Sim by Duration.
	StepAdvance StepKind = iota + 1
	// StepEvent takes the Sim's next event (Sim.Step).
	StepEvent
	// StepMigrate starts migrating VM to host To with Config.
	StepMigrate
	// StepInject injects Fault into the Migration-th migration started
	// (modulo their number) or its link.
	StepInject
	// StepCancel cancels the Migration-th migration started.
	StepCancel
	// StepWrite writes Value over page Page of VM's guest OS footprint,
	// through the Oracle, as a user's own write.
	StepWrite
	// StepPauseResume pauses VM if it runs and resumes it if it is
	// paused.
	StepPauseResume
)

var stepNames = [...]string{StepAdvance: "advance", StepEvent: "step", StepMigrate: "migrate", StepInject: "inject",
	StepCancel: "cancel", StepWrite: "write", StepPauseResume: "pause-resume"}

// String names the kind as a scenario script does.
func (k StepKind) String() string {
	if k > 0 && int(k) < len(stepNames) {
		return stepNames[k]
	}
	return fmt.Sprintf("StepKind(%d)", uint8(k))
}

// Step is one step of a scenario; the fields its Kind does not name are
// zero.
type Step struct {
	Kind StepKind
	// Duration is how far StepAdvance advances.
	Duration time.Duration
	// VM is the index in Spec.VMs of the VM a migrate, write or
	// pause-resume step acts on; To the index of the host a migration
	// goes to.
	VM, To int
	// Config is a migration's configuration.
	Config migrate.Config
	// Migration is the index, among those started so far and modulo
	// their number, of the migration an inject or cancel acts on.
	Migration int
	// Fault is what an inject injects.
	Fault SimFault
	// Page is the guest RAM page a write writes, within the guest OS
	// footprint, and Value the byte it fills the page with.
	Page  int
	Value byte
}

// Scenario draws a scenario: 2 or 3 hosts of one GPU model with 1 or 2
// GPUs, 1 to 3 VMs, and up to 12 steps. It shrinks towards two
// one-GPU P40 hosts, one VM of the smallest type with no workload, and
// fewer, plainer steps.
func Scenario(t *rapid.T) *Spec {
	s := &Spec{GPU: GPUs().Draw(t, "gpu")}
	// Hosts, VMs and steps are drawn as slices, which rapid shrinks by
	// dropping whole elements.
	s.Hosts = rapid.SliceOfN(HostSpecs(), 2, 3).Draw(t, "hosts")
	s.VMs = rapid.SliceOfN(VMSpecs(s.GPU, len(s.Hosts)), 1, 3).Draw(t, "vms")
	s.Steps = rapid.SliceOfN(Steps(len(s.Hosts), len(s.VMs)), 1, 12).Draw(t, "steps")
	s.HostWorkers = rapid.IntRange(0, 2).Draw(t, "hostWorkers")
	return s
}

// HostSpecs draws a host of a scenario: one GPU or two, 64 KiB or 4 KiB
// framebuffer pages.
func HostSpecs() *rapid.Generator[HostSpec] {
	return rapid.Custom(func(t *rapid.T) HostSpec {
		return HostSpec{
			GPUs:                rapid.IntRange(1, 2).Draw(t, "gpus"),
			FramebufferPageSize: rapid.SampledFrom([]int{64 << 10, 4 << 10}).Draw(t, "fbPageSize"),
			Seed:                rapid.Uint64().Draw(t, "hostSeed"),
		}
	})
}

// VMSpecs draws a VM of a scenario of the given GPU model and number of
// hosts: a type of the GPU, a workload, the oracle's rate (0 to 500 pages
// a second) and whether it starts paused.
func VMSpecs(gpu vgpu.GPUSpec, hosts int) *rapid.Generator[VMSpec] {
	return rapid.Custom(func(t *rapid.T) VMSpec {
		return VMSpec{
			Host:              rapid.IntRange(0, hosts-1).Draw(t, "vmHost"),
			Profile:           Profiles(gpu).Draw(t, "profile").Name,
			Workload:          Workloads().Draw(t, "workload"),
			OraclePagesPerSec: rapid.Int64Range(0, 500).Draw(t, "oraclePagesPerSec"),
			Seed:              rapid.Uint64Range(1, 1<<62).Draw(t, "vmSeed"),
			Paused:            rapid.Bool().Draw(t, "paused"),
		}
	})
}

// Steps draws a step for a scenario of hosts hosts and vms VMs (both at
// least 1); migrations come first, so that a failing run shrinks to
// migrating.
func Steps(hosts, vms int) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		k := rapid.SampledFrom([]StepKind{StepMigrate, StepAdvance, StepEvent, StepInject, StepCancel, StepWrite, StepPauseResume}).Draw(t, "step")
		st := Step{Kind: k}
		switch k {
		case StepAdvance:
			st.Duration = time.Duration(rapid.Int64Range(1, 2000).Draw(t, "advanceMS")) * time.Millisecond
		case StepMigrate:
			st.VM = rapid.IntRange(0, vms-1).Draw(t, "vm")
			st.To = rapid.IntRange(0, hosts-1).Draw(t, "to")
			st.Config = Configs().Draw(t, "config")
		case StepInject:
			st.Migration = rapid.IntRange(0, 3).Draw(t, "migration")
			st.Fault = SimFaults().Draw(t, "fault")
		case StepCancel:
			st.Migration = rapid.IntRange(0, 3).Draw(t, "migration")
		case StepWrite:
			st.VM = rapid.IntRange(0, vms-1).Draw(t, "vm")
			st.Page = rapid.IntRange(0, scenarioVMRAMFootprintBytes/4096-1).Draw(t, "page")
			st.Value = rapid.Byte().Draw(t, "value")
		case StepPauseResume:
			st.VM = rapid.IntRange(0, vms-1).Draw(t, "vm")
		}
		return st
	})
}

// Validate reports a Spec that NewWorld cannot build: no host, a host of
// more GPUs than vgpu.MaxGPUs or a negative number (0 means one, as in
// vgpu.HostConfig), a VM on a host the Spec
// does not have, or a step that names one; the error wraps ErrInvalid.
// A step that names a VM the Spec does not have does nothing, as one
// naming a VM that was not placed.
func (s *Spec) Validate() error {
	if s == nil {
		return fmt.Errorf("%w: a nil scenario", ErrInvalid)
	}
	if len(s.Hosts) == 0 {
		return fmt.Errorf("%w: a scenario without hosts", ErrInvalid)
	}
	for i, h := range s.Hosts {
		if h.GPUs < 0 || h.GPUs > vgpu.MaxGPUs {
			return fmt.Errorf("%w: host%d with %d GPUs", ErrInvalid, i, h.GPUs)
		}
	}
	model := s.GPU.Model
	if model == "" {
		model = vgpu.P40().Model
	}
	for i, v := range s.VMs {
		if v.Host < 0 || v.Host >= len(s.Hosts) {
			return fmt.Errorf("%w: vm%d on host%d of %d", ErrInvalid, i, v.Host, len(s.Hosts))
		}
		p, err := vgpu.ParseProfile(v.Profile)
		if err != nil {
			return fmt.Errorf("%w: vm%d: %w", ErrInvalid, i, err)
		}
		if p.GPUModel != model {
			return fmt.Errorf("%w: vm%d: %s is not a type of the %s", ErrInvalid, i, p.Name, model)
		}
		if err := v.Workload.validate(); err != nil {
			return fmt.Errorf("vm%d: %w", i, err)
		}
	}
	for i, st := range s.Steps {
		if st.Kind == StepMigrate && (st.To < 0 || st.To >= len(s.Hosts)) {
			return fmt.Errorf("%w: step %d migrates to host%d of %d", ErrInvalid, i, st.To, len(s.Hosts))
		}
	}
	return nil
}

// String prints the scenario, one line a host, a VM or a step.
func (s *Spec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gpu %s host-workers=%d\n", cmp.Or(s.GPU.Model, "P40"), s.HostWorkers)
	for i, h := range s.Hosts {
		fmt.Fprintf(&b, "host%d gpus=%d fb-page=%d seed=%#x\n", i, h.GPUs, h.FramebufferPageSize, h.Seed)
	}
	for i, v := range s.VMs {
		w := v.Workload.Kind
		if w == "" {
			w = "none"
		}
		fmt.Fprintf(&b, "vm%d on host%d %s workload=%s workload-seed=%#x oracle=%d/s seed=%#x paused=%t\n",
			i, v.Host, v.Profile, w, v.Workload.Seed, v.OraclePagesPerSec, v.Seed, v.Paused)
	}
	for _, st := range s.Steps {
		b.WriteString(st.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// String prints the step as a line of a scenario.
func (st Step) String() string {
	switch st.Kind {
	case StepAdvance:
		return fmt.Sprintf("advance %v", st.Duration)
	case StepMigrate:
		c := st.Config
		// Zero fields take the library's defaults, and say so.
		def := func(v any, zero bool) any {
			if zero {
				return "default"
			}
			return v
		}
		return fmt.Sprintf("migrate vm%d to host%d mode=%v fidelity=%v link=%v codec=%v rounds=%v target=%v on-nonconvergence=%v batch=%v timeout=%v",
			st.VM, st.To, def(c.Mode, c.Mode == 0), def(c.Fidelity, c.Fidelity == 0), def(c.Link.Name, c.Link.Name == ""), c.Codec,
			def(c.MaxRounds, c.MaxRounds == 0), def(c.StunTarget, c.StunTarget == 0), def(c.OnNonConvergence, c.OnNonConvergence == 0),
			def(c.BatchBytes, c.BatchBytes == 0), def(c.Timeout, c.Timeout == 0))
	case StepInject:
		return fmt.Sprintf("inject %v migration=%d whole-link=%t", st.Fault.Fault, st.Migration, st.Fault.Link)
	case StepCancel:
		return fmt.Sprintf("cancel migration=%d", st.Migration)
	case StepWrite:
		return fmt.Sprintf("write vm%d page=%d value=%d", st.VM, st.Page, st.Value)
	case StepPauseResume:
		return fmt.Sprintf("pause-resume vm%d", st.VM)
	}
	return st.Kind.String()
}
