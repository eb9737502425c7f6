package migrate

import (
	"github.com/vgpusim/vgpusim/checkpoint"
)

// Published single-core encode rates, for a simulated CodecAuto, which
// reads no clock: klauspost/compress v1.20.3's READMEs, on silesia.tar,
// one core — zstd at its fastest 318.47 MB/s (zstd/README.md, "zskp 1"),
// S2 607 MB/s (s2/README.md, the "1 CPU" row). Uncompressed pages cost a
// copy, never what limits a migration.
const (
	publishedZstdFastestBytesPerSec = 318.47e6
	publishedS2BytesPerSec          = 607e6
)

// PublishedEncodeBytesPerSec returns the published single-core encode rate
// of level (0 for LevelNone: not a limit), the simulated mode's model of
// a copy engine worker.
func PublishedEncodeBytesPerSec(level checkpoint.Level) float64 {
	switch level {
	case checkpoint.LevelNone:
		return 0
	case checkpoint.LevelS2:
		return publishedS2BytesPerSec
	}
	return publishedZstdFastestBytesPerSec
}

// AdaptiveChooser is CodecAuto as an Engine's Chooser: it picks each
// batch's level by ChooseLevel, from the costs it learns from the batches
// themselves — each level's wire bytes per raw byte and encode rate, as
// moving averages — and the link's rate, which its caller tells it.
//
// It tries every level on its first batches, and then, every
// adaptiveReprobe batches, the level it has heard of least recently, so
// that a change of content or link moves its choice. With Modelled set it
// takes the encode rates from PublishedEncodeBytesPerSec instead of the
// clock, and its choices then depend only on the batches and the link's
// rate, as the simulated mode needs.
type AdaptiveChooser struct {
	// Workers is how many batches are encoded at once.
	Workers int
	// LinkBytesPerSec returns the link's rate now; 0 means unknown.
	LinkBytesPerSec func() float64
	// Modelled makes the encode rates the published ones.
	Modelled bool

	est    [len(autoLevels)]levelEstimate
	chosen int // batches chosen
	seen   int // batches observed
	counts [len(autoLevels)]int64
	// nonZero is the share of the raw bytes in non-zero pages, a moving
	// average over every batch.
	nonZero float64
}

// levelEstimate is what the batches of one level cost, on average, per
// byte of their non-zero pages: the zero pages cost every level the same
// (nothing on the wire, a check), and how many a batch holds depends on
// where in memory it was cut, not on its level, so the levels are compared
// on the pages they compress and the share of zero pages is learnt from
// every batch.
type levelEstimate struct {
	batches      int
	wirePerByte  float64 // wire bytes per non-zero byte
	bytesPerSec  float64 // non-zero bytes encoded a second
	lastObserved int
}

const (
	// adaptiveProbe is how many batches of each level the chooser sees
	// before it chooses.
	adaptiveProbe = 2
	// adaptiveReprobe is how often, in batches, it tries again the
	// level it has heard of least recently.
	adaptiveReprobe = 128
	// adaptiveWeight is the moving averages' weight of a new batch.
	adaptiveWeight = 0.2
)

// NewAdaptiveChooser returns a chooser for workers encoding at once over a
// link whose rate link reports.
func NewAdaptiveChooser(workers int, link func() float64) *AdaptiveChooser {
	return &AdaptiveChooser{Workers: workers, LinkBytesPerSec: link}
}

// Level picks the next batch's level.
func (a *AdaptiveChooser) Level(BatchInfo) checkpoint.Level {
	n := a.chosen
	a.chosen++
	if n < adaptiveProbe*len(autoLevels) {
		return autoLevels[n%len(autoLevels)]
	}
	if n%adaptiveReprobe == 0 {
		stalest := 0
		for i, e := range a.est {
			if e.lastObserved < a.est[stalest].lastObserved {
				stalest = i
			}
		}
		return autoLevels[stalest]
	}
	return a.Choice()
}

// Choice returns the level ChooseLevel picks from what the chooser knows
// now.
func (a *AdaptiveChooser) Choice() checkpoint.Level {
	var costs []CodecCost
	nz := max(a.nonZero, 1e-3)
	for i, e := range a.est {
		if e.batches == 0 {
			continue
		}
		costs = append(costs, CodecCost{Level: autoLevels[i], EncodeBytesPerSec: e.bytesPerSec / nz, WirePerRaw: e.wirePerByte * nz})
	}
	link := 0.0
	if a.LinkBytesPerSec != nil {
		link = a.LinkBytesPerSec()
	}
	return ChooseLevel(link, a.Workers, costs)
}

// Observe learns what a batch cost.
func (a *AdaptiveChooser) Observe(b BatchCost) {
	i := autoIndex(b.Level)
	if i < 0 || b.RawBytes <= 0 {
		return
	}
	a.seen++
	a.counts[i]++
	nz := float64(b.RawBytes-b.ZeroBytes) / float64(b.RawBytes)
	a.nonZero = movingAverage(a.nonZero, nz, a.seen == 1)
	e := &a.est[i]
	e.lastObserved = a.seen
	if b.RawBytes == b.ZeroBytes {
		return // nothing to learn of the level
	}
	nonZeroBytes := float64(b.RawBytes - b.ZeroBytes)
	rate := PublishedEncodeBytesPerSec(b.Level)
	if !a.Modelled {
		rate = nonZeroBytes / max(b.Encode.Seconds(), 1e-9)
	}
	e.wirePerByte = movingAverage(e.wirePerByte, float64(b.WireBytes)/nonZeroBytes, e.batches == 0)
	e.bytesPerSec = movingAverage(e.bytesPerSec, rate, e.batches == 0)
	e.batches++
}

// movingAverage folds v into avg, or starts it at v.
func movingAverage(avg, v float64, first bool) float64 {
	if first {
		return v
	}
	return avg + adaptiveWeight*(v-avg)
}

// Untimed reports whether the chooser takes no encode times: with
// Modelled set, the engine reads no clock for it.
func (a *AdaptiveChooser) Untimed() bool { return a.Modelled }

// Batches returns how many batches of each level the chooser observed:
// LevelNone, LevelS2 and LevelFastest, in that order.
func (a *AdaptiveChooser) Batches() (none, s2, zstd int64) {
	return a.counts[0], a.counts[1], a.counts[2]
}

// autoIndex is level's index in autoLevels, or -1.
func autoIndex(level checkpoint.Level) int {
	for i, l := range autoLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// modelledChooser is CodecAuto for a simulated migration's copy engine:
// the published encode rates, the link's goodput, no clock.
func modelledChooser(m *Migration) *AdaptiveChooser {
	link := float64(m.cfg.Link.GoodputBytesPerSec())
	return &AdaptiveChooser{Workers: m.cfg.EncodeWorkers, LinkBytesPerSec: func() float64 { return link }, Modelled: true}
}

// pinnedChooser gives every batch one level, which its owner sets: Model
// fidelity's explicit pages, encoded at the level chosen for their region.
type pinnedChooser struct{ level checkpoint.Level }

func (p *pinnedChooser) Level(BatchInfo) checkpoint.Level { return p.level }
func (p *pinnedChooser) Observe(BatchCost)                {}
func (p *pinnedChooser) Untimed() bool                    { return true }
