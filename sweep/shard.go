package sweep

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrShard is wrapped by every error about a shard that names no block of
// a grid: text that is not "i/n", a count under one, or an index outside
// [0, count).
var ErrShard = errors.New("sweep: invalid shard")

// ShardError is a shard that cannot be parsed or is not valid.
type ShardError struct {
	Input  string // what was parsed, or the shard as "i/n"
	Reason string
}

func (e *ShardError) Error() string {
	return fmt.Sprintf("sweep: shard %q: %s", e.Input, e.Reason)
}

// Unwrap returns ErrShard.
func (e *ShardError) Unwrap() error { return ErrShard }

// Shard is shard Index of Count, numbered from 0: the Index-th of Count
// contiguous blocks of a grid's points. The zero Shard, and any Shard of
// a Count of one, is the whole grid.
type Shard struct{ Index, Count int }

// ParseShard parses "i/n", shard i of n, 0 <= i < n. A bad input gives a
// *ShardError, which wraps ErrShard.
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(s, "/")
	if !ok {
		return Shard{}, &ShardError{s, `want "i/n", shard i of n, from 0`}
	}
	i, err := strconv.Atoi(is)
	if err != nil {
		return Shard{}, &ShardError{s, "the index " + strconv.Quote(is) + " is not an integer"}
	}
	n, err := strconv.Atoi(ns)
	if err != nil {
		return Shard{}, &ShardError{s, "the count " + strconv.Quote(ns) + " is not an integer"}
	}
	sh := Shard{i, n}
	if err := sh.check(s); err != nil {
		return Shard{}, err
	}
	return sh, nil
}

// Validate returns a *ShardError unless s is the zero Shard or has
// 0 <= Index < Count.
func (s Shard) Validate() error {
	if s == (Shard{}) {
		return nil
	}
	return s.check(s.String())
}

func (s Shard) check(input string) error {
	switch {
	case s.Count < 1:
		return &ShardError{input, "the count must be at least 1"}
	case s.Index < 0 || s.Index >= s.Count:
		return &ShardError{input, fmt.Sprintf("the index must be from 0 to %d", s.Count-1)}
	}
	return nil
}

// Whole reports whether s is the whole grid: the zero Shard or one of a
// Count of one.
func (s Shard) Whole() bool { return s.Count <= 1 }

// Header reports whether the shard writes the header of a file whose
// rows the shards' files concatenate into: only shard 0, or the whole
// grid, does.
func (s Shard) Header() bool { return s.Index == 0 }

// Range returns the points [lo, hi) of a grid of n points that s runs:
// the Index-th of Count contiguous blocks, the first n%Count of them one
// point longer than the rest. Shards 0 to Count-1 cover every point once,
// in order. The whole grid is [0, n). Range panics if s is not valid
// (Validate) or n is negative.
func (s Shard) Range(n int) (lo, hi int) {
	if err := s.Validate(); err != nil {
		panic(err)
	}
	if n < 0 {
		panic(fmt.Sprintf("sweep: Range of %d points", n))
	}
	if s.Whole() {
		return 0, n
	}
	q, r := n/s.Count, n%s.Count
	lo = s.Index*q + min(s.Index, r)
	hi = lo + q
	if s.Index < r {
		hi++
	}
	return lo, hi
}

// String returns "i/n"; the zero Shard is "0/1".
func (s Shard) String() string {
	if s == (Shard{}) {
		return "0/1"
	}
	return strconv.Itoa(s.Index) + "/" + strconv.Itoa(s.Count)
}

// Set parses "i/n" into s, for the flag package.
func (s *Shard) Set(v string) error {
	sh, err := ParseShard(v)
	if err != nil {
		return err
	}
	*s = sh
	return nil
}
