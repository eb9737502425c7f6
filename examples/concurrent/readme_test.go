package main

import (
	"bytes"
	"testing"

	"github.com/vgpusim/vgpusim/examples/internal/readmecheck"
)

// The README's output block is what the program prints with default flags.
func TestREADME(t *testing.T) {
	if raceEnabled {
		t.Skip("the default run under the race detector takes minutes")
	}
	var out, errs bytes.Buffer
	if code := run(nil, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	readmecheck.Check(t, "concurrent", out.String())
}
