package migrate

import (
	"fmt"
	"time"
)

// PostCopyReport is the account of a migration's post-copy phase: what the
// VM paid for running at the destination before its pages had all
// arrived. A page the VM touched before it arrived is a fault: the VM
// waits for the page to be asked for and sent, the link's round trip plus
// the page's transfer, ahead of the background push. The stun of a
// post-copy migration is short (it sends no page); its cost moves into
// the degradation window that follows, which these fields measure.
type PostCopyReport struct {
	// Start is when the VM resumed at the destination with pages still
	// at the source (the Sim's time), and Window the degradation window:
	// from then until the last page arrived (so far, while it lasts).
	Start  time.Duration `json:"start_ns"`
	Window time.Duration `json:"window_ns"`
	// OwedPages is how many pages the destination lacked when the VM
	// resumed.
	OwedPages int64 `json:"owed_pages"`
	// Pushed is what the source sent in the background; Faulted what the
	// VM pulled by touching pages, Faults of them, in Fetches requests
	// (the pages one host step touched go in one request).
	Pushed  Traffic `json:"pushed"`
	Faulted Traffic `json:"faulted"`
	Faults  int64   `json:"faults"`
	Fetches int64   `json:"fetches"`
	// FaultLatencyP50, P99 and Max are the time a faulting page waited
	// for its page, over every fault.
	FaultLatencyP50 time.Duration `json:"fault_latency_p50_ns"`
	FaultLatencyP99 time.Duration `json:"fault_latency_p99_ns"`
	FaultLatencyMax time.Duration `json:"fault_latency_max_ns"`
	// Stall is the time the VM waited on its faults in all.
	Stall time.Duration `json:"stall_ns"`
	// Paused is the time the destination held the VM paused because the
	// link to the source was lost, until Recover.
	Paused time.Duration `json:"paused_ns"`
}

// postCopyState is the Core's post-copy bookkeeping.
type postCopyState struct {
	rep         PostCopyReport
	latencies   []fetchLatency
	pausedSince time.Duration // valid while paused
	paused      bool
	// pushedAll: every page that follows is on the wire (PushedAll).
	pushedAll bool
	// The latency percentiles as of the first cachedFetches fetches, so
	// that a driver asking for the report at every event pays for them
	// only when a fetch was added.
	cachedFetches  int
	p50, p99, pMax time.Duration
	// measured is the destination's own account of its waits (the live
	// mode's), which replaces the latencies Faulted would have given.
	measured *FaultWaits
}

// FaultWaits is what a destination measured of the faults of a
// post-copy: the live mode's destination times each fault itself, from
// the access that touched an absent page to the page's landing, which the
// source, which only serves the requests, cannot see.
type FaultWaits struct {
	// Faults is the pages the VM touched before they arrived, Fetches
	// the requests it sent for them (one a page: a page in flight is
	// waited for, not asked for twice).
	Faults, Fetches int64
	// P50, P99 and Max are the faults' waits (nearest rank), and Stall
	// their sum.
	P50, P99, Max, Stall time.Duration
}

// fetchLatency is one demand fetch's pages: the k-th (from 0) of n
// waited first + k×step.
type fetchLatency struct {
	n           int64
	first, step time.Duration
}

// percentile returns the p-th percentile (0 < p ≤ 100, nearest rank) of
// every fault's latency, exactly, without keeping one entry a fault: the
// smallest latency x such that at least ⌈p×N/100⌉ faults waited no
// longer.
func percentile(fs []fetchLatency, p int) time.Duration {
	var total int64
	hi := time.Duration(0)
	for _, f := range fs {
		total += f.n
		hi = max(hi, f.first+time.Duration(f.n-1)*f.step)
	}
	if total == 0 {
		return 0
	}
	rank := (total*int64(p) + 99) / 100
	atMost := func(x time.Duration) int64 {
		var c int64
		for _, f := range fs {
			switch {
			case x < f.first:
			case f.step == 0:
				c += f.n
			default:
				c += min(f.n, int64((x-f.first)/f.step)+1)
			}
		}
		return c
	}
	lo := time.Duration(0)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if atMost(mid) >= rank {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// Faulted records at now one demand fetch in post-copy: byRegion[i] the
// pages of region i (guest RAM 0, framebuffer k at k+1) the VM touched
// before they arrived, all asked for in one request; the first page
// arrived after first, each next one step later. stall is how long the
// fetch held the VM up: the last page's wait, or zero if the VM was not
// running (see PostCopyReport).
func (c *Core) Faulted(now time.Duration, byRegion []Traffic, first, step, stall time.Duration) {
	if c.phase != PhasePostCopy || c.post == nil || len(byRegion) > c.cfg.Framebuffers+1 {
		return
	}
	var t Traffic
	for _, r := range byRegion {
		t.Add(r)
	}
	if t.Pages <= 0 {
		return
	}
	pc := c.post
	pc.rep.Faulted.Add(t)
	pc.rep.Faults += t.Pages
	pc.rep.Fetches++
	pc.rep.Stall += max(stall, 0)
	pc.latencies = append(pc.latencies, fetchLatency{n: t.Pages, first: first, step: step})
}

// PushedAll records that every page that follows has been sent: the
// destination may hold the whole VM from then on, though the source cannot
// know it, so a failure after it leaves the VM in doubt (ErrInDoubt) rather
// than lost (see Fail). The live source says it when its second streams
// have ended; the simulator, whose pages arrive on its own clock, never
// needs to.
func (c *Core) PushedAll() {
	if c.phase == PhasePostCopy && c.post != nil {
		c.post.pushedAll = true
	}
}

// Served records pages the source sent ahead of its push because the
// destination asked for them, byRegion as Faulted's: the live mode's
// source, which does not see how long the VM waited (the destination
// reports that with FaultWaits).
func (c *Core) Served(byRegion []Traffic) {
	if c.phase != PhasePostCopy || c.post == nil {
		return
	}
	for _, r := range byRegion {
		c.post.rep.Faulted.Add(r)
	}
}

// FaultWaits records the destination's account of its faults (see
// FaultWaits), which the report gives in place of the counts and
// latencies Faulted would have kept. Negative values count as zero.
func (c *Core) FaultWaits(w FaultWaits) {
	if c.phase != PhasePostCopy || c.post == nil {
		return
	}
	w.Faults, w.Fetches = max(w.Faults, 0), max(w.Fetches, 0)
	w.P50, w.P99, w.Max, w.Stall = max(w.P50, 0), max(w.P99, 0), max(w.Max, 0), max(w.Stall, 0)
	c.post.measured = &w
	c.post.rep.Faults, c.post.rep.Fetches, c.post.rep.Stall = w.Faults, w.Fetches, w.Stall
}

// LinkLost reports at now that the link to the other end was lost, for
// cause. Before post-copy it is a failure like any other (Fail). In
// post-copy the destination cannot serve its faults and cannot give the
// VM back: the answer is DoPauseDestination, and the migration waits for
// LinkRestored — however long, since resuming the VM would run it with
// pages missing and the source's copy is no longer the VM.
func (c *Core) LinkLost(now time.Duration, cause error) Action {
	if c.phase != PhasePostCopy {
		return c.Fail(now, cause)
	}
	pc := c.post
	if !pc.paused {
		pc.paused, pc.pausedSince = true, now
		c.noticeAt(now, fmt.Sprintf("post-copy: %v; the destination pauses the VM until the link returns", cause))
	}
	return Action{Kind: DoPauseDestination}
}

// LinkRestored reports at now that the link lost in post-copy is back:
// the destination resumes the VM as it was before the loss and the pages
// follow again. Anywhere else it is refused with ErrConfig.
func (c *Core) LinkRestored(now time.Duration) (Action, error) {
	if c.phase != PhasePostCopy || !c.post.paused {
		return Action{}, fmt.Errorf("%w: no lost post-copy link to restore in %v", ErrConfig, c.phase)
	}
	pc := c.post
	pc.paused = false
	pc.rep.Paused += now - pc.pausedSince
	c.noticeAt(now, fmt.Sprintf("post-copy: link restored after %v; the VM runs again", now-pc.pausedSince))
	return Action{Kind: DoResumePostCopy}, nil
}

// DestinationPaused reports whether the destination is holding the VM
// paused for a lost link.
func (c *Core) DestinationPaused() bool { return c.post != nil && c.post.paused }

// enterPostCopy starts the post-copy phase at now, owed pages short.
func (c *Core) enterPostCopy(now time.Duration) Action {
	pc := c.post
	pc.rep.Start = now
	c.enter(now, PhasePostCopy, PhaseStarted, fmt.Sprintf("VM runs at the destination; %d pages follow", pc.rep.OwedPages))
	return Action{Kind: DoPostCopy}
}

// Owe records pages that the stun of a post-copy migration left for
// later, for the region whose list it is sending.
func (c *Core) Owe(pages int64) {
	if c.post != nil && (c.phase == PhaseFinalRAM || c.phase == PhaseFinalFramebuffer) {
		c.post.rep.OwedPages += max(pages, 0)
	}
}

// closePostCopy ends the post-copy's account at now: its window and any
// pause for a lost link end there.
func (c *Core) closePostCopy(now time.Duration) {
	pc := c.post
	if pc.paused {
		pc.rep.Paused += now - pc.pausedSince
		pc.paused = false
	}
	pc.rep.Window = now - pc.rep.Start
}

// postCopyReport returns the post-copy account as of now, or nil.
func (c *Core) postCopyReport(now time.Duration) *PostCopyReport {
	if c.post == nil {
		return nil
	}
	r := c.post.rep
	if c.phase == PhasePostCopy {
		r.Window = now - r.Start
		if c.post.paused {
			r.Paused += now - c.post.pausedSince
		}
	}
	pc := c.post
	if fs := pc.latencies; pc.cachedFetches != len(fs) {
		pc.p50, pc.p99, pc.pMax = percentile(fs, 50), percentile(fs, 99), percentile(fs, 100)
		pc.cachedFetches = len(fs)
	}
	r.FaultLatencyP50, r.FaultLatencyP99, r.FaultLatencyMax = pc.p50, pc.p99, pc.pMax
	if w := pc.measured; w != nil {
		r.FaultLatencyP50, r.FaultLatencyP99, r.FaultLatencyMax = w.P50, w.P99, w.Max
	}
	return &r
}
