package sweep

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestParseShard(t *testing.T) {
	good := []struct {
		in   string
		want Shard
	}{
		{"0/1", Shard{0, 1}}, {"0/4", Shard{0, 4}}, {"3/4", Shard{3, 4}}, {"11/12", Shard{11, 12}},
		{"+1/2", Shard{1, 2}}, {"007/8", Shard{7, 8}},
	}
	for _, tt := range good {
		got, err := ParseShard(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	bad := []struct{ in, reason string }{
		{"", `want "i/n"`}, {"3", `want "i/n"`}, {"a/4", "index"}, {"1/b", "count"}, {"1/", "count"},
		{"/4", "index"}, {"4/4", "from 0 to 3"}, {"5/4", "from 0 to 3"}, {"-1/4", "from 0 to 3"},
		{"0/0", "at least 1"}, {"0/-2", "at least 1"}, {"1/2/3", "count"}, {" 1/2", "index"}, {"1.0/2", "index"},
	}
	for _, tt := range bad {
		got, err := ParseShard(tt.in)
		var se *ShardError
		switch {
		case err == nil:
			t.Errorf("ParseShard(%q) = %v, want an error", tt.in, got)
		case !errors.Is(err, ErrShard) || !errors.As(err, &se) || se.Input != tt.in:
			t.Errorf("ParseShard(%q): %v (%T), want a *ShardError of the input wrapping ErrShard", tt.in, err, err)
		case !strings.HasPrefix(err.Error(), "sweep: ") || !strings.Contains(err.Error(), tt.reason):
			t.Errorf("ParseShard(%q): %q, want it to start \"sweep: \" and say %q", tt.in, err, tt.reason)
		case got != Shard{}:
			t.Errorf("ParseShard(%q) returned %v with its error", tt.in, got)
		}
	}
	if !strings.HasPrefix(ErrShard.Error(), "sweep: ") {
		t.Errorf("ErrShard %q lacks the package name", ErrShard)
	}
}

// A shard's string parses back to the shard; the zero Shard prints as the
// whole grid it is.
func TestShardStringRoundTrip(t *testing.T) {
	for _, s := range []Shard{{0, 1}, {2, 7}, {99, 100}} {
		got, err := ParseShard(s.String())
		if err != nil || got != s {
			t.Errorf("ParseShard(%q) = %v, %v", s.String(), got, err)
		}
	}
	if s := (Shard{}); s.String() != "0/1" || !s.Whole() || !s.Header() || s.Validate() != nil {
		t.Errorf("zero Shard: %q, whole %v, header %v, %v", s.String(), s.Whole(), s.Header(), s.Validate())
	}
	for _, s := range []Shard{{1, 1}, {0, -1}, {-1, 0}, {3, 2}} {
		if err := s.Validate(); !errors.Is(err, ErrShard) {
			t.Errorf("%#v.Validate() = %v, want ErrShard", s, err)
		}
	}
}

// Shards 0 to count-1 cover every point exactly once, in order, in blocks
// whose sizes differ by at most one.
func TestRangeCoversEveryPoint(t *testing.T) {
	for n := 0; n <= 40; n++ {
		for count := 1; count <= 45; count++ {
			next := 0
			small, large := n, 0
			for i := range count {
				lo, hi := Shard{i, count}.Range(n)
				if lo != next || hi < lo {
					t.Fatalf("n %d, shard %d/%d: [%d, %d), want it to start at %d", n, i, count, lo, hi, next)
				}
				next = hi
				small, large = min(small, hi-lo), max(large, hi-lo)
			}
			if next != n || large-small > 1 {
				t.Fatalf("n %d, %d shards: end at %d, blocks of %d to %d points", n, count, next, small, large)
			}
		}
		if lo, hi := (Shard{}).Range(n); lo != 0 || hi != n {
			t.Fatalf("zero Shard: [%d, %d) of %d", lo, hi, n)
		}
	}
}

func TestRangePanics(t *testing.T) {
	for _, c := range []struct {
		s Shard
		n int
	}{{Shard{4, 4}, 10}, {Shard{0, 0}, -1}, {Shard{0, 2}, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%#v.Range(%d) did not panic", c.s, c.n)
				}
			}()
			c.s.Range(c.n)
		}()
	}
}

// The flags set the config; bad values are usage errors.
func TestRegisterFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"-shard", "2/5", "-workers", "3"}); err != nil {
		t.Fatal(err)
	}
	if c != (Config{Workers: 3, Shard: Shard{2, 5}}) {
		t.Errorf("config %+v", c)
	}
	for _, args := range [][]string{{"-shard", "5/5"}, {"-workers", "-1"}, {"-workers", "x"}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		new(Config).RegisterFlags(fs)
		if err := fs.Parse(args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
