package migrate

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The simulator's post-copy. The stun sends the list of the pages that
// follow (a bit a page of every region: QEMU sends its discard bitmap, a
// bitmap bounds it); the destination marks them absent
// (memory.Region.SetAbsent) and resumes the VM. A second stream then
// pushes the absent pages in region and page order, a few batches a
// transfer; each page lands at the destination when its push is
// written, as the first stream's pages do, and stops being absent when
// the push arrives on the Sim's clock. A page the VM touches while it is
// absent faults: the fault lands the source's page at once, so that the
// VM's access sees it (the source is paused: its pages are final), and
// is charged after the host step it fell in as a demand fetch — the
// link's round trip and the fetched pages' transfer, ahead of the push,
// which waits behind it — during which the VM is stalled
// (vgpu.VM.Stall). A stall begins at the end of that host step, so its
// start is as fine as the Sim's steps, a push transfer's time at most.

// pushBatches is how many batches of Config.BatchBytes one push transfer
// carries: more make fewer, longer transfers and fewer Sim steps; fewer
// make a fault's stall start closer to the fault.
const pushBatches = 4

// postCopyRun is a migration's post-copy.
type postCopyRun struct {
	owed    []*memory.PageSet // by region: the pages the stun left for later
	xfer    transport         // the post-copy stream; nil until the VM resumed
	chunk   []*memory.PageSet // by region: the push on the wire
	pushed  [][]int           // by region: the same pages, listed
	region  int               // where the push goes on from
	page    int
	faulted [][]int // by region: pages the VM touched since the last fetch
	claim   *vgpu.MigrationClaim
	paused  bool // the link is lost and the destination was running: we paused it
	buf     []byte
	pending int64 // bytes on the wire outside the streams, not yet transferred
	wire    int64 // all of them: page lists and demand fetches
}

// clearChunks empties the push's page sets by its list: a push holds a
// few batches of pages, and a region's whole set may be megabytes.
func (pc *postCopyRun) clearChunks() {
	for i, ps := range pc.pushed {
		for _, p := range ps {
			pc.chunk[i].Remove(p)
		}
		pc.pushed[i] = ps[:0]
	}
}

// pageListBytes is the wire size of the list of a region's pages that
// follow: a bit a page.
func pageListBytes(pages int) int64 { return (int64(pages) + 7) / 8 }

// PostCopyListBytes is what the lists of the pages that follow take for
// every region of vm, a bit a page (CoreConfig.PageListBytes): the
// simulated and the live mode's page lists alike.
func PostCopyListBytes(vm *vgpu.VM) int64 {
	n := pageListBytes(vm.RAM().Pages())
	for _, fb := range vm.Framebuffers() {
		n += pageListBytes(fb.Pages())
	}
	return n
}

// OwedPages is the stun's step of a post-copy migration for source region
// src, whose pages to send are set (nil: every page in use, as
// Source.SendRegions gives them): the pages that follow in post-copy
// instead, a set of the caller's own, and the traffic of their list, a
// bit a page of the region.
func OwedPages(src *memory.Region, set *memory.PageSet) (*memory.PageSet, Traffic, error) {
	var owed *memory.PageSet
	if set == nil {
		owed = memory.NewPageSet(src.Pages())
		if err := src.UsedPages(owed); err != nil {
			return nil, Traffic{}, wrap(ErrSource, err)
		}
	} else {
		owed = set.Clone()
	}
	return owed, Traffic{WireBytes: pageListBytes(src.Pages())}, nil
}

// sendPageList is the stun's step of a post-copy migration for the
// regions of a: it sends the list of their pages that follow (those still
// dirty, or, before any round, all in use) instead of the pages.
func (m *Migration) sendPageList(a Action) error {
	if m.post == nil {
		n := len(m.srcRegs)
		m.post = &postCopyRun{owed: make([]*memory.PageSet, n), chunk: make([]*memory.PageSet, n), pushed: make([][]int, n), faulted: make([][]int, n)}
	}
	pc := m.post
	list := func(i int, set *memory.PageSet) (Traffic, error) {
		owed, t, err := OwedPages(m.srcRegs[i], set)
		if err != nil {
			return t, err
		}
		pc.owed[i] = owed
		m.core.Owe(int64(owed.Len()))
		return t, nil
	}
	var sum Traffic
	sent := func(i int, t Traffic) { m.core.Sent(i, t); sum.Add(t) }
	if err := m.src.SendRegions(a.First, a.Regions, a.AllInUse, list, sent); err != nil {
		return err
	}
	pc.pending += sum.WireBytes
	pc.wire += sum.WireBytes
	m.core.PagesQueued()
	m.transfer(0)
	return nil
}

// markAbsent has the destination's regions hold the pages that follow
// absent, before the VM resumes there.
func (m *Migration) markAbsent() error {
	for i, r := range m.dstRegs {
		if err := r.SetAbsent(m.post.owed[i], m.faultFunc(i)); err != nil {
			return wrap(ErrDestination, err)
		}
	}
	return nil
}

// faultFunc lands page p of region i from the source when the VM touches
// it absent, and keeps it for the next fetch's account. It runs on the
// destination host's goroutine, inside its step; the source's VM is
// paused, so its pages are final and only read.
func (m *Migration) faultFunc(i int) memory.FaultFunc {
	return func(p int) error {
		pc := m.post
		if m.core.DestinationPaused() {
			// The source cannot be reached: an access to a page that has
			// not come (the owner's, of the paused VM) fails.
			return fmt.Errorf("%w: page %d of region %d is at the source, and the link is lost", ErrConnection, p, i)
		}
		if err := landPage(m.dstRegs[i], m.srcRegs[i], p, &pc.buf); err != nil {
			return err
		}
		pc.faulted[i] = append(pc.faulted[i], p)
		return nil
	}
}

// landPage stores page p of src in dst: by class and generation if
// generated, as StoreGeneratedFrom does, by its bytes if not.
func landPage(dst, src *memory.Region, p int, buf *[]byte) error {
	st, err := src.PageState(p)
	if err != nil {
		return wrap(ErrSource, err)
	}
	if st.Class.Generated() {
		return wrap0(ErrDestination, dst.StoreGenerated(p, st.Class, st.Gen))
	}
	return copyBytes(dst, src, p, buf)
}

// startPostCopy begins the post-copy once the VM runs at the
// destination: its claim there, which keeps other migrations off a VM
// whose pages have not all come, and the push's stream.
func (m *Migration) startPostCopy() error {
	pc := m.post
	claim, err := m.in.ClaimMigration()
	if err != nil {
		return wrap(ErrDestination, err)
	}
	pc.claim = claim
	var xfer transport
	if m.cfg.Fidelity == Bytes {
		xfer, err = newByteTransport(m, true)
	} else {
		xfer, err = newModelTransport(m, &m.sim.costs, true)
	}
	if err != nil {
		return err
	}
	pc.xfer = xfer
	for i, r := range m.dstRegs {
		pc.chunk[i] = memory.NewPageSet(r.Pages())
	}
	return m.pushNext()
}

// pushNext sends the next pages the destination lacks, up to pushBatches
// batches, from where the last push ended; past the last region it starts
// again from the first, for pages whose push a lost link took. With none
// left it schedules the end of the post-copy.
func (m *Migration) pushNext() error {
	pc := m.post
	budget := int64(pushBatches) * int64(m.cfg.BatchBytes)
	sent := false
	for pass := 0; pass < 2 && !sent; pass++ {
		for ; pc.region < len(m.dstRegs) && budget > 0; pc.region, pc.page = pc.region+1, 0 {
			i, dst, owed, chunk := pc.region, m.dstRegs[pc.region], pc.owed[pc.region], pc.chunk[pc.region]
			n := 0
			for p := owed.Next(pc.page); p >= 0 && budget > 0; p = owed.Next(p + 1) {
				pc.page = p + 1
				if dst.Absent(p) {
					chunk.Add(p)
					pc.pushed[i] = append(pc.pushed[i], p)
					budget -= int64(dst.PageSize())
					n++
				}
			}
			if n > 0 {
				t, err := pc.xfer.send(i, chunk)
				if err != nil {
					return err
				}
				m.core.Sent(i, t)
				sent = true
			}
			if budget <= 0 {
				break
			}
		}
		if !sent {
			if m.absentLeft() == 0 {
				break
			}
			pc.region, pc.page = 0, 0
		}
	}
	if err := pc.xfer.endRound(); err != nil {
		return err
	}
	if err := pc.xfer.deliver(); err != nil {
		return wrap(ErrStream, err)
	}
	n := pc.xfer.pending()
	pc.xfer.markSent()
	if n == 0 {
		m.setTimer(m.sim.now)
		return nil
	}
	// A demand fetch on the wire goes first: the push waits behind it.
	m.sim.net.extend(m.flow, n)
	m.transferring = true
	return nil
}

// absentLeft counts the pages the destination still lacks.
func (m *Migration) absentLeft() int {
	n := 0
	for _, r := range m.dstRegs {
		n += r.AbsentPages()
	}
	return n
}

// pushArrived takes in the push that arrived and reports whether every
// page has; if not, the next push is on its way.
func (m *Migration) pushArrived() (bool, error) {
	pc := m.post
	for i, ps := range pc.pushed {
		for _, p := range ps {
			m.dstRegs[i].Arrive(p)
		}
	}
	pc.clearChunks()
	if m.absentLeft() > 0 {
		return false, m.pushNext()
	}
	if err := pc.xfer.finish(nil); err != nil {
		return false, err
	}
	// The end of the stream is counted in the wire bytes but not waited
	// for: it carries no page.
	pc.xfer.markSent()
	if err := pc.xfer.deliver(); err != nil {
		return false, wrap(ErrStream, err)
	}
	if err := pc.xfer.commit(); err != nil {
		return false, err
	}
	for _, r := range m.dstRegs {
		_ = r.SetAbsent(nil, nil)
	}
	pc.claim.Release()
	return true, nil
}

// serveFaults charges, after a host step, the pages the VM touched absent
// in it: one demand fetch, the link's round trip and the pages' transfer,
// ahead of the push, which waits behind it; the VM is stalled for it.
func (m *Migration) serveFaults() error {
	pc := m.post
	if pc == nil || m.core.Phase() != PhasePostCopy {
		return nil
	}
	traffic := make([]Traffic, len(pc.faulted))
	var pages, wire int64
	for i, ps := range pc.faulted {
		if len(ps) == 0 {
			continue
		}
		t, err := m.fetchTraffic(i, ps)
		if err != nil {
			return err
		}
		traffic[i] = t
		pages += t.Pages
		wire += t.WireBytes
		pc.faulted[i] = ps[:0]
	}
	if pages == 0 {
		return nil
	}
	pc.wire += wire
	m.sim.net.extend(m.flow, wire)
	rate := m.flow.rate // with the fetch on the flow: its share of the path now
	if rate <= 0 {
		rate = m.cfg.goodput()
	}
	rtt := 2 * m.cfg.latency()
	step := transferTime(scaleBytes(wire, 1, pages), rate)
	wait := rtt + transferTime(wire, rate)
	stall := time.Duration(0)
	if m.in.State() == vgpu.VMRunning {
		if err := m.in.Stall(wait); err != nil {
			return wrap(ErrDestination, err)
		}
		stall = wait
	}
	m.core.Faulted(m.sim.now, traffic, rtt+step, step, stall)
	return nil
}

// fetchTraffic sizes a demand fetch of region i's pages as the switchover
// sizes dirty pages (Pages): by their classes at the migration's
// encoding, pages of explicit bytes at the wire ratio pre-copy measured.
func (m *Migration) fetchTraffic(i int, pages []int) (Traffic, error) {
	src := m.srcRegs[i]
	var counts [memory.ClassExplicit + 1]int64
	for _, p := range pages {
		st, err := src.PageState(p)
		if err != nil {
			return Traffic{}, wrap(ErrSource, err)
		}
		counts[min(st.Class, memory.ClassExplicit)]++
	}
	var size Pages
	if err := size.add(&counts, src.PageSize(), m.post.xfer.predictWire); err != nil {
		return Traffic{}, err
	}
	n := int64(len(pages))
	return Traffic{Pages: n, ZeroPages: counts[memory.ClassZero], RawBytes: size.RawBytes, WireBytes: size.wire(m.core.wireRatio())}, nil
}

// linkLost is the migration's connection lost for cause: before the
// post-copy it fails; in it the destination pauses the VM and everything
// waits for Recover.
func (m *Migration) linkLost(cause error) {
	a := m.core.LinkLost(m.sim.now, cause)
	if a.Kind != DoPauseDestination {
		m.rollBack(a)
		m.publish()
		return
	}
	m.transferring, m.timerSet, m.linkStalled = false, false, false
	m.sim.net.start(m.flow, 0, 0)
	pc := m.post
	// The push on the wire is lost; its pages stay absent and go again
	// after Recover.
	pc.clearChunks()
	if !pc.paused && m.in.State() == vgpu.VMRunning {
		if err := pc.claim.Pause(); err == nil {
			pc.paused = true
		}
	}
	// Held: the owner cannot resume a VM whose pages cannot come.
	_ = pc.claim.Hold()
	m.publish()
}

// Recover says that the link of a post-copy migration whose destination
// paused for its loss (FaultLinkDown, FaultLinkStall) is back: the
// destination resumes the VM if it ran before, and the pages follow
// again. Anywhere else it is refused with ErrConfig. A caller whose link
// will not come back ends the wait by saying which end is gone
// (FaultDestinationGone, FaultSourceGone): the VM is then lost.
func (m *Migration) Recover() error {
	a, err := m.core.LinkRestored(m.sim.now)
	if err != nil {
		return err
	}
	defer m.publish()
	if a.Kind != DoResumePostCopy {
		return nil
	}
	pc := m.post
	// A fresh claim: the hold of the old one cannot be undone.
	pc.claim.Release()
	claim, err := m.in.ClaimMigration()
	if err != nil {
		m.fail(wrap(ErrDestination, err))
		return m.core.Err()
	}
	pc.claim = claim
	if pc.paused {
		pc.paused = false
		if err := claim.Resume(); err != nil {
			m.fail(wrap(ErrDestination, err))
			return m.core.Err()
		}
	}
	if err := m.pushNext(); err != nil {
		m.fail(err)
		return m.core.Err()
	}
	return nil
}

// strand is a post-copy migration that failed (DoStrand): the VM is lost.
// The destination's copy lacks pages that no end can give it any more, so
// it is destroyed, its workload handed back to the source's copy first.
// The source's copy, whole as of the stun but older than what ran at the
// destination, stays paused and held as one in doubt
// (vgpu.VM.ResolveMigration: false gives it back, a rollback to the stun;
// true destroys it), unless the failure took it (sourceGone). A VM is
// never resumed with a page missing.
func (m *Migration) strand(sourceGone bool) {
	pc := m.post
	m.transferring = false
	m.sim.net.start(m.flow, 0, 0)
	m.xfer.close()
	if pc.xfer != nil {
		pc.xfer.close()
	}
	if m.in.State() != vgpu.VMDestroyed {
		if m.in.State() == vgpu.VMRunning && pc.claim != nil {
			_ = pc.claim.Pause()
		}
		_ = m.giveBack()
		if pc.claim != nil {
			_ = pc.claim.Destroy()
		} else {
			_ = m.in.Destroy()
		}
	}
	if sourceGone {
		_ = m.src.Release()
	} else {
		m.src.RollBack(true)
	}
	m.finish()
}

// sourceGone is FaultSourceGone: in post-copy the VM is lost; before it,
// refused.
func (m *Migration) sourceGone() error {
	if m.core.Phase() != PhasePostCopy {
		return fmt.Errorf("%w: %v applies in post-copy, not in %v", ErrConfig, FaultSourceGone, m.core.Phase())
	}
	a := m.core.Fail(m.sim.now, fmt.Errorf("%w: the process on %s ended with pages the destination lacks", ErrSource, m.srcHost.Name()))
	if a.Kind == DoStrand {
		m.strand(true)
	}
	m.publish()
	return nil
}
