package main

import (
	"testing"

	"github.com/vgpusim/vgpusim/examples/internal/readmecheck"
)

// The README's output block is what the program prints with default flags.
func TestREADME(t *testing.T) {
	readmecheck.CheckRun(t, "remotegpu", run)
}
