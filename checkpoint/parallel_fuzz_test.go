package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// splitStreams cuts a fuzz input into two streams: a little-endian u32,
// taken modulo what follows, is the length of the first.
func splitStreams(data []byte) [][]byte {
	if len(data) < 4 {
		return [][]byte{data, nil}
	}
	rest := data[4:]
	n := int(binary.LittleEndian.Uint32(data) % uint32(len(rest)+1))
	return [][]byte{rest[:n], rest[n:]}
}

// joinStreams is splitStreams' inverse.
func joinStreams(a, b []byte) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(a))), append(bytes.Clone(a), b...)...)
}

// parallelFuzzSeeds are two-stream migrations, whole and damaged.
func parallelFuzzSeeds(tb testing.TB) map[string][]byte {
	s, _ := parallelFixture(tb, 2)
	flipped := bytes.Clone(s[1])
	flipped[len(flipped)/2] ^= 0x10
	return map[string][]byte{
		"two-streams":       joinStreams(s[0], s[1]),
		"swapped":           joinStreams(s[1], s[0]),
		"second-truncated":  joinStreams(s[0], s[1][:len(s[1])*2/3]),
		"second-flipped":    joinStreams(s[0], flipped),
		"first-twice":       joinStreams(s[0], s[0]),
		"second-header-cut": joinStreams(s[0], s[1][:headerSizeV1/2]),
	}
}

// FuzzParallelApplier feeds two arbitrary streams to a ParallelApplier
// with two workers. It must never panic or hang, fail only with the
// package's typed errors, and leave the destinations scrubbed when it
// fails.
func FuzzParallelApplier(f *testing.F) {
	for _, s := range parallelFuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ss []ParallelStream
		for _, s := range splitStreams(data) {
			ss = append(ss, ParallelStream{R: bytes.NewReader(s)})
		}
		opts := ReaderOptions{Limits: fuzzLimits}
		rd, err := NewReader(bytes.NewReader(splitStreams(data)[0]), opts)
		if err != nil {
			if !typedError(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		var dst []RegionRef
		for _, ri := range rd.Metadata().Regions {
			if ri.Pages() > 4096 || ri.PageSize > 64<<10 {
				return // too large to scrub on every input
			}
			dst = append(dst, RegionRef{ri.ID, fuzzRegion(t, ri)})
		}
		pa, err := NewParallelApplier(ss, opts, dst, ParallelOptions{Workers: 2, InFlight: 3})
		if err != nil {
			if !typedError(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		defer pa.Close()
		if err := pa.Run(context.Background()); err != nil {
			if !typedError(err) {
				t.Fatalf("untyped error %v", err)
			}
			for _, d := range dst {
				for p := range d.Region.Pages() {
					if st, _ := d.Region.PageState(p); st != (memory.PageState{}) {
						t.Fatalf("region %d page %d not scrubbed after %v", d.ID, p, err)
					}
				}
			}
		}
	})
}

// TestWriteParallelFuzzSeeds writes FuzzParallelApplier's seed corpus
// under testdata/fuzz when run with -update (missing files only).
func TestWriteParallelFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to write missing seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParallelApplier")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range parallelFuzzSeeds(t) {
		path := filepath.Join(dir, "seed-"+name)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		if err := os.WriteFile(path, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
