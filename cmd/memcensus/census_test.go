package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
)

// testImage writes an image of generated pages — counts[c] pages of each
// class c, interleaved — plus tail bytes of text, and returns its path.
func testImage(t *testing.T, pageSize int, counts map[memory.Class]int, tail int) string {
	t.Helper()
	var img []byte
	page := make([]byte, pageSize)
	left := make(map[memory.Class]int)
	for c, n := range counts {
		left[c] = n
	}
	for p := 0; len(left) > 0; p++ {
		for c := memory.ClassZero; c < memory.ClassExplicit; c++ {
			if left[c] == 0 {
				delete(left, c)
				continue
			}
			left[c]--
			memory.Generate(page, c, 9, uint64(p), 1)
			img = append(img, page...)
		}
	}
	memory.Generate(page, memory.ClassText, 9, 1<<20, 1)
	img = append(img, page[:tail]...)
	path := filepath.Join(t.TempDir(), "image.raw")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCensus(t *testing.T) {
	counts := map[memory.Class]int{memory.ClassZero: 300, memory.ClassWeights: 200,
		memory.ClassActivations: 100, memory.ClassText: 150, memory.ClassRandom: 250}
	path := testImage(t, 4096, counts, 1000)
	rep, err := censusFile(path, Options{Sample: 64, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	counts[memory.ClassText]++ // the padded tail
	if rep.Pages != 1001 || rep.PaddedBytes != 4096-1000 || rep.Bytes != 1000*4096+1000 {
		t.Errorf("%d pages, %d padded bytes, %d bytes", rep.Pages, rep.PaddedBytes, rep.Bytes)
	}
	share := 0.0
	for i, row := range rep.Classes {
		c := classOrder[i]
		if row.Class != className(c) || row.Pages != int64(counts[c]) || row.Bytes != row.Pages*4096 ||
			row.Sampled != min(64, counts[c]) {
			t.Errorf("%v: %+v, want %d pages", c, row, counts[c])
		}
		share += row.Share
	}
	if math.Abs(share-1) > 1e-9 {
		t.Errorf("shares add up to %v", share)
	}
	if other := rep.Classes[len(rep.Classes)-1]; other.WireRaw != nil {
		t.Errorf("no other page, yet ratios %+v", other.WireRaw)
	}
	near := func(name string, got, lo, hi float64) {
		if got < lo || got > hi {
			t.Errorf("%s: wire/raw %.4f outside [%v, %v]", name, got, lo, hi)
		}
	}
	for _, row := range rep.Classes[:5] {
		r := row.WireRaw
		switch row.Class {
		case "zero":
			for _, v := range []float64{r.None, r.S2, r.Zstd} {
				near("zero", v, 0, 0.01)
			}
		case "random", "weights":
			for _, v := range []float64{r.None, r.S2, r.Zstd} {
				near(row.Class, v, 0.99, 1.01)
			}
		case "text":
			near("text none", r.None, 0.99, 1.01)
			near("text zstd", r.Zstd, 0.2, 0.6)
			near("text s2", r.S2, r.Zstd, 0.8)
		case "activations":
			near("activations none", r.None, 0.99, 1.01)
			near("activations zstd", r.Zstd, 0.4, 0.9)
		}
	}
	// The whole is the byte-weighted mean: with none, every page but the
	// zero ones is sent raw.
	near("whole none", rep.Whole.None, 700.0/1001-0.01, 700.0/1001+0.01)
	if !(rep.Whole.Zstd < rep.Whole.None) {
		t.Errorf("whole: zstd %v, none %v", rep.Whole.Zstd, rep.Whole.None)
	}
}

// TestCensusSampleIsBounded: a small sample is drawn, whatever the
// class's size, and the report is the same from run to run.
func TestCensusSampleIsBounded(t *testing.T) {
	path := testImage(t, 1024, map[memory.Class]int{memory.ClassText: 400, memory.ClassRandom: 10}, 0)
	a, err := censusFile(path, Options{PageSize: 1024, Sample: 7})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := censusFile(path, Options{PageSize: 1024, Sample: 7, Workers: 1})
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("reports differ:\n%s\n%s", ja, jb)
	}
	for _, row := range a.Classes {
		if row.Sampled > 7 {
			t.Errorf("%s: %d pages sampled", row.Class, row.Sampled)
		}
	}
}

func TestRun(t *testing.T) {
	path := testImage(t, 4096, map[memory.Class]int{memory.ClassZero: 3, memory.ClassText: 5}, 0)
	var out, errOut bytes.Buffer
	if code := run([]string{"-sample", "4", path}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"8 pages of 4096 bytes", "up to 4 pages", "zero", "whole image", "text"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"-json", "-page", "1024", path}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Pages != 32 || rep.PageSize != 1024 || len(rep.Classes) != 6 {
		t.Errorf("JSON report %+v (%v):\n%s", rep, err, out.String())
	}
	for _, args := range [][]string{{}, {"-page", "1000", path}, {"-sample", "0", path},
		{filepath.Join(t.TempDir(), "none")}, {"-bogus", path}} {
		errOut.Reset()
		if code := run(args, &out, &errOut); code == 0 || errOut.Len() == 0 {
			t.Errorf("%q: exit %d, %q", args, code, errOut.String())
		}
	}
}
