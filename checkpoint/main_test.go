package checkpoint

import (
	"flag"
	"os"
	"testing"
)

// TestMain shortens the fuzzer's minimization of new inputs from 60 s to
// 2 s unless -fuzzminimizetime is given. The fuzz inputs here are whole
// streams of a few KiB; the minimizer tries removing every subset of their
// bytes, so minimizing one takes the full minute, and a fuzz run of 30 s
// would do nothing else.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.fuzzminimizetime" })
	if !set {
		if err := flag.Set("test.fuzzminimizetime", "2s"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
