package vgpusimtest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/vgpu"
)

// DefaultOraclePages is how many pages of each region an oracle workload
// owns when OracleConfig.Pages is zero.
const DefaultOraclePages = 16

// OracleConfig configures an oracle workload (Oracle.Workload).
type OracleConfig struct {
	// PagesPerSec is how many writes a second the workload makes while
	// its VM runs; each write rewrites one of its pages in guest RAM and
	// the same page in every framebuffer. A throttle cuts the rate as it
	// cuts any workload's.
	PagesPerSec int64
	// Pages is how many pages the workload owns in each region: the last
	// Pages pages of guest RAM and of each framebuffer, so that an Inner
	// workload, whose data starts at the bottom, leaves them alone when it
	// is given a working set that does not reach them. 0 means
	// DefaultOraclePages.
	Pages int
	// Seed chooses which page each write rewrites.
	Seed uint64
	// Inner, if set, runs as it would alone; the oracle's writes are made
	// beside its own, and its events, GPU work and metrics are its own.
	Inner vgpu.Workload
}

// oracleWorkload is the vgpu.Workload Oracle.Workload returns.
type oracleWorkload struct {
	o        *Oracle
	cfg      OracleConfig
	rng      *rand.Rand
	vmID     string
	firsts   []int // each region's first owned page
	versions uint64
	carry    int64 // write-nanoseconds not yet making a write
	last     time.Duration
	running  bool
	paused   bool
	throttle float64
	page     []byte
}

// Workload returns a workload that records every write it makes in o, for
// one VM (the one it starts on; it follows that VM's ID across
// migrations). Give each VM its own.
func (o *Oracle) Workload(cfg OracleConfig) vgpu.Workload {
	if cfg.Pages <= 0 {
		cfg.Pages = DefaultOraclePages
	}
	return &oracleWorkload{o: o, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6f7261636c65))}
}

// Name names the workload: "oracle", or "oracle+" and the inner one's.
func (w *oracleWorkload) Name() string {
	if w.cfg.Inner != nil {
		return "oracle+" + w.cfg.Inner.Name()
	}
	return "oracle"
}

// regions returns the VM's guest RAM and framebuffers, in the oracle's
// region order.
func regions(env *vgpu.Env) ([]*memory.Region, error) {
	rs := []*memory.Region{env.RAM()}
	for i := range env.Devices() {
		fb, err := env.Framebuffer(i)
		if err != nil {
			return nil, err
		}
		rs = append(rs, fb)
	}
	return rs, nil
}

// Start starts the inner workload, then writes every owned page once.
func (w *oracleWorkload) Start(env *vgpu.Env) error {
	if w.vmID != "" && w.vmID != env.VMID() {
		return fmt.Errorf("oracle: the workload of VM %q started on VM %q: give each VM its own", w.vmID, env.VMID())
	}
	rs, err := regions(env)
	if err != nil {
		return err
	}
	w.firsts = w.firsts[:0]
	for i, r := range rs {
		first := r.Pages() - w.cfg.Pages
		base := 0
		if i == 0 {
			base = int((env.RAMWorkloadBase() + int64(r.PageSize()) - 1) / int64(r.PageSize()))
		}
		if first < base {
			return fmt.Errorf("oracle: %d pages do not fit region %d of VM %q (%d pages, %d taken)", w.cfg.Pages, i, env.VMID(), r.Pages(), base)
		}
		w.firsts = append(w.firsts, first)
	}
	if w.cfg.Inner != nil {
		if err := w.cfg.Inner.Start(env); err != nil {
			return err
		}
	}
	w.vmID, w.running, w.paused, w.last = env.VMID(), true, false, env.Now()
	for p := range w.cfg.Pages {
		if err := w.write(rs, p); err != nil {
			return err
		}
	}
	return nil
}

// write rewrites page p of every region with a new version.
func (w *oracleWorkload) write(rs []*memory.Region, p int) error {
	for i, r := range rs {
		if len(w.page) != r.PageSize() {
			w.page = make([]byte, r.PageSize())
		}
		k := oraclePage{i, w.firsts[i] + p}
		w.versions++
		key := pageKey(w.vmID, k)
		versionPage(w.page, key, w.versions)
		if _, err := r.WriteAt(w.page, int64(k.page)*int64(r.PageSize())); err != nil {
			return err
		}
		w.o.record(w.vmID, k, key, w.versions)
	}
	return nil
}

// pageKey keys a page's content by VM and place, so that no two pages of
// the oracle hold the same bytes.
func pageKey(vmID string, k oraclePage) uint64 {
	h := uint64(14695981039346656037)
	for i := range len(vmID) {
		h = (h ^ uint64(vmID[i])) * 1099511628211
	}
	return h ^ uint64(k.region)<<48 ^ uint64(k.page)
}

// AdvanceTo makes the writes due up to t, after the inner workload's.
func (w *oracleWorkload) AdvanceTo(env *vgpu.Env, t time.Duration) error {
	if w.cfg.Inner != nil {
		if err := w.cfg.Inner.AdvanceTo(env, t); err != nil {
			return err
		}
	}
	if !w.running || w.paused || t <= w.last {
		w.last = max(w.last, t)
		return nil
	}
	// Rounded, not truncated: 1-f is seldom exact in binary, and 50
	// pages a second cut by 0.8 must be 10, not 9.
	rate := int64(math.Round(float64(w.cfg.PagesPerSec) * (1 - w.throttle)))
	num := int64(t-w.last)*rate + w.carry
	w.last = t
	n := num / int64(time.Second)
	w.carry = num % int64(time.Second)
	if n == 0 {
		return nil
	}
	rs, err := regions(env)
	if err != nil {
		return err
	}
	if env.VMID() != w.vmID {
		return errors.New("oracle: the workload moved to another VM")
	}
	for range n {
		if err := w.write(rs, w.rng.IntN(w.cfg.Pages)); err != nil {
			return err
		}
	}
	return nil
}

// Pause freezes the writes and the inner workload.
func (w *oracleWorkload) Pause(env *vgpu.Env) {
	w.paused = true
	if w.cfg.Inner != nil {
		w.cfg.Inner.Pause(env)
	}
}

// Resume continues the writes from env.Now(): nothing is written for the
// time the VM was paused.
func (w *oracleWorkload) Resume(env *vgpu.Env) error {
	w.paused, w.last = false, env.Now()
	if w.cfg.Inner != nil {
		return w.cfg.Inner.Resume(env)
	}
	return nil
}

// Stop ends the writes and the inner workload.
func (w *oracleWorkload) Stop(env *vgpu.Env) {
	w.running = false
	if w.cfg.Inner != nil {
		w.cfg.Inner.Stop(env)
	}
}

// NextEvent is the inner workload's; the oracle's writes are continuous.
func (w *oracleWorkload) NextEvent() time.Duration {
	if w.cfg.Inner != nil {
		return w.cfg.Inner.NextEvent()
	}
	return vgpu.NoEvent
}

// Fire passes the event to the inner workload.
func (w *oracleWorkload) Fire(env *vgpu.Env) error {
	if w.cfg.Inner != nil {
		return w.cfg.Inner.Fire(env)
	}
	return nil
}

// Complete passes a finished job to the inner workload.
func (w *oracleWorkload) Complete(env *vgpu.Env, device int, c sched.Completion) error {
	if w.cfg.Inner != nil {
		return w.cfg.Inner.Complete(env, device, c)
	}
	return nil
}

// SetThrottle cuts the writes and the inner workload alike.
func (w *oracleWorkload) SetThrottle(f float64) error {
	if w.cfg.Inner != nil {
		if err := w.cfg.Inner.SetThrottle(f); err != nil {
			return err
		}
	}
	w.throttle = f
	return nil
}

// Shift moves the workload's times, and the inner one's, by d.
func (w *oracleWorkload) Shift(d time.Duration) {
	w.last += d
	if w.cfg.Inner != nil {
		w.cfg.Inner.Shift(d)
	}
}

// Metrics are the inner workload's, or none.
func (w *oracleWorkload) Metrics(from, to time.Duration) vgpu.Metrics {
	if w.cfg.Inner != nil {
		return w.cfg.Inner.Metrics(from, to)
	}
	return vgpu.Metrics{Workload: w.Name(), From: from, To: to}
}
