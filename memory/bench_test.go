package memory

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkCollectDirty collects the dirty pages of a large guest at a
// given density. The bitmap is re-dirtied outside the timer; SetBytes is
// the guest memory the collect covers.
func BenchmarkCollectDirty(b *testing.B) {
	for _, pages := range []int{6291456} { // 24 GiB of 4 KiB pages
		for _, density := range []float64{0.001, 0.01, 0.5} {
			b.Run(fmt.Sprintf("pages=%d/density=%g", pages, density), func(b *testing.B) {
				r := mustNew(b, Config{SizeBytes: int64(pages) * 4096, Kind: Synthetic})
				dirty := NewPageSet(pages)
				rng := wyrand(1)
				for range int(density * float64(pages)) {
					dirty.Add(int(uniform(rng.next(), uint64(pages))))
				}
				want := dirty.Len()
				var set PageSet
				r.CollectDirty(&set)
				b.SetBytes(int64(pages) * 4096)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					copy(r.log.current(), dirty.words)
					b.StartTimer()
					if n := r.CollectDirty(&set); n != want {
						b.Fatalf("collected %d, want %d", n, want)
					}
				}
			})
		}
	}
}

// zeroScanBytes is large enough to leave the caches, as a guest's memory
// does.
const zeroScanBytes = 64 << 20

func prefaulted(n int) []byte {
	buf := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		buf[i] = 1
		buf[i] = 0
	}
	return buf
}

// BenchmarkZeroScan checks every 4 KiB page of an all-zero buffer, the
// worst case: every byte must be read. Compare with BenchmarkBaselineCopy.
func BenchmarkZeroScan(b *testing.B) {
	buf := prefaulted(zeroScanBytes)
	b.SetBytes(zeroScanBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for off := 0; off < len(buf); off += 4096 {
			if !IsZero(buf[off : off+4096]) {
				b.Fatal("zero page reported non-zero")
			}
		}
	}
}

// BenchmarkBaselineCopy copies the same bytes page by page with copy(),
// the figure a scan that only reads must at least match.
func BenchmarkBaselineCopy(b *testing.B) {
	src, dst := prefaulted(zeroScanBytes), prefaulted(zeroScanBytes)
	b.SetBytes(zeroScanBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for off := 0; off < len(src); off += 4096 {
			copy(dst[off:off+4096], src[off:off+4096])
		}
	}
}

// BenchmarkWrite writes one whole page into already allocated pages of each
// backing.
func BenchmarkWrite(b *testing.B) {
	benchPageOp(b, allKinds, func(r *Region, p int, data []byte, _ uint32) error {
		_, err := r.WriteAt(data, int64(p)*4096)
		return err
	})
}

// benchPageOp times op on one whole 4 KiB page of random bytes at a time,
// in a region of each of kinds whose 1024 pages op has already been
// applied to once, so that every page is allocated; gen counts the calls.
func benchPageOp(b *testing.B, kinds []Kind, op func(r *Region, p int, data []byte, gen uint32) error) {
	for _, k := range kinds {
		b.Run("backing="+k.String(), func(b *testing.B) {
			const pages = 1024
			r := mustNew(b, Config{SizeBytes: pages * 4096, Kind: k})
			data := make([]byte, 4096)
			Generate(data, ClassRandom, 1, 1, 1)
			for p := range pages {
				if err := op(r, p, data, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(4096)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := op(r, i%pages, data, uint32(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGenerate measures the content generators, which bound how fast
// workloads can dirty Dense and Sparse regions.
func BenchmarkGenerate(b *testing.B) {
	for c := ClassZero; c < ClassExplicit; c++ {
		b.Run("class="+c.String(), func(b *testing.B) {
			buf := make([]byte, 4096)
			b.SetBytes(4096)
			b.ReportAllocs()
			for i := range b.N {
				Generate(buf, c, 1, uint64(i), 1)
			}
		})
	}
}

// BenchmarkDigest digests a 512 MiB sparse region of 4 KiB pages filled
// with the realistic mix, on 1 and 2 workers: what a migration's two ends
// spend on the end-to-end check while the VM is stopped.
//
//   - state=uncached: every page hashed, as the digest was before it kept
//     its page entries (fullDigest);
//   - state=cold: the first digest of the region, which makes the cache and
//     hashes every page;
//   - state=dest: the first digest of a region every page of which was
//     stored with StorePage, as a migration's destination digests: the
//     stores recorded the pages' sums;
//   - state=warm/dirty=F: a digest after a fraction F of the pages was
//     rewritten (Fill with the page's class, outside the timer) since the
//     last one; dirty=100% marks every page stale instead of rewriting it,
//     which costs the digest the same.
func BenchmarkDigest(b *testing.B) {
	const size = 512 << 20
	m := MixRealistic()
	r := mustNew(b, Config{SizeBytes: size, Kind: Sparse, Seed: 1})
	if err := r.FillMix(0, r.Pages(), m); err != nil {
		b.Fatal(err)
	}
	dst := mustNew(b, Config{SizeBytes: size, Kind: Sparse, Seed: 1})
	buf := make([]byte, r.PageSize())
	for p := range r.Pages() {
		st, err := r.ReadPage(p, buf)
		if err != nil {
			b.Fatal(err)
		}
		if err := dst.StorePage(p, buf, st.Gen); err != nil {
			b.Fatal(err)
		}
	}
	run := func(name string, r *Region, workers int, before func()) {
		b.Run(fmt.Sprintf("%s/workers=%d", name, workers), func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				before()
				b.StartTimer()
				if _, err := r.DigestParallel(workers); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	rng := wyrand(1)
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("state=uncached/workers=%d", workers), func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for range b.N {
				if _, err := fullDigest(r, workers); err != nil {
					b.Fatal(err)
				}
			}
		})
		run("state=cold", r, workers, func() { r.sp.digest.Store(nil) })
		run("state=dest", dst, workers, func() { dst.sp.digest.Store(nil) })
		for _, dirty := range []float64{0, 0.01, 1} {
			if _, err := r.Digest(); err != nil {
				b.Fatal(err)
			}
			run(fmt.Sprintf("state=warm/dirty=%g%%", 100*dirty), r, workers, func() {
				if dirty == 1 {
					r.sp.changedRange(0, r.Pages())
					return
				}
				for range int(dirty * float64(r.Pages())) {
					p := int(uniform(rng.next(), uint64(r.Pages())))
					if err := r.Fill(p, 1, m.ClassOf(r.Seed(), uint64(p))); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkMapUnmap maps and unmaps a 1 GiB window of 4 KiB pages, of which
// a few were written: both scrub every page, which is what a vGPU's
// creation and destruction, and a migration's destination, pay.
func BenchmarkMapUnmap(b *testing.B) {
	for _, k := range []Kind{Sparse, Synthetic} {
		b.Run("backing="+k.String(), func(b *testing.B) {
			const pages = 1 << 18
			r := mustNew(b, Config{SizeBytes: pages * 4096, Kind: k})
			b.SetBytes(pages * 4096)
			b.ReportAllocs()
			for i := range b.N {
				w, err := r.Map(0, pages, uint64(i))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := w.WriteAt([]byte{1}, int64(i%pages)*4096); err != nil {
					b.Fatal(err)
				}
				if err := w.Unmap(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStorePage stores one whole 4 KiB page of random bytes into
// already allocated pages, as a migration's destination applies a page it
// received.
func BenchmarkStorePage(b *testing.B) {
	benchPageOp(b, []Kind{Dense, Sparse}, (*Region).StorePage)
}

// BenchmarkSparseFill stores every page of a fresh 512 MiB sparse region,
// as a migration's destination that receives a whole guest does: every
// page is allocated, and faulted in, on its first store. The pool of freed
// pages is drained first, so that every page is fresh memory.
func BenchmarkSparseFill(b *testing.B) {
	const size = 512 << 20
	data := make([]byte, 4096)
	Generate(data, ClassRandom, 1, 1, 1)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		drainFreePages(12)
		r := mustNew(b, Config{SizeBytes: size, Kind: Sparse})
		b.StartTimer()
		for p := range r.Pages() {
			if err := r.StorePage(p, data, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// drainFreePages empties the pool of freed pages of 1<<shift bytes.
func drainFreePages(shift int) {
	for freePages[shift].Get() != nil {
	}
}

// BenchmarkFillMix rewrites a P40-8Q-sized window (8 GiB of 64 KiB pages)
// of a Synthetic framebuffer with a mix, as a training iteration rewrites
// its weights: as one operation under every lock stripe (path=bulk), or
// page by page (path=page, what a small fill does). SetBytes is the
// window's size.
func BenchmarkFillMix(b *testing.B) {
	const pageSize, pages = 64 << 10, 131072
	for _, path := range []string{"bulk", "page"} {
		b.Run("path="+path, func(b *testing.B) {
			root := mustNew(b, Config{SizeBytes: 3 * pages * pageSize, PageSize: pageSize, Kind: Synthetic})
			if path == "page" {
				root.sp.bulkFillMin = pages + 1
			}
			win, err := root.Map(pages, pages, 7)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(pages * pageSize)
			b.ReportAllocs()
			for b.Loop() {
				if err := win.FillMix(0, pages, MixWeights()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPatternAdvance times a workload's background dirtying of a
// Synthetic guest: a Uniform or HotSet pattern of the realistic mix over
// 1 GiB, each Advance writing pages pages (a few, as a step of a lightly
// dirtying guest writes, or a batch's worth). SetBytes is the pages'
// bytes.
func BenchmarkPatternAdvance(b *testing.B) {
	for _, kind := range []PatternKind{Uniform, HotSet} {
		for _, pages := range []int64{8, 4096} {
			b.Run(fmt.Sprintf("pattern=%v/pages=%d", kind, pages), func(b *testing.B) {
				r := mustNew(b, Config{SizeBytes: 1 << 30, Kind: Synthetic, Seed: 1})
				if err := r.FillMix(0, r.Pages(), MixRealistic()); err != nil {
					b.Fatal(err)
				}
				p, err := NewPattern(r, PatternConfig{Kind: kind, RateBytesPerSec: 4096 * pages, Seed: 2})
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(4096 * pages)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Advance(time.Second); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(p.Written()), "ns/page")
			})
		}
	}
}

// BenchmarkUsedClasses counts the pages in use of a 24 GiB framebuffer of
// 64 KiB pages, 15/16 of it filled, by class: what a Legacy migration asks
// of each framebuffer when a round arrives. A run of one class is counted
// at once; a mix's pages one by one. SetBytes is the framebuffer counted.
func BenchmarkUsedClasses(b *testing.B) {
	for _, m := range []Mix{MixWeights(), MixRealistic()} {
		b.Run("mix="+m.Name, func(b *testing.B) {
			r, err := New(Config{SizeBytes: 24 << 30, PageSize: 64 << 10, Kind: Synthetic, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			if err := r.FillMix(0, r.Pages()*15/16, m); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(r.Size())
			b.ReportAllocs()
			for b.Loop() {
				var c [ClassExplicit + 1]int64
				if err := r.UsedClasses(&c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
