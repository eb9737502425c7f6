package migrate

import (
	"fmt"
	"math"

	"github.com/vgpusim/vgpusim/checkpoint"
)

// Codec is how a migration compresses the pages it sends. Zero pages are
// never sent, whatever the codec.
type Codec uint8

const (
	// CodecZstd compresses with zstd at its fastest; the default.
	CodecZstd Codec = iota
	// CodecNone sends pages as they are.
	CodecNone
	// CodecS2 compresses with S2, faster than zstd and less tight.
	CodecS2
	// CodecAuto picks the codec as the migration goes, by ChooseLevel:
	// the one that moves guest memory fastest, given how fast the link
	// carries bytes and how fast each codec encodes and how much it
	// shrinks the pages. A slow link gets compression; a fast one does
	// not spend the cores on it. The stream records the codec of every
	// batch.
	CodecAuto
)

// String returns the codec's name, as the -codec flags spell it.
func (c Codec) String() string {
	switch c {
	case CodecZstd:
		return "zstd"
	case CodecNone:
		return "none"
	case CodecS2:
		return "s2"
	case CodecAuto:
		return "auto"
	}
	return fmt.Sprintf("Codec(%d)", uint8(c))
}

// ParseCodec returns the codec String names s.
func ParseCodec(s string) (Codec, error) {
	for c := CodecZstd; c <= CodecAuto; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown codec %q (none, s2, zstd or auto)", ErrConfig, s)
}

// Level returns the checkpoint level of a fixed codec, and of CodecAuto
// the level it starts with.
func (c Codec) Level() checkpoint.Level {
	switch c {
	case CodecNone:
		return checkpoint.LevelNone
	case CodecS2:
		return checkpoint.LevelS2
	}
	return checkpoint.LevelFastest
}

// autoLevels are the levels CodecAuto chooses among, from the least CPU
// to the most.
var autoLevels = [...]checkpoint.Level{checkpoint.LevelNone, checkpoint.LevelS2, checkpoint.LevelFastest}

// AutoLevels returns the levels CodecAuto and the live mode's adaptive
// codec choose among, from the least CPU to the most.
func AutoLevels() []checkpoint.Level { return append([]checkpoint.Level(nil), autoLevels[:]...) }

// CodecCost is what sending pages at one level costs: how fast a worker
// encodes them and how many bytes they take on the wire.
type CodecCost struct {
	// Level is the checkpoint level.
	Level checkpoint.Level
	// EncodeBytesPerSec is the raw bytes, zero pages included, one
	// worker encodes a second; 0 means encoding is never what limits the
	// migration.
	EncodeBytesPerSec float64
	// WirePerRaw is the wire bytes per raw byte, zero pages included
	// (so below 1 even for LevelNone when some pages are zero).
	WirePerRaw float64
}

// rate is how fast the pipeline of encoding workers and a link of
// linkBytesPerSec (0: unknown, taken as unlimited) moves raw bytes at cost
// c: the slower of its two stages.
func (c CodecCost) rate(linkBytesPerSec float64, workers int) float64 {
	r := math.Inf(1)
	if c.EncodeBytesPerSec > 0 {
		r = c.EncodeBytesPerSec * float64(max(workers, 1))
	}
	if linkBytesPerSec > 0 && c.WirePerRaw > 0 {
		r = min(r, linkBytesPerSec/c.WirePerRaw)
	}
	return r
}

// chooseMargin is how much faster a codec must be to win over one that
// sends fewer bytes: within it, the network is spared.
const chooseMargin = 0.02

// ChooseLevel returns the level of costs that moves raw bytes fastest
// over a link of linkBytesPerSec (0: unknown) with workers encoding at
// once. Within 2 % of the fastest, the level that sends the fewest bytes
// wins. It is the one rule of CodecAuto, live and simulated: the live mode
// feeds it what it measures, the simulated mode its link's rate and
// modelled encoders. With no costs it returns LevelFastest.
func ChooseLevel(linkBytesPerSec float64, workers int, costs []CodecCost) checkpoint.Level {
	if len(costs) == 0 {
		return checkpoint.LevelFastest
	}
	fastest := 0.0
	for _, c := range costs {
		fastest = max(fastest, c.rate(linkBytesPerSec, workers))
	}
	best := -1
	for i, c := range costs {
		r := c.rate(linkBytesPerSec, workers)
		if r < fastest*(1-chooseMargin) && !math.IsInf(fastest, 1) || math.IsInf(fastest, 1) && !math.IsInf(r, 1) {
			continue
		}
		if best < 0 || c.WirePerRaw < costs[best].WirePerRaw {
			best = i
		}
	}
	return costs[best].Level
}
