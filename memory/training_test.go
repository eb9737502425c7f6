package memory

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/cespare/xxhash/v2"
	"pgregory.net/rapid"
)

// TestTrainingWeightsGolden pins ClassTrainingWeights' output for a few
// keys, generation 0 (the base draw alone) and later ones, at a page size
// that is not a whole number of update chunks and one with a tail shorter
// than a float. A change here changes every training workload's bytes:
// bump it only on purpose.
func TestTrainingWeightsGolden(t *testing.T) {
	for _, tc := range []struct {
		seed, page uint64
		gen        uint32
		size       int
		digest     string
	}{
		{42, 7, 0, 4096, "9c6dff4390da1590"},
		{42, 7, 1, 4096, "23eba8644003e208"},
		{42, 7, 3, 4096, "fdb1c787afc4bf1c"},
		{1, 0, 1 << 31, 4096, "7eb6ca894ddabeac"},
		{0xdeadbeef, 1 << 40, 9, 64 << 10, "6c575c33d230515b"},
		{5, 5, 5, 1155, "1f74e046799526a5"},
	} {
		t.Run(fmt.Sprintf("seed=%d/page=%d/gen=%d/size=%d", tc.seed, tc.page, tc.gen, tc.size), func(t *testing.T) {
			buf := make([]byte, tc.size)
			if !Generate(buf, ClassTrainingWeights, tc.seed, tc.page, tc.gen) {
				t.Fatal("no generator")
			}
			if got := fmt.Sprintf("%016x", xxhash.Sum64(buf)); got != tc.digest {
				t.Errorf("digest %s, golden %s", got, tc.digest)
			}
		})
	}
}

// TestTrainingWeightsReference checks the generator against its
// definition written out plainly: generation 0 is fillGauss of the
// class's generation-0 stream at weightScale, and a later generation adds,
// float by float, fillGauss of the update stream at trainingUpdateScale,
// each drawn in one call over the whole page rather than in chunks.
func TestTrainingWeightsReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.Uint64().Draw(t, "seed")
		page := rapid.Uint64().Draw(t, "page")
		gen := rapid.OneOf(rapid.Just(uint32(0)), rapid.Uint32()).Draw(t, "gen")
		size := rapid.IntRange(0, 3*trainingChunkFloats*4+9).Draw(t, "size")
		want, upd := make([]byte, size), make([]byte, size)
		r := pageStream(seed, page, 0, ClassTrainingWeights)
		fillGauss(want, &r, weightScale, false)
		if gen > 0 {
			u := pageStream(seed, page, gen, ClassTrainingWeights|trainingUpdateTweak)
			fillGauss(upd, &u, trainingUpdateScale, false)
			for i := 0; i+4 <= size; i += 4 {
				w := math.Float32frombits(binary.LittleEndian.Uint32(want[i:]))
				d := math.Float32frombits(binary.LittleEndian.Uint32(upd[i:]))
				binary.LittleEndian.PutUint32(want[i:], math.Float32bits(w+d))
			}
		}
		got := make([]byte, size)
		Generate(got, ClassTrainingWeights, seed, page, gen)
		if !bytes.Equal(got, want) {
			t.Fatal("generator and its definition differ")
		}
	})
}

// floats32 decodes b as little-endian float32s.
func floats32(b []byte) []float32 {
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}

// sameSignExponent returns the share of the float32 lanes of a and b whose
// top nine bits, sign and exponent, are equal.
func sameSignExponent(a, b []byte) float64 {
	same := 0
	n := len(a) / 4
	for i := range n {
		if (binary.LittleEndian.Uint32(a[4*i:])^binary.LittleEndian.Uint32(b[4*i:]))>>23 == 0 {
			same++
		}
	}
	return float64(same) / float64(n)
}

// meanSD returns the mean and standard deviation of f.
func meanSD(f []float32) (mean, sd float64) {
	var sum, sq float64
	for _, v := range f {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	n := float64(len(f))
	mean = sum / n
	return mean, math.Sqrt(sq/n - mean*mean)
}

// TestTrainingWeightsGenerationsClose: two generations of a page, the base
// among them, differ by an update the size of an optimizer step, so at
// least 95 % of the floats keep their sign and exponent, and the pages
// still differ.
func TestTrainingWeightsGenerationsClose(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.Uint64().Draw(t, "seed")
		page := rapid.Uint64().Draw(t, "page")
		g1 := rapid.OneOf(rapid.Just(uint32(0)), rapid.Uint32Range(0, 8), rapid.Uint32()).Draw(t, "g1")
		g2 := rapid.OneOf(rapid.Uint32Range(0, 8), rapid.Uint32()).Filter(func(g uint32) bool { return g != g1 }).Draw(t, "g2")
		a, b := make([]byte, 4096), make([]byte, 4096)
		Generate(a, ClassTrainingWeights, seed, page, g1)
		Generate(b, ClassTrainingWeights, seed, page, g2)
		if bytes.Equal(a, b) {
			t.Fatalf("generations %d and %d are equal", g1, g2)
		}
		if share := sameSignExponent(a, b); share < 0.95 {
			t.Fatalf("generations %d and %d: %.3f of the floats keep sign and exponent, want at least 0.95", g1, g2, share)
		}
		// The update is small: no float moves by more than a hundred
		// times its standard deviation.
		fa, fb := floats32(a), floats32(b)
		for i := range fa {
			if d := math.Abs(float64(fa[i] - fb[i])); d > 100*2e-5 {
				t.Fatalf("float %d moves by %g between generations %d and %d", i, d, g1, g2)
			}
		}
	})
}

// TestTrainingWeightsPageStats: any generation of one page is distributed
// as weights are, mean 0 and standard deviation 0.02, within what 1024
// floats allow (six standard errors).
func TestTrainingWeightsPageStats(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		buf := make([]byte, 4096)
		gen := rapid.OneOf(rapid.Just(uint32(0)), rapid.Uint32()).Draw(t, "gen")
		Generate(buf, ClassTrainingWeights, rapid.Uint64().Draw(t, "seed"), rapid.Uint64().Draw(t, "page"), gen)
		mean, sd := meanSD(floats32(buf))
		if math.Abs(mean) > 0.004 || math.Abs(sd-0.02) > 0.0027 {
			t.Fatalf("generation %d: mean %.5f sd %.5f, want 0 and 0.02", gen, mean, sd)
		}
	})
}

// TestTrainingWeightsAreNormal holds generation 0 and later generations to
// what TestWeightsAreNormal holds ClassWeights to, over a megabyte, and
// checks that their mean and standard deviation are those of ClassWeights
// on the same pages.
func TestTrainingWeightsAreNormal(t *testing.T) {
	stats := func(c Class, gen uint32) (mean, sd, tail float64) {
		buf := make([]byte, 1<<20)
		for p := range 16 {
			Generate(buf[p<<16:(p+1)<<16], c, 1, uint64(p), gen)
		}
		f := floats32(buf)
		mean, sd = meanSD(f)
		for _, v := range f {
			if math.Abs(float64(v)) > 2*0.02 {
				tail++
			}
		}
		return mean, sd, tail / float64(len(f))
	}
	wMean, wSD, _ := stats(ClassWeights, 0)
	for _, gen := range []uint32{0, 1, 1000, math.MaxUint32} {
		t.Run(fmt.Sprintf("gen=%d", gen), func(t *testing.T) {
			mean, sd, tail := stats(ClassTrainingWeights, gen)
			if math.Abs(mean) > 0.0005 || math.Abs(sd-0.02) > 0.0005 {
				t.Errorf("mean %.5f sd %.5f, want 0 and 0.02", mean, sd)
			}
			if math.Abs(mean-wMean) > 0.0005 || math.Abs(sd-wSD) > 0.0005 {
				t.Errorf("mean %.5f sd %.5f, weights' %.5f and %.5f", mean, sd, wMean, wSD)
			}
			if math.Abs(tail-0.0455) > 0.003 { // P(|z| > 2) of a normal
				t.Errorf("%.4f beyond two sigma, want 0.0455", tail)
			}
		})
	}
}

// TestTrainingWeightsUpdateScale: the difference between a generation and
// generation 0 is the update alone, of standard deviation 2e-5 (the add
// rounds it to the weight's precision, a few thousandths of it at 0.02).
func TestTrainingWeightsUpdateScale(t *testing.T) {
	base, next := make([]byte, 1<<20), make([]byte, 1<<20)
	for p := range 16 {
		Generate(base[p<<16:(p+1)<<16], ClassTrainingWeights, 3, uint64(p), 0)
		Generate(next[p<<16:(p+1)<<16], ClassTrainingWeights, 3, uint64(p), 7)
	}
	fb, fn := floats32(base), floats32(next)
	d := make([]float32, len(fb))
	for i := range d {
		d[i] = fn[i] - fb[i]
	}
	mean, sd := meanSD(d)
	if math.Abs(mean) > 1e-6 || math.Abs(sd-2e-5)/2e-5 > 0.02 {
		t.Fatalf("update mean %.3g sd %.4g, want 0 and 2e-5", mean, sd)
	}
}

// TestTrainingWeightsPrefix: the output for a shorter buffer is a prefix
// of the output for a longer one, whatever the buffers held, as classOf
// needs.
func TestTrainingWeightsPrefix(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.Uint64().Draw(t, "seed")
		page := rapid.Uint64().Draw(t, "page")
		gen := rapid.OneOf(rapid.Just(uint32(0)), rapid.Uint32Range(1, 3), rapid.Uint32()).Draw(t, "gen")
		size := rapid.SampledFrom([]int{64, 4096, 64 << 10}).Draw(t, "size")
		n := rapid.IntRange(0, size).Draw(t, "n")
		full := make([]byte, size)
		Generate(full, ClassTrainingWeights, seed, page, gen)
		short := bytes.Repeat([]byte{0xa5}, n)
		Generate(short, ClassTrainingWeights, seed, page, gen)
		whole := n &^ 3
		if !bytes.Equal(short[:whole], full[:whole]) {
			t.Fatalf("the first %d bytes differ from the %d-byte page's", whole, size)
		}
		if !IsZero(short[whole:]) {
			t.Fatalf("tail of %d bytes not cleared: %x", n-whole, short[whole:])
		}
	})
}

// TestTrainingWeightsRecognized: classOf takes a page of
// ClassTrainingWeights at its key and generation for that class, not at
// another generation, and takes a page of another class at the same key
// for that class, not this one.
func TestTrainingWeightsRecognized(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.Uint64().Draw(t, "seed")
		page := rapid.Uint64().Draw(t, "page")
		gen := rapid.OneOf(rapid.Just(uint32(0)), rapid.Uint32()).Draw(t, "gen")
		size := rapid.SampledFrom([]int{64, 4096}).Draw(t, "size")
		data, scratch := make([]byte, size), make([]byte, size)
		Generate(data, ClassTrainingWeights, seed, page, gen)
		if c, ok := classOf(data, seed, page, gen, scratch); !ok || c != ClassTrainingWeights {
			t.Fatalf("training weights recognised as %v, %v", c, ok)
		}
		other := rapid.Uint32().Filter(func(g uint32) bool { return g != gen }).Draw(t, "other")
		if c, ok := classOf(data, seed, page, other, scratch); ok {
			t.Fatalf("training weights of generation %d recognised at generation %d as %v", gen, other, c)
		}
		c := rapid.SampledFrom([]Class{ClassWeights, ClassActivations, ClassText, ClassRandom}).Draw(t, "class")
		Generate(data, c, seed, page, gen)
		if got, ok := classOf(data, seed, page, gen, scratch); !ok || got != c {
			t.Fatalf("%v recognised as %v, %v", c, got, ok)
		}
	})
}
