package vgpu

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// stateCase is a workload run on a VM of its own, busy enough that its
// state holds every kind of thing: requests or iterations in flight,
// records evicted from a short history, a throttle, dirtiers and rings
// part-way through their spans.
type stateCase struct {
	name     string
	profiles []string
	make     func() Workload
}

func stateCases() []stateCase {
	return []stateCase{
		{"inference", []string{"P40-24Q", "P40-24Q"}, func() Workload {
			w, _ := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 3000, FootprintBytes: 64 * MiB, ActivationsBytes: 40 * MiB,
				RAMWorkingSetBytes: 16 * MiB, RAMDirtyPattern: memory.HotSet, FramebufferDirtyBytesPerSec: 8 * MiB,
				HistoryLimit: 700, Seed: 3})
			return w
		}},
		{"training", []string{"P40-24C", "P40-24C"}, func() Workload {
			w, _ := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 4, FootprintBytes: 128 * MiB,
				RAMDirtyBytesPerSec: 4 * MiB, QueueDepth: 3, HistoryLimit: 40, Seed: 4})
			return w
		}},
		{"cad", []string{"P40-2Q"}, func() Workload {
			// Frames heavier than the period: some are skipped.
			w, _ := NewCAD(CADConfig{TargetFPS: 60, SceneBytes: 64 * MiB, OpsPerPixel: 150000,
				RAMWorkingSetBytes: 64 * MiB, HistoryLimit: 30, Seed: 5})
			return w
		}},
		{"desktop", []string{"P40-1B"}, func() Workload {
			w, _ := NewDesktop(DesktopConfig{UpdatesPerSec: 400, RAMWorkingSetBytes: 64 * MiB, RAMDirtyPattern: memory.Sweep,
				RAMDirtyBytesPerSec: 3*MiB + 123, HistoryLimit: 300, Seed: 6})
			return w
		}},
		{"training-dataload", []string{"P40-24C", "P40-24C"}, func() Workload {
			// Saved in the middle of a host phase (see busy).
			w, _ := NewTraining(TrainingConfig{Model: MobileNet(), BatchSize: 4, FootprintBytes: 128 * MiB,
				RAMDirtyBytesPerSec: 4 * MiB, HistoryLimit: 40, Seed: 7, DataLoad: 7 * time.Millisecond, DataLoadJitter: 0.3})
			return w
		}},
	}
}

// kind is the StateKind of c's workload.
func (c stateCase) kind() string { return c.make().(StatefulWorkload).StateKind() }

// stateHostConfig is the host every test of this file runs on; hosts made
// of it run identically.
func stateHostConfig(name string) HostConfig { return HostConfig{Name: name, GPUs: 2, Seed: 1} }

// stateVMSpec is the VM c's workload runs on: small guest memory, so that
// comparing it byte by byte stays cheap.
func stateVMSpec(id string, c stateCase) VMSpec {
	return VMSpec{ID: id, RAMBytes: 160 * MiB, RAMFootprintBytes: 16 * MiB, Profiles: c.profiles, Workload: c.make()}
}

// busyStateVM runs c's workload on a fresh host: 700 ms, a throttle, 600
// ms more, then a pause in the middle of things.
func busyStateVM(t tb, c stateCase, host string) (*Host, *VM) {
	t.Helper()
	h := newHost(t, stateHostConfig(host))
	vm := mustVM(t, h, stateVMSpec("vm-"+c.name, c))
	must(t, vm.Start())
	advance(t, h, 700*time.Millisecond+12345)
	must(t, vm.SetThrottle(0.25))
	advance(t, h, 600*time.Millisecond+678)
	// On, a tenth of a millisecond at a time, to a moment with work in
	// flight (the same moment on every identical host).
	for i := 0; i < 1000 && !busy(vm.Workload()); i++ {
		advance(t, h, 100*time.Microsecond)
	}
	if !busy(vm.Workload()) {
		t.Fatalf("%s: nothing in flight", c.name)
	}
	must(t, vm.Pause())
	return h, vm
}

// busy reports whether w has work in flight on the GPU.
func busy(w Workload) bool {
	switch w := w.(type) {
	case *Inference:
		// Both vGPUs busy, and the next request for the second: the
		// round-robin position is saved too.
		return len(w.inflight) > 1 && w.rr == 1
	case *Desktop:
		return len(w.inflight) > 0
	case *Training:
		if w.cfg.hasDataLoad() {
			// Between iterations, loading the next batch.
			return w.inFlight == 0 && w.readyAt > w.clock
		}
		return len(w.remaining) > 0
	case *CAD:
		return w.inFlight
	}
	return false
}

func appendState(t tb, w Workload) []byte {
	t.Helper()
	sw, ok := w.(StatefulWorkload)
	if !ok {
		t.Fatalf("%T is not a StatefulWorkload", w)
	}
	b, err := sw.AppendState(nil)
	must(t, err)
	return b
}

func decodeState(t tb, env *Env, w Workload, b []byte) Workload {
	t.Helper()
	dec := WorkloadDecoders()[w.(StatefulWorkload).StateKind()]
	if dec == nil {
		t.Fatalf("no decoder for %T", w)
	}
	got, err := dec(env, b)
	must(t, err)
	return got
}

// sameRun checks that two VMs' workloads and memory are the same: their
// metrics over the whole run and over windows of it, their states, their
// GPU time and every page of their regions.
func sameRun(t *testing.T, a, b *VM) {
	t.Helper()
	now := a.Host().Now()
	if b.Host().Now() != now {
		t.Fatalf("clocks differ: %v and %v", now, b.Host().Now())
	}
	wa, wb := a.Workload(), b.Workload()
	for _, win := range [][2]time.Duration{{0, now}, {0, now / 2}, {now / 2, now}, {now - 200*time.Millisecond, now}} {
		ma, mb := wa.Metrics(win[0], win[1]), wb.Metrics(win[0], win[1])
		if ma != mb {
			t.Errorf("metrics over [%v, %v) differ:\n in place %+v\n restored %+v", win[0], win[1], ma, mb)
		}
	}
	if m := wa.Metrics(0, now); m.Completed == 0 {
		t.Errorf("nothing completed: %+v", m)
	}
	if !bytes.Equal(appendState(t, wa), appendState(t, wb)) {
		t.Error("states differ")
	}
	if a.GPUTime() != b.GPUTime() {
		t.Errorf("GPU time %v in place, %v restored", a.GPUTime(), b.GPUTime())
	}
	if p, err := memory.FirstDiff(a.RAM(), b.RAM()); err != nil || p != -1 {
		t.Errorf("guest RAM differs at page %d (%v)", p, err)
	}
	fa, fb := a.Framebuffers(), b.Framebuffers()
	for i := range fa {
		// Page states rather than bytes: a framebuffer is up to 24 GiB
		// of generated pages, whose content is a function of the state.
		if p, err := firstStateDiff(fa[i], fb[i]); err != nil || p != -1 {
			t.Errorf("framebuffer %d differs at page %d (%v)", i, p, err)
		}
	}
}

// firstStateDiff returns the first page whose class and generation differ
// in a and b, or whose bytes differ where both hold explicit bytes, or -1:
// an exact comparison of regions of one seed, where generated content is a
// function of (seed, page, generation, class).
func firstStateDiff(a, b *memory.Region) (int, error) {
	if a.Pages() != b.Pages() || a.Seed() != b.Seed() || a.PageSize() != b.PageSize() {
		return 0, nil
	}
	pa, pb := make([]byte, a.PageSize()), make([]byte, b.PageSize())
	for p := range a.Pages() {
		sa, err := a.PageState(p)
		if err != nil {
			return p, err
		}
		sb, err := b.PageState(p)
		if err != nil {
			return p, err
		}
		if sa != sb {
			return p, nil
		}
		if !sa.Class.Generated() {
			if _, err := a.ReadPage(p, pa); err != nil {
				return p, err
			}
			if _, err := b.ReadPage(p, pb); err != nil {
				return p, err
			}
			if !bytes.Equal(pa, pb) {
				return p, nil
			}
		}
	}
	return -1, nil
}

// copyPages copies every page of src into dst, as copyRegion does, with
// one error for the whole region.
func copyPages(dst, src *memory.Region) error {
	buf := make([]byte, src.PageSize())
	for p := range src.Pages() {
		st, err := src.PageState(p)
		if err != nil {
			return err
		}
		if st.Class.Generated() {
			err = dst.StoreGenerated(p, st.Class, st.Gen)
		} else if _, err = src.ReadPage(p, buf); err == nil {
			err = dst.StorePage(p, buf, st.Gen)
		}
		if err != nil {
			return fmt.Errorf("page %d: %w", p, err)
		}
	}
	return nil
}

// TestWorkloadStateReplacesWorkload checks the state alone: two identical
// hosts run the same workload; on the second the paused workload is
// replaced by one decoded from its state. After a pause both resume and
// run on: metrics, history, state and every page must stay identical to
// the twin's, which was only paused and resumed in place.
func TestWorkloadStateReplacesWorkload(t *testing.T) {
	for _, c := range stateCases() {
		t.Run(c.name, func(t *testing.T) {
			ha, a := busyStateVM(t, c, "a")
			hb, b := busyStateVM(t, c, "b")
			sa, sb := appendState(t, a.Workload()), appendState(t, b.Workload())
			if !bytes.Equal(sa, sb) {
				t.Fatal("identical runs give different states")
			}
			orig := b.Workload()
			w := decodeState(t, &b.env, orig, sb)
			if again := appendState(t, w); !bytes.Equal(again, sb) {
				t.Fatal("decoded state encodes differently")
			}
			// The original leaves the VM with nothing running; its
			// replacement takes its place as a resume would attach it.
			b.workload = nil
			must(t, b.adoptWorkload(w, true, b.Throttle()))
			for _, h := range []*Host{ha, hb} {
				advance(t, h, 300*time.Millisecond)
			}
			must(t, a.Resume())
			must(t, b.Resume())
			for _, h := range []*Host{ha, hb} {
				advance(t, h, 900*time.Millisecond+4321)
			}
			must(t, a.SetThrottle(0))
			must(t, b.SetThrottle(0))
			for _, h := range []*Host{ha, hb} {
				advance(t, h, 400*time.Millisecond)
			}
			sameRun(t, a, b)
			if b.Workload() != w || w == orig {
				t.Error("the decoded workload is not the one that ran")
			}
		})
	}
}

// TestWorkloadStateSuspendToAnotherHost checks the whole path of a
// suspend file: the VM is paused, its workload state, device states and
// memory saved, and it is destroyed; a third host of the same
// configuration, at the same time, prepares it incoming, copies the memory
// in, decodes the workload onto it (adoptWorkload), restores the devices
// and resumes it. It must run on exactly as a twin resumed in place.
func TestWorkloadStateSuspendToAnotherHost(t *testing.T) {
	for _, c := range stateCases() {
		t.Run(c.name, func(t *testing.T) {
			hs, src := busyStateVM(t, c, "source")
			hr, ref := busyStateVM(t, c, "reference")

			state := appendState(t, src.Workload())
			devices, err := src.SaveDeviceStates()
			must(t, err)
			started, throttle := src.wlStarted, src.Throttle()

			hd := newHost(t, stateHostConfig("destination"))
			advance(t, hd, hs.Now())
			in, err := hd.PrepareIncoming(src.IncomingSpec())
			must(t, err)
			must(t, copyPages(in.RAM(), src.RAM()))
			for i, fb := range src.Framebuffers() {
				must(t, copyPages(in.Framebuffers()[i], fb))
			}
			must(t, src.Destroy())
			w := decodeState(t, &in.env, ref.Workload(), state)
			must(t, in.adoptWorkload(w, started, throttle))
			must(t, in.Restore(devices))

			for _, h := range []*Host{hr, hd} {
				advance(t, h, 250*time.Millisecond)
			}
			must(t, ref.Resume())
			must(t, in.Resume())
			for _, h := range []*Host{hr, hd} {
				advance(t, h, time.Second+777)
			}
			if in.Throttle() != 0.25 || in.EffectiveThrottle() != 0.25 {
				t.Errorf("throttle %v after the resume", in.Throttle())
			}
			sameRun(t, ref, in)
		})
	}
}

// TestWorkloadStateRoundTrip checks that a state decodes and encodes back
// to the same bytes in every lifecycle state a workload is saved in.
func TestWorkloadStateRoundTrip(t *testing.T) {
	for _, c := range stateCases() {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t, stateHostConfig("h"))
			vm := mustVM(t, h, stateVMSpec("vm", c))
			check := func(when string) {
				t.Helper()
				b := appendState(t, vm.Workload())
				w := decodeState(t, &vm.env, vm.Workload(), b)
				if again := appendState(t, w); !bytes.Equal(again, b) {
					t.Errorf("%s: decoded state encodes differently", when)
				}
				if w.Name() != vm.Workload().Name() {
					t.Errorf("%s: name %q, was %q", when, w.Name(), vm.Workload().Name())
				}
				for kind, dec := range WorkloadDecoders() {
					if kind == c.kind() {
						continue
					}
					if _, err := dec(&vm.env, b); !errors.Is(err, ErrCorruptState) {
						t.Errorf("%s: the %s decoder took a %s state: %v", when, kind, c.name, err)
					}
				}
			}
			check("never started")
			must(t, vm.SetThrottle(0.5))
			check("throttled before the start")
			must(t, vm.Start())
			advance(t, h, 333*time.Millisecond)
			check("running")
			must(t, vm.Pause())
			check("paused")
			must(t, vm.Stop())
			check("paused, then stopped")
			must(t, vm.Start())
			must(t, vm.SetThrottle(0))
			advance(t, h, 100*time.Millisecond)
			must(t, vm.Stop())
			check("stopped")
		})
	}
}

// TestWorkloadStateEnvs checks a state against the VM it is decoded for:
// one with fewer vGPUs, smaller regions or none at all is refused as
// incompatible; the zero Env takes only a workload never started.
func TestWorkloadStateEnvs(t *testing.T) {
	for _, c := range stateCases() {
		t.Run(c.name, func(t *testing.T) {
			_, vm := busyStateVM(t, c, "h")
			b := appendState(t, vm.Workload())
			dec := WorkloadDecoders()[c.kind()]
			if _, err := dec(nil, b); !errors.Is(err, ErrIncompatibleState) {
				t.Errorf("no VM: %v", err)
			}
			if _, err := dec(&Env{}, b); !errors.Is(err, ErrIncompatibleState) {
				t.Errorf("zero Env: %v", err)
			}
			small := newHost(t, stateHostConfig("small"))
			other := mustVM(t, small, VMSpec{ID: "small", RAMBytes: 64 * MiB, Profiles: []string{"P40-1Q"}})
			if _, err := dec(&other.env, b); !errors.Is(err, ErrIncompatibleState) || !errors.Is(err, ErrWorkload) {
				t.Errorf("a smaller VM: %v", err)
			}
			fresh := c.make().(StatefulWorkload)
			nb, err := fresh.AppendState(nil)
			must(t, err)
			w, err := dec(nil, nb)
			if err != nil {
				t.Fatalf("a workload never started, without a VM: %v", err)
			}
			if !bytes.Equal(appendState(t, w), nb) {
				t.Error("a workload never started encodes differently")
			}
		})
	}
}

// mutated returns the state of a copy of vm's workload changed by edit.
func mutated(t *testing.T, vm *VM, edit func(Workload)) []byte {
	t.Helper()
	w := decodeState(t, &vm.env, vm.Workload(), appendState(t, vm.Workload()))
	edit(w)
	return appendState(t, w)
}

// TestWorkloadStateHostile checks that each kind of damage to a state is
// refused with a *WorkloadStateError of the right sentinel.
func TestWorkloadStateHostile(t *testing.T) {
	vms := map[string]*VM{}
	valid := map[string][]byte{}
	for _, c := range stateCases() {
		_, vm := busyStateVM(t, c, c.name)
		vms[c.name] = vm
		valid[c.name] = appendState(t, vm.Workload())
	}
	inf, tr, cad, desk := vms["inference"], vms["training"], vms["cad"], vms["desktop"]
	set := func(b []byte, i int, v byte) []byte { b = slices.Clone(b); b[i] = v; return b }
	for _, tc := range []struct {
		name  string
		kind  string
		state []byte
		want  error
	}{
		{"unknown version", "desktop", set(valid["desktop"], 0, 2), ErrStateVersion},
		{"version 0", "cad", set(valid["cad"], 0, 0), ErrStateVersion},
		{"empty", "inference", nil, ErrCorruptState},
		{"another kind", "training", valid["inference"], ErrCorruptState},
		{"trailing byte", "inference", append(slices.Clone(valid["inference"]), 0), ErrCorruptState},
		{"truncated", "training", valid["training"][:len(valid["training"])-1], ErrCorruptState},
		{"configuration refused", "inference", mutated(t, inf, func(w Workload) { w.(*Inference).cfg.RequestsPerSec = -1 }), ErrConfig},
		{"configuration not as kept", "desktop", mutated(t, desk, func(w Workload) { w.(*Desktop).cfg.Efficiency = 0 }), ErrCorruptState},
		{"throttle of 1", "cad", mutated(t, cad, func(w Workload) { w.(*CAD).throttle = 1 }), ErrCorruptState},
		{"running and paused", "training", mutated(t, tr, func(w Workload) {
			w.(*Training).running = true
			w.(*Training).paused = true
		}), nil},
		{"unknown flag", "training", set(valid["training"], flagsOffset(tr.Workload()), 4), ErrCorruptState},
		{"flag neither 0 nor 1", "cad", set(valid["cad"], flagsOffset(cad.Workload())+1+8+1+8+4+17-1, 2), ErrCorruptState},
		{"history count above the limit", "cad", mutated(t, cad, func(w Workload) {
			h := &w.(*CAD).hist
			h.n = h.limit + 1
		}), ErrCorruptState},
		{"history evicted but not full", "desktop", mutated(t, desk, func(w Workload) {
			h := &w.(*Desktop).hist
			h.n = 10
		}), ErrCorruptState},
		{"history limit not the configuration's", "inference", mutated(t, inf, func(w Workload) { w.(*Inference).hist.limit++ }), ErrCorruptState},
		{"ring cursor outside its span", "inference", mutated(t, inf, func(w Workload) {
			s := &w.(*Inference).reqRing
			s.cursor = int(s.span.size / 4096)
		}), ErrCorruptState},
		{"ring carry of a page", "desktop", mutated(t, desk, func(w Workload) { w.(*Desktop).out[0].carry = 64 << 10 }), ErrCorruptState},
		{"span outside guest memory", "desktop", mutated(t, desk, func(w Workload) {
			w.(*Desktop).reqRing.span.off = desk.RAM().Size()
		}), ErrIncompatibleState},
		{"span not page-aligned", "cad", mutated(t, cad, func(w Workload) { w.(*CAD).targets.span.off += 512 }), ErrCorruptState},
		{"span outside a framebuffer", "training", mutated(t, tr, func(w Workload) {
			w.(*Training).acts.size = tr.Framebuffers()[1].Size()
		}), ErrIncompatibleState},
		{"dirtier pattern outside guest memory", "inference", mutated(t, inf, func(w Workload) {
			r, err := memory.New(memory.Config{SizeBytes: 2 * GiB, Kind: memory.Synthetic})
			must(t, err)
			st := w.(*Inference).ram.p.State()
			st.Config.FirstPage = r.Pages() - st.Config.Pages
			p, err := memory.RestorePattern(r, st)
			must(t, err)
			w.(*Inference).ram.p = p
		}), ErrIncompatibleState},
		{"dirtier pattern cursor outside its pages", "training", patternCursor(t, tr), ErrCorruptState},
		{"dirtier pattern random state unreadable", "cad", patternRNG(t, cad), ErrCorruptState},
		{"more output rings than vGPUs", "desktop", mutated(t, desk, func(w Workload) {
			d := w.(*Desktop)
			d.out = append(d.out, d.out[0])
		}), ErrIncompatibleState},
		{"more framebuffer dirtiers than the limit", "inference", mutated(t, inf, func(w Workload) {
			i := w.(*Inference)
			for range MaxVGPUsPerVM {
				i.fb = append(i.fb, i.fb[0])
			}
		}), ErrCorruptState},
		{"round robin past the vGPUs", "inference", mutated(t, inf, func(w Workload) { w.(*Inference).rr = 2 }), ErrIncompatibleState},
		{"request tag not yet issued", "inference", mutated(t, inf, func(w Workload) {
			i := w.(*Inference)
			i.inflight[i.seq] = 0
		}), ErrCorruptState},
		{"negative request work", "desktop", mutated(t, desk, func(w Workload) { w.(*Desktop).work = -1 }), ErrCorruptState},
		{"iteration in flight not issued", "training", mutated(t, tr, func(w Workload) {
			x := w.(*Training)
			x.remaining[x.nextIter] = 1
			x.inFlight++
		}), ErrCorruptState},
		{"iteration count not the listed", "training", mutated(t, tr, func(w Workload) { w.(*Training).inFlight++ }), ErrCorruptState},
		{"iteration with more jobs than vGPUs", "training", mutated(t, tr, func(w Workload) {
			x := w.(*Training)
			for it := range x.remaining {
				x.remaining[it] = 3
			}
		}), ErrIncompatibleState},
		{"frame period not the rate's", "cad", mutated(t, cad, func(w Workload) { w.(*CAD).period-- }), ErrCorruptState},
		{"frame rate above the target", "cad", mutated(t, cad, func(w Workload) { w.(*CAD).fps = 61 }), ErrCorruptState},
		{"frame tag not yet issued", "cad", mutated(t, cad, func(w Workload) { w.(*CAD).tag = w.(*CAD).seq + 1 }), ErrCorruptState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := WorkloadDecoders()[tc.kind](&vms[tc.kind].env, tc.state)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se *WorkloadStateError
			if !errors.As(err, &se) || !errors.Is(err, tc.want) || !errors.Is(err, ErrWorkload) {
				t.Fatalf("got %v, want a *WorkloadStateError wrapping %v", err, tc.want)
			}
			if se.Kind != tc.kind || se.Offset < 0 || se.Offset > len(tc.state) {
				t.Errorf("error %+v", se)
			}
		})
	}
}

// TestWorkloadStateTruncated checks every prefix of every kind's state:
// each is refused as corrupt, with the offset inside it.
func TestWorkloadStateTruncated(t *testing.T) {
	for _, c := range stateCases() {
		_, vm := busyStateVM(t, c, c.name)
		b := appendState(t, vm.Workload())
		dec := WorkloadDecoders()[c.kind()]
		step := max(1, len(b)/3000)
		for n := 0; n < len(b); n += step {
			_, err := dec(&vm.env, b[:n])
			var se *WorkloadStateError
			if !errors.As(err, &se) || !errors.Is(err, ErrCorruptState) || se.Offset > n {
				t.Fatalf("%s: %d of %d bytes: %v", c.name, n, len(b), err)
			}
		}
	}
}

// TestWorkloadStateAllocation checks that counts claiming more than the
// state holds are refused before anything is allocated for them.
func TestWorkloadStateAllocation(t *testing.T) {
	_, vm := busyStateVM(t, stateCases()[0], "h")
	w := vm.Workload().(*Inference)
	b := appendState(t, w)
	// The history count follows the config, throttle, last, flags, limit,
	// evicted and oldest: find it by its value.
	var hist []byte
	hist = le.AppendUint64(hist, uint64(w.hist.limit))
	if w.hist.evicted {
		hist = append(hist, 1)
	} else {
		hist = append(hist, 0)
	}
	hist = le.AppendUint64(hist, uint64(w.hist.oldest))
	hist = le.AppendUint32(hist, uint32(w.hist.n))
	at := bytes.Index(b, hist)
	if at < 0 {
		t.Fatal("history not found")
	}
	huge := slices.Clone(b)
	le.PutUint32(huge[at+17:], 1<<32-1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decodeInference(&vm.env, huge)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorruptState) {
		t.Fatalf("a history of 2^32-1 records: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > uint64(4*len(b)+64<<10) {
		t.Errorf("refusing a %d-byte state allocated %d bytes", len(b), n)
	}
}

// TestWorkloadStateFields lists every field the state of a workload is
// made of. A field added to one of these types fails it: the state
// encoding (workload_state.go) must then carry the new field, or say why
// not, before the field is added here.
func TestWorkloadStateFields(t *testing.T) {
	for _, tc := range []struct {
		v      any
		fields string
	}{
		{base{}, "name hist throttle last running paused ram fb"},
		{history{}, "buf head n limit evicted oldest"},
		{record{}, "start end dropped"},
		{dirtier{}, "p rate"},
		{sweeper{}, "span cursor carry"},
		{span{}, "off size mix"},
		{service{}, "base rate arrivals next seq rr inflight work chunk inBytes outBytes io reqRing out"},
		{Inference{}, "service cfg"},
		{Desktop{}, "service cfg"},
		{Training{}, "base cfg work clock nextIter remaining inFlight readyAt lastDone weights acts optimizer loader loadLeft"},
		{CAD{}, "base cfg fps period next seq inFlight tag sentAt work rtBytes targets"},
		{Model{}, "Name MACs Layers Parameters InputBytes ActivationBytes ConvLayers OutputBytes"},
		{InferenceConfig{}, "Model RequestsPerSec Precision Efficiency FootprintBytes WeightsBytes ActivationsBytes RAMWorkingSetBytes RAMDirtyBytesPerSec RAMDirtyPattern FramebufferDirtyBytesPerSec HistoryLimit Seed"},
		{TrainingConfig{}, "Model BatchSize Precision Efficiency FootprintBytes WeightsBytes ActivationsBytes OptimizerStateBytes RAMDirtyBytesPerSec QueueDepth PollInterval HistoryLimit Seed DataLoad DataLoadRatio DataLoadJitter"},
		{CADConfig{}, "TargetFPS WidthPixels HeightPixels OpsPerPixel Efficiency SceneBytes RenderBuffers FootprintBytes RAMWorkingSetBytes RAMDirtyBytesPerSec RAMDirtyPattern HistoryLimit Seed"},
		{DesktopConfig{}, "UpdatesPerSec UpdatePixels OpsPerPixel Efficiency SurfaceBytes RAMWorkingSetBytes RAMDirtyBytesPerSec RAMDirtyPattern HistoryLimit Seed"},
		{memory.PatternState{}, "Config RNG CarryByteNS Cursor Written Passes"},
		{memory.PatternConfig{}, "Kind RateBytesPerSec FirstPage Pages Mix Seed"},
		{memory.Mix{}, "Name Parts"},
		{memory.MixPart{}, "Class Weight"},
	} {
		typ := reflect.TypeOf(tc.v)
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		if g := strings.Join(got, " "); g != tc.fields {
			t.Errorf("%v has fields %q, the workload state carries %q", typ, g, tc.fields)
		}
	}
}

// flagsOffset is the offset of w's base flags: after the header, the
// configuration, the throttle and the last time.
func flagsOffset(w Workload) int {
	e := stateEncoder{}
	e.header(0)
	switch w := w.(type) {
	case *Inference:
		e.inferenceConfig(w.cfg)
	case *Training:
		e.trainingConfig(w.cfg)
	case *CAD:
		e.cadConfig(w.cfg)
	case *Desktop:
		e.desktopConfig(w.cfg)
	}
	return len(e.b) + 8 + 8
}

// patternAt returns the state of vm's workload and the offset of its RAM
// dirtier's random state in it, found by its value.
func patternAt(t *testing.T, vm *VM) ([]byte, int, memory.PatternState) {
	t.Helper()
	b := appendState(t, vm.Workload())
	var st memory.PatternState
	switch w := vm.Workload().(type) {
	case *Training:
		st = w.ram.p.State()
	case *CAD:
		st = w.ram.p.State()
	}
	at := bytes.Index(b, append([]byte{byte(len(st.RNG))}, st.RNG...))
	if at < 0 || bytes.Count(b, st.RNG) != 1 {
		t.Fatal("pattern random state not found once")
	}
	return b, at + 1, st
}

// patternCursor returns vm's state with its RAM pattern's cursor one past
// its range, where no pattern goes.
func patternCursor(t *testing.T, vm *VM) []byte {
	b, at, st := patternAt(t, vm)
	le.PutUint64(b[at+len(st.RNG)+8:], uint64(st.Config.Pages))
	return b
}

// patternRNG returns vm's state with its RAM pattern's random state
// unreadable.
func patternRNG(t *testing.T, vm *VM) []byte {
	b, at, _ := patternAt(t, vm)
	b[at] = 'x'
	return b
}

// TestAdoptWorkloadRefuses checks the hook that attaches a decoded
// workload: never to a running VM or one that has a workload, and a
// started workload only to a VM whose memory it wrote (incoming or
// paused).
func TestAdoptWorkloadRefuses(t *testing.T) {
	c := stateCases()[3]
	h := newHost(t, stateHostConfig("h"))
	spec := stateVMSpec("a", c)
	spec.Workload = nil
	vm := mustVM(t, h, spec)
	w := c.make()
	if err := vm.adoptWorkload(w, true, 0); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("a started workload on a created VM: %v", err)
	}
	if err := vm.adoptWorkload(w, false, 1); !errors.Is(err, ErrConfig) {
		t.Errorf("throttle 1: %v", err)
	}
	if err := vm.adoptWorkload(nil, false, 0); !errors.Is(err, ErrWorkload) {
		t.Errorf("nil workload: %v", err)
	}
	must(t, vm.adoptWorkload(w, false, 0.5))
	if err := vm.adoptWorkload(c.make(), false, 0); !errors.Is(err, ErrWorkload) {
		t.Errorf("a second workload: %v", err)
	}
	must(t, vm.Start())
	if vm.Throttle() != 0.5 {
		t.Errorf("throttle %v", vm.Throttle())
	}
	advance(t, h, 100*time.Millisecond)
	if err := vm.adoptWorkload(c.make(), false, 0); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("a running VM: %v", err)
	}
	if m := w.Metrics(0, h.Now()); m.Completed == 0 {
		t.Errorf("the adopted workload did not run: %+v", m)
	}
}
