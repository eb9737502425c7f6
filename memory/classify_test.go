package memory

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// TestClassifyGenerated checks ClassifyPage's thresholds against the
// package's own generators: each generated class is classified as itself
// (training weights as weights, which a single page of them is) at least
// 99 % of the time, and zero pages always.
func TestClassifyGenerated(t *testing.T) {
	for _, tc := range []struct{ pageSize, pages int }{{4096, 1000}, {64 << 10, 100}} {
		buf := make([]byte, tc.pageSize)
		for c := ClassZero; c < ClassExplicit; c++ {
			var got [numClasses]int
			for p := range tc.pages {
				Generate(buf, c, 7, uint64(p), uint32(1+p%3))
				got[ClassifyPage(buf)]++
			}
			min := tc.pages * 99 / 100
			if c == ClassZero {
				min = tc.pages
			}
			want := c
			if c == ClassTrainingWeights {
				want = ClassWeights
			}
			if got[want] < min {
				t.Errorf("%d-byte pages of %v: classified %v", tc.pageSize, c, got)
			}
		}
	}
}

func TestClassifyPage(t *testing.T) {
	page := func(f func(b []byte)) []byte { b := make([]byte, 4096); f(b); return b }
	floats := func(zeroEvery int, v func(i int) float32) []byte {
		return page(func(b []byte) {
			for i := range len(b) / 4 {
				if zeroEvery == 0 || i%zeroEvery != 0 {
					binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v(i)))
				}
			}
		})
	}
	line := "id,value,label\n17,0.25,cat\n18,1.75,dog\n"
	utf := "Grüße aus München, ça va? Смотри: 東京 "
	for _, tc := range []struct {
		name string
		p    []byte
		want Class
	}{
		{"empty", nil, ClassZero},
		{"zeros", make([]byte, 4096), ClassZero},
		{"csv", []byte(strings.Repeat(line, 4096/len(line)+1)[:4096]), ClassText},
		{"digits", []byte(strings.Repeat("0123456789", 410)[:4096]), ClassText},
		{"utf8", []byte(strings.Repeat(utf, 4096)[:4096]), ClassText},
		{"text then zeros", page(func(b []byte) { copy(b, strings.Repeat("hello world ", 200)) }), ClassText},
		{"weights", floats(0, func(i int) float32 { return float32(i%97-48) * 1e-3 }), ClassWeights},
		{"activations", floats(2, func(i int) float32 { return float32(i%13+1) * 0.1 }), ClassActivations},
		{"few floats", floats(0, func(i int) float32 {
			if i%16 == 0 {
				return 0.5
			}
			return 0
		}), ClassExplicit},
		{"pointers", page(func(b []byte) {
			for i := 0; i < len(b); i += 64 {
				binary.LittleEndian.PutUint64(b[i:], 0x00007f3a_12340000+uint64(i))
			}
		}), ClassExplicit},
		{"counter", page(func(b []byte) {
			for i := range len(b) / 4 {
				binary.LittleEndian.PutUint32(b[4*i:], uint32(i))
			}
		}), ClassExplicit},
		{"random", page(func(b []byte) { Generate(b, ClassRandom, 1, 1, 1) }), ClassRandom},
		{"training weights", page(func(b []byte) { Generate(b, ClassTrainingWeights, 1, 1, 1) }), ClassWeights},
		{"short", []byte{1, 2, 3}, ClassExplicit},
	} {
		if got := ClassifyPage(tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClassifyDoesNotChangePage: the page is only read.
func TestClassifyDoesNotChangePage(t *testing.T) {
	p := make([]byte, 4096)
	Generate(p, ClassText, 3, 3, 3)
	q := bytes.Clone(p)
	ClassifyPage(p)
	if !bytes.Equal(p, q) {
		t.Fatal("ClassifyPage changed its page")
	}
}

func BenchmarkClassifyPage(b *testing.B) {
	for c := ClassZero; c < ClassExplicit; c++ {
		b.Run(c.String(), func(b *testing.B) {
			p := make([]byte, 4096)
			Generate(p, c, 1, 1, 1)
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				ClassifyPage(p)
			}
		})
	}
}
