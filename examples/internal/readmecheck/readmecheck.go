// Package readmecheck holds the README to what the examples print: each
// example's test runs the code path behind its README output block and
// calls Check, which fails, with a diff, when the block is not what the
// run printed.
//
// An output block is the first fenced block without an info string (a
// plain ```) in the README section whose heading is "### NAME: ...". It
// shows the run's output in pieces: a line "..." stands for lines left
// out, and between two of them the lines must follow one another in the
// output exactly as in the block (trailing spaces aside). The block may
// start after the output's first line and end before its last.
package readmecheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Elision is the line of a block that stands for lines left out.
const Elision = "..."

// README returns the module's README.md, found from the working directory
// up.
func README(t testing.TB) []byte {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/vgpusim/vgpusim\n")) {
			readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
			if err != nil {
				t.Fatal(err)
			}
			return readme
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no README.md beside the module's go.mod above the working directory")
		}
		dir = parent
	}
}

// Block returns the lines of the output block of the README section of
// example name.
func Block(t testing.TB, readme []byte, name string) []string {
	t.Helper()
	var (
		inSection, inFence, plain bool
		block                     []string
	)
	sc := bufio.NewScanner(bytes.NewReader(readme))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inFence && line == "```":
			if plain {
				return block
			}
			inFence = false
		case inFence:
			if plain {
				block = append(block, line)
			}
		case strings.HasPrefix(line, "#"):
			inSection = strings.HasPrefix(line, "### "+name+":")
		case inSection && strings.HasPrefix(line, "```"):
			inFence, plain = true, line == "```"
		}
	}
	t.Fatalf("README.md: no output block (a plain ``` fence) under a heading \"### %s: ...\"", name)
	return nil
}

// Check fails t unless the README's output block for example name shows
// output, as the package doc says.
func Check(t testing.TB, name, output string) {
	t.Helper()
	if err := Match(Block(t, README(t), name), output); err != nil {
		t.Errorf("README.md's output block for %s is not what it prints (go run ./examples/%s): %v", name, name, err)
	}
}

// CheckRun runs an example's run function with default flags, as
// `go run ./examples/NAME` does, and checks its output with Check.
func CheckRun(t testing.TB, name string, run func(args []string, stdout, stderr io.Writer) int) {
	t.Helper()
	var out, errs bytes.Buffer
	if code := run(nil, &out, &errs); code != 0 {
		t.Fatalf("%s exited %d: %s", name, code, errs.String())
	}
	Check(t, name, out.String())
}

// Match reports whether block shows output: nil if so, else an error
// with a diff of the first piece that does not match.
func Match(block []string, output string) error {
	out := strings.Split(strings.TrimRight(output, "\n"), "\n")
	for i := range out {
		out[i] = strings.TrimRight(out[i], " \t")
	}
	pos := 0
	for _, seg := range segments(block) {
		at := find(out[pos:], seg)
		if at < 0 {
			got := closest(out[pos:], seg)
			return fmt.Errorf("these %d lines do not follow one another in the output after its line %d (-README +output, the output's closest lines):\n%s",
				len(seg), pos, cmp.Diff(seg, got))
		}
		pos += at + len(seg)
	}
	return nil
}

// segments cuts a block at its elisions, trailing spaces trimmed.
func segments(block []string) [][]string {
	var segs [][]string
	var cur []string
	for _, l := range block {
		l = strings.TrimRight(l, " \t")
		if l == Elision {
			if len(cur) > 0 {
				segs = append(segs, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		segs = append(segs, cur)
	}
	return segs
}

// find returns the first index at which seg occurs in out, or -1.
func find(out, seg []string) int {
	for i := 0; i+len(seg) <= len(out); i++ {
		if equalAt(out[i:], seg) == len(seg) {
			return i
		}
	}
	return -1
}

// closest returns the run of len(seg) lines of out that has the most lines
// equal to seg's, the first such.
func closest(out, seg []string) []string {
	best, bestN := 0, -1
	for i := 0; i < len(out); i++ {
		if n := equalAt(out[i:], seg); n > bestN {
			best, bestN = i, n
		}
	}
	return out[best:min(best+len(seg), len(out))]
}

// equalAt counts the lines of seg equal to those of out at the same place.
func equalAt(out, seg []string) int {
	n := 0
	for j, l := range seg {
		if j < len(out) && out[j] == l {
			n++
		}
	}
	return n
}
