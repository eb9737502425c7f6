package memory

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"
)

// racingRun is one run of writers against a collector, all on real
// goroutines. Writer w owns the pages p with p%writers == w and stores an
// increasing counter (its write number) in the first eight bytes of one of
// them at each write, so that a page's bytes say which write they come
// from. The collector collects, then reads every page it collected. It
// returns what the collector last saw of each page, what each page's
// writer last wrote, and the number of collects made while writers ran.
type racingRun struct {
	region       *Region // root or window, written and collected
	writers      int
	writesEach   int
	minCollects  int  // writers keep writing until this many collects
	wholePages   bool // write whole pages rather than eight bytes
	flip         bool // collect by swapping bitmaps even though the log is small
	seen, last   []uint64
	liveCollects int
}

func (rr *racingRun) run(t interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}) {
	t.Helper()
	r := rr.region
	ps := r.PageSize()
	if rr.flip {
		r.log.flipMinWords = 0
	}
	rr.seen, rr.last = make([]uint64, r.Pages()), make([]uint64, r.Pages())
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range min(rr.writers, r.Pages()) {
		wg.Go(func() {
			own := (r.Pages() - w + rr.writers - 1) / rr.writers
			buf := make([]byte, 8)
			if rr.wholePages {
				buf = make([]byte, ps)
				Generate(buf, ClassRandom, uint64(w), 0, 0)
			}
			rng := wyrand(w + 1)
			for i := uint64(1); i <= uint64(rr.writesEach) || !stop.Load(); i++ {
				p := w + rr.writers*int(uniform(rng.next(), uint64(own)))
				binary.LittleEndian.PutUint64(buf, i)
				if _, err := r.WriteAt(buf, int64(p*ps)); err != nil {
					t.Errorf("write page %d: %v", p, err)
					return
				}
				rr.last[p] = i // each page has one writer
				if i%64 == 0 {
					runtime.Gosched() // let the collector in on one core too
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var set PageSet
	page := make([]byte, ps)
	collect := func() {
		n := r.CollectDirty(&set)
		if n != set.Len() {
			t.Fatalf("CollectDirty returned %d, the set holds %d", n, set.Len())
		}
		for p := range set.All() {
			if _, err := r.ReadPage(p, page); err != nil {
				t.Fatalf("read page %d: %v", p, err)
			}
			v := binary.LittleEndian.Uint64(page)
			if v == 0 {
				t.Fatalf("page %d reported dirty but never written", p)
			}
			if v < rr.seen[p] {
				t.Fatalf("page %d went back from write %d to %d", p, rr.seen[p], v)
			}
			rr.seen[p] = v
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			collect()
			if rr.liveCollects++; rr.liveCollects >= rr.minCollects {
				stop.Store(true)
			}
		}
	}
	collect() // the collect after the last write
	for p := range rr.seen {
		if rr.seen[p] != rr.last[p] {
			t.Fatalf("page %d: collector last saw write %d, the writer's last was %d: a dirty bit was lost",
				p, rr.seen[p], rr.last[p])
		}
	}
	if n := r.DirtyCount(); n != 0 {
		t.Fatalf("%d pages still dirty after the final collect", n)
	}
}

// TestCollectDirtyRacingWriters runs writers and a collector on real
// goroutines (run it with -race): the writers keep writing until the
// collector has made hundreds of collects, so collects and writes overlap
// on any machine. Both ways of collecting are raced: swapping words (a
// small log) and swapping bitmaps (a large one, forced here). If a write's dirty bit were ever lost, the last value
// the collector saw of that page would lag the last value written.
func TestCollectDirtyRacingWriters(t *testing.T) {
	for _, k := range allKinds {
		for _, c := range []struct{ window, flip bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
			t.Run(fmt.Sprintf("backing=%v/window=%v/flip=%v", k, c.window, c.flip), func(t *testing.T) {
				r := mustNew(t, Config{SizeBytes: 4 * 64 * 256, PageSize: 256, Kind: k})
				if c.window {
					r = must(r.Map(7, 200, 3))
				}
				rr := &racingRun{region: r, writers: 4, writesEach: 2000, minCollects: 300, flip: c.flip}
				rr.run(t)
				if rr.liveCollects < rr.minCollects {
					t.Fatalf("only %d collects overlapped the writers", rr.liveCollects)
				}
			})
		}
	}
}

// TestPropCollectDirtyNeverLosesAWrite is the racing test as a property:
// random backings, page sizes, region sizes, writer counts, write lengths
// and numbers of collects, each run on real goroutines.
func TestPropCollectDirtyNeverLosesAWrite(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ps := rapid.SampledFrom([]int{64, 256, 4096}).Draw(t, "pageSize")
		pages := rapid.IntRange(1, 300).Draw(t, "pages")
		r := mustNew(t, Config{
			SizeBytes: int64(ps * pages), PageSize: ps,
			Kind: rapid.SampledFrom(allKinds).Draw(t, "kind"),
		})
		if rapid.Bool().Draw(t, "window") {
			first := rapid.IntRange(0, pages-1).Draw(t, "first")
			r = must(r.Map(first, rapid.IntRange(1, pages-first).Draw(t, "windowPages"), 1))
		}
		rr := &racingRun{
			region:      r,
			writers:     rapid.IntRange(1, 4).Draw(t, "writers"),
			writesEach:  rapid.IntRange(1, 500).Draw(t, "writesEach"),
			minCollects: rapid.IntRange(1, 50).Draw(t, "collects"),
			wholePages:  rapid.Bool().Draw(t, "wholePages"),
			flip:        rapid.Bool().Draw(t, "flip"),
		}
		rr.run(t)
	})
}

// TestPageSetMatchesReference checks the bitmap set against a map.
func TestPageSetMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 300).Draw(t, "cap")
		s := NewPageSet(n)
		ref := map[int]bool{}
		for _, op := range rapid.SliceOf(rapid.IntRange(-5, n+5)).Draw(t, "ops") {
			if op%3 == 0 {
				s.Remove(op)
				delete(ref, op)
			} else if s.Add(op) {
				ref[op] = true
			} else if op >= 0 && op < n {
				t.Fatalf("Add(%d) refused inside capacity %d", op, n)
			}
		}
		var want []int
		for p := range ref {
			want = append(want, p)
		}
		slices.Sort(want)
		if got := s.AppendTo(nil); !slices.Equal(got, want) {
			t.Fatalf("set %v, want %v", got, want)
		}
		if s.Len() != len(want) {
			t.Fatalf("Len %d, want %d", s.Len(), len(want))
		}
		var viaNext []int
		for p := s.Next(0); p >= 0; p = s.Next(p + 1) {
			viaNext = append(viaNext, p)
		}
		if !slices.Equal(viaNext, want) {
			t.Fatalf("Next walk %v, want %v", viaNext, want)
		}
		for p := -2; p < n+2; p++ {
			if s.Has(p) != ref[p] {
				t.Fatalf("Has(%d) = %v", p, s.Has(p))
			}
		}
	})
}

func TestCollectIntoReusedSetDoesNotAllocate(t *testing.T) {
	r := mustNew(t, Config{SizeBytes: 1 << 24, Kind: Synthetic})
	var set PageSet
	r.CollectDirty(&set)
	allocs := testing.AllocsPerRun(20, func() {
		_ = r.Fill(7, 3, ClassText)
		if r.CollectDirty(&set) != 3 {
			t.Fatal("collected the wrong count")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per fill and collect", allocs)
	}
}

func TestWriteIntoAllocatedPageDoesNotAllocate(t *testing.T) {
	for _, k := range allKinds {
		r := mustNew(t, Config{SizeBytes: 1 << 20, Kind: k})
		data := []byte("0123456789")
		_, _ = r.WriteAt(data, 4096*3+5)
		if a := testing.AllocsPerRun(50, func() { _, _ = r.WriteAt(data, 4096*3+5) }); a != 0 {
			t.Errorf("%v: %v allocations per write", k, a)
		}
	}
}

// TestDirtyLogOff: a region made with its log off marks nothing until
// StartDirtyLog, then logs as any other; StopDirtyLog drops what it held.
func TestDirtyLogOff(t *testing.T) {
	r, err := New(Config{SizeBytes: 1 << 20, Kind: Synthetic, DirtyLogOff: true})
	if err != nil {
		t.Fatal(err)
	}
	var set PageSet
	if err := r.Fill(0, 10, ClassText); err != nil {
		t.Fatal(err)
	}
	if r.DirtyLogging() || r.DirtyCount() != 0 || r.CollectDirty(&set) != 0 || r.log.bufs[0] != nil {
		t.Fatalf("a log made off: logging %v, %d dirty", r.DirtyLogging(), r.DirtyCount())
	}
	r.StartDirtyLog()
	if err := r.Fill(3, 2, ClassText); err != nil {
		t.Fatal(err)
	}
	if n := r.CollectDirty(&set); n != 2 || !set.Has(3) || !set.Has(4) {
		t.Fatalf("after StartDirtyLog: %d collected, %v", n, set.AppendTo(nil))
	}
	_ = r.Fill(0, 1, ClassText)
	r.StopDirtyLog()
	if r.DirtyLogging() || r.DirtyCount() != 0 || r.log.bufs[0] != nil {
		t.Fatal("StopDirtyLog kept its log")
	}
}
