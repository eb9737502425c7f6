package migrate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate/internal/migtest"
)

// The image cases of BenchmarkCopyEngine: with VGPUSIM_IMAGE naming a raw
// memory image (a guest RAM or framebuffer dump), content=image/workers=W
// streams every page of it, read through memory.OpenImageFile, with the
// workers and metrics of the generated mixes. VGPUSIM_IMAGE_PAGE sets its
// page size (4096 by default); a short last page is padded with zeros.
const (
	benchImageEnv     = "VGPUSIM_IMAGE"
	benchImagePageEnv = "VGPUSIM_IMAGE_PAGE"
)

// benchImage is the image the benchmarks copy, opened by the first image
// case and kept for the rest of the process, and its engines by worker
// count, warmed on it, each with its Writer to io.Discard.
var benchImage struct {
	f       *memory.ImageFile
	all     *memory.PageSet
	engines map[int]*benchEngine
}

// benchImageRegion returns the image's region and the set of all its
// pages, opening it on first use.
func benchImageRegion(b *testing.B, path string) (*memory.Region, *memory.PageSet) {
	b.Helper()
	bi := &benchImage
	if bi.f == nil {
		cfg := memory.ImageConfig{PadTail: true}
		if s := os.Getenv(benchImagePageEnv); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				b.Fatalf("%s=%q: %v", benchImagePageEnv, s, err)
			}
			cfg.PageSize = n
		}
		f, err := memory.OpenImageFile(path, cfg)
		must(b, err)
		bi.f, bi.all = f, memory.NewPageSet(f.Region.Pages())
		for p := range f.Region.Pages() {
			bi.all.Add(p)
		}
		bi.engines = map[int]*benchEngine{}
	}
	return bi.f.Region, bi.all
}

// benchmarkCopyImage runs BenchmarkCopyEngine's image cases, if
// VGPUSIM_IMAGE names an image.
func benchmarkCopyImage(b *testing.B) {
	path := os.Getenv(benchImageEnv)
	if path == "" {
		return
	}
	for _, workers := range migtest.BenchWorkers() {
		b.Run(fmt.Sprintf("content=image/workers=%d", workers), func(b *testing.B) {
			r, all := benchImageRegion(b, path)
			warmIn(b, benchImage.engines, workers, r, all, "image").copyAll(b, r, all, r.Size())
		})
	}
}

// batchBytes is a BatchWriter keeping every batch's payload, back to back.
type batchBytes struct{ bytes.Buffer }

func (w *batchBytes) WriteBatch(b checkpoint.EncodedBatch) error {
	for _, p := range b.Payload {
		w.Write(p)
	}
	return nil
}

// TestCopyEngineImage: the engine streams an image region, with one
// worker and several, as it streams a Dense region of the same bytes: the
// same batches.
func TestCopyEngineImage(t *testing.T) {
	const pages = 700
	src, err := memory.New(memory.Config{SizeBytes: pages * 4096, Kind: memory.Dense, Seed: 3})
	must(t, err)
	must(t, src.FillMix(0, pages, memory.MixRealistic()))
	data := make([]byte, src.Size())
	_, err = src.ReadAt(data, 0)
	must(t, err)
	dense, err := memory.New(memory.Config{SizeBytes: src.Size(), Kind: memory.Dense})
	must(t, err)
	for p := range pages {
		must(t, dense.StorePage(p, data[p*4096:(p+1)*4096], 0))
	}
	img, err := memory.OpenImage(bytes.NewReader(data), int64(len(data)), memory.ImageConfig{BlockBytes: 64 << 10, CacheBytes: 256 << 10})
	must(t, err)
	for _, workers := range []int{1, 3} {
		e, err := NewEngine(EngineConfig{Workers: workers, BatchBytes: 128 << 10})
		must(t, err)
		var want, got batchBytes
		wt, err := e.Copy(context.Background(), &want, dense, 0, nil)
		must(t, err)
		gt, err := e.Copy(context.Background(), &got, img, 0, nil)
		must(t, err)
		must(t, e.Close())
		if gt != wt || !bytes.Equal(got.Bytes(), want.Bytes()) || gt.Pages == 0 {
			t.Errorf("workers=%d: image traffic %+v, dense %+v; payloads equal %v", workers, gt, wt, bytes.Equal(got.Bytes(), want.Bytes()))
		}
	}
}
