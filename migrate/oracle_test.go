package migrate

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/vgpu"
)

// counterWorkload is the memory oracle of QEMU's migration tests: it walks
// its pages in order, incrementing a counter at the start of each, in
// guest RAM (after the guest OS footprint) and in the first framebuffer in
// lockstep. At any moment every page holds the same count but one step: the
// pages before the cursor one more than the rest.
type counterWorkload struct {
	pagesPerSec int64
	pages       int   // pages walked in each region
	pos         int64 // writes done: pass pos/pages, cursor pos%pages
	carry       int64 // page-nanoseconds not yet making a page
	last        time.Duration
	running     bool
	paused      bool
	throttle    float64
	ramFirst    int
}

func (w *counterWorkload) Name() string { return "counter" }

func (w *counterWorkload) Start(env *vgpu.Env) error {
	ps := int64(env.RAM().PageSize())
	w.ramFirst = int((env.RAMWorkloadBase() + ps - 1) / ps)
	if w.ramFirst+w.pages > env.RAM().Pages() || w.pages > env.Framebuffer(0).Pages() {
		return errors.New("counter: does not fit")
	}
	w.running, w.paused, w.last = true, false, env.Now()
	return nil
}

func (w *counterWorkload) Pause(*vgpu.Env)          { w.paused = true }
func (w *counterWorkload) Stop(*vgpu.Env)           { w.running = false }
func (w *counterWorkload) NextEvent() time.Duration { return vgpu.NoEvent }
func (w *counterWorkload) Fire(*vgpu.Env) error     { return nil }
func (w *counterWorkload) Shift(d time.Duration)    { w.last += d }
func (w *counterWorkload) Complete(*vgpu.Env, int, sched.Completion) error {
	return nil
}
func (w *counterWorkload) SetThrottle(f float64) error { w.throttle = f; return nil }
func (w *counterWorkload) Metrics(from, to time.Duration) vgpu.Metrics {
	return vgpu.Metrics{Workload: "counter", From: from, To: to}
}

func (w *counterWorkload) Resume(env *vgpu.Env) error {
	w.paused, w.last = false, env.Now()
	return nil
}

func (w *counterWorkload) AdvanceTo(env *vgpu.Env, t time.Duration) error {
	if !w.running || w.paused || t <= w.last {
		w.last = max(w.last, t)
		return nil
	}
	rate := int64(float64(w.pagesPerSec) * (1 - w.throttle))
	num := int64(t-w.last)*rate + w.carry
	w.last = t
	n := num / int64(time.Second)
	w.carry = num % int64(time.Second)
	for range n {
		j := int(w.pos % int64(w.pages))
		if err := bump(env.RAM(), w.ramFirst+j); err != nil {
			return err
		}
		if err := bump(env.Framebuffer(0), j); err != nil {
			return err
		}
		w.pos++
	}
	return nil
}

func bump(r *memory.Region, page int) error {
	var b [8]byte
	off := int64(page) * int64(r.PageSize())
	if _, err := r.ReadAt(b[:], off); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b[:], binary.LittleEndian.Uint64(b[:])+1)
	_, err := r.WriteAt(b[:], off)
	return err
}

// check verifies the oracle on the regions of vm: pass c+1 before the
// cursor, c from it on.
func (w *counterWorkload) check(t tb, vm *vgpu.VM) {
	t.Helper()
	c, k := uint64(w.pos/int64(w.pages)), int(w.pos%int64(w.pages))
	for _, rg := range []struct {
		r     *memory.Region
		first int
	}{{vm.RAM(), w.ramFirst}, {vm.Framebuffers()[0], 0}} {
		var b [8]byte
		for j := range w.pages {
			_, err := rg.r.ReadAt(b[:], int64(rg.first+j)*int64(rg.r.PageSize()))
			must(t, err)
			want := c
			if j < k {
				want++
			}
			if got := binary.LittleEndian.Uint64(b[:]); got != want {
				t.Fatalf("%s page %d holds %d, want %d (pass %d, cursor %d)", vm.Host().Name(), j, got, want, c, k)
			}
		}
	}
}

// slowLink is 100 Mb/s, so that a small VM's migration lasts long enough
// for its workload to rewrite all its pages.
var slowLink = Link{Name: "100m", BandwidthBitsPerSec: 100e6, Efficiency: ethernetEfficiency, Latency: datacentreLatency}

// smallPageHosts are Sparse hosts with 4 KiB framebuffer pages, which the
// oracle dirties at a rate a slow link can follow.
func smallPageHosts(t testing.TB) (*vgpu.Host, *vgpu.Host) {
	src, err := vgpu.NewHost(vgpu.HostConfig{Name: "src", Memory: memory.Sparse, FramebufferPageSize: 4096, Seed: 1, RAMBytes: 4 * GiB})
	must(t, err)
	dst, err := vgpu.NewHost(vgpu.HostConfig{Name: "dst", Memory: memory.Sparse, FramebufferPageSize: 4096, Seed: 2, RAMBytes: 4 * GiB, Start: time.Hour})
	must(t, err)
	return src, dst
}

func counterVM(t testing.TB, h *vgpu.Host, w *counterWorkload) *vgpu.VM {
	t.Helper()
	vm, err := h.CreateVM(vgpu.VMSpec{ID: "oracle", RAMBytes: 128 * MiB, RAMFootprintBytes: 32 * MiB, Profiles: []string{"P40-1Q"}, Workload: w})
	must(t, err)
	must(t, vm.Start())
	return vm
}

// runToRelease steps m until the destination has acknowledged the resume:
// the source is still intact and paused, the destination resumed, and no
// time has passed since the stun's end.
func runToRelease(t tb, m *Migration) {
	t.Helper()
	runTo(t, m, PhaseRelease)
}

// runTo steps m until it enters phase p.
func runTo(t tb, m *Migration, p Phase) {
	t.Helper()
	for m.Phase() != p {
		if _, ok, err := m.Step(); err != nil || !ok {
			t.Fatalf("migration ended in %v before %v: %v", m.Phase(), p, m.Err())
		}
	}
}

// TestMemoryOracle: after the migration the destination's counters show
// one clean step, in both fidelities and modes; the pages the workload
// re-dirtied after round 0 sent them were sent again (later rounds or the
// stun carried pages, and the counts, which only grow, are the latest).
func TestMemoryOracle(t *testing.T) {
	for _, fid := range []Fidelity{Bytes, Model} {
		for _, mode := range []Mode{PreCopy, Legacy} {
			t.Run(fid.String()+"/"+mode.String(), func(t *testing.T) {
				src, dst := smallPageHosts(t)
				// 400 pages a second over 200 pages: every page is
				// rewritten twice a second, while the migration runs.
				w := &counterWorkload{pagesPerSec: 400, pages: 200}
				vm := counterVM(t, src, w)
				must(t, src.Advance(1300*time.Millisecond))
				w.check(t, vm)
				s, err := NewSim(SimConfig{}, src, dst)
				must(t, err)
				m, err := s.Start(vm, dst, Config{Policy: Policy{Mode: mode}, Fidelity: fid, Link: slowLink})
				must(t, err)
				before := w.pos
				runToRelease(t, m)
				if w.pos-before < int64(w.pages) {
					t.Fatalf("only %d writes during the migration", w.pos-before)
				}
				w.check(t, vm)
				w.check(t, m.VM())
				rep := m.Report()
				resent := rep.Final.RAM.Pages + rep.Final.Framebuffers[0].Pages
				for _, r := range rep.Rounds[1:] {
					resent += r.Total().Pages
				}
				if resent == 0 {
					t.Fatal("no page was sent twice: the resend path did not run")
				}
				_, err = m.Run()
				must(t, err)
				// The destination runs the workload on.
				must(t, dst.Advance(time.Second))
				w.check(t, m.VM())
			})
		}
	}
}
