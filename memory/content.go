package memory

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// Class names what a page holds. A page filled with a generated class has
// content that is a pure function of (seed, page, generation, class), so
// the same operations give the same bytes on every backing and machine.
type Class uint8

const (
	// ClassZero is an all-zero page.
	ClassZero Class = iota
	// ClassWeights is model weights: float32, normally distributed
	// (mean 0, standard deviation 0.02). Incompressible in practice. The
	// 0.02 is the standard deviation transformer weights are initialised
	// with (initializer_range, 0.02 by default in Hugging Face
	// Transformers' BertConfig and GPT2Config, after Google's BERT
	// reference code); assumption: trained weights keep that scale. The
	// class compresses about 1.0:1 at zstd's fastest level.
	ClassWeights
	// ClassActivations is ReLU activations: float32, half of them zero,
	// the rest half-normal. Moderately compressible (about 1.7:1 at
	// zstd's fastest level). Assumption: the pre-activations are
	// batch-normalised to zero mean and unit variance (Ioffe and Szegedy,
	// "Batch Normalization", ICML 2015), so ReLU zeroes half of them and
	// leaves a unit half-normal.
	ClassActivations
	// ClassText is low-entropy text: words of a small vocabulary, drawn
	// with a skewed frequency, separated by spaces and punctuation.
	// Compresses about three to one: published, enwik9 (English
	// Wikipedia) compresses 2.91:1 at the fastest level of the zstd
	// encoder this project uses (klauspost/compress v1.20.3,
	// zstd/README.md, enwik9 row at level 1); the generator gives about
	// 2.5:1 in the 4 KiB frames of a page.
	ClassText
	// ClassRandom is uniformly random bytes.
	ClassRandom
	// ClassExplicit is a page whose bytes were written explicitly; it has
	// no generator.
	ClassExplicit

	numClasses
)

var classNames = [numClasses]string{"zero", "weights", "activations", "text", "random", "explicit"}

func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Generated reports whether c has a content generator (every class but
// ClassExplicit).
func (c Class) Generated() bool { return c < ClassExplicit }

// Generate fills dst with the content of class c for (seed, page, gen).
// It is a pure function: equal arguments give equal bytes on every machine,
// because it uses integer arithmetic and single, correctly rounded float32
// operations only. It reports false, leaving dst unchanged, for a class
// without a generator.
func Generate(dst []byte, c Class, seed, page uint64, gen uint32) bool {
	r := pageStream(seed, page, gen, c)
	switch c {
	case ClassZero:
		clear(dst)
	case ClassWeights:
		fillGauss(dst, &r, weightScale, false)
	case ClassActivations:
		fillGauss(dst, &r, activationScale, true)
	case ClassText:
		fillText(dst, &r)
	case ClassRandom:
		fillRandom(dst, &r)
	default:
		return false
	}
	return true
}

// A gaussian sample is the sum of twelve uniform 16-bit lanes (Irwin-Hall,
// standard deviation 2^16), shifted left by seven and given seven random
// low bits so that float32 mantissas are fully random, as trained weights'
// are. The scales turn that into the target standard deviation with one
// float32 multiply.
const (
	gaussShift      = 7
	weightScale     = float32(0.02 / (1 << (16 + gaussShift)))
	activationScale = float32(1.0 / (1 << (16 + gaussShift)))
	irwinHallMean   = 12 * 65535 / 2 // sum of twelve lanes; the .5 is dropped
)

// laneSum adds the four 16-bit lanes of x.
func laneSum(x uint64) uint64 {
	y := x&0x0000ffff0000ffff + x>>16&0x0000ffff0000ffff
	return y&0xffffffff + y>>32
}

func fillGauss(dst []byte, r *wyrand, scale float32, relu bool) {
	var jitter uint64
	for i := 0; len(dst) >= 4; i++ {
		if i%9 == 0 {
			jitter = r.next()
		}
		z := int64(laneSum(r.next())+laneSum(r.next())+laneSum(r.next())) - irwinHallMean
		v := z<<gaussShift | int64(jitter&(1<<gaussShift-1))
		jitter >>= gaussShift
		var f float32
		if !relu || z > 0 {
			f = float32(v) * scale
		}
		binary.LittleEndian.PutUint32(dst, math.Float32bits(f))
		dst = dst[4:]
	}
	clear(dst)
}

// vocabulary is the word list of ClassText, most frequent first.
var vocabulary = strings.Fields(`the of and to in is that for it as with was on be at by this had not are
but from or have an they which one you were her all she there would their we him been has when who will more
no if out so said what up its about into than them can only other new some could time these two may then do
first any my now such like our over man me even most made after also did many before must through back years
where much your way well down should because each just those people how too little state good very make world
still own see men work long get here between both life being under never day same another know while last
might us great old year off come since against go came right used take three model layer tensor gradient
batch epoch loss weight kernel memory device driver host guest page frame buffer stream round stun copy
migrate network switch link packet queue thread process system value error result return function table
index record field number string image vector matrix learning training inference request service latency
throughput cluster server client node store cache block write read update delete query commit`)

// separators follow words; spaces are the most common.
var separators = [16]string{" ", " ", " ", " ", " ", " ", " ", " ", " ", " ", " ", " ", ", ", ", ", ". ", "\n"}

func fillText(dst []byte, r *wyrand) {
	n := len(vocabulary)
	for len(dst) > 0 {
		v := r.next()
		for k := 0; k < 2 && len(dst) > 0; k++ {
			x := v >> (32 * k)
			// The product of four uniform 6-bit values is skewed towards
			// small values, giving the frequent words most of the text,
			// as in natural language.
			w := int(x&63) * int(x>>6&63) * int(x>>12&63) * int(x>>18&63) * n >> 24
			c := copy(dst, vocabulary[w])
			dst = dst[c:]
			c = copy(dst, separators[x>>24&15])
			dst = dst[c:]
		}
	}
}

// recognizePrefixBytes is how much of a page classOf generates for each
// class before it generates a whole page: enough that a page of another
// class, or of explicit bytes, is told apart at once.
const recognizePrefixBytes = 64

// classOf returns the generated class whose content for (seed, page, gen)
// is exactly data, and false if none is. scratch, one page long, is
// overwritten. A class is tried on a short prefix first (every generator's
// output for a shorter buffer is a prefix of its output for a longer one),
// so a page of explicit bytes costs four short generations.
func classOf(data []byte, seed, page uint64, gen uint32, scratch []byte) (Class, bool) {
	n := min(recognizePrefixBytes, len(data))
	for c := ClassWeights; c < ClassExplicit; c++ {
		Generate(scratch[:n], c, seed, page, gen)
		if !bytes.Equal(scratch[:n], data[:n]) {
			continue
		}
		Generate(scratch, c, seed, page, gen)
		if bytes.Equal(scratch, data) {
			return c, true
		}
	}
	return 0, false
}
