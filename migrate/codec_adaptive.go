package migrate

import (
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
)

// Published single-core encode rates, for a simulated CodecAuto, which
// reads no clock: klauspost/compress v1.20.3's READMEs, on silesia.tar,
// one core — zstd at its fastest 318.47 MB/s (zstd/README.md, "zskp 1"),
// S2 607 MB/s (s2/README.md, the "1 CPU" row). Uncompressed pages cost a
// copy, never what limits a migration. The zstd README counts its mb/s in
// 2^20 bytes (and does not name a core count for that table), so its
// figure is 333.9e6 bytes a second; the constant keeps 318.47e6, 4.6 %
// lower, a conservative reading. The S2 README does not say which
// megabyte it means; 607e6 takes the decimal one.
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
//
// With Now set (the live mode), the rule's choice is checked against what
// each level achieves: the chooser sends windows of batches of one level
// and measures the non-zero bytes a second that went out while each
// level was sent. ChooseLevel's inputs leave out what the encoders share
// their cores with — the other end, when both run on one machine; the
// sockets; the hashing — and a level whose windows achieved more than the
// rule's choice by a margin is kept instead. It tries the levels from the
// least compression up, each only if the one before did not clearly
// lose, and every few windows tries a neighbour of the best again.
type AdaptiveChooser struct {
	// Workers is how many batches are encoded at once.
	Workers int
	// LinkBytesPerSec returns the link's rate now; 0 means unknown.
	LinkBytesPerSec func() float64
	// Modelled makes the encode rates the published ones.
	Modelled bool
	// Now, if set, is the clock the levels' achieved rates are measured
	// on; nil measures none, and the rule alone chooses.
	Now func() time.Time

	est    [len(autoLevels)]levelEstimate
	chosen int // batches chosen
	seen   int // batches observed
	counts [len(autoLevels)]int64
	// nonZero is the share of the raw bytes in non-zero pages, a moving
	// average over every batch.
	nonZero float64

	// What Now measures: the window being chosen, the time of the last
	// Observe, whether the next one follows a gap (the engine idle
	// between copies), and each level's achieved rate.
	winLevel checkpoint.Level
	winLeft  int
	windows  int
	explores int // windows that explored a neighbour of the best
	lastAt   time.Time
	afterGap bool
	achieved [len(autoLevels)]achievedRate
}

// achievedRate is what the batches of a level achieved, as decaying sums
// of their non-zero bytes and of the time between their writes.
type achievedRate struct {
	bytes, secs float64
	lastWindow  int
}

func (r achievedRate) rate() float64 {
	if r.secs <= 0 {
		return 0
	}
	return r.bytes / r.secs
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
	// adaptiveWindow is the batches of a window that tries a level;
	// every adaptiveExplore-th window does, the others send
	// adaptiveExploit batches of the best.
	adaptiveWindow  = 8
	adaptiveExploit = 32
	adaptiveExplore = 16
	// adaptiveDecay weighs an achieved rate's past batches down, one
	// batch at a time.
	adaptiveDecay = 0.97
	// adaptiveKeep is by how much a measured level must beat the rule's
	// choice to be kept instead.
	adaptiveKeep = 1.03
	// adaptiveGap is the pause between an Observe and the next Level,
	// with nothing in flight, after which the next batch's time is not
	// counted: the engine was idle between copies.
	adaptiveGap = 2 * time.Millisecond
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
	if a.Now != nil {
		if n == a.seen && !a.lastAt.IsZero() && a.Now().Sub(a.lastAt) > adaptiveGap {
			a.afterGap = true
		}
		return a.windowLevel()
	}
	if n < adaptiveProbe*len(autoLevels) {
		return autoLevels[n%len(autoLevels)]
	}
	if n%adaptiveReprobe == 0 {
		return autoLevels[a.stalest()]
	}
	return a.Choice()
}

// stalest is the index of the level observed least recently.
func (a *AdaptiveChooser) stalest() int {
	stalest := 0
	for i, e := range a.est {
		if e.lastObserved < a.est[stalest].lastObserved {
			stalest = i
		}
	}
	return stalest
}

// windowLevel is Level with a clock: the level of the current window,
// and, when it is over, the next window's. The levels go from the least
// CPU and the most bytes (none) to the most CPU and the fewest (zstd), so
// it searches them in that order: it tries a level only if the one before
// it did not clearly lose, and later explores the neighbours of the best.
func (a *AdaptiveChooser) windowLevel() checkpoint.Level {
	if a.winLeft > 0 {
		a.winLeft--
		return a.winLevel
	}
	w := a.windows
	a.windows++
	a.winLeft = adaptiveWindow - 1
	probed := 0
	for probed < len(autoLevels) && a.achieved[probed].secs > 0 {
		probed++
	}
	switch {
	case probed < len(autoLevels) && (probed == 0 || !a.clearlyWorse(probed-1, probed-2)):
		a.winLevel = autoLevels[probed]
	case w%adaptiveExplore == 0 || w&(w-1) == 0:
		// A neighbour of the best, the two in turn: at first every
		// time the windows double, so that a first choice made on
		// the noise of a start is soon corrected, then every
		// adaptiveExplore windows.
		b := autoIndex(a.best())
		n := b + 1 - 2*(a.explores%2)
		a.explores++
		if n < 0 || n >= len(autoLevels) {
			n = 2*b - n
		}
		a.winLevel = autoLevels[n]
	default:
		a.winLevel = a.best()
		a.winLeft = adaptiveExploit - 1
	}
	a.achieved[autoIndex(a.winLevel)].lastWindow = w
	return a.winLevel
}

// clearlyWorse reports whether level i achieved less than level j by the
// margin; false if j is out of range.
func (a *AdaptiveChooser) clearlyWorse(i, j int) bool {
	return j >= 0 && a.achieved[i].rate()*adaptiveKeep < a.achieved[j].rate()
}

// best is the rule's choice, unless a level achieved more by the margin.
func (a *AdaptiveChooser) best() checkpoint.Level {
	rule := a.Choice()
	best, bestRate := rule, a.achieved[autoIndex(rule)].rate()*adaptiveKeep
	for i, r := range a.achieved {
		if r.rate() > bestRate {
			best, bestRate = autoLevels[i], r.rate()
		}
	}
	return best
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
	if a.Now != nil {
		a.measure(i, b)
	}
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

// measure credits level i with b's non-zero bytes and the time since the
// last batch was written.
func (a *AdaptiveChooser) measure(i int, b BatchCost) {
	now := a.Now()
	if !a.lastAt.IsZero() && !a.afterGap {
		r := &a.achieved[i]
		r.bytes = r.bytes*adaptiveDecay + float64(b.RawBytes-b.ZeroBytes)
		r.secs = r.secs*adaptiveDecay + now.Sub(a.lastAt).Seconds()
	}
	a.lastAt, a.afterGap = now, false
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
	link := float64(m.cfg.goodput())
	return &AdaptiveChooser{Workers: m.cfg.EncodeWorkers, LinkBytesPerSec: func() float64 { return link }, Modelled: true}
}

// pinnedChooser gives every batch one level, which its owner sets: Model
// fidelity's explicit pages, encoded at the level chosen for their region.
type pinnedChooser struct{ level checkpoint.Level }

func (p *pinnedChooser) Level(BatchInfo) checkpoint.Level { return p.level }
func (p *pinnedChooser) Observe(BatchCost)                {}
func (p *pinnedChooser) Untimed() bool                    { return true }
