package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

// Options says how a census reads and samples an image.
type Options struct {
	// PageSize is the page size the image is cut into; 0 means 4 KiB.
	PageSize int
	// Sample is the most pages of each class encoded to measure the
	// codecs; 0 means DefaultSample.
	Sample int
	// Workers is the goroutines classifying pages; 0 means GOMAXPROCS.
	Workers int
}

// DefaultSample is Options.Sample's default: 4 MiB of 4 KiB pages a class.
const DefaultSample = 1024

// readChunkBytes is what a census reads of the image at once.
const readChunkBytes = 4 << 20

// levels are the codecs a census measures, in its columns' order.
var levels = []checkpoint.Level{checkpoint.LevelNone, checkpoint.LevelS2, checkpoint.LevelFastest}

// Ratios are the wire/raw ratios of a set of pages under each codec.
type Ratios struct {
	None float64 `json:"none"`
	S2   float64 `json:"s2"`
	Zstd float64 `json:"zstd"`
}

// at returns the ratio of levels[i].
func (r *Ratios) at(i int) *float64 {
	switch i {
	case 0:
		return &r.None
	case 1:
		return &r.S2
	}
	return &r.Zstd
}

// ClassRow is what a census found of one content class.
type ClassRow struct {
	Class   string  `json:"class"`
	Pages   int64   `json:"pages"`
	Bytes   int64   `json:"bytes"`
	Share   float64 `json:"share"`
	Sampled int     `json:"sampled"`
	// WireRaw is what checkpoint.BatchEncoder makes of the sampled pages;
	// nil for a class without pages.
	WireRaw *Ratios `json:"wire_raw,omitempty"`
}

// Report is a census of an image.
type Report struct {
	Image       string     `json:"image,omitempty"`
	Bytes       int64      `json:"bytes"`
	PaddedBytes int64      `json:"padded_bytes"` // zeros added to complete the last page
	PageSize    int        `json:"page_size"`
	Pages       int64      `json:"pages"`
	Sample      int        `json:"sample"`      // most pages of each class encoded
	BatchBytes  int        `json:"batch_bytes"` // the encoder's batches
	Classes     []ClassRow `json:"classes"`
	// Whole is the classes' ratios weighted by their bytes: what the
	// codecs would make of the whole image, batches of one class at a time.
	Whole Ratios `json:"whole"`
}

// classOrder is the order of a report's rows; ClassExplicit is "other":
// bytes like none of the generated classes.
var classOrder = []memory.Class{memory.ClassZero, memory.ClassWeights, memory.ClassActivations,
	memory.ClassText, memory.ClassRandom, memory.ClassExplicit}

func className(c memory.Class) string {
	if c == memory.ClassExplicit {
		return "other"
	}
	return c.String()
}

// sample is a reservoir of up to k pages of one class (Vitter's
// algorithm R), each with its index, so that the pages are encoded in
// image order.
type sample struct {
	k     int
	seen  int64
	idx   []int64
	pages [][]byte
}

func (s *sample) offer(rng *rand.Rand, index int64, page []byte) {
	s.seen++
	switch {
	case len(s.idx) < s.k:
		s.idx = append(s.idx, index)
		s.pages = append(s.pages, slices.Clone(page))
	default:
		if j := rng.Int64N(s.seen); j < int64(s.k) {
			s.idx[j] = index
			copy(s.pages[j], page)
		}
	}
}

// Census reads the size bytes of image r once, classifies every page with
// memory.ClassifyPage, and encodes a sample of each class's pages at each
// codec level with checkpoint.BatchEncoder.
func Census(r io.ReaderAt, size int64, opts Options) (*Report, error) {
	ps, k, workers := opts.PageSize, opts.Sample, opts.Workers
	if ps == 0 {
		ps = memory.DefaultPageSize
	}
	if k == 0 {
		k = DefaultSample
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if ps < memory.MinPageSize || ps > memory.MaxPageSize || ps&(ps-1) != 0 {
		return nil, fmt.Errorf("page size %d is not a power of two in [%d, %d]", ps, memory.MinPageSize, memory.MaxPageSize)
	}
	if k < 0 || size <= 0 {
		return nil, fmt.Errorf("sample of %d pages of an image of %d bytes", k, size)
	}
	pages := (size + int64(ps) - 1) / int64(ps)
	rep := &Report{Bytes: size, PaddedBytes: pages*int64(ps) - size, PageSize: ps, Pages: pages, Sample: k,
		BatchBytes: checkpoint.DefaultBatchBytes}
	samples := make([]sample, len(classOrder))
	for i := range samples {
		samples[i].k = k
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, max(readChunkBytes, ps))
	per := len(buf) / ps
	classes := make([]memory.Class, per)
	var counts [memory.ClassExplicit + 1]int64
	for first := int64(0); first < pages; first += int64(per) {
		n := int(min(int64(per), pages-first))
		chunk := buf[:n*ps]
		if err := readFull(r, chunk, first*int64(ps), size); err != nil {
			return nil, err
		}
		classify(chunk, ps, classes[:n], workers)
		for i, c := range classes[:n] {
			counts[c]++
			samples[slices.Index(classOrder, c)].offer(rng, first+int64(i), chunk[i*ps:(i+1)*ps])
		}
	}
	for i, c := range classOrder {
		row := ClassRow{Class: className(c), Pages: counts[c], Bytes: counts[c] * int64(ps),
			Share: float64(counts[c]) / float64(pages), Sampled: len(samples[i].idx)}
		if row.Pages > 0 {
			ratios, err := encode(&samples[i], ps)
			if err != nil {
				return nil, err
			}
			row.WireRaw = &ratios
			for l := range levels {
				*rep.Whole.at(l) += row.Share * *ratios.at(l)
			}
		}
		rep.Classes = append(rep.Classes, row)
	}
	return rep, nil
}

// readFull reads len(p) bytes of the image at off, zeros past its size.
func readFull(r io.ReaderAt, p []byte, off, size int64) error {
	n := int(min(int64(len(p)), size-off))
	clear(p[n:])
	got, err := r.ReadAt(p[:n], off)
	if got == n {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %d bytes at %d: %w", n, off, err)
}

// classify sets classes[i] to the class of page i of chunk, on up to
// workers goroutines.
func classify(chunk []byte, ps int, classes []memory.Class, workers int) {
	share := (len(classes) + workers - 1) / workers
	var wg sync.WaitGroup
	for from := 0; from < len(classes); from += share {
		to := min(len(classes), from+share)
		wg.Go(func() {
			for i := from; i < to; i++ {
				classes[i] = memory.ClassifyPage(chunk[i*ps : (i+1)*ps])
			}
		})
	}
	wg.Wait()
}

// encode returns the wire/raw ratio of s's pages at each level, encoded in
// image order in batches of checkpoint.DefaultBatchBytes.
func encode(s *sample, ps int) (Ratios, error) {
	order := make([]int, len(s.idx))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(s.idx[a] - s.idx[b]) })
	per := checkpoint.PagesPerBatch(checkpoint.DefaultBatchBytes, ps)
	var out Ratios
	for li, level := range levels {
		enc, err := checkpoint.NewBatchEncoder(level)
		if err != nil {
			return out, err
		}
		wire, raw := int64(0), int64(0)
		for b := 0; b < len(order); b += per {
			if err := enc.Begin(0, ps); err != nil {
				return out, err
			}
			for _, i := range order[b:min(len(order), b+per)] {
				if err := enc.Add(int(s.idx[i]), 0, s.pages[i]); err != nil {
					return out, err
				}
			}
			eb, err := enc.Finish()
			if err != nil {
				return out, err
			}
			for _, p := range eb.Payload {
				wire += int64(len(p))
			}
			raw += int64(eb.RawBytes)
		}
		if err := enc.Close(); err != nil {
			return out, err
		}
		*out.at(li) = float64(wire) / float64(raw)
	}
	return out, nil
}
