package migrate

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs fewer property-test cases under the race detector, unless
// -rapid.checks is given: every case is a whole byte-exact migration, and
// the race detector makes each ten times slower. The full count runs
// without it.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if raceEnabled && !set {
		if err := flag.Set("rapid.checks", "4"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
