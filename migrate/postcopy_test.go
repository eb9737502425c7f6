package migrate

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// postCopyPolicies are the two ways into post-copy: at once, and after a
// bounded pre-copy that does not converge (QEMU's postcopy-after-precopy).
var postCopyPolicies = []struct {
	name string
	p    Policy
}{
	{"post-copy", Policy{Mode: PostCopy}},
	{"hybrid", Policy{Mode: PreCopy, OnNonConvergence: SwitchToPostCopy, MaxRounds: 1, StunTarget: time.Millisecond}},
}

// counterMigration starts migrating, with cfg over slowLink, a VM whose
// counter oracle has run long enough to have written every page it
// keeps, between two hosts of small pages.
func counterMigration(t *testing.T, cfg Config) (*Sim, *Migration, *counterWorkload, *vgpu.VM) {
	t.Helper()
	src, dst := smallPageHosts(t)
	w := &counterWorkload{PagesPerSec: 400, Pages: 200}
	vm := counterVM(t, src, w)
	must(t, src.Advance(1300*time.Millisecond))
	sameClock(t, src, dst)
	s, err := NewSim(SimConfig{}, src, dst)
	must(t, err)
	cfg.Link = slowLink
	m, err := s.Start(vm, dst, cfg)
	must(t, err)
	return s, m, w, vm
}

// TestPostCopyOracle: a VM whose workload reads and rewrites its pages
// (the counter oracle) migrates in post-copy in both fidelities; it runs
// at the destination with pages absent, faults on them, and ends with
// every counter as one clean run would have it, at the destination and
// after it runs on.
func TestPostCopyOracle(t *testing.T) {
	for _, fid := range []Fidelity{Bytes, Model} {
		for _, pc := range postCopyPolicies {
			t.Run(fid.String()+"/"+pc.name, func(t *testing.T) {
				s, m, w, vm := counterMigration(t, Config{Policy: pc.p, Fidelity: fid})
				runTo(t, m, PhasePostCopy)
				if n := m.absentLeft(); n == 0 {
					t.Fatal("the VM resumed with no page absent")
				}
				rep, err := m.Run()
				must(t, err)
				w.Check(t, m.VM())
				if rep.Outcome != PhaseDone || rep.PostCopy == nil {
					t.Fatalf("outcome %v, post-copy %+v", rep.Outcome, rep.PostCopy)
				}
				p := rep.PostCopy
				if p.Window <= 0 || p.OwedPages == 0 {
					t.Fatalf("post-copy report %+v", *p)
				}
				// Every page in use follows a post-copy, long enough for
				// the workload to touch some; a hybrid's few dirty
				// pages may all come before it does.
				if pc.p.Mode == PostCopy && (p.Faults == 0 || p.Fetches == 0 || p.Stall <= 0) {
					t.Fatalf("post-copy report %+v", *p)
				}
				if p.FaultLatencyP50 > p.FaultLatencyP99 || p.FaultLatencyP99 > p.FaultLatencyMax {
					t.Fatalf("fault latencies p50 %v p99 %v max %v", p.FaultLatencyP50, p.FaultLatencyP99, p.FaultLatencyMax)
				}
				if got := p.Pushed.Pages + p.Faulted.Pages; got < p.OwedPages {
					t.Fatalf("%d pages pushed or fetched of %d owed", got, p.OwedPages)
				}
				if vm.State() != vgpu.VMDestroyed {
					t.Fatalf("source VM %v after the post-copy", vm.State())
				}
				if pc.p.Mode == PostCopy && len(rep.Rounds) != 0 {
					t.Fatalf("%d pre-copy rounds in post-copy mode", len(rep.Rounds))
				}
				_, err = s.Advance(time.Second)
				must(t, err)
				w.Check(t, m.VM())
				// One request a host step, whatever regions it covers:
				// the stall accounted is the stall the VM had.
				if got := m.VM().StallTime(); got != p.Stall {
					t.Fatalf("report's stall %v, the VM stalled %v", p.Stall, got)
				}
				t.Logf("stun %v, window %v, %d faults in %d fetches, p50 %v p99 %v, stall %v, %d owed, %d pushed",
					rep.Stun, p.Window, p.Faults, p.Fetches, p.FaultLatencyP50, p.FaultLatencyP99, p.Stall, p.OwedPages, p.Pushed.Pages)
			})
		}
	}
}

// TestPostCopyLinkLost: a link lost in post-copy pauses the VM at the
// destination, which waits however long for Recover and then runs on,
// every page arriving; the oracle holds throughout.
func TestPostCopyLinkLost(t *testing.T) {
	for _, f := range []Fault{FaultLinkDown, FaultLinkStall} {
		t.Run(f.String(), func(t *testing.T) {
			s, m, w, _ := counterMigration(t, Config{Policy: Policy{Mode: PostCopy}, Fidelity: Bytes})
			runTo(t, m, PhasePostCopy)
			_, err := s.Advance(5 * time.Millisecond)
			must(t, err)
			must(t, m.Inject(f))
			if m.VM().State() != vgpu.VMPaused || m.Done() {
				t.Fatalf("destination VM %v, done %v after the link was lost", m.VM().State(), m.Done())
			}
			if err := m.VM().Resume(); !errors.Is(err, vgpu.ErrMigrating) {
				t.Fatalf("owner resumed a VM with pages it cannot get: %v", err)
			}
			if _, err := m.Run(); !errors.Is(err, ErrConnection) {
				t.Fatalf("run while the link is lost: %v", err)
			}
			pos := w.Pos
			_, err = s.Advance(10 * time.Second)
			must(t, err)
			if w.Pos != pos {
				t.Fatal("the VM ran while its link was lost")
			}
			must(t, m.Recover())
			rep, err := m.Run()
			must(t, err)
			w.Check(t, m.VM())
			if rep.PostCopy.Paused < 10*time.Second {
				t.Fatalf("paused %v", rep.PostCopy.Paused)
			}
			if err := m.Recover(); !errors.Is(err, ErrConfig) {
				t.Fatalf("recover after the end: %v", err)
			}
		})
	}
}

// TestPostCopyVMLost: the destination or the source failing in post-copy
// loses the VM; neither copy is left running: the destination's, which
// lacks pages, is destroyed, and the source's, if its process lives,
// stays paused and held.
func TestPostCopyVMLost(t *testing.T) {
	for _, f := range []Fault{FaultDestinationGone, FaultSourceGone} {
		t.Run(f.String(), func(t *testing.T) {
			_, m, _, vm := counterMigration(t, Config{Policy: Policy{Mode: PostCopy}, Fidelity: Bytes})
			if err := m.Inject(FaultSourceGone); !errors.Is(err, ErrConfig) {
				t.Fatalf("source-gone before post-copy: %v", err)
			}
			runTo(t, m, PhasePostCopy)
			in := m.VM()
			must(t, m.Inject(f))
			if !m.Done() || !errors.Is(m.Err(), ErrVMLost) {
				t.Fatalf("done %v, err %v", m.Done(), m.Err())
			}
			if vm.State() == vgpu.VMRunning || in.State() == vgpu.VMRunning {
				t.Fatalf("source %v, destination %v: a lost VM runs", vm.State(), in.State())
			}
			if f == FaultSourceGone {
				// Nothing whole is left: the destination's copy lacks
				// pages nobody has any more.
				if vm.State() != vgpu.VMDestroyed || in.State() != vgpu.VMDestroyed {
					t.Fatalf("source %v, destination %v", vm.State(), in.State())
				}
			} else {
				if in.State() != vgpu.VMDestroyed || vm.State() != vgpu.VMPaused {
					t.Fatalf("source %v, destination %v", vm.State(), in.State())
				}
				if err := vm.Resume(); !errors.Is(err, vgpu.ErrMigrating) {
					t.Fatalf("the source's old copy was resumed: %v", err)
				}
			}
			if err := m.Cancel(); err != nil {
				t.Fatalf("cancel after the failure: %v", err)
			}
		})
	}
}

// TestPostCopyEncrypted: an encrypted post-copy migration arrives whole;
// its post-copy stream has an id and a key of its own, so that no record
// number is a nonce twice under one key.
func TestPostCopyEncrypted(t *testing.T) {
	key := bytes.Repeat([]byte{7}, checkpoint.KeySize)
	_, m, w, _ := counterMigration(t, Config{Policy: Policy{Mode: PostCopy}, Fidelity: Bytes, EncryptionKey: key})
	id0, k0, err := streamIdentity(m, false)
	must(t, err)
	id1, k1, err := streamIdentity(m, true)
	must(t, err)
	if id0 == id1 || bytes.Equal(k0, k1) || !bytes.Equal(k0, key) || len(k1) != checkpoint.KeySize {
		t.Fatalf("streams share an id (%v) or a key (%v)", id0 == id1, bytes.Equal(k0, k1))
	}
	rep, err := m.Run()
	must(t, err)
	w.Check(t, m.VM())
	if rep.PostCopy.Faults == 0 {
		t.Fatal("no fault")
	}
}

// failingCounter is the counter oracle until its time reaches at, when
// its writes fail: a workload that breaks part-way.
type failingCounter struct {
	*counterWorkload
	at time.Duration
}

func (w *failingCounter) AdvanceTo(env *vgpu.Env, t time.Duration) error {
	if t >= w.at {
		return errors.New("counter broke")
	}
	return w.counterWorkload.AdvanceTo(env, t)
}

// TestHostFailureSparesOtherMigrations: a workload failing on a host that
// a post-copy does not touch leaves it running; the Sim reports the
// failure, and the post-copy completes, the oracle intact.
func TestHostFailureSparesOtherMigrations(t *testing.T) {
	s, m, w, _ := counterMigration(t, Config{Policy: Policy{Mode: PostCopy}, Fidelity: Bytes})
	third, err := vgpu.NewHost(vgpu.HostConfig{Name: "third", Memory: memory.Sparse, FramebufferPageSize: 4096, Seed: 3, RAMBytes: 4 * GiB})
	must(t, err)
	broken := &failingCounter{&counterWorkload{PagesPerSec: 10, Pages: 16}, maxTime}
	vm, err := third.CreateVM(vgpu.VMSpec{ID: "broken", RAMBytes: 16 * MiB, RAMFootprintBytes: 2 * MiB, Profiles: []string{"P40-1Q"}, Workload: broken})
	must(t, err)
	must(t, vm.Start())
	must(t, third.Advance(s.Now()-third.Now()))
	must(t, s.AddHost(third))
	runTo(t, m, PhasePostCopy)
	broken.at = s.Now() + 50*time.Millisecond
	if _, err := s.Advance(100 * time.Millisecond); err == nil {
		t.Fatal("the broken workload's host advanced without an error")
	}
	if m.Done() {
		t.Fatalf("a post-copy was failed by a host it does not touch: %v", m.Err())
	}
	must(t, vm.Stop()) // its owner stops the broken VM, and the Sim moves on
	_, err = m.Run()
	must(t, err)
	w.Check(t, m.VM())
}
