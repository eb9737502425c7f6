package script

import (
	"errors"
	"slices"
	"testing"
)

func TestTokenize(t *testing.T) {
	toks, err := tokenize(`migrate vm=a via=(x, y ,z) quiet label="two words" empty=()`)
	if err != nil {
		t.Fatal(err)
	}
	want := []arg{{"migrate", nil}, {"vm", []string{"a"}}, {"via", []string{"x", "y", "z"}}, {"quiet", nil},
		{"label", []string{"two words"}}, {"empty", []string{}}}
	if !slices.EqualFunc(toks, want, func(a, b arg) bool {
		return a.key == b.key && slices.Equal(a.vals, b.vals) && (a.vals == nil) == (b.vals == nil)
	}) {
		t.Fatalf("tokens %+v, want %+v", toks, want)
	}
	for _, bad := range []string{`a=(b`, `a=b)`, `a="b`, `=b`, `a=b(c)`, `a!=b`} {
		if _, err := tokenize(bad); !errors.Is(err, errSyntax) {
			t.Errorf("tokenize(%q) = %v, want a syntax error", bad, err)
		}
	}
}

func TestParseCases(t *testing.T) {
	text := "# c\n\ncmd a=1\n  b=2\n# a comment among keys\n  c\n----\nout\n\nnext\n----\n\nlast\n----\n----\nx\n\ny\n----\n----\n\nbare"
	s, err := parse("f", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.cases) != 4 {
		t.Fatalf("%d cases", len(s.cases))
	}
	c := s.cases[0]
	if c.line != 3 || c.cmd != "cmd" || len(c.args) != 3 || c.expected != "out\n" || !c.hasSep {
		t.Errorf("case 0: %+v", c)
	}
	if c := s.cases[1]; c.line != 10 || c.expected != "" || !c.hasSep {
		t.Errorf("case 1: %+v", c)
	}
	if c := s.cases[2]; c.line != 13 || c.expected != "x\n\ny\n" {
		t.Errorf("case 2: %+v", c)
	}
	if c := s.cases[3]; c.line != 22 || c.hasSep {
		t.Errorf("case 3: %+v", c)
	}
}

func TestParseCRLF(t *testing.T) {
	s, err := parse("f", "state\r\n----\r\nempty\r\n")
	if err != nil || len(s.cases) != 1 || s.cases[0].expected != "empty\n" {
		t.Fatalf("%+v %v", s, err)
	}
}

func TestUnits(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "64KiB": 64 << 10, "1.5GiB": 3 << 29, "2TiB": 2 << 40, "7B": 7} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1KiB", "1.5B", "1e300", "NaN", "4 GB"} {
		if got, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", bad, got)
		}
	}
	for in, want := range map[string]int64{"100Mbit": 100e6, "10Gb/s": 10e9, "2.5e9": 2.5e9, "1Kbit": 1000} {
		if got, err := parseBits(in); err != nil || got != want {
			t.Errorf("parseBits(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestArgs(t *testing.T) {
	list, err := tokenize("c n=3 d=2s s=1MiB f=0.5 flag off=false names=(a, b)")
	if err != nil {
		t.Fatal(err)
	}
	a, err := newArgs("c", list[1:], []string{"n", "d", "s", "f", "flag", "off", "names", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	if a.int("n", 0, 0, 9) != 3 || a.dur("d", 0).String() != "2s" || a.size("s", 0) != 1<<20 || a.float("f", 0, 0, 1) != 0.5 ||
		!a.flag("flag") || a.flag("off") || a.flag("absent") || !slices.Equal(a.list("names"), []string{"a", "b"}) ||
		a.str("absent", "def") != "def" || a.err != nil {
		t.Fatalf("args read wrong: %v", a.err)
	}
	if a.int("n", 0, 4, 9); !errors.Is(a.err, errBadValue) {
		t.Errorf("out of range: %v", a.err)
	}
	a.err = nil
	if a.need("absent"); !errors.Is(a.err, errMissingKey) {
		t.Errorf("missing: %v", a.err)
	}
	if _, err := newArgs("c", list[1:], []string{"n"}); !errors.Is(err, errUnknownKey) {
		t.Errorf("unknown key: %v", err)
	}
}
