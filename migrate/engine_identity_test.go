package migrate

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"pgregory.net/rapid"
)

// engineCase is a region and a set of its pages to copy.
type engineCase struct {
	name  string
	r     *memory.Region
	set   *memory.PageSet // nil: every used page
	level checkpoint.Level
}

// engineCases are regions of every backing and several mixes, with the
// sets a migration sends: the used pages, a dirty log, every page.
func engineCases(t *testing.T) []engineCase {
	dense := engineRegion(t, memory.Dense, 384, 4096, 11, memory.MixRealistic())
	sparse := engineRegion(t, memory.Sparse, 300, 4096, 12, memory.MixText())
	synth := engineRegion(t, memory.Synthetic, 96, 64<<10, 13, memory.MixRealistic())
	weights := engineRegion(t, memory.Dense, 200, 4096, 14, memory.MixWeights())

	dense.CollectDirty(memory.NewPageSet(0))
	p, err := memory.NewPattern(dense, memory.PatternConfig{Kind: memory.Uniform, RateBytesPerSec: 100 * 4096, Seed: 15})
	must(t, err)
	_, err = p.Advance(time.Second)
	must(t, err)
	dirty := memory.NewPageSet(0)
	dense.CollectDirty(dirty)
	every := memory.NewPageSet(sparse.Pages())
	for q := range sparse.Pages() {
		every.Add(q)
	}
	return []engineCase{
		{"dense-used", dense, nil, checkpoint.LevelFastest},
		{"dense-dirty", dense, dirty, checkpoint.LevelFastest},
		{"sparse-every", sparse, every, checkpoint.LevelFastest},
		{"sparse-used-default", sparse, nil, checkpoint.LevelDefault},
		{"synthetic-64k", synth, nil, checkpoint.LevelFastest},
		{"weights-none", weights, nil, checkpoint.LevelNone},
		{"dense-dirty-s2", dense, dirty, checkpoint.LevelS2},
		{"sparse-used-s2", sparse, nil, checkpoint.LevelS2},
	}
}

// TestEngineOutputIdentical checks that the stream does not depend on the
// workers, the batches in flight or GOMAXPROCS, and is the serial
// reference's, byte for byte.
func TestEngineOutputIdentical(t *testing.T) {
	cases := engineCases(t)
	batchSizes := []int{16 << 10, 100 << 10}
	type ref struct {
		stream []byte
		tr     Traffic
	}
	refs := map[string]ref{}
	for _, c := range cases {
		for _, bb := range batchSizes {
			s, tr := referenceStream(t, c.r, c.set, c.level, bb)
			refs[fmt.Sprint(c.name, bb)] = ref{s, tr}
		}
	}
	workers := []int{1, 2, 4, 8}
	if raceEnabled {
		workers = []int{1, 3}
	}
	for _, procs := range []int{1, 2} {
		for _, w := range workers {
			for _, inFlight := range []int{0, w, w + 1, 3 * w} {
				t.Run(fmt.Sprintf("procs=%d/workers=%d/inflight=%d", procs, w, inFlight), func(t *testing.T) {
					defer setProcs(procs)()
					for _, bb := range batchSizes {
						for _, level := range []checkpoint.Level{checkpoint.LevelFastest, checkpoint.LevelDefault, checkpoint.LevelNone, checkpoint.LevelS2} {
							e, err := NewEngine(EngineConfig{Workers: w, InFlight: inFlight, BatchBytes: bb, Level: level})
							must(t, err)
							for _, c := range cases {
								if c.level != level {
									continue
								}
								want := refs[fmt.Sprint(c.name, bb)]
								got, tr := engineStream(t, e, c.r, c.set)
								if !bytes.Equal(got, want.stream) {
									t.Errorf("%s, batch %d: stream of %d bytes differs from the reference's %d", c.name, bb, len(got), len(want.stream))
								}
								tr.WireBytes = 0 // the reference does not count them
								if tr != want.tr {
									t.Errorf("%s, batch %d: traffic %+v, want %+v", c.name, bb, tr, want.tr)
								}
							}
							must(t, e.Close())
						}
					}
				})
			}
		}
	}
}

// TestEngineMatchesReferenceProperty draws regions, contents, sets, batch
// sizes, levels, Choosers, engine shapes and writers — a plain one, or a
// queue that writes the batches later on lanes of its own, out of order —
// and checks that the engine's stream is the reference's, that a Chooser
// is told of every batch in order, and that applying the stream
// reproduces the pages.
func TestEngineMatchesReferenceProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		pageSize := rapid.SampledFrom([]int{64, 512, 4096, 64 << 10}).Draw(rt, "pageSize")
		pages := rapid.IntRange(1, min(300, (4<<20)/pageSize)).Draw(rt, "pages")
		kind := rapid.SampledFrom([]memory.Kind{memory.Dense, memory.Sparse, memory.Synthetic}).Draw(rt, "kind")
		mix := rapid.SampledFrom(append(memory.Mixes(), memory.MixActivations())).Draw(rt, "mix")
		seed := rapid.Uint64().Draw(rt, "seed")
		r := engineRegion(rt, kind, pages, pageSize, seed, mix)

		var set *memory.PageSet
		switch rapid.IntRange(0, 2).Draw(rt, "setKind") {
		case 1: // random pages
			set = memory.NewPageSet(pages)
			density := rapid.IntRange(1, 100).Draw(rt, "density")
			for q := range pages {
				if rapid.IntRange(1, 100).Draw(rt, "in") <= density {
					set.Add(q)
				}
			}
		case 2: // a dirty log
			set = memory.NewPageSet(0)
			r.CollectDirty(set)
			p, err := memory.NewPattern(r, memory.PatternConfig{Kind: memory.Sweep,
				RateBytesPerSec: int64(rapid.IntRange(1, pages).Draw(rt, "dirtyPages") * pageSize), Seed: seed})
			must(rt, err)
			_, err = p.Advance(time.Second)
			must(rt, err)
			r.CollectDirty(set)
		}
		batchBytes := rapid.IntRange(memory.MinPageSize, 256<<10).Draw(rt, "batchBytes")
		levels := []checkpoint.Level{checkpoint.LevelFastest, checkpoint.LevelDefault, checkpoint.LevelNone, checkpoint.LevelS2}
		level := rapid.SampledFrom(levels).Draw(rt, "level")
		workers := rapid.IntRange(1, 6).Draw(rt, "workers")
		inFlight := rapid.SampledFrom([]int{0, workers, workers + rapid.IntRange(1, 4).Draw(rt, "extra")}).Draw(rt, "inFlight")

		// 0: a plain writer; else a queue of that many lanes.
		lanes := rapid.IntRange(0, 3).Draw(rt, "queueLanes")

		cfg := EngineConfig{Workers: workers, InFlight: inFlight, BatchBytes: batchBytes, Level: level}
		var want []byte
		var wantTr Traffic
		var ch *stripeChooser
		if rapid.Bool().Draw(rt, "chooser") {
			ch = &stripeChooser{levels: rapid.SliceOfN(rapid.SampledFrom(levels), 1, 5).Draw(rt, "stripes")}
			cfg.Chooser = ch
			want, wantTr = chosenReference(rt, r, set, batchBytes, ch.pick)
		} else {
			want, wantTr = referenceStream(rt, r, set, level, batchBytes)
		}
		e, err := NewEngine(cfg)
		must(rt, err)
		defer e.Close()
		var got []byte
		var tr Traffic
		if lanes == 0 {
			got, tr = engineStream(rt, e, r, set)
		} else {
			pause := time.Duration(rapid.IntRange(0, 50).Draw(rt, "pauseUS")) * time.Microsecond
			got, tr = queuedStream(rt, e, r, set, lanes, pause)
		}
		if !bytes.Equal(got, want) {
			rt.Fatalf("stream of %d bytes differs from the reference's %d", len(got), len(want))
		}
		if ch != nil {
			// Told of every batch, in order, once it was chosen.
			if len(ch.observed) != len(ch.chosen) {
				rt.Fatalf("%d batches chosen, %d observed", len(ch.chosen), len(ch.observed))
			}
			for i, o := range ch.observed {
				if o.level != ch.chosen[i] || o.observedBetween <= i {
					rt.Fatalf("batch %d observed at %v after %d chosen; chosen at %v", i, o.level, o.observedBetween, ch.chosen[i])
				}
			}
		}
		if tr.Pages != wantTr.Pages || tr.ZeroPages != wantTr.ZeroPages || tr.RawBytes != wantTr.RawBytes {
			rt.Fatalf("traffic %+v, want %+v", tr, wantTr)
		}
		if set == nil {
			set, err = usedPages(r, memory.NewPageSet(0))
			must(rt, err)
		}
		checkApplied(rt, r, applyStream(rt, r, got), set)
	})
}

// TestEngineChooserIdentical checks the engine's promise with a Chooser:
// the levels chosen alone decide the stream, which is the serial
// reference's for any number of workers, batches in flight or GOMAXPROCS;
// the Chooser is asked in batch order, told in batch order of every batch
// written — its level, raw and wire bytes, and an encode time — and never
// told of a batch before it chose it.
func TestEngineChooserIdentical(t *testing.T) {
	all := engineCases(t)
	var cases []engineCase
	for _, c := range all {
		if c.name == "dense-dirty" || c.name == "sparse-every" || c.name == "synthetic-64k" {
			cases = append(cases, c)
		}
	}
	const batchBytes = 24 << 10
	ref := &stripeChooser{levels: chooserLevels}
	type want struct {
		stream []byte
		tr     Traffic
	}
	wants := map[string]want{}
	for _, c := range cases {
		s, tr := chosenReference(t, c.r, c.set, batchBytes, ref.pick)
		wants[c.name] = want{s, tr}
	}
	workers := []int{1, 2, 4}
	if raceEnabled {
		workers = []int{1, 3}
	}
	for _, procs := range []int{1, 2} {
		for _, w := range workers {
			for _, inFlight := range []int{0, w + 1} {
				t.Run(fmt.Sprintf("procs=%d/workers=%d/inflight=%d", procs, w, inFlight), func(t *testing.T) {
					defer setProcs(procs)()
					for _, c := range cases {
						ch := &stripeChooser{levels: chooserLevels}
						e, err := NewEngine(EngineConfig{Workers: w, InFlight: inFlight, BatchBytes: batchBytes, Chooser: ch})
						must(t, err)
						got, tr := engineStream(t, e, c.r, c.set)
						must(t, e.Close())
						if !bytes.Equal(got, wants[c.name].stream) {
							t.Errorf("%s: stream of %d bytes differs from the reference's %d", c.name, len(got), len(wants[c.name].stream))
						}
						checkObserved(t, c.name, ch, tr)
						tr.WireBytes = 0 // the reference does not count them
						if tr != wants[c.name].tr {
							t.Errorf("%s: traffic %+v, want %+v", c.name, tr, wants[c.name].tr)
						}
					}
				})
			}
		}
	}
}
