package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/vgpusim/vgpusim/migrate"
)

// printReport prints rep, if there is one, and a digest line per region.
func printReport(w io.Writer, rep *migrate.Report) {
	if rep == nil {
		return
	}
	fmt.Fprint(w, rep.String())
	for i, d := range rep.RegionDigests {
		fmt.Fprintf(w, "digest %s %v\n", regionName(i), d)
	}
}

// regionName names region i of a migration's stream: guest RAM first, then
// each vGPU's framebuffer.
func regionName(i int) string {
	if i == 0 {
		return "ram"
	}
	return fmt.Sprintf("fb%d", i-1)
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func mbps(bytesPerSec int64) float64 { return float64(bytesPerSec) / 1e6 }

// writeReport writes rep as JSON to path, if both are set.
func writeReport(path string, rep *migrate.Report) error {
	if path == "" || rep == nil {
		return nil
	}
	return writeJSON(path, rep)
}

// writeJSON writes v, indented, to path.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("the report as JSON: %w", err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// lineWriter prefixes every line written through it, and writes whole
// lines only, under a lock it shares with the other side's lineWriter, so
// that two sides printing at once interleave by lines, never inside one.
type lineWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte // the line begun and not ended yet
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	var out []byte
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		out = append(append(out, l.prefix...), l.buf[:i+1]...)
		l.buf = l.buf[i+1:]
	}
	if len(out) > 0 {
		if _, err := l.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flush ends the line begun, if any.
func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf)
		l.buf = nil
	}
}
