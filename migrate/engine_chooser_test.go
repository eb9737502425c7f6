package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

// stripeChooser picks each batch's level from the batch alone — its
// region and first page — so that its choices, and the stream, are the
// same for any number of workers. It records what the engine tells it.
type stripeChooser struct {
	levels   []checkpoint.Level
	chosen   []checkpoint.Level
	observed []observation
}

type observation struct {
	level           checkpoint.Level
	raw, wire       int
	encode          time.Duration
	observedBetween int // batches chosen when this one was observed
}

func (c *stripeChooser) pick(b BatchInfo) checkpoint.Level {
	return c.levels[(b.First/max(1, b.MaxPages/2)+int(b.Region))%len(c.levels)]
}

func (c *stripeChooser) Level(b BatchInfo) checkpoint.Level {
	l := c.pick(b)
	c.chosen = append(c.chosen, l)
	return l
}

func (c *stripeChooser) Observe(b BatchCost) {
	c.observed = append(c.observed, observation{b.Level, b.RawBytes, b.WireBytes, b.Encode, len(c.chosen)})
}

// chooserLevels are the levels a stripeChooser takes in turn: every codec,
// and two zstd levels.
var chooserLevels = []checkpoint.Level{checkpoint.LevelS2, checkpoint.LevelFastest, checkpoint.LevelNone, checkpoint.LevelS2, checkpoint.LevelDefault}

// chosenReference is the stream of the serial reference, each batch at the
// level pick gives it, in a mixed stream.
func chosenReference(t tb, r *memory.Region, set *memory.PageSet, batchBytes int, pick func(BatchInfo) checkpoint.Level) ([]byte, Traffic) {
	t.Helper()
	return referenceWith(t, r, set, checkpoint.WriterOptions{Mixed: true, BatchBytes: batchBytes}, checkpoint.LevelFastest, pick)
}

// checkObserved checks what a Chooser was told against what it chose and
// what the copy sent.
func checkObserved(t *testing.T, name string, ch *stripeChooser, tr Traffic) {
	t.Helper()
	if len(ch.observed) != len(ch.chosen) || len(ch.chosen) < 4 {
		t.Fatalf("%s: %d batches chosen, %d observed", name, len(ch.chosen), len(ch.observed))
	}
	var raw, wire int64
	var spent time.Duration
	levels := map[checkpoint.Level]bool{}
	for i, o := range ch.observed {
		if o.level != ch.chosen[i] {
			t.Fatalf("%s: batch %d observed at %v, chosen at %v", name, i, o.level, ch.chosen[i])
		}
		if o.observedBetween <= i {
			t.Fatalf("%s: batch %d observed before it was chosen", name, i)
		}
		if o.encode < 0 || o.raw <= 0 || o.wire <= 0 {
			t.Fatalf("%s: batch %d observed as %+v", name, i, o)
		}
		raw += int64(o.raw)
		wire += int64(o.wire)
		spent += o.encode
		levels[o.level] = true
	}
	if raw != tr.RawBytes || wire != tr.WireBytes {
		t.Errorf("%s: observed %d raw and %d wire bytes, the copy sent %d and %d", name, raw, wire, tr.RawBytes, tr.WireBytes)
	}
	if spent <= 0 {
		t.Errorf("%s: no encode time observed", name)
	}
	if len(levels) < 3 {
		t.Errorf("%s: only levels %v chosen: the test proves little", name, slices.Collect(maps.Keys(levels)))
	}
}

// badChooser picks an unknown level for batch bad, and LevelS2 before.
type badChooser struct{ n, bad int }

func (c *badChooser) Level(BatchInfo) checkpoint.Level {
	c.n++
	if c.n > c.bad {
		return checkpoint.LevelS2 + 1
	}
	return checkpoint.LevelS2
}

func (c *badChooser) Observe(BatchCost) {}

// TestEngineChooserErrors: a Chooser's unknown level fails the copy with
// ErrConfig, after the batches before it; a level the stream does not
// allow fails it with ErrStream; and the engine is usable after either.
func TestEngineChooserErrors(t *testing.T) {
	r := engineRegion(t, memory.Dense, 64, 4096, 5, memory.MixRealistic())
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			ch := &badChooser{bad: 5}
			e, err := NewEngine(EngineConfig{Workers: workers, BatchBytes: 4 * 4096, Chooser: ch})
			must(t, err)
			defer e.Close()
			cw := &batchCounter{}
			_, err = e.Copy(context.Background(), cw, r, 0, nil)
			if !errors.Is(err, ErrConfig) || !errors.Is(err, checkpoint.ErrInvalid) {
				t.Fatalf("unknown level: %v, want ErrConfig", err)
			}
			if cw.batches != 5 {
				t.Errorf("%d batches written before the unknown level, want 5", cw.batches)
			}

			// S2 batches to a zstd stream: refused by the writer.
			ch.n, ch.bad = 0, 1<<30
			_ = streamOf(t, r, checkpoint.LevelFastest, 4*4096, false, func(w *checkpoint.Writer) error {
				_, err := e.Copy(context.Background(), w, r, 0, nil)
				if !errors.Is(err, ErrStream) || !errors.Is(err, checkpoint.ErrInvalid) {
					t.Errorf("s2 batch in a zstd stream: %v, want ErrStream", err)
				}
				return nil
			})

			// And the engine goes on.
			ch.n = 0
			got, _ := engineStream(t, e, r, nil)
			want, _ := chosenReference(t, r, nil, 4*4096, func(BatchInfo) checkpoint.Level { return checkpoint.LevelS2 })
			if !bytes.Equal(got, want) {
				t.Error("stream after the errors differs from the reference's")
			}
		})
	}
}
