package sweeptest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/sweep"
)

// tb records failures instead of failing the test.
type tb struct {
	testing.TB
	errs []string
}

func (r *tb) Helper()                   {}
func (r *tb) Errorf(f string, a ...any) { r.errs = append(r.errs, f) }

// A grid of seven points written with sweep's writers: four shards,
// concatenated, are the whole; a shard that writes its header twice is
// caught.
func TestConcatEqual(t *testing.T) {
	rows := [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}, {"f"}, {"g"}}
	write := func(s sweep.Shard, header bool) map[string][]byte {
		lo, hi := s.Range(len(rows))
		var c, j bytes.Buffer
		if header {
			s = sweep.Shard{}
		}
		if err := sweep.WriteCSV(&c, s, []string{"x"}, rows[lo:hi]); err != nil {
			t.Fatal(err)
		}
		if err := sweep.WriteJSONLines(&j, rows[lo:hi]); err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{"out.csv": c.Bytes(), "out.jsonl": j.Bytes()}
	}
	whole := write(sweep.Shard{}, false)
	Equal(t, "4 shards", whole, Concat(t, 4, func(s sweep.Shard) map[string][]byte { return write(s, false) }))

	r := &tb{TB: t}
	Equal(r, "every shard a header", whole, Concat(t, 4, func(s sweep.Shard) map[string][]byte { return write(s, true) }))
	if len(r.errs) != 1 {
		t.Errorf("%d failures, want one, for the CSV", len(r.errs))
	}
	r.errs = nil
	Equal(r, "a file missing", whole, map[string][]byte{"out.csv": whole["out.csv"]})
	if len(r.errs) != 1 {
		t.Errorf("%d failures for a missing file, want one", len(r.errs))
	}
}

func TestDiff(t *testing.T) {
	if err := diff([]byte("a\nb\n"), []byte("a\nb\n")); err != nil {
		t.Error(err)
	}
	for _, c := range [][2]string{{"a\nb\n", "a\nc\n"}, {"a\nb\n", "a\n"}, {"a\n", "a\nb\n"}, {"a", "a\n"}} {
		err := diff([]byte(c[0]), []byte(c[1]))
		if err == nil || !strings.Contains(err.Error(), "line ") {
			t.Errorf("diff(%q, %q) = %v", c[0], c[1], err)
		}
	}
}
