package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
	"pgregory.net/rapid"
)

// remoteClient is a training VM on host "a" whose GPU is a session of
// host "server", with host "b" to migrate it to, in a Sim driving all
// three.
type remoteClient struct {
	server, a, b *vgpu.Host
	r            *vgpu.RemoteGPU
	vm           *vgpu.VM
	w            *vgpu.Training
	sim          *Sim
}

func newRemoteClient(t tb, link vgpu.RemoteLink, cfg SimConfig) remoteClient {
	return newTrainingClient(t, &link, cfg)
}

// newTrainingClient is newRemoteClient, or with link nil the same VM with
// a local P40-12Q instead, on host "a".
func newTrainingClient(t tb, link *vgpu.RemoteLink, cfg SimConfig) remoteClient {
	t.Helper()
	var c remoteClient
	var err error
	hosts := make([]*vgpu.Host, 3)
	for i, name := range []string{"server", "a", "b"} {
		hosts[i], err = vgpu.NewHost(vgpu.HostConfig{Name: name, RAMBytes: 16 * vgpu.GiB})
		must(t, err)
	}
	c.server, c.a, c.b = hosts[0], hosts[1], hosts[2]
	spec := vgpu.VMSpec{ID: "client", RAMBytes: 512 * vgpu.MiB, RAMFootprintBytes: 128 * vgpu.MiB}
	if link != nil {
		c.r, err = c.server.OpenRemote(vgpu.RemoteConfig{Profile: "P40-12Q", Link: *link})
		must(t, err)
		spec.Remote = []*vgpu.RemoteGPU{c.r}
	} else {
		spec.Profiles = []string{"P40-12Q"}
	}
	c.w, err = vgpu.NewTraining(vgpu.TrainingConfig{Model: vgpu.ResNet50(), BatchSize: 16, QueueDepth: 1,
		WeightsBytes: 128 * vgpu.MiB, ActivationsBytes: 128 * vgpu.MiB,
		OptimizerStateBytes: 32 * vgpu.MiB, RAMDirtyBytesPerSec: 64 * vgpu.MiB})
	must(t, err)
	spec.Workload = c.w
	c.vm, err = c.a.CreateVM(spec)
	must(t, err)
	must(t, c.vm.Start())
	c.sim, err = NewSim(cfg, c.server, c.a, c.b)
	must(t, err)
	_, err = c.sim.Advance(200 * time.Millisecond)
	must(t, err)
	return c
}

// iterations is the training's completed iterations over [from, to).
func (c remoteClient) iterations(from, to time.Duration) int64 {
	return c.w.Metrics(from, to).Completed
}

// TestRemoteClientMigration: a VM whose only GPU is remote migrates with
// no framebuffer to move; the session follows it to the destination,
// which pays the hand-over, and its training goes on there.
func TestRemoteClientMigration(t *testing.T) {
	for _, fid := range []Fidelity{Bytes, Model} {
		t.Run(fid.String(), func(t *testing.T) {
			link := vgpu.RemoteVMXNET3()
			c := newRemoteClient(t, link, SimConfig{})
			m, err := c.sim.Start(c.vm, c.b, Config{Link: GbE10(), Fidelity: fid})
			must(t, err)
			rep, err := m.Run()
			must(t, err)
			if rep.Outcome != PhaseDone {
				t.Fatalf("outcome %v: %s", rep.Outcome, rep.Error)
			}
			if rep.Remote == nil || rep.Remote.Sessions != 1 || rep.Remote.Servers[0] != "server" || rep.Remote.Handover != 2*link.RTT {
				t.Fatalf("remote account %+v, want one session on server handed over in %v", rep.Remote, 2*link.RTT)
			}
			if len(rep.Profiles) != 0 || rep.DeviceStateBytes != 0 {
				t.Errorf("profiles %v, %d bytes of device state: the VM has no local vGPU", rep.Profiles, rep.DeviceStateBytes)
			}
			if ram := c.vm.RAM().Size(); rep.RawBytes > 4*ram {
				t.Errorf("%d bytes of pages moved for %d of guest RAM", rep.RawBytes, ram)
			}
			if rep.Stun <= 0 || rep.Stun > time.Second {
				t.Errorf("stun %v", rep.Stun)
			}
			if got := c.r.Client(); got != m.VM() || got.Host() != c.b {
				t.Fatalf("the session's client is %v, want the destination's VM", got)
			}
			end := c.sim.Now()
			_, err = c.sim.Advance(time.Second)
			must(t, err)
			if n := c.iterations(end, end+time.Second); n < 5 {
				t.Errorf("%d iterations in the second after the migration", n)
			}
			if st := c.r.Stats(); st.Handovers != 1 || st.Jobs-st.Completed > 1 {
				t.Errorf("session stats %+v", st)
			}
			if !strings.Contains(rep.String(), "remote GPUs: 1 on [server]") {
				t.Errorf("the report does not print the session:\n%s", rep)
			}
		})
	}
}

// TestRemoteClientFaultTable: every fault and a cancel, in every phase
// before the commit, leave the session with the source's VM, which trains
// on; a fault after the commit leaves it with the destination's. No job
// of the session is lost either way.
func TestRemoteClientFaultTable(t *testing.T) {
	type scenario struct {
		name  string
		fault Fault // 0: cancel
		phase Phase
	}
	var table []scenario
	for _, p := range []Phase{PhasePreCopy, PhaseQuiesce, PhaseFinalRAM, PhaseDeviceState, PhaseResume, PhaseRelease} {
		table = append(table, scenario{"cancel/" + p.String(), 0, p})
		for _, f := range Faults() {
			table = append(table, scenario{f.String() + "/" + p.String(), f, p})
		}
	}
	for _, sc := range table {
		t.Run(sc.name, func(t *testing.T) {
			c := newRemoteClient(t, vgpu.RemoteRoCE(), SimConfig{})
			m, err := c.sim.Start(c.vm, c.b, Config{Link: GbE10(), Fidelity: Model})
			must(t, err)
			runTo(t, m, sc.phase)
			if sc.fault == 0 {
				err = m.Cancel()
			} else {
				err = m.Inject(sc.fault)
			}
			if sc.phase == PhaseRelease {
				if !errors.Is(err, ErrTooLate) {
					t.Fatalf("after the commit: %v, want ErrTooLate", err)
				}
			} else {
				must(t, err)
			}
			rep, _ := m.Run()
			if (rep.Outcome == PhaseDone) != (sc.phase == PhaseRelease) {
				t.Fatalf("outcome %v after %v in %v", rep.Outcome, sc.name, sc.phase)
			}
			want := c.vm
			if rep.Outcome == PhaseDone {
				want = m.VM()
			}
			if got := c.r.Client(); got != want {
				t.Fatalf("outcome %v: the session's client is %v, want %v", rep.Outcome, got, want)
			}
			if want.State() != vgpu.VMRunning {
				t.Fatalf("outcome %v: the VM holding the session is %v", rep.Outcome, want.State())
			}
			now := c.sim.Now()
			_, err = c.sim.Advance(time.Second)
			must(t, err)
			if n := c.iterations(now, now+time.Second); n < 5 {
				t.Errorf("outcome %v: %d iterations in the second after", rep.Outcome, n)
			}
			if st := c.r.Stats(); st.Jobs-st.Completed > 1 {
				t.Errorf("outcome %v: %d jobs submitted, %d came back", rep.Outcome, st.Jobs, st.Completed)
			}
		})
	}
}

// TestRemoteClientProperty: migrations of remote clients, each started,
// faulted or cancelled at any step, one after the other, between three
// hosts: at every step exactly one running VM holds the session, and no
// job it submitted is lost.
func TestRemoteClientProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := newRemoteClient(rt, vgpu.RemoteLink{Name: "drawn",
			RTT:         time.Duration(rapid.Int64Range(2, int64(100*time.Microsecond)).Draw(rt, "rtt")),
			BytesPerSec: rapid.Int64Range(1e8, 2e10).Draw(rt, "rate")}, SimConfig{})
		vm := c.vm
		hosts := []*vgpu.Host{c.a, c.b}
		for range rapid.IntRange(1, 3).Draw(rt, "migrations") {
			dst := hosts[0]
			if vm.Host() == dst {
				dst = hosts[1]
			}
			m, err := c.sim.Start(vm, dst, Config{Link: GbE10(), Fidelity: Model})
			if err != nil {
				rt.Fatal(err)
			}
			act := rapid.IntRange(0, 3).Draw(rt, "act") // 0 none, 1 cancel, 2 fault
			at := rapid.IntRange(0, 40).Draw(rt, "at")
			f := rapid.SampledFrom(Faults()).Draw(rt, "fault")
			for step := 0; !m.Done(); step++ {
				if step == at {
					switch act {
					case 1:
						_ = m.Cancel()
					case 2:
						_ = m.Inject(f)
					}
				}
				if _, _, err := m.Step(); err != nil {
					break
				}
				holder := c.r.Client()
				if holder == nil || (holder != vm && holder != m.VM()) {
					rt.Fatalf("step %d in %v: the session's client is %v", step, m.Phase(), holder)
				}
			}
			if m.Phase() == PhaseDone {
				vm = m.VM()
			}
			if c.r.Client() != vm || vm.State() != vgpu.VMRunning {
				rt.Fatalf("after the migration (%v) the session holds %v, the VM is %v", m.Phase(), c.r.Client(), vm.State())
			}
			if _, err := c.sim.Advance(time.Duration(rapid.Int64Range(0, int64(150*time.Millisecond)).Draw(rt, "run"))); err != nil {
				rt.Fatal(err)
			}
		}
		if st := c.r.Stats(); st.Jobs-st.Completed > 1 {
			rt.Fatalf("%d jobs submitted, %d came back", st.Jobs, st.Completed)
		}
	})
}

// TestRemoteClientPostCopy: a remote client migrates in post-copy: its
// guest memory follows after the resume, and its session is handed over
// at the commit as in pre-copy.
func TestRemoteClientPostCopy(t *testing.T) {
	c := newRemoteClient(t, vgpu.RemoteVMXNET3(), SimConfig{})
	m, err := c.sim.Start(c.vm, c.b, Config{Link: GbE10(), Fidelity: Model, Policy: Policy{Mode: PostCopy}})
	must(t, err)
	rep, err := m.Run()
	must(t, err)
	if rep.Outcome != PhaseDone || rep.PostCopy == nil || rep.Remote == nil || rep.Remote.Handover == 0 {
		t.Fatalf("outcome %v, post-copy %+v, remote %+v", rep.Outcome, rep.PostCopy, rep.Remote)
	}
	if c.r.Client() != m.VM() || m.VM().RAM().AbsentPages() != 0 {
		t.Fatalf("the session's client %v, %d pages absent", c.r.Client(), m.VM().RAM().AbsentPages())
	}
	end := c.sim.Now()
	_, err = c.sim.Advance(time.Second)
	must(t, err)
	if n := c.iterations(end, end+time.Second); n < 5 {
		t.Errorf("%d iterations in the second after", n)
	}
}

// TestRemoteSimHorizon: a Sim that drives a GPU server's client host
// without the server refuses to advance, as the hosts would drift apart.
func TestRemoteSimHorizon(t *testing.T) {
	server, err := vgpu.NewHost(vgpu.HostConfig{Name: "server"})
	must(t, err)
	client, err := vgpu.NewHost(vgpu.HostConfig{Name: "client"})
	must(t, err)
	r, err := server.OpenRemote(vgpu.RemoteConfig{Profile: "P40-12Q", Link: vgpu.RemoteRoCE()})
	must(t, err)
	_, err = client.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: vgpu.GiB, Remote: []*vgpu.RemoteGPU{r}})
	must(t, err)
	s, err := NewSim(SimConfig{}, client)
	must(t, err)
	if _, err := s.Advance(time.Millisecond); !errors.Is(err, vgpu.ErrOutOfStep) || !errors.Is(err, ErrConfig) {
		t.Errorf("advancing a client without its server: %v", err)
	}
}

// TestRemoteHostWorkers: hosts joined by remote GPUs advanced on several
// goroutines (SimConfig.HostWorkers) give the report one goroutine gives,
// byte for byte, with a desktop on host b whose jobs move no bytes
// beside the training. (TestRemoteHostOrder in vgpu makes the ties of
// arrival and event times such jobs allow.)
func TestRemoteHostWorkers(t *testing.T) {
	run := func(workers int) []byte {
		c := newRemoteClient(t, vgpu.RemoteVMXNET3(), SimConfig{HostWorkers: workers})
		r2, err := c.server.OpenRemote(vgpu.RemoteConfig{Profile: "P40-12Q", Link: vgpu.RemoteVMXNET3()})
		must(t, err)
		d, err := vgpu.NewDesktop(vgpu.DesktopConfig{UpdatesPerSec: 2000, RAMWorkingSetBytes: 64 * vgpu.MiB, SurfaceBytes: 64 * vgpu.MiB})
		must(t, err)
		dvm, err := c.b.CreateVM(vgpu.VMSpec{ID: "desktop", RAMBytes: 256 * vgpu.MiB, Remote: []*vgpu.RemoteGPU{r2}, Workload: d})
		must(t, err)
		must(t, dvm.Start())
		s := c.sim
		m, err := s.Start(c.vm, c.b, Config{Link: GbE10(), Fidelity: Model})
		must(t, err)
		_, err = m.Run()
		must(t, err)
		_, err = s.Advance(300 * time.Millisecond)
		must(t, err)
		rep := m.Report()
		b, err := json.Marshal(rep)
		must(t, err)
		return append(b, fmt.Sprint(c.r.Stats(), c.w.Metrics(0, s.Now()), r2.Stats(), d.Metrics(0, s.Now()))...)
	}
	one := run(1)
	if got := run(3); !bytes.Equal(got, one) {
		t.Errorf("three host workers give another report:\n%s\none gives:\n%s", got, one)
	}
}

// TestRemoteMigrateOneCall: Migrate drives the GPU server with the two
// hosts, as the session needs.
func TestRemoteMigrateOneCall(t *testing.T) {
	c := newRemoteClient(t, vgpu.RemoteVMXNET3(), SimConfig{})
	c.sim.releaseAll()
	if got := vgpu.Joined(c.a, c.b); len(got) != 3 || got[2] != c.server {
		t.Fatalf("joined hosts %v", got)
	}
	rep, err := Migrate(c.vm, c.b, Config{Link: GbE10(), Fidelity: Model})
	must(t, err)
	if rep.Outcome != PhaseDone || c.r.Client().Host() != c.b {
		t.Fatalf("outcome %v, the session's client on %v", rep.Outcome, c.r.Client().Host().Name())
	}
	if c.server.Now() != c.b.Now() {
		t.Errorf("the server is at %v, the destination at %v", c.server.Now(), c.b.Now())
	}
}
