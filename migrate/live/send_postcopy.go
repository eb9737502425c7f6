package live

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
)

// The source's post-copy. The stun sends, instead of the last dirty
// pages, their list (owed); once the destination runs the VM, a second
// stream on every connection carries them, each page once: the pages the
// destination asks for (fetch) go ahead of the next push, and a fetch of
// a page already sent is only counted, since the page is on its way. A
// goroutine reads the fetches from the first connection while the sender
// pushes; the migration ends when the destination says every page landed.

// fetchQueue bounds the fetches read and not yet served: a destination
// that asks faster waits on the connection's flow control.
const fetchQueue = 1024

// postCopyStreamIndex is the index of connection i's post-copy stream,
// from which its id and key are drawn: past those of the first streams.
func postCopyStreamIndex(i int) int { return maxConnections + i }

// sendPostCopy is the source's post-copy state.
type sendPostCopy struct {
	// left holds, by region, the pages not yet sent; owedAtStart all
	// that followed, which the destination may ask for.
	left, owedAtStart []*memory.PageSet
	owedPages         int64
	// firstWire is the first stream's bytes, once the second replaced it.
	firstWire int64
	// scratch holds, by region, the pages of the next copy, and listed
	// the same pages, so that clearing a set costs its pages, not its
	// capacity.
	scratch []*memory.PageSet
	listed  [][]int
}

// owePages is the stun's step of a post-copy migration for the regions of
// a: it keeps the list of their pages that follow instead of sending them
// (their list goes after the first stream, sendOwed).
func (s *sender) owePages(a migrate.Action) error {
	regs := s.src.Regions()
	if s.post == nil {
		n := len(regs)
		s.post = &sendPostCopy{left: make([]*memory.PageSet, n), owedAtStart: make([]*memory.PageSet, n),
			scratch: make([]*memory.PageSet, n), listed: make([][]int, n)}
	}
	pc := s.post
	list := func(i int, set *memory.PageSet) (migrate.Traffic, error) {
		owed, t, err := migrate.OwedPages(regs[i], set)
		if err != nil {
			return t, err
		}
		pc.left[i], pc.owedAtStart[i] = owed, owed.Clone()
		pc.scratch[i] = memory.NewPageSet(regs[i].Pages())
		pc.owedPages += int64(owed.Len())
		s.core.Owe(int64(owed.Len()))
		return t, nil
	}
	if err := s.src.SendRegions(a.First, a.Regions, a.AllInUse, list, s.core.Sent); err != nil {
		return err
	}
	s.core.PagesQueued()
	return nil
}

// postCopying reports whether pages follow the stun in post-copy: the
// Core switched over into it, and some page was left.
func (s *sender) postCopying() bool { return s.post != nil && s.post.owedPages > 0 }

// sendOwed sends, after the first stream, the list of the pages that
// follow: none if the migration did not switch over into post-copy.
func (s *sender) sendOwed() error {
	var sets []*memory.PageSet
	if s.post != nil {
		sets = s.post.left
	}
	chunks, pages := owedChunks(sets)
	if pages == 0 {
		chunks = nil // nothing follows: the stream ended with its digests
	}
	if err := s.conv.write(msgOwed, owed{Pages: pages, Chunks: len(chunks)}); err != nil {
		return err
	}
	for _, c := range chunks {
		if err := s.conv.writeRaw(msgOwedBits, c.encode()); err != nil {
			return err
		}
	}
	return nil
}

// postCopy runs the post-copy once the destination runs the VM: it opens
// the second streams, pushes every page that follows, serving the
// destination's fetches first, ends the streams and waits for the
// destination's word that every page landed.
func (s *sender) postCopy() error {
	if !s.postCopying() {
		return nil // the stun left no page: the VM is whole at the destination
	}
	if err := s.openPostCopyStreams(); err != nil {
		return err
	}
	// The fetches come when the VM touches a page, which may be seldom:
	// the first connection's reads wait on the VM, not on a slow peer,
	// and the pushes' writes bound the peer meanwhile.
	s.conns[0].untimedReads(true)
	g, ctx := errgroup.WithContext(s.ctx)
	fetches := make(chan fetch, fetchQueue)
	done := make(chan landed, 1)
	// The first failure is the cause. It closes the connections, so that
	// the other goroutine's reads and writes return at once, and their
	// failure on a connection closed under them must not stand for it.
	var (
		causeOnce sync.Once
		cause     error
	)
	fail := func(err error) error {
		causeOnce.Do(func() { cause = err })
		s.conns.closeAll()
		return err
	}
	g.Go(func() error {
		defer close(fetches)
		if err := s.readFetches(ctx, fetches, done); err != nil {
			return fail(err)
		}
		return nil
	})
	g.Go(func() error {
		if err := s.push(ctx, fetches); err != nil {
			return fail(err)
		}
		// The destination may have every page from here on.
		s.core.PushedAll()
		// Every page is on the wire: the fetches still coming are for
		// pages on their way, and the destination's word comes once they
		// landed, within the timeout.
		s.conns[0].untimedReads(false)
		for range fetches {
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return cause
	}
	select {
	case l := <-done:
		s.core.FaultWaits(migrate.FaultWaits{Faults: l.Faults, Fetches: l.Fetches, P50: time.Duration(l.P50NS),
			P99: time.Duration(l.P99NS), Max: time.Duration(l.MaxNS), Stall: time.Duration(l.StallNS)})
		return nil
	default:
		return fmt.Errorf("%w: the post-copy ended without the destination's word", migrate.ErrStream)
	}
}

// openPostCopyStreams opens the second stream on every connection, whose
// ids are drawn from the whole conversation so far and whose keys are the
// migration's for indexes no first stream has, and has the connections'
// goroutines write them.
func (s *sender) openPostCopyStreams() error {
	outs := make([]checkpoint.ParallelOut, len(s.conns))
	for i := range outs {
		outs[i].W = &s.out.streams[i].out
		outs[i].StreamID = s.conv.t.streamID(s.cfg.StreamID, postCopyStreamIndex(i))
		if s.cfg.EncryptionKey != nil {
			var err error
			if outs[i].Key, err = s.conv.t.keys.streamKey(postCopyStreamIndex(i)); err != nil {
				return err
			}
		}
	}
	pw, err := checkpoint.NewParallelWriter(s.src.Metadata(), s.writerOptions(), outs)
	if err != nil {
		return wrap(migrate.ErrStream, err)
	}
	// The first stream ended: its writers' goroutines are idle, and the
	// next batch queued to them happens after this.
	s.post.firstWire = s.pw.Offset()
	_ = s.pw.Release()
	s.pw = pw
	s.out.bind(pw)
	return nil
}

// readFetches reads the destination's messages in post-copy: fetches,
// each checked and queued, until its word that every page landed.
func (s *sender) readFetches(ctx context.Context, fetches chan<- fetch, done chan<- landed) error {
	pc := s.post
	var asked int64
	for {
		typ, body, err := s.conv.readOneOf(msgFetch, msgLanded)
		if err != nil {
			return err
		}
		if typ == msgLanded {
			var l landed
			if err := decodeMsg(typ, body, &l); err != nil {
				return err
			}
			done <- l
			return nil
		}
		var f fetch
		if err := decodeMsg(typ, body, &f); err != nil {
			return err
		}
		if f.Region < 0 || f.Region >= len(pc.owedAtStart) || f.Page < 0 || f.Page >= pc.owedAtStart[f.Region].Cap() ||
			!pc.owedAtStart[f.Region].Has(f.Page) {
			return fmt.Errorf("%w: a fetch of page %d of region %d, which does not follow", migrate.ErrStream, f.Page, f.Region)
		}
		// A destination asks for a page once, when the VM first touches
		// it absent: more fetches than pages that follow are a flood.
		if asked++; asked > pc.owedPages {
			return fmt.Errorf("%w: %d fetches for %d pages that follow", migrate.ErrStream, asked, pc.owedPages)
		}
		select {
		case fetches <- f:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pushBatchesPerConn is how many batches a push hands each connection at
// a time: the destination's fetches wait for at most that much of the
// push ahead of them.
const pushBatchesPerConn = 2

// push sends every page that follows: the fetched ones first, then the
// rest in region and page order, a few batches at a time.
func (s *sender) push(ctx context.Context, fetches <-chan fetch) error {
	pc := s.post
	budget := int64(pushBatchesPerConn*len(s.conns)) * int64(s.cfg.Engine.BatchBytes)
	region := 0
	for {
		if err := s.serveFetches(ctx, fetches); err != nil {
			return err
		}
		for region < len(pc.left) && pc.left[region].Len() == 0 {
			region++
		}
		if region == len(pc.left) {
			break
		}
		left, scratch := pc.left[region], pc.scratch[region]
		pageBytes := int64(s.src.Regions()[region].PageSize())
		for p, n := left.Next(0), int64(0); p >= 0 && n < budget; p, n = left.Next(p+1), n+pageBytes {
			scratch.Add(p)
			pc.listed[region] = append(pc.listed[region], p)
		}
		t, err := s.copyListed(ctx, region)
		if err != nil {
			return err
		}
		s.core.Sent(region, t)
	}
	return wrap0(migrate.ErrStream, s.pw.CloseWithDigests(nil))
}

// serveFetches sends the pages asked for and not yet sent, ahead of the
// push; it does not wait for fetches.
func (s *sender) serveFetches(ctx context.Context, fetches <-chan fetch) error {
	pc := s.post
	var any bool
	for more := true; more; {
		select {
		case f, ok := <-fetches:
			if !ok {
				return nil // the reader ended: its error is the group's
			}
			if pc.left[f.Region].Has(f.Page) {
				pc.scratch[f.Region].Add(f.Page)
				pc.listed[f.Region] = append(pc.listed[f.Region], f.Page)
				any = true
			}
		default:
			more = false
		}
	}
	if !any {
		return nil
	}
	byRegion := make([]migrate.Traffic, len(pc.left))
	for i, ps := range pc.listed {
		if len(ps) == 0 {
			continue
		}
		t, err := s.copyListed(ctx, i)
		if err != nil {
			return err
		}
		byRegion[i] = t
	}
	s.core.Served(byRegion)
	return nil
}

// copyListed sends the pages listed for region i and takes them off the
// pages left.
func (s *sender) copyListed(ctx context.Context, i int) (migrate.Traffic, error) {
	pc := s.post
	t, err := s.eng.Copy(ctx, queueSink{s}, s.src.Regions()[i], uint32(i), pc.scratch[i])
	for _, p := range pc.listed[i] {
		pc.scratch[i].Remove(p)
		pc.left[i].Remove(p)
	}
	pc.listed[i] = pc.listed[i][:0]
	return t, err
}

// wireBytes is what the streams carried so far: the first, and the
// post-copy's second.
func (s *sender) wireBytes() int64 {
	if s.pw == nil {
		return 0
	}
	n := s.pw.Offset()
	if s.post != nil {
		n += s.post.firstWire
	}
	return n
}

// strand ends a post-copy that failed (DoStrand): the destination, which
// lacks pages no end can give it any more, destroys its copy; this end
// keeps its own, as of the stun, paused and held in doubt, for whoever
// manages the hosts to give back (vgpu.VM.ResolveMigration). A VM is never
// resumed with a page missing. (After every page was sent the destination
// may have run the VM whole: the error then says in doubt, not lost.)
func (s *sender) strand(a migrate.Action) (*migrate.Report, error) {
	s.conns.closeAll()
	s.cfg.Lock.Lock()
	s.src.RollBack(true)
	s.cfg.Lock.Unlock()
	s.publish()
	return s.report(), a.Err
}
