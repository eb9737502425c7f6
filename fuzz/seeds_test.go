package fuzz_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// What FuzzMigrationStream and FuzzDeviceRestore share — the -update-seeds
// flag and the committed corpus files it rewrites, the shared destination
// host and the check that it holds nothing — and the real devices whose
// saved states seed FuzzDeviceRestore, and the hosts and memory contents
// of the migrations FuzzMigrationStream records (stream_test.go).

// seedUpdateFlag names the flag that rewrites the committed corpora.
const seedUpdateFlag = "update-seeds"

// The flag is registered in init, after every package-level variable, and
// only if no other file of the package registered it first: registering a
// flag twice panics.
func init() {
	if flag.Lookup(seedUpdateFlag) == nil {
		flag.Bool(seedUpdateFlag, false, "rewrite the committed seed corpora under testdata/fuzz")
	}
}

func seedsUpdating() bool {
	f := flag.Lookup(seedUpdateFlag)
	return f != nil && f.Value.String() == "true"
}

const seedGiB = int64(1) << 30

// seedQuick reports whether the run is a quick one — -short, or a -race
// build, under which receiving a migration costs tens of times more (the
// destination scrubs a vGPU's 1 GiB window page by page, a lock each) —
// in which the seed tests record and replay fewer migrations.
func seedQuick() bool { return testing.Short() || seedRace }

// seedRace is whether the test binary was built with -race.
var seedRace = func() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" {
				return s.Value == "true"
			}
		}
	}
	return false
}()

func seedMust(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// seedSharedHost is the destination every input of one target goes to. A
// host costs more to build than many inputs cost to run, and one that
// holds nothing after each input, as it must, is as good as new.
type seedSharedHost struct {
	once sync.Once
	h    *vgpu.Host
	err  error
}

// get returns the host, built by build on first use, after checking that
// the inputs before left nothing on it.
func (s *seedSharedHost) get(t testing.TB, build func() (*vgpu.Host, error)) *vgpu.Host {
	t.Helper()
	s.once.Do(func() { s.h, s.err = build() })
	seedMust(t, s.err)
	seedHoldsNothing(t, s.h)
	return s.h
}

// seedHoldsNothing fails t unless host holds no VM, no vGPU and no
// framebuffer window, and all its guest memory is free.
func seedHoldsNothing(t testing.TB, host *vgpu.Host) {
	t.Helper()
	if vms := host.VMs(); len(vms) != 0 {
		t.Fatalf("host %s holds %d VM(s), first %q", host.Name(), len(vms), vms[0].ID())
	}
	if free, all := host.FreeRAMBytes(), host.RAMBytes(); free != all {
		t.Fatalf("host %s has %d of %d bytes of guest memory free", host.Name(), free, all)
	}
	for _, g := range host.GPUs() {
		if n, w := g.VGPUCount(), len(g.Framebuffer().Windows()); n != 0 || w != 0 {
			t.Fatalf("host %s GPU %d holds %d vGPU(s) and %d window(s)", host.Name(), g.Index(), n, w)
		}
	}
}

// seedCorpusFile returns vals in go test fuzz's corpus file format
// (version 1), as the fuzzer itself writes them.
func seedCorpusFile(vals ...any) ([]byte, error) {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case byte:
			fmt.Fprintf(&b, "byte(%q)\n", v)
		case bool:
			fmt.Fprintf(&b, "bool(%v)\n", v)
		default:
			return nil, fmt.Errorf("corpus value of type %T", v)
		}
	}
	return []byte(b.String()), nil
}

// seedSyncCorpus writes vals as target's committed seed name with
// -update-seeds. Without it, it checks that the committed file holds
// exactly what the seed's generator makes now, so that a committed corpus
// cannot drift from the library unnoticed, nor a generator be
// nondeterministic.
func seedSyncCorpus(t *testing.T, target, name string, vals ...any) {
	t.Helper()
	body, err := seedCorpusFile(vals...)
	seedMust(t, err)
	path := filepath.Join("testdata", "fuzz", target, name)
	if seedsUpdating() {
		seedMust(t, os.MkdirAll(filepath.Dir(path), 0o755))
		seedMust(t, os.WriteFile(path, body, 0o644))
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("committed seed: %v (rewrite the corpus with go test ./fuzz -%s)", err, seedUpdateFlag)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("committed seed %s differs from what its generator makes now (%d bytes, want %d); "+
			"rerun with -%s if the change is meant", path, len(got), len(body), seedUpdateFlag)
	}
}

// deviceSource is a real device whose saved state seeds the target: a VM
// with one vGPU of the type, running a workload for a while, then paused.
type deviceSource struct {
	profile  string
	workload string
	make     func() (vgpu.Workload, error) // nil: no workload
}

func (s deviceSource) String() string { return s.profile + "-" + s.workload }

// deviceSources cover the four series and every workload kind, idle, busy
// with queued inference requests, and training.
var deviceSources = []deviceSource{
	{"P40-1Q", "desktop", func() (vgpu.Workload, error) {
		return vgpu.NewDesktop(vgpu.DesktopConfig{SurfaceBytes: 16 << 20, RAMWorkingSetBytes: 8 << 20, Seed: 1})
	}},
	{"P40-4Q", "inference", func() (vgpu.Workload, error) {
		return vgpu.NewInference(vgpu.InferenceConfig{Model: vgpu.MobileNet(), RequestsPerSec: 2000, WeightsBytes: 16 << 20,
			ActivationsBytes: 8 << 20, RAMWorkingSetBytes: 16 << 20, Seed: 2})
	}},
	{"P40-8Q", "cad", func() (vgpu.Workload, error) {
		return vgpu.NewCAD(vgpu.CADConfig{FootprintBytes: 64 << 20, RAMWorkingSetBytes: 16 << 20, Seed: 3})
	}},
	{"P40-24C", "training", func() (vgpu.Workload, error) {
		return vgpu.NewTraining(vgpu.TrainingConfig{Model: vgpu.MobileNet(), BatchSize: 8, Seed: 4})
	}},
	{"P40-2B", "idle", nil},
	{"P40-6A", "desktop", func() (vgpu.Workload, error) {
		return vgpu.NewDesktop(vgpu.DesktopConfig{SurfaceBytes: 16 << 20, RAMWorkingSetBytes: 8 << 20, UpdatesPerSec: 50, Seed: 6})
	}},
}

// deviceSeed is a saved state and the source it was saved from.
type deviceSeed struct {
	deviceSource
	state []byte
}

var deviceSaved struct {
	once  sync.Once
	seeds []deviceSeed
	err   error
}

// deviceSeeds returns every source's saved state, made once per test
// binary. Everything runs on simulated time from fixed seeds, so the
// states are the same bytes on every run.
func deviceSeeds(t testing.TB) []deviceSeed {
	t.Helper()
	deviceSaved.once.Do(func() {
		for i, src := range deviceSources {
			b, err := deviceSave(src, uint64(i+1))
			if err != nil {
				deviceSaved.err = fmt.Errorf("saving %v: %w", src, err)
				return
			}
			deviceSaved.seeds = append(deviceSaved.seeds, deviceSeed{src, b})
		}
	})
	seedMust(t, deviceSaved.err)
	return deviceSaved.seeds
}

// deviceSave runs src's VM on a host of its own for 50 ms of simulated
// time (and an odd number of nanoseconds, so that work is mid-flight),
// pauses it and saves its vGPU's state.
func deviceSave(src deviceSource, seed uint64) ([]byte, error) {
	h, err := deviceNewHost("device-src", seed)
	if err != nil {
		return nil, err
	}
	spec := vgpu.VMSpec{ID: "device-seed", Seed: seed, RAMBytes: 512 << 20, RAMFootprintBytes: 64 << 20, Profiles: []string{src.profile}}
	if src.make != nil {
		if spec.Workload, err = src.make(); err != nil {
			return nil, err
		}
	}
	vm, err := h.CreateVM(spec)
	if err != nil {
		return nil, err
	}
	if err := vm.Start(); err != nil {
		return nil, err
	}
	if err := h.Advance(50*time.Millisecond + 123457); err != nil {
		return nil, err
	}
	if err := vm.Pause(); err != nil {
		return nil, err
	}
	states, err := vm.SaveDeviceStates()
	if err != nil {
		return nil, err
	}
	return states[0], nil
}

// seedStreamHost returns a Sparse host with 4 KiB framebuffer pages: the
// vGPU context a started device writes is then four 4 KiB pages, not four
// 64 KiB ones, which keeps recorded migrations small.
func seedStreamHost(name string, seed uint64) (*vgpu.Host, error) {
	return vgpu.NewHost(vgpu.HostConfig{Name: name, Memory: memory.Sparse, FramebufferPageSize: 4096,
		Seed: seed, RAMBytes: 4 * seedGiB})
}

// streamShrink rewrites a started seed VM's memory so that its stream fits
// a committed corpus file: of the pages in use in each region — the
// guest's data in RAM, the vGPU's four context pages of random bytes — the
// first half become text, which compresses and quotes short in a corpus
// file, and the rest zero pages, whose contents a stream elides.
func streamShrink(vm *vgpu.VM) error {
	for _, r := range append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...) {
		var used []int
		for p := range r.Pages() {
			zero, err := r.IsZeroPage(p)
			if err != nil {
				return err
			}
			if !zero {
				used = append(used, p)
			}
		}
		for i, p := range used {
			c := memory.ClassText
			if i >= len(used)/2 {
				c = memory.ClassZero
			}
			if err := r.Fill(p, 1, c); err != nil {
				return err
			}
		}
	}
	return nil
}
