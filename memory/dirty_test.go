package memory

import (
	"encoding/binary"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// TestCollectDirtyRacingWriters runs writers and a collector on real
// goroutines (run it with -race). Each writer stores an increasing counter
// in its pages; the collector reads every page it collects. If a write's
// dirty bit were ever lost, the last value the collector saw for that page
// would lag the last value written.
func TestCollectDirtyRacingWriters(t *testing.T) {
	const writers, pagesEach, rounds = 4, 64, 2000
	for _, k := range allKinds {
		t.Run(k.String(), func(t *testing.T) {
			r := mustNew(t, Config{SizeBytes: writers * pagesEach * 256, PageSize: 256, Kind: k})
			final := make([]uint64, r.Pages())
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					var buf [8]byte
					rng := wyrand(w + 1)
					for i := 1; i <= rounds; i++ {
						p := w*pagesEach + int(uniform(rng.next(), pagesEach))
						binary.LittleEndian.PutUint64(buf[:], uint64(i))
						if _, err := r.WriteAt(buf[:], int64(p*256)); err != nil {
							t.Error(err)
							return
						}
						final[p] = uint64(i) // each page has one writer
					}
				})
			}
			seen := make([]uint64, r.Pages())
			var set PageSet
			page := make([]byte, 256)
			collect := func() {
				r.CollectDirty(&set)
				for p := range set.All() {
					if _, err := r.ReadPage(p, page); err != nil {
						t.Fatal(err)
					}
					seen[p] = binary.LittleEndian.Uint64(page)
				}
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
		loop:
			for {
				select {
				case <-done:
					break loop
				default:
					collect()
				}
			}
			collect() // the collect after the last write
			for p := range seen {
				if seen[p] != final[p] {
					t.Fatalf("page %d: collector last saw %d, writer last wrote %d", p, seen[p], final[p])
				}
			}
			if r.DirtyCount() != 0 {
				t.Fatal("pages still dirty after the final collect")
			}
		})
	}
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
