package main

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

// params describes the experiment.
//
// The source trains Inception V3 and ResNet-50 with tf_cnn_benchmarks at
// several batch sizes, each on a GPU in DirectPath I/O (the baseline) and
// remotely through Bitfusion over three networks; its figures plot the
// remote runs' performance over the baseline's. Here the baseline is a
// P40-24Q, the P40's whole-GPU vGPU, alone on its GPU, so that it has all
// of the GPU's time, as a VM with a passthrough GPU has; the remote runs
// open a P40-24Q session on a GPU server for a VM on another host
// (vgpu.Host.OpenRemote). The source's text names neither its GPU nor its
// batch sizes: the P40 is the library's GPU, and batch sizes 16 to 128,
// doubling, are an assumption; the source says only that larger batches
// have less overhead.
//
// The sharing scenario has 1, 2 or 4 client VMs, each on a host of its
// own, each with a P40-6Q session on the same server GPU over 10 GbE,
// training at once: the source's closing point, that Bitfusion's shared
// pools of GPUs raise their utilization. Its model, batch and profile are
// assumptions, the case of the largest overhead (Inception V3 at the
// smallest batch) on the profile that lets four sessions share the GPU.
type params struct {
	models     []vgpu.Model
	batches    []int
	links      []vgpu.RemoteLink
	iterations int // measured per run, after the first

	shareModel   vgpu.Model
	shareBatch   int
	shareProfile string
	shareLink    vgpu.RemoteLink
	clients      []int // client VMs per sharing run
}

// localProfile is the baseline's vGPU and the remote sessions' in the
// first table: the P40's whole-GPU profile.
const localProfile = "P40-24Q"

func defaultParams() params {
	return params{
		models:  []vgpu.Model{vgpu.InceptionV3(), vgpu.ResNet50()},
		batches: []int{16, 32, 64, 128},
		// In the order of the source's Figures 2, 3 and 4.
		links:      []vgpu.RemoteLink{vgpu.RemoteVMXNET3(), vgpu.RemoteRoCE(), vgpu.RemotePVRDMA()},
		iterations: 5,

		shareModel:   vgpu.InceptionV3(),
		shareBatch:   16,
		shareProfile: "P40-6Q",
		shareLink:    vgpu.RemoteVMXNET3(),
		clients:      []int{1, 2, 4},
	}
}

// Limits of the flags: enough for any figure, small enough that a
// mistyped value fails at once rather than simulating for hours.
const (
	maxIterations = 100
	maxBatch      = 256
)

func (p params) check() error {
	switch {
	case p.iterations < 1 || p.iterations > maxIterations:
		return fmt.Errorf("-iterations %d: want 1 to %d", p.iterations, maxIterations)
	case len(p.batches) == 0:
		return fmt.Errorf("-batches: want at least one batch size")
	}
	for _, b := range p.batches {
		if b < 1 || b > maxBatch {
			return fmt.Errorf("-batches: batch size %d outside 1 to %d", b, maxBatch)
		}
	}
	prof, err := vgpu.ParseProfile(p.shareProfile)
	if err != nil {
		return err
	}
	for _, n := range p.clients {
		if n < 1 || n > prof.MaxInstances {
			return fmt.Errorf("-clients: %d clients, want 1 to %d (the %s sessions one P40 holds)", n, prof.MaxInstances, prof.Name)
		}
	}
	return nil
}

// training returns a tf_cnn_benchmarks-like training loop: one iteration
// on the GPU at a time (QueueDepth 1), the next launched as soon as the
// last is done (a 1 µs poll, under the shortest round trip measured), and
// a fixed framebuffer footprint (assumption: 256 MiB each of weights and
// activations, which every profile used holds; the iteration times do
// not depend on it).
func training(m vgpu.Model, batch int) (*vgpu.Training, error) {
	return vgpu.NewTraining(vgpu.TrainingConfig{Model: m, BatchSize: batch, QueueDepth: 1, PollInterval: time.Microsecond,
		WeightsBytes: 256 * vgpu.MiB, ActivationsBytes: 256 * vgpu.MiB, OptimizerStateBytes: 64 * vgpu.MiB})
}

// row is one model, batch and link: the iteration time on the local
// baseline and on the remote GPU.
type row struct {
	model  string
	batch  int
	link   vgpu.RemoteLink
	local  time.Duration
	remote time.Duration
}

// normalized is the source's figures' measure: the baseline's performance
// over the remote run's, 1 with no overhead.
func (r row) normalized() float64 { return float64(r.local) / float64(r.remote) }

// overheadPct is how much longer a remote iteration takes, in percent.
func (r row) overheadPct() float64 { return 100 * (float64(r.remote)/float64(r.local) - 1) }

// shareRow is one client of a sharing run.
type shareRow struct {
	clients   int
	client    int
	iteration time.Duration
	local     time.Duration // the same training alone on a local P40-24Q
	gpuUtil   float64       // the server GPU's, over the measured window, 0 to 1
}

// result is everything the command prints.
type result struct {
	rows  []row
	share []shareRow
}

// simulate runs the baseline and every link for each model and batch,
// then the sharing runs.
func simulate(p params) (result, error) {
	if err := p.check(); err != nil {
		return result{}, err
	}
	var res result
	for _, m := range p.models {
		for _, b := range p.batches {
			local, err := measure(p, m, b, nil, localProfile, 1)
			if err != nil {
				return result{}, err
			}
			for _, l := range p.links {
				remote, err := measure(p, m, b, &l, localProfile, 1)
				if err != nil {
					return result{}, err
				}
				res.rows = append(res.rows, row{model: m.Name, batch: b, link: l, local: local.iterations[0], remote: remote.iterations[0]})
			}
		}
	}
	if len(p.clients) == 0 {
		return res, nil
	}
	alone, err := measure(p, p.shareModel, p.shareBatch, nil, localProfile, 1)
	if err != nil {
		return result{}, err
	}
	for _, n := range p.clients {
		link := p.shareLink
		run, err := measure(p, p.shareModel, p.shareBatch, &link, p.shareProfile, n)
		if err != nil {
			return result{}, err
		}
		for i, it := range run.iterations {
			res.share = append(res.share, shareRow{clients: n, client: i + 1, iteration: it, local: alone.iterations[0], gpuUtil: run.gpuUtil})
		}
	}
	return res, nil
}

// measured is one simulation's measure: each client's mean iteration time and
// the GPU's utilization over the window they were measured in.
type measured struct {
	iterations []time.Duration
	gpuUtil    float64
}

// usageResolution is the server GPU's utilization history's bucket
// (HostConfig.UsageResolution), the finest the library keeps: a window of
// whole iterations starts and ends within a bucket, and the part of
// those two buckets it covers is prorated.
const usageResolution = time.Millisecond

// measure trains model m at batch b on clients VMs at once, each with a
// vGPU of profile prof: local to its host when link is nil (then clients
// must be 1), else a session on one GPU server's GPU, each client on a
// host of its own, over link. Every VM's first iteration is left out, as
// tf_cnn_benchmarks leaves out its warm-up steps: the window runs from
// the end of the first VM's iteration that ends once each VM has done
// one, for p.iterations more of its iterations. A VM's iteration time is
// the mean of its iterations ending in the window; the first VM's are
// exactly the window's, and the GPU's utilization is over the window.
func measure(p params, m vgpu.Model, b int, link *vgpu.RemoteLink, prof string, clients int) (measured, error) {
	w, err := training(m, b)
	if err != nil {
		return measured{}, err
	}
	work := w.IterationWork(vgpu.P40())
	// An iteration takes its work on a GPU shared by every client, plus
	// its network time, which on the links here is under its work: four
	// times that bounds a run that would otherwise never end.
	limit := time.Duration(p.iterations+3) * time.Duration(clients) * 4 * work
	name := "gpu-server"
	if link == nil {
		name = "local"
	}
	server, err := vgpu.NewHost(vgpu.HostConfig{Name: name, UsageResolution: usageResolution, UsageRetention: limit + time.Second})
	if err != nil {
		return measured{}, err
	}
	hosts := []*vgpu.Host{server}
	var loads []*vgpu.Training
	for i := range clients {
		if i > 0 {
			if w, err = training(m, b); err != nil {
				return measured{}, err
			}
		}
		spec := vgpu.VMSpec{ID: fmt.Sprint("vm", i+1), RAMBytes: vgpu.GiB, Workload: w}
		host := server
		if link == nil {
			if clients != 1 {
				return measured{}, fmt.Errorf("a local baseline has one VM, not %d", clients)
			}
			spec.Profiles = []string{prof}
		} else {
			r, err := server.OpenRemote(vgpu.RemoteConfig{Profile: prof, Link: *link})
			if err != nil {
				return measured{}, err
			}
			if host, err = vgpu.NewHost(vgpu.HostConfig{Name: fmt.Sprint("client", i+1)}); err != nil {
				return measured{}, err
			}
			hosts = append(hosts, host)
			spec.Remote = []*vgpu.RemoteGPU{r}
		}
		vm, err := host.CreateVM(spec)
		if err != nil {
			return measured{}, err
		}
		if err := vm.Start(); err != nil {
			return measured{}, err
		}
		loads = append(loads, w)
	}

	completed := func(w *vgpu.Training) int64 { return w.Metrics(0, server.Now()+1).Completed }
	advanceUntil := func(done func() bool) error {
		for !done() {
			if server.Now() > limit {
				return fmt.Errorf("%s at batch %d on %d VMs: the iterations measured not done in %v", m.Name, b, clients, limit)
			}
			// The hosts move together, in steps no longer than the
			// links allow (AdvanceHosts); a step of a quarter of an
			// iteration's work only sets how often the counts are read.
			if err := vgpu.AdvanceHosts(max(work/4, time.Microsecond), hosts...); err != nil {
				return err
			}
		}
		return nil
	}
	if err := advanceUntil(func() bool {
		for _, w := range loads {
			if completed(w) < 1 {
				return false
			}
		}
		return true
	}); err != nil {
		return measured{}, err
	}
	first := completed(loads[0])
	last := first + int64(p.iterations)
	if err := advanceUntil(func() bool { return completed(loads[0]) >= last }); err != nil {
		return measured{}, err
	}
	from, to := iterationEnd(loads[0], first, server.Now()), iterationEnd(loads[0], last, server.Now())
	var out measured
	for i, w := range loads {
		// Metrics counts the iterations ending in [from+1, to+1): those
		// ending after from, up to and including to.
		mt := w.Metrics(from+1, to+1)
		if mt.Completed == 0 {
			return measured{}, fmt.Errorf("%s at batch %d: vm%d did no iteration in the window", m.Name, b, i+1)
		}
		out.iterations = append(out.iterations, mt.LatencyMean)
	}
	if out.gpuUtil, err = server.GPU(0).Utilization(from, to); err != nil {
		return measured{}, err
	}
	return out, nil
}

// iterationEnd returns when w's k-th iteration (from 1) ended, which is
// no later than now: the least t by which k had ended, found by halving
// [0, now] on w's history.
func iterationEnd(w *vgpu.Training, k int64, now time.Duration) time.Duration {
	lo, hi := time.Duration(0), now
	for lo < hi {
		mid := lo + (hi-lo)/2
		if w.Metrics(0, mid+1).Completed >= k {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
