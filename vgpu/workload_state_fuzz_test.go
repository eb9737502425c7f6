package vgpu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// The VM every state of the fuzz corpus is saved on and decoded for: two
// P40-24Q vGPUs, 1 GiB of guest memory.
var fuzzStateSpec = VMSpec{ID: "fuzz", RAMBytes: 1 * GiB, RAMFootprintBytes: 64 * MiB, Profiles: []string{"P40-24Q", "P40-24Q"}}

// fuzzStateWorkloads returns one workload of each kind that fits
// fuzzStateSpec, by StateKind, and a training with a host phase, as
// "training-dataload".
func fuzzStateWorkloads() map[string]StatefulWorkload {
	inf, _ := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 2000, FootprintBytes: 48 * MiB,
		ActivationsBytes: 24 * MiB, RAMWorkingSetBytes: 8 * MiB, FramebufferDirtyBytesPerSec: 2 * MiB, HistoryLimit: 50, Seed: 1})
	tr, _ := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 2, FootprintBytes: 96 * MiB,
		RAMDirtyBytesPerSec: MiB, HistoryLimit: 20, Seed: 2})
	cad, _ := NewCAD(CADConfig{SceneBytes: 32 * MiB, OpsPerPixel: 150000, RAMWorkingSetBytes: 16 * MiB, HistoryLimit: 20, Seed: 3})
	desk, _ := NewDesktop(DesktopConfig{UpdatesPerSec: 300, SurfaceBytes: 16 * MiB, RAMWorkingSetBytes: 16 * MiB,
		RAMDirtyPattern: memory.Rewrite, RAMDirtyBytesPerSec: 2 * MiB, HistoryLimit: 40, Seed: 4})
	load, _ := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 2, FootprintBytes: 96 * MiB,
		RAMDirtyBytesPerSec: MiB, HistoryLimit: 20, Seed: 5, DataLoad: 7 * time.Millisecond, DataLoadJitter: 0.25})
	return map[string]StatefulWorkload{StateKindInference: inf, StateKindTraining: tr, StateKindCAD: cad, StateKindDesktop: desk,
		StateKindTraining + "-dataload": load}
}

func fuzzStateVM(t tb, w Workload) (*Host, *VM) {
	t.Helper()
	h := newHost(t, stateHostConfig("fuzz"))
	spec := fuzzStateSpec
	spec.Workload = w
	return h, mustVM(t, h, spec)
}

// FuzzWorkloadState decodes arbitrary bytes with every decoder: none may
// panic, every refusal is a typed *WorkloadStateError, and what decodes
// encodes back to the same bytes.
func FuzzWorkloadState(f *testing.F) {
	_, vm := fuzzStateVM(f, nil)
	// Valid seeds built here, besides the corpus in testdata (busy
	// workloads, saved paused and stopped): each kind never started.
	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range WorkloadDecoders() {
			if !yield(k) {
				return
			}
		}
	})
	seeds := fuzzStateWorkloads()
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range seeds {
			if !yield(k) {
				return
			}
		}
	}) {
		b, err := seeds[k].AppendState(nil)
		must(f, err)
		f.Add(b)
	}
	decoders := WorkloadDecoders()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, kind := range kinds {
			w, err := decoders[kind](&vm.env, b)
			if err != nil {
				var se *WorkloadStateError
				if !errors.As(err, &se) || !errors.Is(err, ErrWorkload) || se.Kind != kind ||
					!(errors.Is(err, ErrCorruptState) || errors.Is(err, ErrStateVersion) || errors.Is(err, ErrIncompatibleState)) {
					t.Fatalf("%s: untyped error %v", kind, err)
				}
				if se.Offset < 0 || se.Offset > len(b) {
					t.Fatalf("%s: offset %d of %d bytes", kind, se.Offset, len(b))
				}
				continue
			}
			sw, ok := w.(StatefulWorkload)
			if !ok || sw.StateKind() != kind {
				t.Fatalf("%s decoder made a %T", kind, w)
			}
			again, err := sw.AppendState(nil)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("%s: re-encoding (%v):\n%x\n%x", kind, err, b, again)
			}
		}
	})
}

// fuzzCorpusDir is the seed corpus of FuzzWorkloadState. Its files named
// valid-KIND-* hold states a KIND workload saved; broken-* ones damaged
// states.
var fuzzCorpusDir = filepath.Join("testdata", "fuzz", "FuzzWorkloadState")

// TestWriteWorkloadStateCorpus regenerates the seed corpus of
// FuzzWorkloadState when VGPU_WRITE_CORPUS is set:
//
//	VGPU_WRITE_CORPUS=1 go test ./vgpu -run TestWriteWorkloadStateCorpus
func TestWriteWorkloadStateCorpus(t *testing.T) {
	if os.Getenv("VGPU_WRITE_CORPUS") == "" {
		t.Skip("set VGPU_WRITE_CORPUS=1 to regenerate the corpus")
	}
	must(t, os.MkdirAll(fuzzCorpusDir, 0o755))
	write := func(name string, b []byte) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		must(t, os.WriteFile(filepath.Join(fuzzCorpusDir, name), []byte(body), 0o644))
	}
	for name, w := range fuzzStateWorkloads() {
		h, vm := fuzzStateVM(t, w)
		must(t, vm.Start())
		advance(t, h, 300*time.Millisecond+999)
		must(t, vm.SetThrottle(0.125))
		advance(t, h, 200*time.Millisecond+77)
		must(t, vm.Pause())
		paused, err := w.AppendState(nil)
		must(t, err)
		write("valid-"+name+"-paused", paused)
		must(t, vm.Stop())
		stopped, err := w.AppendState(nil)
		must(t, err)
		write("valid-"+name+"-stopped", stopped)
		write("broken-"+name+"-truncated", paused[:len(paused)*2/3])
		write("broken-"+name+"-version", append([]byte{newestStateVersion + 1}, paused[1:]...))
	}
}

// TestWorkloadStateCorpus checks the committed corpus: every valid state
// still decodes, for the VM it was saved on, and encodes back to the same
// bytes; every broken one is refused. A change of the format that fails
// it must bump workloadStateVersion and regenerate the corpus.
func TestWorkloadStateCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(fuzzCorpusDir, "*"))
	must(t, err)
	if len(files) < 4*len(WorkloadDecoders()) {
		t.Fatalf("%d corpus files", len(files))
	}
	_, vm := fuzzStateVM(t, nil)
	for _, file := range files {
		name := filepath.Base(file)
		b := readCorpusFile(t, file)
		parts := strings.SplitN(name, "-", 3)
		dec := WorkloadDecoders()[parts[1]]
		if len(parts) != 3 || dec == nil {
			t.Fatalf("%s: not valid-KIND-* or broken-KIND-*", name)
		}
		w, err := dec(&vm.env, b)
		switch parts[0] {
		case "valid":
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if again := appendState(t, w); !bytes.Equal(again, b) {
				t.Errorf("%s: encodes differently", name)
			}
		case "broken":
			if err == nil {
				t.Errorf("%s: decoded", name)
			}
		default:
			t.Errorf("%s: not valid-KIND-* or broken-KIND-*", name)
		}
	}
}

// readCorpusFile reads a corpus file of one []byte value.
func readCorpusFile(t *testing.T, file string) []byte {
	t.Helper()
	raw, err := os.ReadFile(file)
	must(t, err)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
		!strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
		t.Fatalf("%s: not a corpus file of one []byte", file)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	must(t, err)
	return []byte(s)
}
