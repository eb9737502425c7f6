package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// TestParallelContinueAccept: streams that continue others (Continue)
// leave the regions as they were on a failure and on Abort — a VM may run
// on them — and Accept refuses a batch before any of its pages is stored,
// failing the streams with ErrMalformed wrapping its error; the pages it
// let through were stored, and told with their indexes.
func TestParallelContinueAccept(t *testing.T) {
	streams, dst := parallelFixture(t, 2)
	if err := dst.Fill(0, 64, memory.ClassText); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("not a page this destination asked for")
	var ss []ParallelStream
	for _, s := range streams {
		ss = append(ss, ParallelStream{R: bytes.NewReader(s)})
	}
	var told []int
	pa, err := NewParallelApplier(ss, ReaderOptions{}, []RegionRef{{0, dst}}, ParallelOptions{Workers: 1, InFlight: 2, Continue: true,
		Accept: func(region uint32, idx []int) error {
			if idx[0] >= 8 {
				return refused
			}
			return nil
		},
		Applied: func(a Applied) {
			if a.Type == RecordPageBatch {
				told = append(told, a.Indexes...)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	err = pa.Run(context.Background())
	if !errors.Is(err, ErrMalformed) || !errors.Is(err, refused) {
		t.Fatalf("Run: %v, want ErrMalformed wrapping the refusal", err)
	}
	pa.Abort()
	for _, p := range told {
		if p >= 8 {
			t.Fatalf("page %d of a refused batch was stored and told", p)
		}
	}
	if len(told) == 0 {
		// The fixture's first batch starts at page 0: it went through.
		t.Fatal("no batch was accepted")
	}
	// The pages accepted changed what they landed on; the rest is as the
	// caller left it, neither scrubbed by the failure nor by Abort.
	if n := dst.ResidentBytes(); n == 0 {
		t.Fatal("the regions were scrubbed")
	}
	buf := make([]byte, dst.PageSize())
	for p := 8; p < 64; p++ {
		if _, err := dst.ReadPage(p, buf); err != nil {
			t.Fatal(err)
		}
		if bytes.Count(buf, []byte{0}) == len(buf) {
			t.Fatalf("page %d was zeroed", p)
		}
	}
}
