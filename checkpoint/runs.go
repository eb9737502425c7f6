package checkpoint

import (
	"encoding/binary"
	"slices"

	"github.com/vgpusim/vgpusim/memory"
)

// PageRuns is the payload of a page runs record: runs of pages of one
// region, each a content class or a mix at one generation, which a
// destination regenerates (memory.Region.StoreRuns). It is how a
// suspended VM's generated content travels in kilobytes: a run costs a few
// bytes whatever its length. A run never has class memory.ClassExplicit;
// pages holding bytes of their own go in page batches.
type PageRuns struct {
	// Region is the region's id.
	Region uint32
	// Runs are the runs, in increasing page order, none overlapping.
	Runs []memory.Run
	// Sum is the record's sum in the stream's digests: the xxhash64 of
	// its payload.
	Sum uint64
}

// Pages returns the pages the runs cover, and how many of them are of
// class zero.
func (pr *PageRuns) Pages() (pages, zero int) {
	for _, r := range pr.Runs {
		pages += r.Pages
		if r.Mix.Parts == nil && r.Class == memory.ClassZero {
			zero += r.Pages
		}
	}
	return pages, zero
}

// MaxMixParts bounds the parts of a mix a page runs record carries: the
// most a region's run names.
const MaxMixParts = memory.MaxRunMixParts

// The kind byte of a run: a class below runMix, or one of these.
const (
	// runMix: a mix whose parts and seed follow, then its key.
	runMix = 0x40
	// runSameMix: the record's previous mix again; its key follows.
	runSameMix = 0x41
)

// appendPageRuns appends the payload of a page runs record of runs, which
// the caller checked with checkRuns.
func appendPageRuns(b []byte, region uint32, runs []memory.Run) []byte {
	b = appendUvarint(b, uint64(region))
	b = appendUvarint(b, uint64(len(runs)))
	end := 0
	var last *memory.Run // the run that defined the record's current mix
	for i := range runs {
		r := &runs[i]
		b = appendUvarint(b, uint64(r.First-end))
		b = appendUvarint(b, uint64(r.Pages))
		switch {
		case r.Mix.Parts == nil:
			b = append(b, byte(r.Class))
		case last != nil && last.MixSeed == r.MixSeed && slices.Equal(last.Mix.Parts, r.Mix.Parts):
			b = append(b, runSameMix)
		default:
			b = append(b, runMix)
			b = appendUvarint(b, uint64(len(r.Mix.Parts)))
			for _, p := range r.Mix.Parts {
				b = append(b, byte(p.Class))
				b = appendUvarint(b, uint64(p.Weight))
			}
			b = appendUint64(b, r.MixSeed)
			last = r
		}
		if r.Mix.Parts != nil {
			// The key less the first page: the same small number for
			// every run of one fill, however far into the region.
			b = binary.AppendVarint(b, int64(r.MixKey-uint64(r.First)))
		}
		b = appendUvarint(b, uint64(r.Gen))
		end = r.First + r.Pages
	}
	return b
}

// runsName reports whether a run of runs, or a part of its mix, is of
// class c.
func runsName(runs []memory.Run, c memory.Class) bool {
	for _, r := range runs {
		if r.Mix.Parts == nil && r.Class == c {
			return true
		}
		for _, p := range r.Mix.Parts {
			if p.Class == c {
				return true
			}
		}
	}
	return false
}

// checkRuns reports what is wrong with runs as runs of a region of pages
// pages, "" if nothing: a writer's check, the one a reader's decode makes.
// They are what a region takes (memory.CheckRuns), and none is of pages
// holding bytes of their own, which a record cannot carry.
func checkRuns(runs []memory.Run, pages int) string {
	if err := memory.CheckRuns(runs, pages); err != nil {
		return err.Error()
	}
	for _, r := range runs {
		if r.Mix.Parts == nil && r.Class == memory.ClassExplicit {
			return "run of explicit pages"
		}
	}
	return ""
}

// decodePageRuns decodes the payload of a page runs record into pr,
// reusing its slices, for a stream whose metadata is meta. Runs are
// bounded by maxRuns, their pages by their region's.
func decodePageRuns(p []byte, pr *PageRuns, meta *Metadata, maxRuns int, minor uint16, newer bool) (why string, overLimit bool) {
	d := newDecoder(p)
	pr.Region = d.uint32("region")
	n := d.uvarint("run count")
	i := meta.region(pr.Region)
	switch {
	case !d.ok:
		return d.problem()
	case i < 0:
		return "runs of undeclared region " + utoa(uint64(pr.Region)), false
	case n == 0:
		return "no run", false
	case n > uint64(maxRuns):
		return "too many runs", true
	case n > uint64(d.rest()/4):
		// A run takes at least four bytes: gap, pages, kind and
		// generation. Checked before the slice is sized by n.
		return "run count beyond the payload", false
	}
	pages := meta.Regions[i].Pages()
	pr.Runs = slices.Grow(pr.Runs[:0], int(n))
	var mix memory.Mix // the record's current mix, and its seed
	var mixSeed uint64
	end := uint64(0)
	for range n {
		first := end + d.uvarintMax("run gap", uint64(pages))
		np := d.uvarintMax("run pages", uint64(pages))
		r := memory.Run{First: int(min(first, uint64(pages))), Pages: int(np)}
		switch kind := d.byte("run kind"); {
		case kind < runMix:
			r.Class = memory.Class(kind)
		case kind == runSameMix:
			if mix.Parts == nil {
				d.fail("run of the previous mix, and none was defined")
			}
			r.Mix, r.MixSeed = mix, mixSeed
		case kind == runMix:
			parts := d.uvarintMax("mix parts", MaxMixParts)
			if parts == 0 {
				d.fail("mix of no part")
			}
			mix = memory.Mix{Parts: make([]memory.MixPart, 0, min(parts, uint64(d.rest()/2)))}
			for range parts {
				c := d.byte("mix class")
				mix.Parts = append(mix.Parts, memory.MixPart{Class: memory.Class(c), Weight: d.uint32("mix weight")})
			}
			mixSeed = d.uint64("mix seed")
			r.Mix, r.MixSeed = mix, mixSeed
		default:
			d.fail("unknown run kind")
		}
		if r.Mix.Parts != nil {
			r.MixKey = uint64(r.First) + uint64(d.varint("mix key"))
		}
		r.Gen = d.uint32("generation")
		if !d.ok {
			return d.problem()
		}
		pr.Runs = append(pr.Runs, r)
		end = first + np
	}
	d.end(newer)
	if why, over := d.problem(); why != "" {
		return why, over
	}
	if why := checkRuns(pr.Runs, pages); why != "" {
		return why, false
	}
	if minor < minorFilters && runsName(pr.Runs, memory.ClassTrainingWeights) {
		// A 1.2 reader takes class 5 for explicit pages, which no run
		// holds, and refuses it: so is it refused here.
		return "run of class " + memory.ClassTrainingWeights.String() + " in a version 1." + utoa(uint64(minor)) + " stream", false
	}
	pr.Sum = xxhashSum(p)
	return "", false
}
