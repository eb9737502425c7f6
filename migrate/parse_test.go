package migrate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// parseCase is one kind of name: every value of it, its parser, and names
// that must not parse, among them near misses a flag or a script might
// write (another case, a hyphen for a space, the zero value's String).
type parseCase struct {
	kind    string
	values  []fmt.Stringer
	parse   func(string) (fmt.Stringer, error)
	unknown []string
}

// parser adapts a typed parser to the table's.
func parser[T fmt.Stringer](parse func(string) (T, error)) func(string) (fmt.Stringer, error) {
	return func(s string) (fmt.Stringer, error) { return parse(s) }
}

// named returns every value of T with a name: those whose String is not
// the fallback "T(n)". A value added later is tested without a change
// here, and fails until its parser knows it.
func named[T interface {
	~uint8
	fmt.Stringer
}]() []fmt.Stringer {
	var out []fmt.Stringer
	for n := 0; n <= 255; n++ {
		if v := T(n); !strings.HasSuffix(v.String(), fmt.Sprintf("(%d)", n)) {
			out = append(out, v)
		}
	}
	return out
}

// TestParseNames checks that every value's String parses back to it, and
// that a name no value prints is refused with ErrConfig.
func TestParseNames(t *testing.T) {
	cases := []parseCase{
		{"mode", named[Mode](), parser(ParseMode),
			[]string{"", "precopy", "Legacy", "pre copy", Mode(0).String(), "both"}},
		{"fidelity", named[Fidelity](), parser(ParseFidelity),
			[]string{"", "Model", "bytes ", Fidelity(0).String()}},
		{"non-convergence", named[NonConvergence](), parser(ParseNonConvergence),
			[]string{"", "switch", "switch-over-anyway", "Abort", NonConvergence(0).String()}},
		{"fault", named[Fault](), parser(ParseFault),
			[]string{"", "link down", "Refused", Fault(0).String(), Fault(numFaults + 2).String()}},
		{"phase", named[Phase](), parser(ParsePhase),
			[]string{"", "precopy", "final-RAM", "final ram", "Done", Phase(0).String(), Phase(numPhases + 1).String()}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			if len(c.values) < 2 {
				t.Fatalf("%d named values", len(c.values))
			}
			for _, v := range c.values {
				got, err := c.parse(v.String())
				if err != nil || got != v {
					t.Errorf("parse(%q) = %v, %v; want %v", v.String(), got, err, v)
				}
			}
			for _, s := range c.unknown {
				if got, err := c.parse(s); !errors.Is(err, ErrConfig) {
					t.Errorf("parse(%q) = %v, %v; want an error wrapping ErrConfig", s, got, err)
				}
			}
		})
	}
}
