// Package sweeptest checks that a sweep's shards concatenate into the
// whole sweep: the test kit of package sweep, for the programs that run
// one shard of their grid with -shard i/n.
package sweeptest

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/vgpusim/vgpusim/sweep"
)

// Concat runs shards 0 to n-1 of a sweep with run, in order, and returns
// each output's bytes, by name, concatenated in shard order: what a batch
// system's shards leave once their files are joined. run returns the
// outputs of one shard, such as the files a command wrote, by name; an
// output a shard did not write counts as empty.
func Concat(t testing.TB, n int, run func(s sweep.Shard) map[string][]byte) map[string][]byte {
	t.Helper()
	if n < 1 {
		t.Fatalf("sweeptest: %d shards", n)
	}
	all := map[string][]byte{}
	for i := range n {
		for name, b := range run(sweep.Shard{Index: i, Count: n}) {
			all[name] = append(all[name], b...)
		}
	}
	return all
}

// Equal fails t unless got holds the same outputs as want, under the same
// names, byte for byte; it names the first line that differs.
func Equal(t testing.TB, what string, want, got map[string][]byte) {
	t.Helper()
	names := slices.Sorted(maps.Keys(want))
	if g := slices.Sorted(maps.Keys(got)); !slices.Equal(names, g) {
		t.Errorf("%s: outputs %q, want %q", what, g, names)
		return
	}
	for _, name := range names {
		if err := diff(want[name], got[name]); err != nil {
			t.Errorf("%s: %s: %v", what, name, err)
		}
	}
}

// diff says where a and b first differ, by line; nil if they are equal.
func diff(want, got []byte) error {
	if bytes.Equal(want, got) {
		return nil
	}
	w, g := bytes.SplitAfter(want, []byte("\n")), bytes.SplitAfter(got, []byte("\n"))
	for i := range max(len(w), len(g)) {
		var wl, gl []byte
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if !bytes.Equal(wl, gl) {
			return fmt.Errorf("line %d is %q, want %q (%d bytes, want %d)", i+1, gl, wl, len(got), len(want))
		}
	}
	return fmt.Errorf("%d bytes, want %d", len(got), len(want)) // not reached: the lines hold every byte
}
