package live

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
	"github.com/vgpusim/vgpusim/vgpu"
)

// postCopyWorld is the counter oracle's VM running at a source, and a
// destination whose Runner takes the VM's workload on once it resumes
// there, while its pages still come: every fault the counter takes is a
// page it reads and rewrites, so a page that came stale, twice or not at
// all shows in its check.
type postCopyWorld struct {
	src, dst *vgpu.Host
	vm       *vgpu.VM
	// w is the source's workload, and dstW its copy at the destination,
	// taken once the source paused it: each VM runs its own.
	w, dstW          *counterWorkload
	srcRun, dstRun   *Runner
	resumedMu        sync.Mutex
	resumedCalls     int
	resumedOnRunning bool
}

func newPostCopyWorld(t testing.TB, w *counterWorkload) *postCopyWorld {
	t.Helper()
	src, dst := migtest.SmallPageHosts(t)
	pw := &postCopyWorld{src: src, dst: dst, w: w}
	var err error
	pw.vm, err = src.CreateVM(vgpu.VMSpec{ID: "oracle", RAMBytes: 128 * MiB, RAMFootprintBytes: 32 * MiB, Profiles: []string{"P40-1Q"}, Workload: w})
	must(t, err)
	must(t, pw.vm.Start())
	must(t, src.Advance(100*time.Millisecond))
	pw.srcRun, pw.dstRun = NewRunner(src, 0), NewRunner(dst, 0)
	pw.srcRun.Start()
	pw.dstRun.Start()
	t.Cleanup(func() {
		_ = pw.srcRun.Stop()
		_ = pw.dstRun.Stop()
	})
	return pw
}

// dirtyAtStun, the source's Progress, moves the source host on by one
// pass of the counter as the stun begins, before the pause: the counter
// rewrites every page it walks then, so that the hybrid's stun always
// leaves those pages to follow, however soon after the last round the
// Runner's ticks fall, and the same number of them from run to run.
func (pw *postCopyWorld) dirtyAtStun(e migrate.Event) {
	if e.Kind == migrate.StunStarted {
		pw.srcRun.Lock()
		defer pw.srcRun.Unlock()
		pass := time.Duration(pw.w.Pages) * time.Second / time.Duration(pw.w.PagesPerSec)
		if err := pw.src.Advance(pass + time.Millisecond); err != nil {
			panic(err)
		}
	}
}

// configs are the two ends' configurations for policy.
func (pw *postCopyWorld) configs(p migrate.Policy, key []byte) (SendConfig, ReceiveConfig) {
	sc := SendConfig{Policy: p, Engine: migrate.EngineConfig{Workers: 2}, EncryptionKey: key, Lock: pw.srcRun, Progress: pw.dirtyAtStun}
	rc := ReceiveConfig{EncryptionKey: key, Lock: pw.dstRun, OnResume: func(in *vgpu.VM) {
		pw.resumedMu.Lock()
		pw.resumedCalls++
		pw.resumedOnRunning = in.State() == vgpu.VMRunning
		pw.resumedMu.Unlock()
		pw.srcRun.Lock()
		w := *pw.w
		pw.srcRun.Unlock()
		pw.dstW = &w
		pw.dstRun.Lock()
		defer pw.dstRun.Unlock()
		if err := in.SetWorkload(pw.dstW); err != nil {
			panic(err)
		}
	}}
	return sc, rc
}

// A running VM moves in post-copy, pure and hybrid, on one and on several
// connections, encrypted or not: it runs at the destination while its
// pages come, takes faults on pages it touches first, and ends with every
// page its own and the oracle whole; both ends count the same faults.
func TestLivePostCopy(t *testing.T) {
	key := bytes.Repeat([]byte{3}, checkpoint.KeySize)
	for _, tc := range []struct {
		name   string
		policy migrate.Policy
		conns  int
		key    []byte
	}{
		{"pure, one connection", migrate.Policy{Mode: migrate.PostCopy}, 1, nil},
		{"pure, three connections, encrypted", migrate.Policy{Mode: migrate.PostCopy}, 3, key},
		{"hybrid, two connections", migrate.Policy{Mode: migrate.PreCopy, StunTarget: time.Microsecond, MaxRounds: 2, OnNonConvergence: migrate.SwitchToPostCopy}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Fast enough that pre-copy never converges, and that the
			// destination touches its pages before the push reaches them.
			pw := newPostCopyWorld(t, &counterWorkload{PagesPerSec: 200000, Pages: 2000})
			sc, rc := pw.configs(tc.policy, tc.key)
			s, d := loopbackConns(t, tc.conns)
			res := liveMigrate(context.Background(), pw.vm, pw.dst, rws(s), rws(d), sc, rc)
			if res.srcErr != nil || res.dstErr != nil {
				t.Fatalf("source: %v; destination: %v", res.srcErr, res.dstErr)
			}
			must(t, pw.dstRun.Stop())
			must(t, pw.srcRun.Stop())
			pw.dstW.Check(t, res.in)
			if res.in.State() != vgpu.VMRunning || pw.vm.State() != vgpu.VMDestroyed || pw.resumedCalls != 1 || !pw.resumedOnRunning {
				t.Fatalf("destination VM %v, source VM %v, OnResume called %d times (running %v)", res.in.State(), pw.vm.State(), pw.resumedCalls, pw.resumedOnRunning)
			}
			for _, r := range pw.vm.Host().VMs() {
				t.Fatalf("the source still holds %q", r.ID())
			}
			for i, reg := range append([]*memory.Region{res.in.RAM()}, res.in.Framebuffers()...) {
				if n := reg.AbsentPages(); n != 0 {
					t.Fatalf("region %d has %d absent pages after the post-copy", i, n)
				}
			}
			sp, dp := res.srcRep.PostCopy, res.dstRep.PostCopy
			if sp == nil || dp == nil {
				t.Fatalf("post-copy reports: source %v, destination %v", sp, dp)
			}
			if sp.OwedPages == 0 || sp.OwedPages != dp.OwedPages || sp.Faults == 0 || sp.Faults != dp.Faults || sp.Fetches != dp.Fetches ||
				sp.FaultLatencyP99 != dp.FaultLatencyP99 || sp.FaultLatencyMax < sp.FaultLatencyP50 || sp.Stall != dp.Stall {
				t.Fatalf("post-copy: source %+v, destination %+v", *sp, *dp)
			}
			if got := sp.Pushed.Pages + sp.Faulted.Pages; got != sp.OwedPages {
				t.Fatalf("source sent %d pages in post-copy, %d followed", got, sp.OwedPages)
			}
			if got := dp.Pushed.Pages + dp.Faulted.Pages; got != dp.OwedPages {
				t.Fatalf("destination landed %d pages in post-copy, %d followed", got, dp.OwedPages)
			}
			if sp.Window <= 0 || res.srcRep.Stun <= 0 || res.srcRep.Outcome != migrate.PhaseDone || res.srcRep.Mode != tc.policy.Mode {
				t.Fatalf("report: %v", res.srcRep)
			}
			if tc.policy.Mode == migrate.PreCopy && len(res.srcRep.Rounds) == 0 {
				t.Fatalf("the hybrid sent no pre-copy round: %v", res.srcRep)
			}
			t.Logf("%d pages followed; %d faults, %d fetches, waits p50 %v p99 %v max %v; window %v, stun %v",
				sp.OwedPages, sp.Faults, sp.Fetches, sp.FaultLatencyP50, sp.FaultLatencyP99, sp.FaultLatencyMax, sp.Window, res.srcRep.Stun)
		})
	}
}

// A paused VM moves in post-copy paused, and its memory arrives byte for
// byte: pages read at the destination before they came (a guest access of
// the owner's, from OnResume) read what the source held.
func TestLivePostCopyPausedExact(t *testing.T) {
	src, dst := hostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-paused", "P40-2Q", 128*MiB, 32*MiB, tinyModel, 9)
	must(t, src.Advance(200*time.Millisecond))
	must(t, vm.Pause())
	before := regionDigests(t, vm)
	regs := append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...)
	type sample struct {
		region, page int
		want         []byte
	}
	var samples []sample
	for i, r := range regs {
		for p := r.Pages() - 1; p >= 0 && len(samples) < 40*(i+1); p -= 97 {
			b := make([]byte, r.PageSize())
			_, err := r.ReadPage(p, b)
			must(t, err)
			samples = append(samples, sample{i, p, b})
		}
	}
	var wg sync.WaitGroup
	var readErr error
	var mu sync.Mutex
	rc := ReceiveConfig{OnResume: func(in *vgpu.VM) {
		in2 := append([]*memory.Region{in.RAM()}, in.Framebuffers()...)
		for _, s := range samples {
			wg.Go(func() {
				b := make([]byte, len(s.want))
				_, err := in2[s.region].ReadAt(b, int64(s.page)*int64(len(b)))
				if err == nil && !bytes.Equal(b, s.want) {
					err = errors.New("a page read other bytes than the source held")
				}
				if err != nil {
					mu.Lock()
					readErr = errors.Join(readErr, err)
					mu.Unlock()
				}
			})
		}
	}}
	sc, dc := loopbackConns(t, 2)
	res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc), SendConfig{Policy: migrate.Policy{Mode: migrate.PostCopy}}, rc)
	wg.Wait()
	if res.srcErr != nil || res.dstErr != nil || readErr != nil {
		t.Fatalf("source: %v; destination: %v; reads: %v", res.srcErr, res.dstErr, readErr)
	}
	if res.in.State() != vgpu.VMPaused {
		t.Fatalf("destination VM is %v, want paused as it was", res.in.State())
	}
	if got := regionDigests(t, res.in); !slices.Equal(got, before) {
		t.Fatalf("destination digests %x, source's before %x", got, before)
	}
	if p := res.dstRep.PostCopy; p == nil || p.OwedPages == 0 {
		t.Fatalf("no post-copy: %v", res.dstRep)
	}
}

// TestSendRefusesRemoteGPU: a VM whose GPU is a session of another host
// stays where it is, whole and running, and the destination holds
// nothing: the live mode cannot name the session to another process.
func TestSendRefusesRemoteGPU(t *testing.T) {
	server, err := vgpu.NewHost(vgpu.HostConfig{Name: "server"})
	must(t, err)
	src, err := vgpu.NewHost(vgpu.HostConfig{Name: "src"})
	must(t, err)
	dst, err := vgpu.NewHost(vgpu.HostConfig{Name: "dst"})
	must(t, err)
	r, err := server.OpenRemote(vgpu.RemoteConfig{Profile: "P40-12Q", Link: vgpu.RemoteRoCE()})
	must(t, err)
	vm, err := src.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: 256 * vgpu.MiB, Remote: []*vgpu.RemoteGPU{r}})
	must(t, err)
	must(t, vm.Start())
	s, d := loopbackConns(t, 1)
	res := liveMigrate(context.Background(), vm, dst, rws(s), rws(d), SendConfig{}, ReceiveConfig{})
	if !errors.Is(res.srcErr, migrate.ErrConfig) {
		t.Fatalf("Send: %v", res.srcErr)
	}
	if vm.State() != vgpu.VMRunning || vm.Migrating() || r.Client() != vm {
		t.Errorf("the VM is %v, migrating %v, its session's client %v", vm.State(), vm.Migrating(), r.Client())
	}
	holdsNothing(t, dst)
}
