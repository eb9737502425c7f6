package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// small is a VM that migrates in about a second: the smallest framebuffer
// and little guest RAM. Under the race detector, which slows the page
// writes and the compressor most, the workload writes less and pages go
// uncompressed, so that the instrumented host keeps up with wall time and
// pre-copy outruns it; flags after these override them.
func small(extra ...string) []string {
	args := []string{"-ram", "128MiB", "-profile", "P40-1Q", "-warmup", "100ms"}
	if raceEnabled {
		args = []string{"-ram", "64MiB", "-profile", "P40-1Q", "-warmup", "50ms", "-dirty", "1MiB", "-codec", "none"}
	}
	return append(args, extra...)
}

// result is what one run printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

func runArgs(args ...string) result {
	var out, errs bytes.Buffer
	code := run(args, &out, &errs)
	return result{code, out.String(), errs.String()}
}

// mustSucceed fails t unless r exited 0.
func mustSucceed(t *testing.T, r result) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// linesWith returns the lines of s that match re.
func linesWith(s string, re *regexp.Regexp) []string {
	var out []string
	for line := range strings.Lines(s) {
		line = strings.TrimSuffix(line, "\n")
		if re.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

var (
	digestLine = regexp.MustCompile(`^digest (ram|fb\d+) [0-9a-f]{16}$`)
	// The report's first line ends in the migration's outcome.
	outcomeLine = regexp.MustCompile(`^\S+ \[P40-\d+Q\] -> \S+ over .*: (\S+)$`)
	sourceRound = regexp.MustCompile(`^round \d+: [\d.]+ MB on the wire at [\d.]+ MB/s, dirtied [\d.]+ MB/s, expected stun \S+$`)
	destRound   = regexp.MustCompile(`^round \d+ received: [\d.]+ MB so far`)
)

// side returns the lines of a loopback run's output that one side printed,
// without their prefix.
func side(stdout, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(stdout) {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			b.WriteString(rest)
		}
	}
	return b.String()
}

// checkSide checks the shape of one side's output of a migration that
// succeeded, and returns its digest lines.
func checkSide(t *testing.T, name, out string, round *regexp.Regexp) []string {
	t.Helper()
	digests := linesWith(out, digestLine)
	// One vGPU: guest RAM and one framebuffer.
	if len(digests) != 2 || !strings.HasPrefix(digests[0], "digest ram ") || !strings.HasPrefix(digests[1], "digest fb0 ") {
		t.Errorf("%s: digest lines %q, want ram and fb0", name, digests)
	}
	if len(linesWith(out, round)) == 0 {
		t.Errorf("%s: no round line in\n%s", name, out)
	}
	outcomes := linesWith(out, outcomeLine)
	if len(outcomes) != 1 || outcomeLine.FindStringSubmatch(outcomes[0])[1] != "done" {
		t.Errorf("%s: report lines %q, want one with outcome done", name, outcomes)
	}
	return digests
}

// checkLoopback checks a loopback run that succeeded: both sides' output
// and the digests compared.
func checkLoopback(t *testing.T, r result) (src, dst string) {
	t.Helper()
	mustSucceed(t, r)
	src, dst = side(r.stdout, "src: "), side(r.stdout, "dst: ")
	sd := checkSide(t, "source", src, sourceRound)
	dd := checkSide(t, "destination", dst, destRound)
	if !slices.Equal(sd, dd) {
		t.Errorf("source digests %q, destination %q", sd, dd)
	}
	if !strings.Contains(r.stdout, "\ndigests match\n") {
		t.Errorf("no \"digests match\" in\n%s", r.stdout)
	}
	return src, dst
}

// A VM migrates in this process over loopback TCP; both sides print their
// rounds, a report whose outcome is done and the same digests, and -json
// writes both reports.
func TestLoopback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	checkLoopback(t, runArgs(small("-loopback", "-json", path)...))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Digests are strings: as JSON numbers most would exceed 2^53 and be
	// rounded by JavaScript and many JSON tools.
	var reps struct {
		Source, Destination struct {
			Outcome       string   `json:"outcome"`
			Source        string   `json:"source"`
			Mode          string   `json:"mode"`
			Rounds        []any    `json:"rounds"`
			WireBytes     int64    `json:"wire_bytes"`
			RegionDigests []string `json:"region_digests"`
		}
	}
	if err := json.Unmarshal(b, &reps); err != nil {
		t.Fatalf("%v in\n%s", err, b)
	}
	s, d := reps.Source, reps.Destination
	if s.Outcome != "done" || d.Outcome != "done" || len(s.Rounds) == 0 ||
		len(s.RegionDigests) != 2 || !slices.Equal(s.RegionDigests, d.RegionDigests) {
		t.Fatalf("JSON reports: source %+v, destination %+v", s, d)
	}
	for _, dg := range s.RegionDigests {
		if !hexDigest.MatchString(dg) {
			t.Errorf("digest %q in JSON, want 16 hexadecimal digits", dg)
		}
	}
	// The destination's report says what it saw of the same migration.
	if d.Source != "source" || d.Mode != s.Mode || len(d.Rounds) != len(s.Rounds) || d.WireBytes != s.WireBytes {
		t.Errorf("destination's JSON report: source %q, mode %q, %d rounds, %d B; source's: mode %q, %d rounds, %d B",
			d.Source, d.Mode, len(d.Rounds), d.WireBytes, s.Mode, len(s.Rounds), s.WireBytes)
	}
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{16}$`)

// The stream spread over three connections, encoded by two workers.
func TestLoopbackConnsWorkers(t *testing.T) {
	src, _ := checkLoopback(t, runArgs(small("-loopback", "-conns", "3", "-workers", "2")...))
	if !strings.Contains(src, " x3, ") {
		t.Errorf("the source's report does not name three connections:\n%s", src)
	}
}

// Pages sent uncompressed.
func TestLoopbackUncompressed(t *testing.T) {
	checkLoopback(t, runArgs(small("-loopback", "-codec", "none")...))
}

// A training VM with its float pages shuffled and its pages sent again as
// deltas: the digests agree at both ends.
func TestLoopbackShuffleDelta(t *testing.T) {
	checkLoopback(t, runArgs(small("-loopback", "-workload", "training", "-shuffle", "-delta-cache", "64MiB")...))
}

// Legacy mode: the framebuffer goes during the stun.
func TestLoopbackLegacy(t *testing.T) {
	src, _ := checkLoopback(t, runArgs(small("-loopback", "-mode", "legacy")...))
	if !strings.Contains(src, "legacy mode") {
		t.Errorf("the source's report does not say legacy mode:\n%s", src)
	}
}

// Post-copy: the VM resumes at the destination before its pages, runs a
// workload there that touches them, and ends with every page; the hybrid
// pre-copies first. Neither compares digests, which the running VM
// outdates.
func TestLoopbackPostCopy(t *testing.T) {
	for _, mode := range []string{"postcopy", "hybrid"} {
		args := small("-loopback", "-mode", mode)
		if mode == "hybrid" {
			// A stun target nothing meets, and a VM that dirties memory
			// all along: pre-copy never converges, and pages follow.
			args = append(args, "-stun-target", "1us", "-workload", "training", "-dirty", "256MiB")
		}
		r := runArgs(args...)
		mustSucceed(t, r)
		src, dst := side(r.stdout, "src: "), side(r.stdout, "dst: ")
		for name, out := range map[string]string{"source": src, "destination": dst} {
			if !strings.Contains(out, "  post-copy: window ") {
				t.Errorf("%s %s: no post-copy line in\n%s", mode, name, out)
			}
		}
		if !strings.Contains(dst, " runs on destination with every page: ") || !strings.Contains(r.stdout, "\nevery page landed\n") {
			t.Errorf("%s: no word that every page landed in\n%s", mode, r.stdout)
		}
		if mode == "hybrid" && len(linesWith(src, sourceRound)) == 0 {
			t.Errorf("hybrid: no pre-copy round in\n%s", src)
		}
	}
}

// A source and a destination started apart, as two machines would run
// them, agree on the digests.
func TestListenAndSend(t *testing.T) {
	dst, addr := startDestination(t, "-conns", "2")
	src := runArgs(small("-send", addr, "-conns", "2", "-workload", "training")...)
	mustSucceed(t, src)
	d := <-dst
	mustSucceed(t, d)
	sd := checkSide(t, "source", src.stdout, sourceRound)
	dd := checkSide(t, "destination", d.stdout, destRound)
	if !slices.Equal(sd, dd) {
		t.Errorf("source digests %q, destination %q", sd, dd)
	}
}

// A source whose stream the destination refuses — spread over more
// connections than it accepts — fails at both ends, with the reason on
// standard error, and leaves nothing running.
func TestConnsMismatchRefused(t *testing.T) {
	noLeaks(t, func() {
		dst, addr := startDestination(t, "-conns", "1")
		src := runArgs(small("-send", addr, "-conns", "2", "-warmup", "0s", "-workload", "idle")...)
		d := <-dst
		if src.code != 1 || !strings.Contains(src.stderr, "refused") {
			t.Errorf("source: exit %d, stderr %q; want 1 and a refusal", src.code, src.stderr)
		}
		if d.code != 1 || !strings.Contains(d.stderr, "2 connections") {
			t.Errorf("destination: exit %d, stderr %q; want 1 and the reason", d.code, d.stderr)
		}
	})
}

// Sending to an address nobody listens on fails with the reason on
// standard error, and leaves nothing running.
func TestSendNobodyListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	noLeaks(t, func() {
		r := runArgs(small("-send", addr, "-warmup", "0s", "-workload", "idle")...)
		if r.code != 1 || !strings.Contains(r.stderr, "livemigrate: ") || !strings.Contains(r.stderr, addr) {
			t.Errorf("exit %d, stderr %q; want 1 and an error naming %s", r.code, r.stderr, addr)
		}
	})
}

// keyFile writes a key file of hex digits and returns its path.
func keyFile(t *testing.T, hexKey string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(hexKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// With the same key at both ends the migration is authenticated and
// encrypted and the digests agree; with another at the destination both
// ends fail its authentication, and nothing is left running.
func TestKeyFile(t *testing.T) {
	key := keyFile(t, strings.Repeat("5a", 32))
	dst, addr := startDestination(t, "-key-file", key)
	src := runArgs(small("-send", addr, "-key-file", key, "-workload", "idle", "-warmup", "0s")...)
	mustSucceed(t, src)
	mustSucceed(t, <-dst)
	noLeaks(t, func() {
		dst, addr := startDestination(t, "-key-file", keyFile(t, strings.Repeat("a5", 32)))
		src := runArgs(small("-send", addr, "-key-file", key, "-warmup", "0s", "-workload", "idle")...)
		d := <-dst
		for side, r := range map[string]result{"source": src, "destination": d} {
			if r.code != 1 || !strings.Contains(r.stderr, "authentication failed") {
				t.Errorf("%s with another key: exit %d, stderr %q; want 1 and an authentication failure", side, r.code, r.stderr)
			}
		}
	})
}

func TestHelp(t *testing.T) {
	r := runArgs("-h")
	if r.code != 0 {
		t.Fatalf("-h: exit %d", r.code)
	}
	for _, want := range []string{"Usage:", "-listen ADDR", "-send ADDR", "-loopback", "-conns", "-profile", "-dirty"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("usage lacks %q:\n%s", want, r.stderr)
		}
	}
}

// Bad flags exit 2 with a message, before anything starts.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-loopback", "-profile", "nosuch"}, "nosuch"},
		{[]string{"-loopback", "-mode", "fast"}, "-mode"},
		{[]string{"-loopback", "-mode", "post-copy-now"}, "-mode"},
		{[]string{"-loopback", "-codec", "gzip"}, "-codec"},
		{[]string{"-loopback", "-workload", "mining"}, "-workload"},
		{[]string{"-loopback", "-ram", "lots"}, "-ram"},
		{[]string{"-loopback", "-conns", "0"}, "-conns"},
		{[]string{"-loopback", "-workers", "0"}, "-workers"},
		{[]string{"-loopback", "-warmup", "-1s"}, "-warmup"},
		{[]string{"-loopback", "-nosuch"}, "-nosuch"},
		{[]string{"-loopback", "extra"}, "unexpected"},
		{nil, "exactly one"},
		{[]string{"-loopback", "-send", "127.0.0.1:1"}, "exactly one"},
		{[]string{"-send", "127.0.0.1:1", "-serve"}, "-serve"},
		{[]string{"-listen", "127.0.0.1:0", "-serve", "-json", "x.json"}, "-json"},
		{[]string{"-loopback", "-key-file", "/nonexistent/key"}, "-key-file"},
		{[]string{"-loopback", "-key-file", keyFile(t, "abcd")}, "64 hex digits"},
	} {
		r := runArgs(tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"512MiB": 512 << 20, "2GiB": 2 << 30, "64MB": 64e6, "4096": 4096, "1.5GiB": 3 << 29,
		"8 KiB": 8 << 10, "100B": 100, "1gib": 1 << 30, "0": 0,
	} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("%q: %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1MiB", "MiB", "1XB", "1e30GiB", "NaN"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("%q: %d, want an error", in, b)
		}
	}
	for n, want := range map[int64]string{1 << 30: "1GiB", 512 << 20: "512MiB", 1000: "1000B", 0: "0B"} {
		if got := byteSize(n).String(); got != want {
			t.Errorf("%d prints %q, want %q", n, got, want)
		}
	}
}

// startDestination runs the command as a destination on a port of its
// own, and returns its result, when it exits, and its address.
func startDestination(t *testing.T, args ...string) (<-chan result, string) {
	t.Helper()
	out := &watchedBuffer{ready: make(chan string, 1)}
	var errs bytes.Buffer
	done := make(chan result, 1)
	go func() {
		code := run(append([]string{"-listen", "127.0.0.1:0"}, args...), out, &errs)
		done <- result{code, out.String(), errs.String()}
	}()
	select {
	case addr := <-out.ready:
		return done, addr
	case r := <-done:
		t.Fatalf("the destination exited %d before listening: %s", r.code, r.stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("the destination did not start listening")
	}
	return nil, ""
}

// watchedBuffer is the output of a command running on another goroutine;
// it reports the address of the "listening on" line once.
type watchedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	ready chan string
	seen  bool
}

var listeningLine = regexp.MustCompile(`(?m)^listening on (\S+) `)

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if m := listeningLine.FindSubmatch(w.b.Bytes()); m != nil && !w.seen {
		w.seen = true
		w.ready <- string(m[1])
	}
	return n, err
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// noLeaks runs f twice and fails t if the second run leaves more
// goroutines or open files (connections among them) behind than the first:
// the first starts what lives as long as the process (the signal watcher),
// the second must add nothing.
func noLeaks(t *testing.T, f func()) {
	t.Helper()
	f()
	// Goroutines of the first run may still be on their way out.
	goroutines, files := runtime.NumGoroutine(), openFiles()
	for range 10 {
		time.Sleep(10 * time.Millisecond)
		goroutines, files = min(goroutines, runtime.NumGoroutine()), min(files, openFiles())
	}
	f()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines || openFiles() > files {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines %d before, %d after; open files %d before, %d after:\n%s",
				goroutines, runtime.NumGoroutine(), files, openFiles(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openFiles counts the process's open file descriptors where the system
// lists them (Linux), and returns 0 elsewhere.
func openFiles() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(fds)
}
