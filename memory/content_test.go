package memory

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
)

// TestGenerateIsStable pins the generators' output. A change here changes
// every stream and report the project produces: bump it only on purpose.
func TestGenerateIsStable(t *testing.T) {
	buf := make([]byte, 4096)
	for c := range golden {
		if !Generate(buf, c, 42, 7, 3) {
			t.Fatalf("%v has no generator", c)
		}
		got := fmt.Sprintf("%016x", xxhash.Sum64(buf))
		if golden[c] != got {
			t.Errorf("%v: digest %s, golden %s", c, got, golden[c])
		}
	}
	if Generate(buf, ClassExplicit, 1, 1, 1) {
		t.Error("explicit content has a generator")
	}
}

var golden = map[Class]string{
	ClassZero:        "ac869b6f32d8bbdb",
	ClassWeights:     "43cbae25ac05ea61",
	ClassActivations: "b5876a841f51ff68",
	ClassText:        "59dafbb9c6fa0fc2",
	ClassRandom:      "991b2f21bbc16d6c",
	// More keys of it: TestTrainingWeightsGolden.
	ClassTrainingWeights: "fdb1c787afc4bf1c",
}

func TestGenerateDependsOnEveryKeyPart(t *testing.T) {
	for _, c := range []Class{ClassText, ClassTrainingWeights} {
		base := make([]byte, 4096)
		Generate(base, c, 1, 2, 3)
		for name, args := range map[string][3]uint64{"seed": {9, 2, 3}, "page": {1, 9, 3}, "gen": {1, 2, 9}, "gen 0": {1, 2, 0}} {
			other := make([]byte, 4096)
			Generate(other, c, args[0], args[1], uint32(args[2]))
			if string(other) == string(base) {
				t.Errorf("%v: changing the %s does not change the content", c, name)
			}
		}
	}
}

func TestWeightsAreNormal(t *testing.T) {
	buf := make([]byte, 1<<20)
	for p := range 16 {
		Generate(buf[p<<16:(p+1)<<16], ClassWeights, 1, uint64(p), 1)
	}
	var sum, sq, tail float64
	n := len(buf) / 4
	for i := range n {
		v := float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:])))
		sum += v
		sq += v * v
		if math.Abs(v) > 2*0.02 {
			tail++
		}
	}
	mean, sd := sum/float64(n), math.Sqrt(sq/float64(n)-(sum/float64(n))*(sum/float64(n)))
	if math.Abs(mean) > 0.0005 || math.Abs(sd-0.02) > 0.0005 {
		t.Fatalf("mean %.5f sd %.5f, want 0 and 0.02", mean, sd)
	}
	if frac := tail / float64(n); math.Abs(frac-0.0455) > 0.003 { // P(|z| > 2) of a normal
		t.Fatalf("%.4f beyond two sigma, want 0.0455", frac)
	}
}

// TestCompressionRatios checks that each class compresses as the data it
// stands for does, so that ratios measured on this project are real.
func TestCompressionRatios(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	for _, tc := range []struct {
		c        Class
		min, max float64
	}{
		{ClassZero, 100, math.Inf(1)},
		{ClassWeights, 0.99, 1.15},
		{ClassActivations, 1.3, 2.5},
		{ClassText, 2.2, 4},
		{ClassRandom, 0.99, 1.01},
		{ClassTrainingWeights, 0.99, 1.15},
	} {
		raw := make([]byte, 64*4096)
		for p := range 64 {
			Generate(raw[p*4096:(p+1)*4096], tc.c, 11, uint64(p), 1)
		}
		var out []byte
		for p := range 64 { // page by page, as a batch of small frames
			out = enc.EncodeAll(raw[p*4096:(p+1)*4096], out)
		}
		ratio := float64(len(raw)) / float64(len(out))
		t.Logf("%v: %.2f:1 in 4 KiB frames", tc.c, ratio)
		if ratio < tc.min || ratio > tc.max {
			t.Errorf("%v compresses %.2f:1, want [%v, %v]", tc.c, ratio, tc.min, tc.max)
		}
	}
}

func TestMixRatios(t *testing.T) {
	counts := map[Class]int{}
	const n = 100000
	for p := range n {
		counts[MixRealistic().ClassOf(7, uint64(p))]++
	}
	for _, part := range MixRealistic().Parts {
		if got := float64(counts[part.Class]) / n; math.Abs(got-float64(part.Weight)/100) > 0.01 {
			t.Errorf("%v: %.3f of pages, want %.2f", part.Class, got, float64(part.Weight)/100)
		}
	}
	if _, err := MixByName("realistic"); err != nil {
		t.Error(err)
	}
	if _, err := MixByName("nope"); err == nil {
		t.Error("unknown mix accepted")
	}
}

// TestSyntheticAtScale simulates a VM with 64 GiB of guest RAM and a 24 GiB
// framebuffer, all written, in well under 1 GiB of real memory.
func TestSyntheticAtScale(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("fills 23 M pages; what it measures does not depend on the race detector")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ram := mustNew(t, Config{SizeBytes: 64 << 30, Kind: Synthetic, Seed: 1})
	gpu := mustNew(t, Config{SizeBytes: 24 << 30, Kind: Synthetic, Seed: 2})
	fb := must(gpu.Map(0, gpu.Pages(), 3))
	for _, r := range []*Region{ram, fb} {
		if err := r.FillMix(0, r.Pages(), MixRealistic()); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("64 GiB RAM + 24 GiB framebuffer, every page written: %d MiB of heap", used>>20)
	if used > 256<<20 {
		t.Fatalf("%d MiB of heap, want well under 1 GiB", used>>20)
	}
	page := make([]byte, 4096)
	if st, err := fb.ReadPage(fb.Pages()-1, page); err != nil || st.Gen != 1 {
		t.Fatalf("last framebuffer page: %+v, %v", st, err)
	}
	runtime.KeepAlive(ram)
}
