package migrate

import (
	"errors"
	"slices"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
	"pgregory.net/rapid"
)

// The cluster: three hosts of two P40s, 256 MiB of guest memory each, so
// that a few VMs fill a host and placement and capacity refusals happen.
const (
	clusterHostCount  = 3
	clusterHostRAM    = 256 * MiB
	clusterMaxPerHost = 2
	// The framebuffers' pages are the default 64 KiB: mapping and
	// scrubbing a window and digesting it cost time in proportion to its
	// pages. At the counter's rates (up to 200 pages a second, 13 MB/s of
	// framebuffer) the slow link cannot keep up and the fast one can, so
	// both convergence and its failure happen.
	clusterFramebufferPage = 64 << 10
)

// clusterLinks are the two links migrations share, by name: a fast one and
// one slow enough that a migration takes seconds, so that faults and
// cancels land in every phase.
var clusterLinks = []Link{
	{Name: "fast", BandwidthBitsPerSec: 10e9, Efficiency: ethernetEfficiency, Latency: datacentreLatency},
	{Name: "slow", BandwidthBitsPerSec: 20e6, Efficiency: ethernetEfficiency, Latency: datacentreLatency},
}

// clusterProfiles are the P40 types of at most 2 GiB: the bigger types
// only cost more pages to map, scrub and digest, and reach no other code.
func clusterProfiles() []vgpu.Profile {
	return slices.DeleteFunc(vgpu.Profiles("P40"), func(p vgpu.Profile) bool { return p.FramebufferBytes > 2*GiB })
}

// The draws name profiles and links, so that a failing sequence reads.
func clusterProfileNames() []string {
	var out []string
	for _, p := range clusterProfiles() {
		out = append(out, p.Name)
	}
	return out
}

func clusterProfile(name string) vgpu.Profile {
	ps := clusterProfiles()
	return ps[slices.IndexFunc(ps, func(p vgpu.Profile) bool { return p.Name == name })]
}

func clusterLinkNames() []string { return []string{clusterLinks[0].Name, clusterLinks[1].Name} }

func clusterLink(name string) Link {
	return clusterLinks[slices.IndexFunc(clusterLinks, func(l Link) bool { return l.Name == name })]
}

// clusterVM is what the model knows of one VM: where it lives and what it
// was asked to do.
type clusterVM struct {
	id       string
	host     int // owner, per the model
	gpu      int // the GPU of its vGPU on the owner
	profile  vgpu.Profile
	ramBytes int64
	paused   bool                    // the run state its owner last set
	w        *counterWorkload        // nil until given one
	wSince   time.Duration           // when w was given, in Sim time
	digests  []uint64                // its regions as created and written by its owner, while it has no workload
	written  map[clusterWord][8]byte // the words its owner wrote
	mig      *clusterMig             // its migration under way, or nil

	lastPos    int64 // w's writes and run state at the last check
	lastPaused bool
}

// clusterMig is one migration the model follows.
type clusterMig struct {
	m              *Migration
	vm             *clusterVM // nil once the VM was destroyed
	id             string
	profile        vgpu.Profile
	ramBytes       int64
	src, dst       int
	srcGPU, dstGPU int
	link           string
	timeout        time.Duration
	stalled        bool // a FaultLinkStall hit it in stallPhase
	stallPhase     Phase
	stallUntil     time.Duration // the first stall's timeout: later ones keep it
	stalledLater   bool          // a second stall came after time had passed
	resumedIn      Phase         // its owner resumed its VM in this stunned phase, and it runs
	writesAtResume int64         // its VM's counter's writes at that resume
	writtenIn      Phase         // its VM was written in this stunned phase
	changedIn      Phase         // its owner paused or resumed its VM in this stunned phase
	destroyed      bool          // its VM was destroyed before the acknowledgement
	released       bool          // the destination acknowledged: the VM is dst's
	failedWith     error         // the sentinel a cancel or fault failed it with
	policy         NonConvergence
	label          string // how draws name it
	writesAtStart  int64  // its VM's counter's writes when it started
}

// want is the sentinel the migration must fail with, nil while nothing
// doomed it. A stall wins over the rest: its timeout is the migration's
// next event, the one that would have caught a resumed, written or
// destroyed VM.
func (mg *clusterMig) want() error {
	switch {
	case mg.stalled:
		return ErrConnection
	case mg.doomedIn() != 0 || mg.destroyed:
		return ErrSource
	}
	return nil
}

// doomedIn is the stunned phase in which its owner paused, resumed or
// wrote its VM, 0 if none: the
// migration's next event, still in that phase, catches it. Both, if set,
// name the phase the migration is in, as it cannot move on.
func (mg *clusterMig) doomedIn() Phase { return max(mg.changedIn, mg.resumedIn, mg.writtenIn) }

// clusterWord is where a VM's owner wrote a word: the region (0 its guest
// RAM, i its framebuffer i-1) and the offset in it.
type clusterWord struct {
	region int
	off    int64
}

// runState is the run state of the VM's copy at its owner: what its owner
// last set, but paused while its migration stuns it, unless its owner
// resumed it since (and has not paused it again).
func (vm *clusterVM) runState() vgpu.VMState {
	if mg := vm.mig; vm.paused || mg != nil && !mg.released && mg.m.Phase().Stunned() && mg.resumedIn == 0 {
		return vgpu.VMPaused
	}
	return vgpu.VMRunning
}

// clusterCopy is one VM copy a host must hold: its place and run state.
type clusterCopy struct {
	ID      string
	Host    int
	GPU     int
	Profile string
	RAM     int64
	State   vgpu.VMState
}

// copies lists every VM copy the model says exists: each VM at its owner,
// and for each migration its incoming copy (before the acknowledgement)
// or the source's copy awaiting release (after).
func (cm *clusterModel) copies() []clusterCopy {
	var out []clusterCopy
	for _, id := range cm.order {
		vm := cm.vms[id]
		out = append(out, clusterCopy{vm.id, vm.host, vm.gpu, vm.profile.Name, vm.ramBytes, vm.runState()})
	}
	for _, mg := range cm.migs {
		c := clusterCopy{ID: mg.id, Profile: mg.profile.Name, RAM: mg.ramBytes, State: vgpu.VMPaused}
		switch p := mg.m.Phase(); {
		case mg.released:
			c.Host, c.GPU = mg.src, mg.srcGPU
		case p < PhaseRestore:
			c.Host, c.GPU, c.State = mg.dst, mg.dstGPU, vgpu.VMIncoming
		default: // restored, not yet resumed: paused
			c.Host, c.GPU = mg.dst, mg.dstGPU
		}
		out = append(out, c)
	}
	return out
}

// place predicts the host's breadth-first placement of a vGPU of p: the
// least loaded GPU that is empty or holds p's type with a slot free,
// the lowest index on a tie; and whether the guest memory fits after it.
func (cm *clusterModel) place(host int, p vgpu.Profile, ram int64) (gpu int, gpuOK, ramOK bool) {
	count, typ := map[int]int{}, map[int]string{}
	free := int64(clusterHostRAM)
	for _, c := range cm.copies() {
		if c.Host == host {
			count[c.GPU]++
			typ[c.GPU] = c.Profile
			free -= c.RAM
		}
	}
	gpu = -1
	for g := range cm.hosts[host].GPUs() {
		fits := count[g] == 0 || typ[g] == p.Name && count[g] < p.MaxInstances
		if fits && (gpu < 0 || count[g] < count[gpu]) {
			gpu = g
		}
	}
	return gpu, gpu >= 0, ram <= free
}

// checkPlacementRefusal checks a refused placement's typed error: no GPU
// fits, or (only then checked) the guest memory does not.
func checkPlacementRefusal(t *rapid.T, err error, gpuOK bool) {
	t.Helper()
	var pe *vgpu.PlacementError
	var ce *vgpu.CapacityError
	switch {
	case !gpuOK && (!errors.As(err, &pe) || !errors.Is(err, vgpu.ErrNoCapacity)):
		t.Fatalf("no GPU fits, yet the error is %v", err)
	case gpuOK && (!errors.As(err, &ce) || !errors.Is(err, vgpu.ErrInsufficientRAM)):
		t.Fatalf("the guest memory does not fit, yet the error is %v", err)
	}
}

// checkCluster compares every host with the model: the VMs it holds, their
// run states and GPUs, its free memory, and each GPU's vGPUs and windows.
func (cm *clusterModel) checkCluster(t *rapid.T) {
	t.Helper()
	want := cm.copies()
	type held struct {
		State vgpu.VMState
		GPU   int
	}
	running := map[string]int{}
	for hi, h := range cm.hosts {
		got, exp := map[string]held{}, map[string]held{}
		free := h.RAMBytes()
		count, typ := map[int]int{}, map[int]string{}
		for _, c := range want {
			if c.Host == hi {
				exp[c.ID] = held{c.State, c.GPU}
				free -= c.RAM
				count[c.GPU]++
				typ[c.GPU] = c.Profile
			}
		}
		for _, vm := range h.VMs() {
			got[vm.ID()] = held{vm.State(), vm.VGPUs()[0].GPU().Index()}
			if vm.State() == vgpu.VMRunning {
				running[vm.ID()]++
			}
		}
		if d := cmp.Diff(exp, got); d != "" {
			t.Fatalf("host %d holds other VMs than the model (-model +host):\n%s", hi, d)
		}
		if h.FreeRAMBytes() != free {
			t.Fatalf("host %d has %d bytes of guest memory free, the model %d", hi, h.FreeRAMBytes(), free)
		}
		for gi, g := range h.GPUs() {
			ws := g.Framebuffer().Windows()
			if g.VGPUCount() != count[gi] || len(ws) != count[gi] {
				t.Fatalf("host %d GPU %d: %d vGPUs, %d windows, the model %d", hi, gi, g.VGPUCount(), len(ws), count[gi])
			}
			if p, ok := g.Type(); ok != (count[gi] > 0) || ok && p.Name != typ[gi] {
				t.Fatalf("host %d GPU %d holds type %v (%v), the model %q", hi, gi, p.Name, ok, typ[gi])
			}
			slices.SortFunc(ws, func(a, b *memory.Region) int { return a.FirstPage() - b.FirstPage() })
			for i := 1; i < len(ws); i++ {
				if ws[i-1].FirstPage()+ws[i-1].Pages() > ws[i].FirstPage() {
					t.Fatalf("host %d GPU %d: windows at pages %d and %d overlap", hi, gi, ws[i-1].FirstPage(), ws[i].FirstPage())
				}
			}
		}
	}
	for id, n := range running {
		if n > 1 {
			t.Fatalf("VM %s runs on %d hosts", id, n)
		}
	}
}
