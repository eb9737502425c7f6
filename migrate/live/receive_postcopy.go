package live

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The destination's post-copy. After the first stream, a source that may
// switch over says which pages follow; the destination marks them absent
// (memory.Region.SetAbsent) before the VM resumes. The second streams then
// land the pages as they come, each marked present once stored
// (memory.Region.Arrive); an access that touches a page before it came
// asks the source for it (fetch) and waits for it to land. When every
// page has landed the destination says so (landed) and the VM is whole.
//
// The failure rule is the Core's: once the VM runs here, neither end
// alone holds all of it. The live mode has no way back to a lost
// connection yet, so a post-copy that fails — a connection lost or
// stalled, a bad stream, a cancel — destroys the copy here, whose pages
// can never all come, and the source keeps its own, as of the stun,
// paused and held in doubt (ErrVMLost at both ends, or ErrInDoubt at the
// source once it sent every page). A VM is never run with a page missing:
// an access waiting for a page fails with the migration
// (memory.AbsentError), and a workload that meets one pauses its VM.

// recvPostCopy is the destination's post-copy state.
type recvPostCopy struct {
	regions []*memory.Region
	owed    []*memory.PageSet // by region: the pages that followed
	pages   int64
	clock   Clock
	// conv is the conversation, whose messages in post-copy — fetches
	// from the accesses' goroutines, then landed — go one at a time,
	// under convMu; none goes after landed (ended).
	conv   *conversation
	convMu sync.Mutex
	ended  bool
	stop   func() // closes the connections, on a failure of the accesses' own
	// timeout bounds an access's wait for a page it asked for.
	timeout time.Duration
	// ids are the second streams' ids, drawn from the conversation up
	// to the resume's acknowledgement; acked is closed once they are
	// (ready), and no fetch goes before.
	ids       [][checkpoint.StreamIDSize]byte
	acked     chan struct{}
	ackedOnce sync.Once

	mu sync.Mutex
	// accepted holds, by region, the pages the second streams brought
	// to be stored (accept), and landed those stored (applied); waiting
	// the accesses waiting for a page not yet landed, by region and page.
	accepted, landed []*memory.PageSet
	count            int64
	waiting          map[[2]int]chan struct{}
	fetched          []*memory.PageSet // the pages asked for
	err              error             // the post-copy's failure, once it failed
	// What the destination measured: each fault's wait, their sum, the
	// requests sent, and the traffic of the pages landed, fetched or not.
	waits           []time.Duration
	stall           time.Duration
	fetches         int64
	pushed, faulted migrate.Traffic
	lastWire        int64
	start           time.Duration
}

// readOwed reads, after the first stream of a source that may switch over
// into post-copy, the list of the pages that follow; none means the
// migration converged.
func (r *receiver) readOwed() error {
	var o owed
	if err := r.conv.read(msgOwed, &o); err != nil {
		return err
	}
	regs := r.regions()
	sizes := make([]int, len(regs))
	var maxChunks int
	for i, reg := range regs {
		sizes[i] = reg.Pages()
		maxChunks += (reg.Pages() + 8*owedChunkBits - 1) / (8 * owedChunkBits)
	}
	if o.Pages < 0 || o.Chunks < 0 || o.Chunks > maxChunks || (o.Pages == 0) != (o.Chunks == 0) {
		return fmt.Errorf("%w: a list of %d pages in %d bitmaps, for regions that take %d", migrate.ErrStream, o.Pages, o.Chunks, maxChunks)
	}
	if o.Pages == 0 {
		return nil
	}
	rd := newOwedReader(sizes)
	for range o.Chunks {
		body, err := r.conv.readRaw(msgOwedBits)
		if err != nil {
			return err
		}
		if err := rd.add(body); err != nil {
			return err
		}
	}
	if err := rd.done(o.Pages); err != nil {
		return err
	}
	pc := &recvPostCopy{regions: regs, owed: rd.sets, pages: o.Pages, clock: r.cfg.Clock, timeout: r.cfg.Timeout,
		waiting: make(map[[2]int]chan struct{}), acked: make(chan struct{})}
	for _, reg := range regs {
		pc.accepted = append(pc.accepted, memory.NewPageSet(reg.Pages()))
		pc.landed = append(pc.landed, memory.NewPageSet(reg.Pages()))
		pc.fetched = append(pc.fetched, memory.NewPageSet(reg.Pages()))
	}
	pc.conv, pc.stop = r.conv, r.conns.closeAll
	r.post = pc
	r.rep.PostCopy = &migrate.PostCopyReport{OwedPages: o.Pages}
	return nil
}

// regions are the incoming VM's regions, guest RAM first.
func (r *receiver) regions() []*memory.Region {
	return append([]*memory.Region{r.in.RAM()}, r.in.Framebuffers()...)
}

// markAbsent has the regions hold the pages that follow absent, before the
// VM resumes.
func (r *receiver) markAbsent() error {
	pc := r.post
	for i, reg := range pc.regions {
		if err := reg.SetAbsent(pc.owed[i], pc.fault(i)); err != nil {
			return wrap(migrate.ErrDestination, err)
		}
	}
	return nil
}

// fault is region i's fault function: it asks the source for the page,
// unless it has landed meanwhile, and waits for it to land.
func (pc *recvPostCopy) fault(i int) memory.FaultFunc {
	return func(p int) error {
		start := pc.clock.Now()
		pc.mu.Lock()
		if pc.err != nil {
			pc.mu.Unlock()
			return pc.err
		}
		if pc.landed[i].Has(p) {
			// Landed while the access came: Arrive left it to the
			// access to mark present.
			pc.mu.Unlock()
			return nil
		}
		key := [2]int{i, p}
		ch := pc.waiting[key]
		if ch == nil {
			ch = make(chan struct{})
			pc.waiting[key] = ch
		}
		// PageSet.Add reports a page in range, not one new to the set.
		ask := !pc.fetched[i].Has(p)
		if ask {
			pc.fetched[i].Add(p)
			pc.fetches++
		}
		pc.mu.Unlock()
		if ask {
			<-pc.acked
			if err := pc.write(msgFetch, fetch{Region: i, Page: p}, false); err != nil {
				pc.fail(fmt.Errorf("%w: asking for page %d of region %d: %w", migrate.ErrConnection, p, i, err))
				pc.stop() // the streams' reads fail too
			}
		}
		// A source that goes on pushing other pages but never this one
		// would hold the access, and the host it runs on, for ever.
		timer := time.NewTimer(pc.timeout)
		select {
		case <-ch:
		case <-timer.C:
			// The page may have landed as the timer fired: only a page
			// still missing fails the migration.
			pc.mu.Lock()
			late := !pc.landed[i].Has(p)
			if late {
				pc.failLocked(fmt.Errorf("%w: page %d of region %d, asked for, did not come within %v", migrate.ErrConnection, p, i, pc.timeout))
			}
			pc.mu.Unlock()
			if late {
				pc.stop()
			}
		}
		timer.Stop()
		pc.mu.Lock()
		defer pc.mu.Unlock()
		if !pc.landed[i].Has(p) {
			return pc.err
		}
		wait := pc.clock.Now().Sub(start)
		pc.waits = append(pc.waits, wait)
		pc.stall += wait
		return nil
	}
}

// write writes one message of the post-copy; last ends them, and a
// message after it is dropped: a fetch for a page that landed meanwhile.
func (pc *recvPostCopy) write(typ msgType, v any, last bool) error {
	pc.convMu.Lock()
	defer pc.convMu.Unlock()
	if pc.ended {
		return nil
	}
	pc.mu.Lock()
	err := pc.err
	pc.mu.Unlock()
	if err != nil {
		return err // the connections are closing
	}
	pc.ended = last
	return pc.conv.write(typ, v)
}

// accept takes a batch of the second streams before its pages are
// stored (checkpoint.ParallelOptions.Accept): a page that did not follow,
// or came already, would overwrite what the VM wrote since, so the source
// broke the protocol, and the batch is refused and the migration fails.
// Each page accepted is stored once.
func (pc *recvPostCopy) accept(region uint32, indexes []int) error {
	i := int(region)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.err != nil {
		// Failed already: the batch is let go, as a stopped applier's
		// are, not refused as one the source got wrong.
		return context.Canceled
	}
	for _, p := range indexes {
		if !pc.owed[i].Has(p) || pc.accepted[i].Has(p) {
			err := fmt.Errorf("%w: page %d of region %d came in post-copy, and did not follow or came already", migrate.ErrStream, p, i)
			pc.failLocked(err)
			return err
		}
	}
	for _, p := range indexes {
		pc.accepted[i].Add(p)
	}
	return nil
}

// applied lands the pages of a batch of the second streams, accepted and
// stored by now: each is marked present, and the accesses waiting for it
// go on.
func (pc *recvPostCopy) applied(a checkpoint.Applied) {
	if a.Type != checkpoint.RecordPageBatch {
		return
	}
	i := int(a.Region)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.err != nil {
		return
	}
	var fetched int
	for _, p := range a.Indexes {
		pc.landed[i].Add(p)
		pc.count++
		pc.regions[i].Arrive(p)
		if pc.fetched[i].Has(p) {
			fetched++
		}
		key := [2]int{i, p}
		if ch := pc.waiting[key]; ch != nil {
			close(ch)
			delete(pc.waiting, key)
		}
	}
	pageBytes := int64(pc.regions[i].PageSize())
	wire := a.WireBytes - pc.lastWire
	pc.lastWire = a.WireBytes
	n := int64(len(a.Indexes))
	f := int64(fetched)
	pc.faulted.Add(migrate.Traffic{Pages: f, RawBytes: f * pageBytes, WireBytes: wire * f / n})
	pc.pushed.Add(migrate.Traffic{Pages: n - f, ZeroPages: int64(a.ZeroPages), RawBytes: (n - f) * pageBytes, WireBytes: wire - wire*f/n})
}

// errStreamsFailed is the failure the waiting accesses get when the
// second streams fail: the streams' own error says why.
var errStreamsFailed = fmt.Errorf("%w: the post-copy's streams failed", migrate.ErrStream)

// cause returns the post-copy's failure, if any.
func (pc *recvPostCopy) cause() error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.err
}

// fail fails the post-copy for cause: the accesses waiting for a page, and
// those to come, fail with it.
func (pc *recvPostCopy) fail(cause error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.failLocked(cause)
}

func (pc *recvPostCopy) failLocked(cause error) {
	if pc.err != nil {
		return
	}
	pc.err = cause
	for key, ch := range pc.waiting {
		close(ch)
		delete(pc.waiting, key)
	}
}

// ready lets the fetches go once the resume's acknowledgement was written
// (err nil; otherwise the post-copy has failed, and so does every access
// that waits for a page): the second streams' ids are drawn from the
// conversation up to it, before any fetch changes the conversation.
func (pc *recvPostCopy) ready(t *transcript, caller uint64, conns int, err error) {
	if err == nil {
		for i := range conns {
			pc.ids = append(pc.ids, t.streamID(caller, postCopyStreamIndex(i)))
		}
	} else {
		pc.fail(fmt.Errorf("%w: acknowledging the resume: %w", migrate.ErrConnection, err))
	}
	pc.ackedOnce.Do(func() { close(pc.acked) })
}

// postCopy lands the pages of the second streams, one on each connection,
// until every page that followed has, tells the source, and gives the VM
// its whole memory back. The streams open and are applied before and
// while the VM is handed to the caller's OnResume, so that an access
// there (a workload's start, say) that waits for a page never waits on
// OnResume's return, nor does the source's word.
func (r *receiver) postCopy() error {
	pc := r.post
	pc.start = r.since()
	r.rep.PostCopy.Start = pc.start
	r.prog.emit(migrate.Event{Kind: migrate.PhaseStarted, At: pc.start, Phase: migrate.PhasePostCopy, Round: -1, WireBytes: r.wire(),
		Detail: fmt.Sprintf("VM runs at the destination; %d pages follow", pc.pages)})
	pa, err := r.openPostCopyStreams()
	if err != nil {
		return err
	}
	r.postPA, pc.lastWire = pa, pa.Offset()
	type landing struct {
		acct postCopyAccount
		err  error
	}
	ran := make(chan landing, 1)
	go func() {
		acct, err := r.landAll(pa)
		ran <- landing{acct, err}
	}()
	r.onResume()
	res := <-ran
	if res.err != nil {
		return res.err
	}
	r.cfg.Lock.Lock()
	for _, reg := range pc.regions {
		_ = reg.SetAbsent(nil, nil)
	}
	r.claim.Release()
	r.claim = nil
	r.cfg.Lock.Unlock()
	r.rep.PostCopy = res.acct.report
	return nil
}

// landAll applies the second streams to their end, checks that every page
// that followed has landed, and says so to the source. A failure fails
// every access waiting for a page at once.
func (r *receiver) landAll(pa *checkpoint.ParallelApplier) (postCopyAccount, error) {
	pc := r.post
	if err := pa.Run(r.ctx); err != nil {
		pc.fail(fmt.Errorf("%w: %w", migrate.ErrStream, err))
		if cause := pc.cause(); cause != nil && !errors.Is(cause, errStreamsFailed) {
			// An access failed first (its fetch, or its wait), and
			// closed the connections the streams then failed on.
			return postCopyAccount{}, cause
		}
		return postCopyAccount{}, wrap(migrate.ErrStream, err)
	}
	if err := pa.Commit(); err != nil {
		pc.fail(fmt.Errorf("%w: %w", migrate.ErrStream, err))
		return postCopyAccount{}, wrap(migrate.ErrStream, err)
	}
	pc.mu.Lock()
	if pc.err == nil && pc.count != pc.pages {
		pc.failLocked(fmt.Errorf("%w: the post-copy streams ended with %d of %d pages landed", migrate.ErrStream, pc.count, pc.pages))
	}
	err := pc.err
	pc.mu.Unlock()
	if err != nil {
		return postCopyAccount{}, err
	}
	acct := pc.account(r.since())
	w := acct.waits
	l := landed{Faults: w.Faults, Fetches: w.Fetches, P50NS: int64(w.P50), P99NS: int64(w.P99), MaxNS: int64(w.Max), StallNS: int64(w.Stall)}
	if err := pc.write(msgLanded, l, true); err != nil && r.cfg.Logger != nil {
		// Every page is here: the VM is whole, whatever the source heard.
		r.cfg.Logger.Warn("migrate: telling the source every page landed", "vm", r.rep.VM, "error", err)
	}
	return acct, nil
}

// postCopyAccount is the destination's account of a post-copy.
type postCopyAccount struct {
	waits  migrate.FaultWaits
	report *migrate.PostCopyReport
}

// account is the post-copy's account as of now.
func (pc *recvPostCopy) account(now time.Duration) postCopyAccount {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	w := migrate.FaultWaits{Faults: int64(len(pc.waits)), Fetches: pc.fetches, Stall: pc.stall}
	if len(pc.waits) > 0 {
		sorted := slices.Sorted(slices.Values(pc.waits))
		w.P50, w.P99, w.Max = vgpu.Percentile(sorted, 50), vgpu.Percentile(sorted, 99), sorted[len(sorted)-1]
	}
	rep := &migrate.PostCopyReport{Start: pc.start, Window: now - pc.start, OwedPages: pc.pages, Pushed: pc.pushed, Faulted: pc.faulted,
		Faults: w.Faults, Fetches: w.Fetches, FaultLatencyP50: w.P50, FaultLatencyP99: w.P99, FaultLatencyMax: w.Max, Stall: w.Stall}
	return postCopyAccount{waits: w, report: rep}
}

// openPostCopyStreams opens the second stream on every connection, each
// with the id and key the conversation so far gives it, into the regions
// as the first streams left them.
func (r *receiver) openPostCopyStreams() (*checkpoint.ParallelApplier, error) {
	opts := checkpoint.ReaderOptions{Limits: r.lim}
	streams := make([]checkpoint.ParallelStream, len(r.data))
	for i, d := range r.data {
		streams[i].R = d
		if r.cfg.EncryptionKey != nil {
			opts.Encryption = checkpoint.EncryptionRequired
			var err error
			if streams[i].Key, err = r.conv.t.keys.streamKey(postCopyStreamIndex(i)); err != nil {
				return nil, err
			}
		}
	}
	regs := r.post.regions
	refs := make([]checkpoint.RegionRef, len(regs))
	for i, reg := range regs {
		refs[i] = checkpoint.RegionRef{ID: uint32(i), Region: reg}
	}
	// The first failure fails the accesses waiting for pages at once,
	// before anything else happens; the regions, on which the VM runs,
	// are left as they are (Continue).
	stop := func() {
		r.post.fail(errStreamsFailed)
		r.conns.closeAll()
	}
	popts := checkpoint.ParallelOptions{Workers: r.cfg.Workers, InFlight: r.cfg.InFlight, Stop: stop,
		Accept: r.post.accept, Applied: r.post.applied, Continue: true}
	pa, err := checkpoint.NewParallelApplier(streams, opts, refs, popts)
	if err != nil {
		return nil, wrap(migrate.ErrStream, err)
	}
	if meta, first := pa.Metadata(), r.pa.Metadata(); meta.VMID != first.VMID || !slices.Equal(meta.Regions, first.Regions) {
		_ = pa.Close()
		return nil, fmt.Errorf("%w: the post-copy streams declare VM %q, the first %q", migrate.ErrStream, meta.VMID, first.VMID)
	}
	for i := range streams {
		if pa.Header(i).StreamID != r.post.ids[i] {
			_ = pa.Close()
			return nil, fmt.Errorf("%w: post-copy stream %d's id is not this migration's", migrate.ErrAuthentication, i)
		}
	}
	return pa, nil
}

// strand ends a post-copy that failed: the copy here lacks pages that can
// never come, so it is paused and destroyed, under the host's lock; the
// source keeps its own, paused and held in doubt. The report keeps the
// post-copy's account up to the failure.
func (r *receiver) strand() {
	pc := r.post
	pc.fail(fmt.Errorf("%w: the post-copy failed", migrate.ErrVMLost))
	// An access waiting to ask for a page goes on, and fails.
	pc.ackedOnce.Do(func() { close(pc.acked) })
	if r.postPA != nil {
		// The post-copy began: its account up to the failure.
		r.rep.PostCopy = pc.account(r.since()).report
	}
	if r.postPA != nil {
		_ = r.postPA.Close()
	}
	r.cfg.Lock.Lock()
	if r.claim != nil {
		_ = r.claim.Pause()
		_ = r.claim.Destroy()
	} else {
		_ = r.in.Destroy()
	}
	r.cfg.Lock.Unlock()
	r.claim, r.in = nil, nil
}
