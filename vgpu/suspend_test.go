package vgpu

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
)

// suspendCase is a VM of c, busy, suspended to a file from a running
// state, beside its twin on an identical host that was only paused and
// resumed in place at the same instant.
func suspendCase(t *testing.T, c stateCase, opts SuspendOptions) (file []byte, src *Host, twinHost *Host, twin *VM) {
	t.Helper()
	src, vm := busyStateVM(t, c, "source")
	twinHost, twin = busyStateVM(t, c, "twin")
	must(t, vm.Resume())
	must(t, twin.Resume())
	var buf bytes.Buffer
	must(t, vm.Suspend(&buf, opts))
	if vm.State() != VMDestroyed {
		t.Fatalf("suspended VM %v", vm.State())
	}
	if _, ok := src.VM(vm.ID()); ok || src.FreeRAMBytes() != src.RAMBytes() {
		t.Fatal("the source host still holds the VM")
	}
	for _, g := range src.GPUs() {
		if g.VGPUCount() != 0 {
			t.Fatalf("GPU %d still holds %d vGPUs", g.Index(), g.VGPUCount())
		}
	}
	return buf.Bytes(), src, twinHost, twin
}

// TestSuspendResume suspends a VM of each workload to a file and resumes
// it on another host at the same time: it must run on exactly as its twin
// does, and a synthetic VM's file must be small whatever its memory.
func TestSuspendResume(t *testing.T) {
	for _, c := range stateCases() {
		t.Run(c.name, func(t *testing.T) {
			file, src, th, twin := suspendCase(t, c, SuspendOptions{})
			// Gigabytes of guest memory and framebuffer; the file holds
			// runs of pages, the workload's state and the device states.
			if len(file) > 256<<10 {
				t.Errorf("suspend file of %d bytes", len(file))
			}
			dst := newHost(t, stateHostConfig("destination"))
			advance(t, dst, src.Now())
			vm, err := dst.Resume(bytes.NewReader(file), ResumeOptions{})
			must(t, err)
			if vm.State() != VMRunning || vm.ID() != twin.ID() {
				t.Fatalf("resumed %q %v", vm.ID(), vm.State())
			}
			for _, h := range []*Host{th, dst} {
				advance(t, h, 700*time.Millisecond+333)
			}
			sameRun(t, twin, vm)
		})
	}
}

// TestSuspendResumeLater resumes on a host whose clock is ahead: the
// workload's times move with it, and it serves on as its twin would have
// after resuming from the same pause.
func TestSuspendResumeLater(t *testing.T) {
	c := stateCases()[0]
	src, vm := busyStateVM(t, c, "source")
	th, twin := busyStateVM(t, c, "twin")
	dst, resumed := suspendResumeLater(t, src, vm)
	if resumed.State() != VMPaused {
		t.Fatalf("a VM suspended paused resumes %v", resumed.State())
	}
	from := th.Now()
	must(t, twin.Resume())
	must(t, resumed.Resume())
	advance(t, th, time.Second)
	advance(t, dst, time.Second)
	a := twin.Workload().Metrics(from, th.Now())
	b := resumed.Workload().Metrics(from+resumeLaterGap, dst.Now())
	if a.Completed == 0 || a.Completed != b.Completed || a.Dropped != b.Dropped || a.LatencyP99 != b.LatencyP99 || a.BusyTime != b.BusyTime {
		t.Errorf("the next second:\n twin    %+v\n resumed %+v", a, b)
	}
}

// TestSuspendBytes writes every page's bytes: a larger file, whose regions'
// digests are checked end to end at the resume, for the same VM.
func TestSuspendBytes(t *testing.T) {
	c := stateCases()[3] // a desktop: the smallest framebuffer
	compact, _, _, _ := suspendCase(t, c, SuspendOptions{})
	file, src, th, twin := suspendCase(t, c, SuspendOptions{Bytes: true, Writer: checkpoint.WriterOptions{Level: checkpoint.LevelS2}})
	if len(file) < 10*len(compact) {
		t.Errorf("file of bytes %d, compact %d", len(file), len(compact))
	}
	dst := newHost(t, stateHostConfig("destination"))
	advance(t, dst, src.Now())
	vm, err := dst.Resume(bytes.NewReader(file), ResumeOptions{})
	must(t, err)
	for _, h := range []*Host{th, dst} {
		advance(t, h, 300*time.Millisecond)
	}
	sameRun(t, twin, vm)
}

// failingWriter fails after n bytes.
type failingWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		n := w.n
		w.n = 0
		return n, errDiskFull
	}
	w.n -= len(p)
	return len(p), nil
}

// TestSuspendFailsCleanly checks that a suspend whose file cannot be
// written leaves the VM running as if nothing had happened, and that one
// a VM cannot make is refused before anything changes.
func TestSuspendFailsCleanly(t *testing.T) {
	c := stateCases()[0]
	h, vm := busyStateVM(t, c, "source")
	th, twin := busyStateVM(t, c, "twin")
	must(t, vm.Resume())
	must(t, twin.Resume())
	for _, n := range []int{0, 100, 5000} {
		if err := vm.Suspend(&failingWriter{n: n}, SuspendOptions{}); !errors.Is(err, errDiskFull) {
			t.Fatalf("suspend to a full disk after %d bytes: %v", n, err)
		}
		if vm.State() != VMRunning {
			t.Fatalf("VM %v after a failed suspend", vm.State())
		}
	}
	advance(t, h, 500*time.Millisecond)
	advance(t, th, 500*time.Millisecond)
	sameRun(t, twin, vm)

	claim, err := vm.ClaimMigration()
	must(t, err)
	if err := vm.Suspend(io.Discard, SuspendOptions{}); !errors.Is(err, ErrMigrating) {
		t.Errorf("suspend of a migrating VM: %v", err)
	}
	claim.Release()
	must(t, vm.Stop())
	var te *TransitionError
	if err := vm.Suspend(io.Discard, SuspendOptions{}); !errors.As(err, &te) {
		t.Errorf("suspend of a stopped VM: %v", err)
	}
	pt := mustVM(t, newHost(t, stateHostConfig("pt")), VMSpec{ID: "pt", Passthrough: true})
	must(t, pt.Start())
	var nm *NotMigratableError
	if err := pt.Suspend(io.Discard, SuspendOptions{}); !errors.As(err, &nm) {
		t.Errorf("suspend of a passthrough VM: %v", err)
	}
}

// TestResumeFailsCleanly checks that a file that cannot be resumed on a
// host leaves nothing of its VM there, with a typed error.
func TestResumeFailsCleanly(t *testing.T) {
	c := stateCases()[3]
	file, src, _, _ := suspendCase(t, c, SuspendOptions{})
	flipped := bytes.Clone(file)
	flipped[len(flipped)/2] ^= 1
	for _, tc := range []struct {
		name string
		file []byte
		host HostConfig
		opts ResumeOptions
		pre  func(*Host)
		want error
	}{
		{"a flipped bit", flipped, stateHostConfig("d"), ResumeOptions{}, nil, checkpoint.ErrChecksum},
		{"truncated", file[:len(file)*2/3], stateHostConfig("d"), ResumeOptions{}, nil, checkpoint.ErrTruncated},
		{"another GPU model", file, HostConfig{Name: "v100", GPU: T4(), Seed: 1}, ResumeOptions{}, nil, ErrIncompatibleHost},
		{"the same VM there", file, stateHostConfig("d"), ResumeOptions{}, func(h *Host) {
			mustVM(t, h, VMSpec{ID: "vm-" + c.name, Profiles: []string{"P40-1B"}})
		}, ErrDuplicateVM},
		{"its decoder fails", file, stateHostConfig("d"), ResumeOptions{Workloads: map[string]WorkloadDecoder{
			c.name: func(*Env, []byte) (Workload, error) { return nil, errors.New("no") },
		}}, nil, ErrWorkload},
		{"wrong key", file, stateHostConfig("d"), ResumeOptions{Reader: checkpoint.ReaderOptions{
			Encryption: checkpoint.EncryptionRequired, Key: bytes.Repeat([]byte{1}, checkpoint.KeySize)}}, nil, checkpoint.ErrEncryptionMode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, tc.host)
			advance(t, h, src.Now())
			if tc.pre != nil {
				tc.pre(h)
			}
			before := len(h.VMs())
			vm, err := h.Resume(bytes.NewReader(tc.file), tc.opts)
			if !errors.Is(err, tc.want) || vm != nil {
				t.Fatalf("resume: %v, want %v", err, tc.want)
			}
			if len(h.VMs()) != before {
				t.Errorf("%d VMs left, %d before", len(h.VMs()), before)
			}
			vgpus := 0
			for _, g := range h.GPUs() {
				vgpus += g.VGPUCount()
			}
			if vgpus != before {
				t.Errorf("%d vGPUs on the host, %d before", vgpus, before)
			}
		})
	}
}

// TestSuspendRecordRoundTrip checks the VM record's form and refusals.
func TestSuspendRecordRoundTrip(t *testing.T) {
	rec := suspendRecord{
		spec: IncomingSpec{ID: "vm", Seed: 9, RAMBytes: 1 << 30, RAMFootprintBytes: 1 << 20, RAMPageSize: 4096,
			FramebufferPageSize: 65536, GPUModel: "Tesla P40", Profiles: []string{"P40-2Q", "P40-2Q"}},
		running: true, throttle: 0.25, nowNS: -5, workloadKind: "inference", workloadStarted: true, workloadState: []byte("state"),
	}
	b, err := rec.append(nil)
	must(t, err)
	got, err := decodeSuspendRecord(b)
	must(t, err)
	if again, _ := got.append(nil); !bytes.Equal(again, b) {
		t.Fatal("the record encodes differently")
	}
	for i := range b {
		if _, err := decodeSuspendRecord(b[:i]); !errors.Is(err, ErrSuspendFile) {
			t.Fatalf("record cut at %d of %d bytes: %v", i, len(b), err)
		}
	}
	if _, err := decodeSuspendRecord(append(bytes.Clone(b), 0)); !errors.Is(err, ErrSuspendFile) {
		t.Errorf("trailing byte: %v", err)
	}
	rec.throttle = 1
	if b, _ := rec.append(nil); !errors.Is(func() error { _, err := decodeSuspendRecord(b); return err }(), ErrSuspendFile) {
		t.Errorf("throttle 1: %v", err)
	}
}

// FuzzSuspendRecord feeds arbitrary bytes to the VM record's decoder: it
// never panics, fails typed, and what it accepts encodes back the same.
func FuzzSuspendRecord(f *testing.F) {
	rec := suspendRecord{spec: IncomingSpec{ID: "vm", Seed: 1, RAMBytes: 1 << 20, RAMPageSize: 4096,
		FramebufferPageSize: 65536, GPUModel: "Tesla P40", Profiles: []string{"P40-1Q"}}, running: true}
	b, _ := rec.append(nil)
	f.Add(b)
	rec.workloadKind, rec.workloadState, rec.throttle = "training", []byte{1, 2, 3}, 0.5
	b, _ = rec.append(nil)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeSuspendRecord(b)
		if err != nil {
			if !errors.Is(err, ErrSuspendFile) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if again, err := rec.append(nil); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted record encodes differently (%v)", err)
		}
	})
}

// TestHistoryShiftKeepsEviction checks that a history that evicted records
// still says so after its times move below zero and back, as a VM's do
// when it resumes on a host whose clock is behind and then on one ahead.
func TestHistoryShiftKeepsEviction(t *testing.T) {
	h := newHistory(2)
	for i := range 3 {
		at := time.Duration(i+1) * time.Second
		h.add(record{start: at - time.Millisecond, end: at})
	}
	want := h.metrics("w", time.Second, 4*time.Second)
	h.shift(-10 * time.Second)
	h.shift(10 * time.Second)
	if got := h.metrics("w", time.Second, 4*time.Second); got != want || !got.Partial {
		t.Errorf("after shifting back and forth %+v, before %+v", got, want)
	}
}

// TestWorkloadStateOwesTooMuch checks that a state whose next event lies
// so far before its clock that the first Fire after a resume would go
// through more than maxCatchUpEvents of them is refused: a crafted file
// must not spin the host that resumes it.
func TestWorkloadStateOwesTooMuch(t *testing.T) {
	for _, c := range []stateCase{stateCases()[0], stateCases()[2], stateCases()[3]} {
		_, vm := busyStateVM(t, c, "h")
		for _, back := range []time.Duration{time.Second, 1 << 62} {
			b := mutated(t, vm, func(w Workload) {
				switch w := w.(type) {
				case *Inference:
					w.next = w.last - back
				case *Desktop:
					w.next = w.last - back
				case *CAD:
					w.next = w.last - back
				}
			})
			_, err := WorkloadDecoders()[c.name](&vm.env, b)
			if back == time.Second && err != nil {
				t.Errorf("%s owing a second: %v", c.name, err)
			}
			if back != time.Second && !errors.Is(err, ErrCorruptState) {
				t.Errorf("%s owing %v: %v", c.name, back, err)
			}
		}
	}
}

// opaqueWorkload hides a workload's state: only the Workload methods show.
type opaqueWorkload struct{ Workload }

// TestSuspendNeedsState checks that a VM whose workload cannot save its
// state is refused before anything happens to it.
func TestSuspendNeedsState(t *testing.T) {
	h := newHost(t, stateHostConfig("h"))
	w, _ := NewDesktop(DesktopConfig{RAMWorkingSetBytes: 64 * MiB, Seed: 1})
	vm := mustVM(t, h, VMSpec{ID: "opaque", RAMFootprintBytes: 64 * MiB, Profiles: []string{"P40-1B"}, Workload: opaqueWorkload{w}})
	must(t, vm.Start())
	advance(t, h, 100*time.Millisecond)
	changes := vm.Changes()
	if err := vm.Suspend(io.Discard, SuspendOptions{}); !errors.Is(err, ErrWorkload) {
		t.Fatalf("suspend of an opaque workload: %v", err)
	}
	if vm.State() != VMRunning || vm.Changes() != changes {
		t.Errorf("VM %v, %d changes, before %d", vm.State(), vm.Changes(), changes)
	}
}

// resumeLaterGap is how far ahead of the source's clock
// suspendResumeLater's host is: 3 s and 17 ns, so that nothing lines up
// by chance.
const resumeLaterGap = 3*time.Second + 17

// suspendResumeLater suspends vm to a file and resumes it on a new host
// whose clock is resumeLaterGap ahead of src's, returning that host and
// the resumed VM.
func suspendResumeLater(t *testing.T, src *Host, vm *VM) (*Host, *VM) {
	t.Helper()
	var file bytes.Buffer
	must(t, vm.Suspend(&file, SuspendOptions{}))
	dst := newHost(t, stateHostConfig("destination"))
	advance(t, dst, src.Now()+resumeLaterGap)
	resumed, err := dst.Resume(&file, ResumeOptions{})
	must(t, err)
	return dst, resumed
}
