package sweep

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// Config is how Run runs a sweep.
type Config struct {
	// Workers is how many points run at once, each on a goroutine of its
	// own; 0 means runtime.GOMAXPROCS(0).
	Workers int
	// Shard is the block of the points to run; the zero Shard runs them
	// all.
	Shard Shard
}

// Validate checks the workers and the shard.
func (c Config) Validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("sweep: %d workers: want 0 (one per core) or more", c.Workers)
	}
	return c.Shard.Validate()
}

// workers is Workers with the default filled in.
func (c Config) workers() int {
	if c.Workers == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return c.Workers
}

// RegisterFlags defines the flags -shard i/n and -workers N on fs, setting
// c's Shard and Workers. -workers refuses a negative number.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(&c.Shard, "shard", "run only shard `i/n` of the sweep, the i-th of n contiguous blocks of its points (0 <= i < n); "+
		"the shards' -csv and -json files, concatenated in order, are the whole sweep's")
	fs.Func("workers", "simulations run at once, `N` goroutines (default 0: one per core, GOMAXPROCS); "+
		"the results do not depend on it", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return errors.New("want 0 (one per core) or more")
		}
		c.Workers = n
		return nil
	})
}

// PointError is the error a point's run returned, with the point's index
// in the whole grid.
type PointError struct {
	Index int
	Err   error
}

func (e *PointError) Error() string { return fmt.Sprintf("sweep: point %d: %v", e.Index, e.Err) }

// Unwrap returns the run's error.
func (e *PointError) Unwrap() error { return e.Err }

// Run calls run on each point of cfg.Shard's block of points
// (cfg.Shard.Range(len(points))), cfg.Workers at a time, with the point's
// index i in the whole grid, and returns the results in point order: the
// result of point lo first, whatever order the points ran in.
//
// Each point must be independent: run must make its result from i and p
// alone and must not share mutable state across points (a host, a random
// source, a cache written as it goes). That is what makes the results the
// same for any number of workers; the points run concurrently, so state
// they share is also a data race.
//
// The first point to return an error cancels the context the others were
// given, no point starts after it, and Run returns that error as a
// *PointError, with no results. If ctx is cancelled before every point
// has run, Run returns an error that wraps ctx's (context.Cause), with no
// results. A panic in run is not recovered: it
// crashes the program, with its own goroutine's stack, as a panic in any
// goroutine does.
func Run[P, R any](ctx context.Context, points []P, cfg Config, run func(ctx context.Context, i int, p P) (R, error)) ([]R, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lo, hi := cfg.Shard.Range(len(points))
	results := make([]R, hi-lo)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.workers())
	var skipped atomic.Bool
	for i := lo; i < hi; i++ {
		if gctx.Err() != nil {
			skipped.Store(true)
			break
		}
		g.Go(func() error {
			// Go waits for a free worker: the sweep may have stopped
			// meanwhile.
			if gctx.Err() != nil {
				skipped.Store(true)
				return nil
			}
			r, err := run(gctx, i, points[i])
			if err != nil {
				return &PointError{Index: i, Err: err}
			}
			results[i-lo] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if skipped.Load() {
		return nil, fmt.Errorf("sweep: stopped before every point ran: %w", context.Cause(ctx))
	}
	return results, nil
}
