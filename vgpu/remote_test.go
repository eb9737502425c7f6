package vgpu

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/sched"
	"pgregory.net/rapid"
)

// scripted is a workload that submits set jobs at set times to its device
// 0 and records when each completes.
type scripted struct {
	jobs  []scriptedJob
	next  int
	done  []scriptedDone
	fires []int // completions seen at each Fire
}

type scriptedJob struct {
	at  time.Duration
	job sched.Job
	io  JobIO
}

type scriptedDone struct {
	tag      uint64
	at       time.Duration
	finished time.Duration
}

func (w *scripted) Name() string              { return "scripted" }
func (w *scripted) Start(env *Env) error      { return nil }
func (w *scripted) Pause(env *Env)            {}
func (w *scripted) Resume(env *Env) error     { return nil }
func (w *scripted) Stop(env *Env)             { w.next = len(w.jobs) }
func (w *scripted) SetThrottle(float64) error { return nil }
func (w *scripted) Shift(time.Duration)       {}
func (w *scripted) AdvanceTo(env *Env, t time.Duration) error {
	return nil
}
func (w *scripted) Metrics(from, to time.Duration) Metrics { return Metrics{} }

func (w *scripted) NextEvent() time.Duration {
	if w.next < len(w.jobs) {
		return w.jobs[w.next].at
	}
	return NoEvent
}

func (w *scripted) Fire(env *Env) error {
	w.fires = append(w.fires, len(w.done))
	for w.next < len(w.jobs) && w.jobs[w.next].at <= env.Now() {
		j := w.jobs[w.next]
		w.next++
		if err := env.SubmitIO(0, j.job, j.io); err != nil {
			return err
		}
	}
	return nil
}

func (w *scripted) Complete(env *Env, dev int, c sched.Completion) error {
	w.done = append(w.done, scriptedDone{tag: c.Tag, at: env.Now(), finished: c.Finished})
	return nil
}

// remotePair is a GPU server and a client host with a VM using one
// session of it.
type remotePair struct {
	server, client *Host
	r              *RemoteGPU
	vm             *VM
}

func newRemotePair(t interface {
	Helper()
	Fatal(...any)
}, link RemoteLink, w Workload) remotePair {
	t.Helper()
	server, err := NewHost(HostConfig{Name: "server"})
	if err != nil {
		t.Fatal(err)
	}
	client, err := NewHost(HostConfig{Name: "client"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := server.OpenRemote(RemoteConfig{Profile: "P40-24Q", Link: link})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := client.CreateVM(VMSpec{ID: "vm", RAMBytes: GiB, Remote: []*RemoteGPU{r}, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.Start(); err != nil {
		t.Fatal(err)
	}
	return remotePair{server: server, client: client, r: r, vm: vm}
}

// referenceDone is when each job reaches the client, computed the naive
// way for a session alone on its GPU: the link carries one transfer at a
// time each way, a job starts once its inputs are in and the job before it
// ended, its parts run back to back with a round trip between them.
func referenceDone(link RemoteLink, jobs []scriptedJob) []time.Duration {
	var out []time.Duration
	var sendFree, serverFree, backFree time.Duration
	lat := link.RTT / 2
	for _, j := range jobs {
		sent := max(j.at, sendFree)
		sendFree = sent + link.transfer(j.io.InputBytes)
		arrives := sendFree + lat
		t := max(arrives, serverFree)
		n := int(min(int64(max(j.io.Calls, 1)), int64(j.job.Work)))
		for k := range n {
			if k > 0 {
				t += link.RTT
			}
			t += partWork(j.job.Work, k, n)
		}
		serverFree = t
		back := max(t, backFree)
		backFree = back + link.transfer(j.io.OutputBytes)
		out = append(out, backFree+lat)
	}
	return out
}

// TestRemoteMatchesReference checks the session against referenceDone:
// any jobs, inputs, outputs and calls, any link, advanced in any steps.
func TestRemoteMatchesReference(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		link := RemoteLink{Name: "l",
			RTT:         time.Duration(rapid.Int64Range(2, int64(200*time.Microsecond)).Draw(rt, "rtt")),
			BytesPerSec: rapid.Int64Range(1e6, 2e10).Draw(rt, "rate")}
		n := rapid.IntRange(1, 12).Draw(rt, "jobs")
		var jobs []scriptedJob
		var at time.Duration
		for i := range n {
			at += time.Duration(rapid.Int64Range(0, int64(5*time.Millisecond)).Draw(rt, "gap"))
			jobs = append(jobs, scriptedJob{at: at,
				job: sched.Job{Work: time.Duration(rapid.Int64Range(1, int64(20*time.Millisecond)).Draw(rt, "work")), Tag: uint64(i)},
				io: JobIO{InputBytes: rapid.Int64Range(0, 1<<24).Draw(rt, "in"),
					OutputBytes: rapid.Int64Range(0, 1<<20).Draw(rt, "out"),
					Calls:       rapid.IntRange(0, 50).Draw(rt, "calls")}})
		}
		w := &scripted{jobs: slices.Clone(jobs)}
		p := newRemotePair(rt, link, w)
		want := referenceDone(link, jobs)
		end := want[len(want)-1] + time.Millisecond
		for p.server.Now() < end {
			d := time.Duration(rapid.Int64Range(1, int64(300*time.Millisecond)).Draw(rt, "step"))
			if err := AdvanceHosts(min(d, end-p.server.Now()), p.server, p.client); err != nil {
				rt.Fatal(err)
			}
		}
		if len(w.done) != len(want) {
			rt.Fatalf("%d jobs came back, want %d", len(w.done), len(want))
		}
		for i, d := range w.done {
			if d.tag != uint64(i) || d.at != want[i] || d.finished != want[i] {
				rt.Fatalf("job %d: tag %d back at %v (finished %v), want job %d at %v", i, d.tag, d.at, d.finished, i, want[i])
			}
		}
		st := p.r.Stats()
		if st.Jobs != int64(n) || st.Completed != int64(n) {
			rt.Fatalf("stats %+v for %d jobs", st, n)
		}
	})
}

// TestRemoteSplitInvariance: one AdvanceHosts or many give the same
// completions, and the same iteration times of a training VM.
func TestRemoteSplitInvariance(t *testing.T) {
	run := func(step time.Duration) []scriptedDone {
		w := &scripted{}
		for i := range 40 {
			w.jobs = append(w.jobs, scriptedJob{at: time.Duration(i) * 3 * time.Millisecond,
				job: sched.Job{Work: time.Duration(1+i%7) * time.Millisecond, Tag: uint64(i), Chunk: 100 * time.Microsecond},
				io:  JobIO{InputBytes: int64(i) << 16, OutputBytes: 4000, Calls: i % 9}})
		}
		p := newRemotePair(t, RemoteVMXNET3(), w)
		for p.server.Now() < time.Second {
			if err := AdvanceHosts(step, p.server, p.client); err != nil {
				t.Fatal(err)
			}
		}
		return w.done
	}
	whole := run(time.Second)
	if len(whole) != 40 {
		t.Fatalf("%d of 40 jobs back", len(whole))
	}
	for _, step := range []time.Duration{7 * time.Microsecond, 333 * time.Microsecond, 10 * time.Millisecond} {
		if got := run(step); !slices.Equal(got, whole) {
			t.Errorf("steps of %v: completions differ from one advance", step)
		}
	}
}

// TestRemoteHostOrder: a completion that reaches the client at the very
// time its workload has an event is seen at that event whichever host
// moves first — jobs without bytes make such ties — and so on several
// goroutines too.
func TestRemoteHostOrder(t *testing.T) {
	link := RemoteVMXNET3()
	run := func(serverFirst bool, step time.Duration) ([]scriptedDone, []int) {
		w := &scripted{}
		for i := range 20 {
			at := time.Duration(i) * 3 * time.Millisecond
			w.jobs = append(w.jobs, scriptedJob{at: at, job: sched.Job{Work: 2 * time.Millisecond, Tag: uint64(i)}})
			// An event exactly when the job's completion arrives.
			w.jobs = append(w.jobs, scriptedJob{at: at + 2*time.Millisecond + link.RTT, job: sched.Job{Work: 1, Tag: 1000 + uint64(i)}})
		}
		p := newRemotePair(t, link, w)
		hosts := []*Host{p.server, p.client}
		if !serverFirst {
			hosts = []*Host{p.client, p.server}
		}
		for p.server.Now() < 100*time.Millisecond {
			if err := AdvanceHosts(step, hosts...); err != nil {
				t.Fatal(err)
			}
		}
		return w.done, w.fires
	}
	done, fires := run(true, 100*time.Millisecond)
	if len(done) != 40 {
		t.Fatalf("%d of 40 jobs back", len(done))
	}
	for _, step := range []time.Duration{100 * time.Millisecond, 777 * time.Microsecond} {
		d, f := run(false, step)
		if !slices.Equal(d, done) || !slices.Equal(f, fires) {
			t.Errorf("client first, steps of %v: fires saw %v completions, server first %v", step, f, fires)
		}
	}
	// The event at the arrival sees the completion that arrives then.
	if fires[1] != 1 {
		t.Errorf("the event at the first completion's arrival saw %d completions", fires[1])
	}
}

// TestRemoteQueueFull: a session holds as many jobs as the server's
// scheduler queues for a tenant, and refuses the next as a full queue.
func TestRemoteQueueFull(t *testing.T) {
	w := &scripted{}
	for i := range sched.DefaultMaxQueue + 1 {
		w.jobs = append(w.jobs, scriptedJob{job: sched.Job{Work: time.Millisecond, Tag: uint64(i)}})
	}
	p := newRemotePair(t, RemoteRoCE(), w)
	err := AdvanceHosts(time.Millisecond, p.server, p.client)
	if !errors.Is(err, sched.ErrQueueFull) || !errors.Is(err, ErrWorkload) {
		t.Fatalf("job %d of a full session: %v", sched.DefaultMaxQueue+1, err)
	}
	if st := p.r.Stats(); st.Jobs != sched.DefaultMaxQueue {
		t.Errorf("the session took %d jobs", st.Jobs)
	}
}

// TestRemoteSharedScheduler: sessions of several clients share the
// server GPU's scheduler, and each client's jobs take longer for it.
func TestRemoteSharedScheduler(t *testing.T) {
	if isolationRace {
		t.Skip("a deterministic figure, 25 times slower under the race detector, which finds nothing in one goroutine")
	}
	server, err := NewHost(HostConfig{Name: "server"})
	if err != nil {
		t.Fatal(err)
	}
	hosts := []*Host{server}
	var loads []*Training
	for i := range 3 {
		c, err := NewHost(HostConfig{Name: fmt.Sprintf("client%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := server.OpenRemote(RemoteConfig{Profile: "P40-8Q", Link: RemoteVMXNET3()})
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewTraining(TrainingConfig{Model: ResNet50(), BatchSize: 16, QueueDepth: 1, PollInterval: 10 * time.Microsecond,
			WeightsBytes: 128 * MiB, ActivationsBytes: 128 * MiB, OptimizerStateBytes: 64 * MiB})
		if err != nil {
			t.Fatal(err)
		}
		vm, err := c.CreateVM(VMSpec{ID: "vm", RAMBytes: GiB, Remote: []*RemoteGPU{r}, Workload: w})
		if err != nil {
			t.Fatal(err)
		}
		if err := vm.Start(); err != nil {
			t.Fatal(err)
		}
		hosts, loads = append(hosts, c), append(loads, w)
	}
	if got := len(server.GPU(0).VGPUs()); got != 3 {
		t.Fatalf("the server's GPU has %d vGPUs, want the 3 sessions'", got)
	}
	if err := AdvanceHosts(2*time.Second, hosts...); err != nil {
		t.Fatal(err)
	}
	alone := newRemotePairTraining(t)
	for i, w := range loads {
		shared := w.Metrics(500*time.Millisecond, 2*time.Second).LatencyMean
		if shared < 2*alone {
			t.Errorf("client %d: an iteration takes %v sharing the GPU with two others, %v alone", i, shared, alone)
		}
	}
	if u, err := server.GPU(0).Utilization(time.Second, 2*time.Second); err != nil || u < 0.9 {
		t.Errorf("the shared GPU is busy %.2f of the time (%v)", u, err)
	}
}

// newRemotePairTraining returns the mean iteration time of the shared
// test's training alone on its remote GPU.
func newRemotePairTraining(t *testing.T) time.Duration {
	w, err := NewTraining(TrainingConfig{Model: ResNet50(), BatchSize: 16, QueueDepth: 1, PollInterval: 10 * time.Microsecond,
		WeightsBytes: 128 * MiB, ActivationsBytes: 128 * MiB, OptimizerStateBytes: 64 * MiB})
	if err != nil {
		t.Fatal(err)
	}
	p := newRemotePair(t, RemoteVMXNET3(), w)
	if err := AdvanceHosts(2*time.Second, p.server, p.client); err != nil {
		t.Fatal(err)
	}
	return w.Metrics(500*time.Millisecond, 2*time.Second).LatencyMean
}

// TestRemoteOverheadShapes reproduces seed 002's shapes: a training
// iteration's overhead on a remote GPU over a local one is 4 to 20 % or so
// over 10 GbE, at most 5 % over 100 Gb RoCE, PVRDMA between them; it falls
// as the batch grows; ResNet-50 pays less of it than Inception V3.
func TestRemoteOverheadShapes(t *testing.T) {
	if isolationRace {
		t.Skip("a deterministic figure, 25 times slower under the race detector, which finds nothing in one goroutine")
	}
	overhead := map[string]float64{}
	key := func(m Model, b int, l RemoteLink) string { return fmt.Sprintf("%s/%d/%s", m.Name, b, l.Name) }
	links := []RemoteLink{RemoteVMXNET3(), RemotePVRDMA(), RemoteRoCE()}
	batches := []int{16, 64}
	for _, m := range []Model{InceptionV3(), ResNet50()} {
		for _, b := range batches {
			local := iterationTime(t, m, b, nil)
			for _, l := range links {
				remote := iterationTime(t, m, b, &l)
				overhead[key(m, b, l)] = float64(remote)/float64(local) - 1
			}
		}
	}
	for _, m := range []Model{InceptionV3(), ResNet50()} {
		for _, b := range batches {
			vx, pv, roce := overhead[key(m, b, links[0])], overhead[key(m, b, links[1])], overhead[key(m, b, links[2])]
			t.Logf("%s batch %d: 10 GbE %.1f %%, PVRDMA %.1f %%, RoCE %.1f %%", m.Name, b, 100*vx, 100*pv, 100*roce)
			if vx < 0.03 || vx > 0.23 {
				t.Errorf("%s batch %d: 10 GbE overhead %.1f %%, outside about 4 to 20 %%", m.Name, b, 100*vx)
			}
			if roce <= 0 || roce > 0.05 {
				t.Errorf("%s batch %d: RoCE overhead %.1f %%, not in (0, 5 %%]", m.Name, b, 100*roce)
			}
			if !(roce < pv && pv < vx) {
				t.Errorf("%s batch %d: PVRDMA's %.1f %% not between RoCE's and 10 GbE's", m.Name, b, 100*pv)
			}
		}
		for _, l := range links {
			if small, large := overhead[key(m, 16, l)], overhead[key(m, 64, l)]; large >= small {
				t.Errorf("%s over %s: overhead %.1f %% at batch 64, not below batch 16's %.1f %%", m.Name, l.Name, 100*large, 100*small)
			}
		}
	}
	for _, b := range batches {
		if r, i := overhead[key(ResNet50(), b, links[0])], overhead[key(InceptionV3(), b, links[0])]; r >= i {
			t.Errorf("batch %d over 10 GbE: ResNet-50's overhead %.1f %% not below Inception V3's %.1f %%", b, 100*r, 100*i)
		}
	}
}

// iterationTime is the mean training iteration of m at batch b, on a
// local P40-24Q, or on a remote one over link.
func iterationTime(t testing.TB, m Model, b int, link *RemoteLink) time.Duration {
	t.Helper()
	w, err := NewTraining(TrainingConfig{Model: m, BatchSize: b, QueueDepth: 1, PollInterval: 10 * time.Microsecond,
		WeightsBytes: 256 * MiB, ActivationsBytes: 256 * MiB, OptimizerStateBytes: 64 * MiB})
	if err != nil {
		t.Fatal(err)
	}
	iter := w.IterationWork(P40())
	span := 4 * iter
	if link == nil {
		h, err := NewHost(HostConfig{Name: "local"})
		if err != nil {
			t.Fatal(err)
		}
		vm, err := h.CreateVM(VMSpec{ID: "vm", RAMBytes: GiB, Profiles: []string{"P40-24Q"}, Workload: w})
		if err != nil {
			t.Fatal(err)
		}
		if err := vm.Start(); err != nil {
			t.Fatal(err)
		}
		if err := h.Advance(span + 2*iter); err != nil {
			t.Fatal(err)
		}
	} else {
		p := newRemotePair(t, *link, w)
		if err := AdvanceHosts(span+2*iter, p.server, p.client); err != nil {
			t.Fatal(err)
		}
	}
	return w.Metrics(2*iter, span+2*iter).LatencyMean
}

// TestRemoteRules checks the documented refusals and what a VM's stop,
// pause and destruction do to its session.
func TestRemoteRules(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		p := newRemotePair(t, RemoteRoCE(), &scripted{})
		for _, h := range []*Host{p.server, p.client} {
			if err := h.Advance(time.Millisecond); !errors.Is(err, ErrOutOfStep) {
				t.Errorf("%s alone: %v, want ErrOutOfStep", h.Name(), err)
			}
		}
		if _, err := Horizon([]*Host{p.client}); !errors.Is(err, ErrOutOfStep) {
			t.Errorf("horizon without the server: %v", err)
		}
		if err := AdvanceHosts(time.Millisecond, p.server); !errors.Is(err, ErrOutOfStep) {
			t.Errorf("advancing the server without its client: %v", err)
		}
	})
	t.Run("attach", func(t *testing.T) {
		p := newRemotePair(t, RemoteRoCE(), &scripted{})
		if _, err := p.client.CreateVM(VMSpec{ID: "vm2", RAMBytes: GiB, Remote: []*RemoteGPU{p.r}}); !errors.Is(err, ErrGPUBusy) {
			t.Errorf("a second VM on a session: %v", err)
		}
		if err := p.r.Close(); !errors.Is(err, ErrGPUBusy) {
			t.Errorf("closing a session in use: %v", err)
		}
		r2, err := p.server.OpenRemote(RemoteConfig{Profile: "P40-24Q", Link: RemoteRoCE()})
		if err == nil {
			t.Fatalf("a second 24Q session on a full P40: %v", r2)
		}
		var pe *PlacementError
		if !errors.As(err, &pe) {
			t.Errorf("a full GPU: %v, want a *PlacementError", err)
		}
	})
	t.Run("clocks", func(t *testing.T) {
		server, _ := NewHost(HostConfig{Name: "server"})
		late, _ := NewHost(HostConfig{Name: "late", Start: time.Second})
		r, err := server.OpenRemote(RemoteConfig{Profile: "P40-12Q", Link: RemoteRoCE()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := late.CreateVM(VMSpec{ID: "vm", RAMBytes: GiB, Remote: []*RemoteGPU{r}}); !errors.Is(err, ErrOutOfStep) {
			t.Errorf("a client whose clock differs: %v", err)
		}
		if _, err := server.OpenRemote(RemoteConfig{Profile: "P40-12Q", Link: RemoteLink{Name: "bad", RTT: 0, BytesPerSec: 1}}); !errors.Is(err, ErrConfig) {
			t.Errorf("a link without a round trip: %v", err)
		}
		if _, err := server.OpenRemote(RemoteConfig{Profile: "P40-12Q", Link: RemoteLink{Name: "bad", RTT: time.Microsecond}}); !errors.Is(err, ErrConfig) {
			t.Errorf("a link without a rate: %v", err)
		}
	})
	t.Run("hand-over", func(t *testing.T) {
		w := &scripted{jobs: []scriptedJob{{at: 0, job: sched.Job{Work: 5 * time.Millisecond, Tag: 3}}}}
		p := newRemotePair(t, RemoteVMXNET3(), w)
		if err := p.vm.CheckMigratable(); err != nil {
			t.Fatalf("a remote GPU's client: %v", err)
		}
		other, err := NewHost(HostConfig{Name: "other"})
		if err != nil {
			t.Fatal(err)
		}
		spec := p.vm.IncomingSpec()
		if len(spec.Remote) != 1 || spec.Remote[0] != p.r || spec.GPUModel != "" {
			t.Fatalf("incoming spec %+v", spec)
		}
		in, err := other.PrepareIncoming(spec)
		if err != nil {
			t.Fatal(err)
		}
		if p.r.Client() != p.vm {
			t.Fatal("preparing the destination took the session")
		}
		if _, err := p.vm.HandOverRemote(in); err == nil {
			t.Error("a running VM handed its session over")
		}
		if err := AdvanceHosts(time.Millisecond, p.server, p.client, other); err != nil {
			t.Fatal(err)
		}
		if err := p.vm.Pause(); err != nil {
			t.Fatal(err)
		}
		took, err := p.vm.HandOverRemote(in)
		if err != nil || took != 2*RemoteVMXNET3().RTT {
			t.Fatalf("hand-over: %v, %v", took, err)
		}
		if p.r.Client() != in {
			t.Fatal("the session did not follow")
		}
		if err := p.vm.HandOverWorkload(in); err != nil {
			t.Fatal(err)
		}
		if err := in.Commit(nil); err != nil { // runs it
			t.Fatal(err)
		}
		if err := p.vm.Destroy(); err != nil {
			t.Fatal(err)
		}
		if p.r.Client() != in {
			t.Fatal("destroying the source took the session from the destination")
		}
		if err := AdvanceHosts(20*time.Millisecond, p.server, p.client, other); err != nil {
			t.Fatal(err)
		}
		// The job ended on the server at about 5.03 ms, and its answer
		// waited for the hand-over at 1 ms + 100 µs.
		if len(w.done) != 1 || w.done[0].at >= 6*time.Millisecond || w.done[0].at < 5*time.Millisecond {
			t.Errorf("the job came back %+v", w.done)
		}
	})
	t.Run("hand-over holds calls", func(t *testing.T) {
		// Parts of 100 µs, a 50 µs round trip apart: the 7th runs from
		// 0.925 to 1.025 ms, and the session is handed over at 1 ms,
		// answering again at 1.1 ms; the part's answer waits for that,
		// and the next part starts at 1.125 ms instead of 1.075: the job
		// comes back 50 µs later.
		link := RemoteVMXNET3()
		jobs := []scriptedJob{{at: 0, job: sched.Job{Work: 5 * time.Millisecond, Tag: 4}, io: JobIO{Calls: 50}}}
		w := &scripted{jobs: slices.Clone(jobs)}
		p := newRemotePair(t, link, w)
		other, err := NewHost(HostConfig{Name: "other"})
		if err != nil {
			t.Fatal(err)
		}
		in, err := other.PrepareIncoming(p.vm.IncomingSpec())
		if err != nil {
			t.Fatal(err)
		}
		if err := AdvanceHosts(time.Millisecond, p.server, p.client, other); err != nil {
			t.Fatal(err)
		}
		if err := p.vm.Pause(); err != nil {
			t.Fatal(err)
		}
		if _, err := p.vm.HandOverRemote(in); err != nil {
			t.Fatal(err)
		}
		if err := p.vm.HandOverWorkload(in); err != nil {
			t.Fatal(err)
		}
		if err := in.Commit(nil); err != nil {
			t.Fatal(err)
		}
		if err := AdvanceHosts(20*time.Millisecond, p.server, p.client, other); err != nil {
			t.Fatal(err)
		}
		want := referenceDone(link, jobs)[0] + 50*time.Microsecond
		if len(w.done) != 1 || w.done[0].at != want {
			t.Errorf("the job came back %+v, want at %v", w.done, want)
		}
	})
	t.Run("destroyed source", func(t *testing.T) {
		p := newRemotePair(t, RemoteRoCE(), &scripted{})
		other, err := NewHost(HostConfig{Name: "other"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.PrepareIncoming(p.vm.IncomingSpec()); err != nil {
			t.Fatal(err)
		}
		if err := p.vm.Destroy(); err != nil {
			t.Fatal(err)
		}
		if got := Joined(other); len(got) != 1 {
			t.Errorf("a destination whose source is gone is joined to %d hosts", len(got))
		}
		if err := other.Advance(time.Millisecond); err != nil {
			t.Errorf("a destination holding no session: %v", err)
		}
	})
	t.Run("bad io", func(t *testing.T) {
		w := &scripted{jobs: []scriptedJob{{at: 0, job: sched.Job{Work: time.Millisecond}, io: JobIO{Calls: -1}}}}
		p := newRemotePair(t, RemoteRoCE(), w)
		err := AdvanceHosts(time.Millisecond, p.server, p.client)
		if !errors.Is(err, ErrWorkload) || !errors.Is(err, ErrConfig) {
			t.Errorf("a job with -1 calls: %v", err)
		}
	})
	t.Run("pause holds completions", func(t *testing.T) {
		w := &scripted{jobs: []scriptedJob{{at: 0, job: sched.Job{Work: time.Millisecond, Tag: 7}}}}
		p := newRemotePair(t, RemoteRoCE(), w)
		if err := AdvanceHosts(100*time.Microsecond, p.server, p.client); err != nil {
			t.Fatal(err)
		}
		if err := p.vm.Pause(); err != nil {
			t.Fatal(err)
		}
		if err := AdvanceHosts(10*time.Millisecond, p.server, p.client); err != nil {
			t.Fatal(err)
		}
		if len(w.done) != 0 {
			t.Fatalf("a paused VM saw %d completions", len(w.done))
		}
		if err := p.vm.Resume(); err != nil {
			t.Fatal(err)
		}
		if err := AdvanceHosts(0, p.server, p.client); err != nil {
			t.Fatal(err)
		}
		if len(w.done) != 1 || w.done[0].at != 10100*time.Microsecond {
			t.Errorf("after the resume at 10.1 ms: %+v", w.done)
		}
	})
	t.Run("stop and destroy", func(t *testing.T) {
		w := &scripted{jobs: []scriptedJob{{at: 0, job: sched.Job{Work: 50 * time.Millisecond, Tag: 1}, io: JobIO{Calls: 3}}}}
		p := newRemotePair(t, RemoteRoCE(), w)
		if err := AdvanceHosts(5*time.Millisecond, p.server, p.client); err != nil {
			t.Fatal(err)
		}
		if err := p.vm.Stop(); err != nil {
			t.Fatal(err)
		}
		info, err := p.server.GPU(0).Scheduler().Tenant(p.r.VGPU().Tenant())
		if err != nil || info.Queued != 0 {
			t.Errorf("after the client's stop the session's tenant has %d jobs (%v)", info.Queued, err)
		}
		if err := AdvanceHosts(100*time.Millisecond, p.server, p.client); err != nil {
			t.Fatal(err)
		}
		if len(w.done) != 0 {
			t.Errorf("a stopped VM's job came back: %+v", w.done)
		}
		if err := p.vm.Destroy(); err != nil {
			t.Fatal(err)
		}
		if p.r.Client() != nil {
			t.Error("the session keeps its destroyed VM")
		}
		if err := p.server.Advance(time.Millisecond); err != nil {
			t.Errorf("the server with no client left: %v", err)
		}
		if err := p.r.Close(); err != nil {
			t.Fatal(err)
		}
		if got := len(p.server.GPU(0).VGPUs()); got != 0 {
			t.Errorf("a closed session leaves %d vGPUs", got)
		}
	})
}
