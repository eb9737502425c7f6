package memory

import (
	"encoding/binary"
	"math/bits"
)

// wyrand is a small, fast, seedable generator (Wang Yi's wyrand). The
// content generators need one fresh stream a page, so a generator that is a
// single word of state, made on the stack, beats a math/rand/v2 source
// behind an interface.
type wyrand uint64

func (s *wyrand) next() uint64 {
	*s += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(uint64(*s), uint64(*s)^0xe7037ed1a0b428db)
	return hi ^ lo
}

// mix64 is the splitmix64 finalizer: a bijection that spreads every input
// bit over the output, used to derive independent per-page streams.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// pageStream returns the generator for one page's content.
func pageStream(seed, page uint64, gen uint32, c Class) wyrand {
	return wyrand(mix64(mix64(mix64(seed^0x9e3779b97f4a7c15)^page) ^ (uint64(gen)<<8 | uint64(c))))
}

// fillRandom fills b with the generator's output.
func fillRandom(b []byte, r *wyrand) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, r.next())
		b = b[8:]
	}
	if len(b) > 0 {
		v := r.next()
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
	}
}
