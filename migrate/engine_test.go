package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

func TestEngineConfig(t *testing.T) {
	valid := []struct{ in, want EngineConfig }{
		{EngineConfig{}, EngineConfig{Workers: 1, InFlight: 2, BatchBytes: checkpoint.DefaultBatchBytes}},
		{EngineConfig{Workers: 3}, EngineConfig{Workers: 3, InFlight: 6, BatchBytes: checkpoint.DefaultBatchBytes}},
		{EngineConfig{Workers: 3, InFlight: 3, BatchBytes: memory.MinPageSize, Level: checkpoint.LevelNone},
			EngineConfig{Workers: 3, InFlight: 3, BatchBytes: memory.MinPageSize, Level: checkpoint.LevelNone}},
		{EngineConfig{InFlight: 1, BatchBytes: checkpoint.MaxBatchBytes}, EngineConfig{Workers: 1, InFlight: 1, BatchBytes: checkpoint.MaxBatchBytes}},
		{EngineConfig{Level: checkpoint.LevelS2}, EngineConfig{Workers: 1, InFlight: 2, BatchBytes: checkpoint.DefaultBatchBytes, Level: checkpoint.LevelS2}},
	}
	for _, c := range valid {
		e, err := NewEngine(c.in)
		if err != nil {
			t.Errorf("NewEngine(%+v): %v", c.in, err)
			continue
		}
		got := e.Config()
		if got.Workers != c.want.Workers || got.InFlight != c.want.InFlight || got.BatchBytes != c.want.BatchBytes || got.Level != c.want.Level {
			t.Errorf("NewEngine(%+v).Config() = %+v, want %+v", c.in, got, c.want)
		}
		must(t, e.Close())
	}
	invalid := []EngineConfig{
		{Workers: -1}, {InFlight: -1}, {BatchBytes: -1},
		{Workers: 4, InFlight: 3},
		{BatchBytes: memory.MinPageSize - 1},
		{BatchBytes: checkpoint.MaxBatchBytes + 1},
		{Level: checkpoint.LevelS2 + 1},
	}
	for _, c := range invalid {
		if e, err := NewEngine(c); !errors.Is(err, ErrConfig) {
			t.Errorf("NewEngine(%+v) = %v, want ErrConfig", c, err)
			if e != nil {
				must(t, e.Close())
			}
		}
	}
}

func TestEngineClose(t *testing.T) {
	r := engineRegion(t, memory.Dense, 16, 4096, 1, memory.MixRealistic())
	for _, workers := range []int{1, 3} {
		e, err := NewEngine(EngineConfig{Workers: workers})
		must(t, err)
		must(t, e.Close())
		must(t, e.Close())
		_, err = e.Copy(context.Background(), &batchCounter{}, r, 0, nil)
		if !errors.Is(err, ErrClosed) || !errors.Is(err, ErrConfig) {
			t.Errorf("workers=%d: Copy after Close: %v, want ErrClosed and ErrConfig", workers, err)
		}
	}
}

// settledGoroutines waits until the goroutine count is want, which
// goroutines that are ending may delay, and returns the last count.
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n != want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(time.Millisecond)
	}
	return n
}

// stableGoroutines returns the goroutine count once it has stopped
// changing: goroutines of earlier tests may still be ending after the
// WaitGroup that waited for them returned.
func stableGoroutines() int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			break
		}
		n = m
	}
	return n
}

func TestEngineGoroutines(t *testing.T) {
	r := engineRegion(t, memory.Dense, 64, 4096, 2, memory.MixRealistic())
	before := stableGoroutines()
	e, err := NewEngine(EngineConfig{Workers: 1, BatchBytes: 8192})
	must(t, err)
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("one worker: %d goroutines after NewEngine, %d before", n, before)
	}
	stop := make(chan struct{})
	var most atomic.Int64
	go func() { // samples the count during the copy
		for {
			select {
			case <-stop:
				return
			default:
				most.Store(max(most.Load(), int64(runtime.NumGoroutine())))
				runtime.Gosched()
			}
		}
	}()
	_, err = e.Copy(context.Background(), &batchCounter{}, r, 0, nil)
	must(t, err)
	close(stop)
	if m := most.Load(); m > int64(before)+1 {
		t.Errorf("one worker: up to %d goroutines during Copy (sampler included), %d before", m, before)
	}
	must(t, e.Close())
	before = settledGoroutines(before)

	e, err = NewEngine(EngineConfig{Workers: 4, BatchBytes: 8192})
	must(t, err)
	if n := settledGoroutines(before + 4); n != before+4 {
		t.Errorf("4 workers: %d goroutines after NewEngine, %d before", n, before)
	}
	_, err = e.Copy(context.Background(), &batchCounter{}, r, 0, nil)
	must(t, err)
	must(t, e.Close())
	if n := settledGoroutines(before); n != before {
		t.Errorf("4 workers: %d goroutines after Close, %d before", n, before)
	}
}

// checkIdle checks that no batch of e is in flight and every slot is free.
func checkIdle(t *testing.T, e *Engine) {
	t.Helper()
	if e.encoding != 0 || e.queued != 0 || len(e.free) != len(e.slots) {
		t.Fatalf("engine not idle: %d batches encoding, %d queued, %d of %d slots free", e.encoding, e.queued, len(e.free), len(e.slots))
	}
	for k := range e.order {
		if i := e.order[k]; i >= 0 {
			t.Fatalf("reorder ring holds slot %d at %d", i, k)
		}
		if i := e.releases[k]; i >= 0 {
			t.Fatalf("release ring holds slot %d at %d", i, k)
		}
	}
}

// slowWriter passes batches on to w, slowly, checking that the engine
// never has more than inFlight batches encoded and not yet written.
type slowWriter struct {
	w        BatchWriter
	delay    time.Duration
	encoded  *atomic.Int64 // batches the engine's workers finished
	written  int64
	inFlight int64
	most     int64 // the most batches seen encoded and not yet written
	errs     []string
}

func (s *slowWriter) check() {
	ahead := s.encoded.Load() - s.written
	s.most = max(s.most, ahead)
	if ahead > s.inFlight {
		s.errs = append(s.errs, fmt.Sprintf("batch %d: %d batches encoded and unwritten", s.written, ahead))
	}
}

func (s *slowWriter) WriteBatch(b checkpoint.EncodedBatch) error {
	// The batch being written is encoded and not yet written; the
	// workers may finish more during the write.
	s.check()
	time.Sleep(s.delay)
	s.check()
	s.written++
	return s.w.WriteBatch(b)
}

func TestEngineBackPressure(t *testing.T) {
	r := engineRegion(t, memory.Dense, 256, 4096, 3, memory.MixRealistic())
	const batchBytes = 4 << 12
	want, _ := referenceStream(t, r, nil, checkpoint.LevelFastest, batchBytes)
	for _, c := range []struct{ workers, inFlight int }{{2, 2}, {2, 5}, {4, 4}, {4, 9}} {
		t.Run(fmt.Sprintf("workers=%d/inflight=%d", c.workers, c.inFlight), func(t *testing.T) {
			e, err := NewEngine(EngineConfig{Workers: c.workers, InFlight: c.inFlight, BatchBytes: batchBytes})
			must(t, err)
			defer e.Close()
			var encoded atomic.Int64
			e.afterEncode = func() { encoded.Add(1) }
			var sw *slowWriter
			got := streamOf(t, r, checkpoint.LevelFastest, batchBytes, true, func(w *checkpoint.Writer) error {
				sw = &slowWriter{w: w, delay: 2 * time.Millisecond, encoded: &encoded, inFlight: int64(c.inFlight)}
				_, err := e.Copy(context.Background(), sw, r, 0, nil)
				return err
			})
			for _, msg := range sw.errs {
				t.Error(msg)
			}
			// The workers fill every slot while the writer sleeps.
			if sw.most != int64(c.inFlight) {
				t.Errorf("at most %d batches encoded ahead of the writer, want %d", sw.most, c.inFlight)
			}
			if !bytes.Equal(got, want) {
				t.Error("stream differs from the reference's")
			}
			checkIdle(t, e)
		})
	}
}

func TestEngineSteadyStateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	r := engineRegion(t, memory.Dense, 512, 4096, 6, memory.MixRealistic())
	set := memory.NewPageSet(r.Pages())
	for p := 0; p < r.Pages(); p += 3 {
		set.Add(p)
	}
	for _, workers := range []int{1, 2} {
		e, err := NewEngine(EngineConfig{Workers: workers, BatchBytes: 16 << 10})
		must(t, err)
		w, err := checkpoint.NewWriter(io.Discard, checkpoint.Metadata{Regions: []checkpoint.RegionInfo{checkpoint.RegionInfoOf(0, r)}},
			checkpoint.WriterOptions{BatchBytes: 16 << 10})
		must(t, err)
		for _, s := range []*memory.PageSet{nil, set} {
			copyAll := func() {
				if _, err := e.Copy(context.Background(), w, r, 0, s); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				copyAll()
			}
			if n := testing.AllocsPerRun(10, copyAll); n != 0 {
				t.Errorf("workers=%d, set=%v: %v allocations per Copy of %d pages", workers, s != nil, n, r.Pages())
			}
		}
		must(t, w.Release())
		must(t, e.Close())
	}
}
