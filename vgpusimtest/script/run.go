package script

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

var (
	rewriteFlag = flag.Bool("vgpusimtest.rewrite", false,
		"rewrite scenario scripts (package vgpusimtest/script) with their actual outputs instead of failing")
)

// rewriteEnv is the environment variable that, set to 1, rewrites
// scripts as the flag does, for a go test run whose flags a tool sets.
const rewriteEnv = "VGPUSIM_REWRITE"

// rewriting reports whether scripts are rewritten rather than checked.
func rewriting() bool { return *rewriteFlag || os.Getenv(rewriteEnv) == "1" }

// TB is what Run needs of a test: *testing.T and *testing.B have it, as
// does any testing.TB, and so may another runner's own recorder. Errorf
// reports a mismatch and lets the script run on; Fatalf reports a script
// that cannot run on, and the runner returns after it whether or not it
// stops the goroutine, as a recorder's does not.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Run runs the script at path against a fresh simulated world and checks
// every command's output against the one written after it. A mismatch is
// reported with the file, the line and the command, the expected and the
// actual output; the script runs on, so that one report shows every
// difference. With -vgpusimtest.rewrite (or VGPUSIM_REWRITE=1) the file
// is rewritten with the actual outputs instead. It takes a TB, not a
// *testing.T, so that a benchmark or another runner can run a script.
func Run(t TB, path string) {
	t.Helper()
	runFile(t, path, rewriting())
}

// RunDir runs every script (*.txt) under dir, in lexical order, each as a
// subtest named by its path below dir. A dir that holds none fails the
// test, as a misspelt directory would pass silently otherwise. It takes a
// *testing.T, not a TB, because the subtests are t.Run's; a runner
// without subtests calls Run for each file.
func RunDir(t *testing.T, dir string) {
	t.Helper()
	runDir(t, dir)
}

// dirTB is what RunDir needs of a test: a TB that runs subtests.
type dirTB interface {
	TB
	Run(name string, f func(t *testing.T)) bool
}

func runDir(t dirTB, dir string) {
	t.Helper()
	paths, err := scripts(dir)
	if err != nil {
		t.Fatalf("script: %v", err)
		return
	}
	if len(paths) == 0 {
		t.Fatalf("script: no scripts (*.txt) under %s", dir)
		return
	}
	for _, p := range paths {
		name, err := filepath.Rel(dir, p)
		if err != nil {
			name = p
		}
		t.Run(filepath.ToSlash(name), func(t *testing.T) { Run(t, p) })
	}
}

// scripts returns the paths of the scripts under dir, sorted.
func scripts(dir string) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".txt") {
			paths = append(paths, p)
		}
		return err
	})
	slices.Sort(paths)
	return paths, err
}

// runFile runs one script, reporting to t; with rewrite it writes the
// actual outputs back to the file, even where they match.
func runFile(t TB, path string, rewrite bool) {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("script: %v", err)
		return
	}
	s, err := parse(path, string(text))
	if err != nil {
		t.Fatalf("%v", err)
		return
	}
	actual := make([]*string, len(s.cases))
	w := newWorld()
	for i, c := range s.cases {
		out, err := w.exec(c.cmd, c.args)
		if err != nil {
			// The script is wrong, or the library panicked: nothing
			// after this command means what it says.
			t.Fatalf("%s:%d: %s: %v", path, c.line, c.text, err)
			break
		}
		out = normalize(out)
		actual[i] = &out
		switch {
		case rewrite:
		case !c.hasSep:
			t.Errorf("%s:%d: %s: %v: no expected output (write it with -vgpusimtest.rewrite)\nactual:\n%s",
				path, c.line, c.text, errMismatch, out)
		case out != c.expected:
			t.Errorf("%s:%d: %s: %v\nexpected:\n%sactual:\n%s", path, c.line, c.text, errMismatch, c.expected, out)
		}
	}
	if !rewrite {
		return
	}
	if err := os.WriteFile(path, []byte(s.rewrite(actual)), 0o644); err != nil {
		t.Errorf("script: rewrite: %v", err)
	}
}

// exec runs one command. A script error or a panic is returned; anything
// the world refuses is the command's output, "error: " and the reason.
func (w *world) exec(name string, list []arg) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	c, ok := commands[name]
	if !ok {
		return "", fmt.Errorf("%w %q (commands: %s)", errUnknownCommand, name, strings.Join(commandNames(), " "))
	}
	a, err := newArgs(name, list, c.keys)
	if err != nil {
		return "", err
	}
	out, err = c.run(w, a)
	if a.err != nil {
		return "", a.err
	}
	if isScriptError(err) {
		return "", err
	}
	if err != nil {
		out += "error: " + err.Error() + "\n"
	}
	return out, nil
}
