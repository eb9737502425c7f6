package sweep

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// simulate stands for one point's simulation: a result made from the
// point and its index alone, with a random source of its own, after a
// random delay that shuffles the order the points finish in.
func simulate(_ context.Context, i int, seed uint64) ([]uint64, error) {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	if d := rng.IntN(3); d > 0 {
		time.Sleep(time.Duration(d) * 50 * time.Microsecond)
	} else {
		runtime.Gosched()
	}
	out := make([]uint64, 1+rng.IntN(4))
	for k := range out {
		out[k] = rng.Uint64()
	}
	return out, nil
}

// reference runs the shard's points one after another, in order.
func reference(points []uint64, s Shard) [][]uint64 {
	lo, hi := s.Range(len(points))
	var out [][]uint64
	for i := lo; i < hi; i++ {
		r, _ := simulate(context.Background(), i, points[i])
		out = append(out, r)
	}
	return out
}

// For any points, workers and shard, Run returns what running the shard's
// points in order on one goroutine does.
func TestRunMatchesSequential(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		points := rapid.SliceOfN(rapid.Uint64(), 0, 40).Draw(t, "points")
		workers := rapid.IntRange(0, 9).Draw(t, "workers")
		var s Shard
		if count := rapid.IntRange(0, 8).Draw(t, "count"); count > 0 {
			s = Shard{rapid.IntRange(0, count-1).Draw(t, "index"), count}
		}
		got, err := Run(context.Background(), points, Config{Workers: workers, Shard: s}, simulate)
		if err != nil {
			t.Fatal(err)
		}
		want := reference(points, s)
		if len(got) != len(want) {
			t.Fatalf("%d results, want %d", len(got), len(want))
		}
		for k := range want {
			if !slices.Equal(got[k], want[k]) {
				t.Fatalf("result %d: %v, want %v", k, got[k], want[k])
			}
		}
	})
}

// One worker or eight, the same results; and the shards' results,
// concatenated, are the whole sweep's.
func TestRunDeterministic(t *testing.T) {
	points := make([]uint64, 200)
	for i := range points {
		points[i] = uint64(i) * 7919
	}
	run := func(cfg Config) [][]uint64 {
		t.Helper()
		r, err := Run(context.Background(), points, cfg, simulate)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	one, eight := run(Config{Workers: 1}), run(Config{Workers: 8})
	var shards [][]uint64
	for i := range 4 {
		shards = append(shards, run(Config{Workers: 3, Shard: Shard{i, 4}})...)
	}
	for _, other := range [][][]uint64{eight, shards} {
		if !slices.EqualFunc(one, other, slices.Equal) {
			t.Fatal("results differ between worker counts or shardings")
		}
	}
}

// Workers bounds the points that run at once.
func TestRunWorkersLimit(t *testing.T) {
	for _, workers := range []int{1, 3} {
		var now, peak atomic.Int32
		_, err := Run(context.Background(), make([]int, 30), Config{Workers: workers}, func(context.Context, int, int) (int, error) {
			n := now.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(200 * time.Microsecond)
			now.Add(-1)
			return 0, nil
		})
		if err != nil || peak.Load() > int32(workers) {
			t.Errorf("%d workers: %d at once, %v", workers, peak.Load(), err)
		}
	}
}

// The first error cancels the points running, no point starts after it,
// and Run returns it with its point's index.
func TestRunErrorCancels(t *testing.T) {
	boom := errors.New("boom")
	var mu sync.Mutex
	var ran []int
	res, err := Run(context.Background(), make([]struct{}, 100), Config{Workers: 2},
		func(ctx context.Context, i int, _ struct{}) (int, error) {
			mu.Lock()
			ran = append(ran, i)
			mu.Unlock()
			if i == 1 {
				return 0, boom
			}
			<-ctx.Done() // only the error ends the other points
			return 0, ctx.Err()
		})
	var pe *PointError
	if !errors.Is(err, boom) || !errors.As(err, &pe) || pe.Index != 1 || res != nil {
		t.Fatalf("Run: %v, %v; want point 1's error and no results", res, err)
	}
	// Point 0 may not have started before point 1 failed; no point after
	// them did.
	slices.Sort(ran)
	if !slices.Equal(ran, []int{0, 1}) && !slices.Equal(ran, []int{1}) {
		t.Errorf("points %v ran, want 1 and at most 0 besides", ran)
	}
	if pe.Error() != "sweep: point 1: boom" {
		t.Errorf("error %q", pe.Error())
	}
}

// A cancelled context stops the sweep: Run says so rather than return
// results with points missing.
func TestRunContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	res, err := Run(ctx, make([]int, 50), Config{Workers: 1}, func(context.Context, int, int) (int, error) {
		if n.Add(1) == 3 {
			cancel()
		}
		return 1, nil
	})
	if !errors.Is(err, context.Canceled) || res != nil || n.Load() != 3 {
		t.Errorf("Run: %v, %v after %d points; want context.Canceled after 3", res, err, n.Load())
	}
}

func TestRunBadConfig(t *testing.T) {
	never := func(context.Context, int, int) (int, error) { panic("ran") }
	if _, err := Run(context.Background(), []int{1}, Config{Workers: -1}, never); err == nil {
		t.Error("no error for -1 workers")
	}
	if _, err := Run(context.Background(), []int{1}, Config{Shard: Shard{2, 2}}, never); !errors.Is(err, ErrShard) {
		t.Errorf("shard 2/2: %v, want ErrShard", err)
	}
}
