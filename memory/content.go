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
	// ClassTrainingWeights is model weights under training: generation 0
	// is a draw of float32 weights as ClassWeights draws them (mean 0,
	// standard deviation 0.02), from a stream of its own, and every later
	// generation is that draw plus a small gaussian update, element by
	// element (trainingUpdateScale). Two generations of a page differ by
	// an update the size of one optimizer step, so the sign, exponent and
	// high mantissa bits of almost every float are the same in both (99 %
	// keep sign and exponent, against 11 % of two generations of
	// ClassWeights); each generation on its own compresses about 1.0:1, as
	// ClassWeights does.
	ClassTrainingWeights
	// ClassExplicit is a page whose bytes were written explicitly; it has
	// no generator.
	ClassExplicit

	numClasses
)

var classNames = [numClasses]string{"zero", "weights", "activations", "text", "random", "training-weights", "explicit"}

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
	case ClassTrainingWeights:
		fillTrainingWeights(dst, seed, page, gen)
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

// trainingUpdateScale turns a gaussian sample of fillGauss into the update
// ClassTrainingWeights adds to a weight at each generation after the
// first: standard deviation 2e-5, one optimizer step. Adam's effective
// step per parameter is bounded by about its step size α (Kingma and Ba,
// "Adam: A Method for Stochastic Optimization", ICLR 2015, section 2.1),
// and BERT is fine-tuned with learning rates of 2e-5 to 5e-5 (Devlin et
// al., "BERT: Pre-training of Deep Bidirectional Transformers for
// Language Understanding", NAACL 2019, appendix A.3); 2e-5 is the low end,
// a thousandth of the weights' 0.02. Assumption: generation g's update is
// drawn afresh around generation 0, not accumulated over generations 1 to
// g, so that generation g costs O(1) to generate, not O(g); the difference
// between two generations is then the size of one or two steps (one
// update against generation 0, two independent ones between two later
// generations), not of the steps between them.
const trainingUpdateScale = float32(2e-5 / (1 << (16 + gaussShift)))

// trainingUpdateTweak is set in the class byte of the stream of a
// ClassTrainingWeights update: pageStream keys a page's streams by
// gen<<8 | class, and through bijections (mix64), so a key whose class
// byte has this bit set, which no class has, gives a stream that is never
// that of any class of the page, in particular never the class's base,
// pageStream(seed, page, 0, ClassTrainingWeights).
const trainingUpdateTweak = 0x80

// fillTrainingWeights fills dst with the ClassTrainingWeights content of
// (seed, page, gen): the generation-0 draw, plus, for gen > 0, an update
// of that generation, one float32 add (a single, correctly rounded
// operation) for each weight. The update is drawn in chunks through a
// buffer on the stack, so a page costs about two ClassWeights draws and
// allocates nothing; the chunks follow fillGauss's draws, nine weights to
// a jitter word, so the output for a shorter dst is a prefix of the output
// for a longer one.
func fillTrainingWeights(dst []byte, seed, page uint64, gen uint32) {
	base := pageStream(seed, page, 0, ClassTrainingWeights)
	fillGauss(dst, &base, weightScale, false)
	if gen == 0 {
		return
	}
	upd := pageStream(seed, page, gen, ClassTrainingWeights|trainingUpdateTweak)
	var buf [trainingChunkFloats * 4]byte
	for len(dst) >= 4 {
		n := min(len(dst)/4, trainingChunkFloats)
		fillGauss(buf[:4*n], &upd, trainingUpdateScale, false)
		for i := range n {
			w := math.Float32frombits(binary.LittleEndian.Uint32(dst[4*i:]))
			u := math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(w+u))
		}
		dst = dst[4*n:]
	}
}

// trainingChunkFloats is the updates fillTrainingWeights draws at once: a
// multiple of nine, so that each chunk starts on a jitter word of
// fillGauss and the chunks draw what one fillGauss call would.
const trainingChunkFloats = 9 * 32

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
// so a page of explicit bytes costs five short generations.
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
