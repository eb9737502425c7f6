package script

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a TB that keeps what the runner reports, so that a test can
// check a failure the runner must report without failing itself.
type recorder struct {
	errs, fatals, ran []string
}

// Run records a subtest's name without running it: its function takes a
// *testing.T the recorder does not have.
func (r *recorder) Run(name string, _ func(*testing.T)) bool {
	r.ran = append(r.ran, name)
	return true
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
}

// writeScript writes text to a file of its own and returns its path.
func writeScript(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.txt")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunDir runs the runner's own scripts, one subtest each.
func TestRunDir(t *testing.T) {
	RunDir(t, "testdata/scripts")
}

// TestRunDirEmpty: a directory without scripts fails, as a misspelt one
// would otherwise pass; so does one that is not there.
func TestRunDirEmpty(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "none")} {
		var r recorder
		runDir(&r, dir)
		if len(r.fatals) != 1 || len(r.ran) != 0 {
			t.Errorf("%s: fatals %q, ran %q", dir, r.fatals, r.ran)
		}
	}
}

// TestRunDirNames: every *.txt under the directory runs, in order, named
// by its path below it; other files do not.
func TestRunDirNames(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"b.txt", "a/c.txt", "a/notes.md", "z.txt.orig"} {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var r recorder
	runDir(&r, dir)
	if got := strings.Join(r.ran, " "); got != "a/c.txt b.txt" || len(r.fatals) != 0 {
		t.Fatalf("ran %q, fatals %q", got, r.fatals)
	}
}

const goodScript = `# A comment.
host name=h1
----
h1: 1 x P40, 768 GiB RAM, synthetic memory

vm id=a host=h1 profile=P40-4Q
  ram=2GiB
----
a on h1: P40-4Q on gpu 0 slot 0, running

state
----
h1: a running
`

func TestRunPasses(t *testing.T) {
	var r recorder
	runFile(&r, writeScript(t, goodScript), false)
	if len(r.errs)+len(r.fatals) != 0 {
		t.Fatalf("errors %q, fatals %q", r.errs, r.fatals)
	}
}

// TestRunTakesTB: Run reports to any TB, not only a *testing.T, so that
// another runner sees the failures.
func TestRunTakesTB(t *testing.T) {
	if rewriting() {
		t.Skip("rewriting: Run would not compare")
	}
	var r recorder
	Run(&r, writeScript(t, strings.Replace(goodScript, "h1: a running", "h1: a paused", 1)))
	if len(r.fatals) != 0 || len(r.errs) != 1 || !strings.Contains(r.errs[0], errMismatch.Error()) {
		t.Fatalf("errors %q, fatals %q; want one mismatch", r.errs, r.fatals)
	}
}

// BenchmarkRun runs a script as a benchmark: Run takes a *testing.B.
func BenchmarkRun(b *testing.B) {
	for b.Loop() {
		Run(b, "testdata/scripts/basic.txt")
	}
}

// TestMismatch: a wrong output is reported with the file and line, the
// command, what was expected and what came, and the script runs on.
func TestMismatch(t *testing.T) {
	text := strings.Replace(goodScript, "a on h1: P40-4Q on gpu 0 slot 0, running", "a on h1: P40-8Q on gpu 0 slot 0, running", 1)
	text = strings.Replace(text, "h1: a running", "h1: a paused", 1)
	p := writeScript(t, text)
	var r recorder
	runFile(&r, p, false)
	if len(r.fatals) != 0 || len(r.errs) != 2 {
		t.Fatalf("errors %q, fatals %q; want two mismatches", r.errs, r.fatals)
	}
	for _, want := range []string{p + ":6: vm id=a host=h1 profile=P40-4Q", errMismatch.Error(),
		"expected:\na on h1: P40-8Q on gpu 0 slot 0, running\n", "actual:\na on h1: P40-4Q on gpu 0 slot 0, running\n"} {
		if !strings.Contains(r.errs[0], want) {
			t.Errorf("mismatch message %q lacks %q", r.errs[0], want)
		}
	}
	if !strings.Contains(r.errs[1], p+":11: state") {
		t.Errorf("second mismatch %q", r.errs[1])
	}
}

// TestScriptErrors: a script that is wrong fails at its line and stops.
func TestScriptErrors(t *testing.T) {
	for _, c := range []struct {
		name, text string
		err        error
		line       int
	}{
		{"unknown command", "host name=h1\n----\nh1: 1 x P40, 768 GiB RAM, synthetic memory\n\nfly to=moon\n----\n", errUnknownCommand, 5},
		{"unknown key", "host name=h1 colour=red\n----\n", errUnknownKey, 1},
		{"key twice", "host name=h1 name=h2\n----\n", errUnknownKey, 1},
		{"bad size", "host name=h1 ram=lots\n----\n", errBadValue, 1},
		{"bad duration", "advance by=soon\n----\n", errBadValue, 1},
		{"negative duration", "advance by=-1s\n----\n", errBadValue, 1},
		{"missing key", "host gpus=2\n----\n", errMissingKey, 1},
		{"neither by nor to", "advance\n----\n", errMissingKey, 1},
		{"key of another kind", "host name=h\n----\nh: 1 x P40, 768 GiB RAM, synthetic memory\n\nvm id=a host=h profile=P40-1Q\n----\na on h: P40-1Q on gpu 0 slot 0, running\n\nworkload vm=a kind=desktop fps=60\n----\n", errUnknownKey, 9},
		{"bad phase", "step migration=m1 until=lunch\n----\n", errBadValue, 1},
		{"phase in another case", "step migration=m1 until=Pre-Copy\n----\n", errBadValue, 1},
		{"bad mode", "migrate vm=a to=h1 mode=postcopy\n----\n", errBadValue, 1},
		{"sim after host", "host name=h1\n----\nh1: 1 x P40, 768 GiB RAM, synthetic memory\n\nsim max-per-host=2\n----\nok\n", errOrder, 5},
		{"sim after capacity", "capacity link=10g rate=1Gbit\n----\n\nsim\n----\nok\n", errOrder, 4},
		{"sim after rates", "rates link=10g\n----\n\nsim\n----\nok\n", errOrder, 4},
		{"separator alone", "----\nfoo\n", errSyntax, 1},
		{"unclosed block", "state\n----\n----\nempty\n", errSyntax, 1},
		{"unbalanced", "host name=(h1\n----\n", errSyntax, 1},
		{"bad key", "host na!me=h1\n----\n", errSyntax, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeScript(t, c.text)
			var r recorder
			runFile(&r, p, false)
			if len(r.fatals) != 1 {
				t.Fatalf("fatals %q, errors %q; want one fatal", r.fatals, r.errs)
			}
			if want := fmt.Sprintf("%s:%d:", p, c.line); !strings.HasPrefix(r.fatals[0], want) {
				t.Errorf("fatal %q does not start with %q", r.fatals[0], want)
			}
			if !strings.Contains(r.fatals[0], c.err.Error()) {
				t.Errorf("fatal %q does not say %q", r.fatals[0], c.err)
			}
		})
	}
}

// TestRewrite: a script of commands alone, rewritten, then passes; a
// second rewrite changes nothing; comments and spacing stay.
func TestRewrite(t *testing.T) {
	text := "# Setup.\nhost name=h1\n\n# A VM.\nvm id=a host=h1 profile=P40-4Q\n----\nstale output\nmore of it\n\nstate\n----\n----\nold\n\nblock\n----\n----\n\nhosts"
	p := writeScript(t, text)
	var r recorder
	runFile(&r, p, true)
	if len(r.errs)+len(r.fatals) != 0 {
		t.Fatalf("rewrite: errors %q, fatals %q", r.errs, r.fatals)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `# Setup.
host name=h1
----
h1: 1 x P40, 768 GiB RAM, synthetic memory

# A VM.
vm id=a host=h1 profile=P40-4Q
----
a on h1: P40-4Q on gpu 0 slot 0, running

state
----
h1: a running

hosts
----
h1: 764 GiB of 768 GiB RAM free
  gpu 0: a slot 0 (P40-4Q)
`
	if string(got) != want {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", got, want)
	}
	runFile(&r, p, false)
	if len(r.errs)+len(r.fatals) != 0 {
		t.Fatalf("rewritten script fails: errors %q, fatals %q", r.errs, r.fatals)
	}
	runFile(&r, p, true)
	if again, _ := os.ReadFile(p); string(again) != want {
		t.Fatalf("a second rewrite changed the file:\n%s", again)
	}
}

// TestRewriteStops: a rewrite that meets a script error reports it and
// leaves the cases after it as they were.
func TestRewriteStops(t *testing.T) {
	text := "state\n----\nold\n\nbogus\n----\nkept\n\nstate\n----\nkept too\n"
	p := writeScript(t, text)
	var r recorder
	runFile(&r, p, true)
	if len(r.fatals) != 1 || !strings.Contains(r.fatals[0], errUnknownCommand.Error()) {
		t.Fatalf("fatals %q", r.fatals)
	}
	got, _ := os.ReadFile(p)
	if want := "state\n----\nempty\n\nbogus\n----\nkept\n\nstate\n----\nkept too\n"; string(got) != want {
		t.Fatalf("rewritten:\n%s", got)
	}
}

// TestDoubleSeparator: an output with blank lines is written between
// double separators, and reads back whole.
func TestDoubleSeparator(t *testing.T) {
	s, err := parse("x", "state\n----\nold\n")
	if err != nil {
		t.Fatal(err)
	}
	out := "first\n\nthird\n"
	text := s.rewrite([]*string{&out})
	if want := "state\n----\n----\nfirst\n\nthird\n----\n----\n"; text != want {
		t.Fatalf("rewrite %q, want %q", text, want)
	}
	back, err := parse("x", text)
	if err != nil || len(back.cases) != 1 || back.cases[0].expected != out {
		t.Fatalf("parsed back %+v, %v", back, err)
	}
}

func TestMissingOutput(t *testing.T) {
	var r recorder
	runFile(&r, writeScript(t, "state\n"), false)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "no expected output") {
		t.Fatalf("errors %q", r.errs)
	}
}

func TestRewriteEnv(t *testing.T) {
	t.Setenv(rewriteEnv, "1")
	if !rewriting() {
		t.Fatal("VGPUSIM_REWRITE=1 does not rewrite")
	}
	t.Setenv(rewriteEnv, "0")
	if rewriting() != *rewriteFlag {
		t.Fatal("VGPUSIM_REWRITE=0 rewrites")
	}
}

func TestMissingFile(t *testing.T) {
	var r recorder
	runFile(&r, filepath.Join(t.TempDir(), "none.txt"), false)
	if len(r.fatals) != 1 || !strings.Contains(r.fatals[0], "none.txt") {
		t.Fatalf("fatals %q", r.fatals)
	}
}
