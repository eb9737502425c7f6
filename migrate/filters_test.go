package migrate

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// trainingFilterCodecs are the codecs BenchmarkPrecopyTraining and
// TestFiltersShrinkTraining compare, all at zstd's fastest level.
var trainingFilterCodecs = []struct {
	name  string
	codec Codec
	f     Filtering
}{
	{"none", CodecNone, Filtering{}},
	{"zstd", CodecZstd, Filtering{}},
	{"zstd+delta", CodecZstd, Filtering{DeltaCacheBytes: trainingDeltaCacheBytes}},
	{"zstd+delta+shuffle", CodecZstd, Filtering{DeltaCacheBytes: trainingDeltaCacheBytes, Shuffle: true}},
}

// The training VM of the filter comparisons: its framebuffer in use is its
// weights, trainingWeightsBytes of them, which every iteration rewrites
// with a training step's update, at a steady rate: an iteration of a
// model of trainingMACs multiply-accumulates takes about a third of a
// second of a P40, so the weights are rewritten at about 0.7 GB/s, below
// 10 GbE's goodput but not far. The stun target is tight enough that
// pre-copy needs rounds. The optimizer state in guest RAM is kept small,
// so that the framebuffer is what moves.
const (
	trainingWeightsBytes    = 256 * MiB
	trainingMACs            = 140e9
	trainingStunTarget      = 150 * time.Millisecond
	trainingDeltaCacheBytes = 2 * (GiB + 1*GiB) // the whole of both regions
)

// trainingWeightsVM creates and starts, on h, a training VM whose whole
// framebuffer in use is weights: weightsBytes of them, rewritten by every
// iteration of a model of macs multiply-accumulates.
func trainingWeightsVM(t tb, h *vgpu.Host, weightsBytes int64, macs float64) *vgpu.VM {
	t.Helper()
	model := tinyModel
	model.Name, model.MACs = "weights-bound", int64(macs)
	w, err := vgpu.NewTraining(vgpu.TrainingConfig{Model: model, BatchSize: 1, WeightsBytes: weightsBytes,
		ActivationsBytes: 64 << 10, OptimizerStateBytes: 1 * MiB, Seed: 11})
	must(t, err)
	vm, err := h.CreateVM(vgpu.VMSpec{ID: "train", RAMBytes: GiB, RAMFootprintBytes: 16 * MiB, Profiles: []string{"P40-1Q"}, Workload: w})
	must(t, err)
	must(t, vm.Start())
	must(t, h.Advance(time.Second))
	return vm
}

// migrateTrainingVM migrates a fresh training VM of weightsBytes of
// weights and a model of macs with codec c and filters f at fidelity fid
// over 10 GbE, under stun target target, and returns its report.
func migrateTrainingVM(t testing.TB, fid Fidelity, c Codec, f Filtering, weightsBytes int64, macs float64, target time.Duration) *Report {
	t.Helper()
	src, dst := hostPair(t, memory.Synthetic, 1)
	vm := trainingWeightsVM(t, src, weightsBytes, macs)
	sameClock(t, src, dst)
	cfg := Config{Fidelity: fid, Codec: c, Filtering: f, Link: GbE10()}
	cfg.StunTarget = target
	rep, err := Migrate(vm, dst, cfg)
	must(t, err)
	if rep.Outcome != PhaseDone {
		t.Fatalf("outcome %v", rep.Outcome)
	}
	return rep
}

// afterRoundZero returns the wire bytes of a report after its first
// round: the later rounds and the stun's.
func afterRoundZero(rep *Report) int64 { return rep.WireBytes - rep.Rounds[0].WireBytes }

// BenchmarkPrecopyTraining migrates a training VM whose framebuffer in use
// is weights under update (memory.ClassTrainingWeights) with pre-copy over
// 10 GbE, once with each codec — none, zstd, zstd with delta pages, and
// zstd with delta and shuffled pages — at Bytes fidelity, every page
// encoded, and at Model fidelity. It reports the rounds, the wire bytes of
// round 0 and after it, and the stun:
//
//	go test -run '^$' -bench PrecopyTraining -benchtime 1x ./migrate
//
// The target: delta+shuffle at most half of zstd's bytes after round 0.
func BenchmarkPrecopyTraining(b *testing.B) {
	for _, c := range trainingFilterCodecs {
		for _, fid := range []Fidelity{Bytes, Model} {
			b.Run("codec="+c.name+"/fidelity="+fid.String(), func(b *testing.B) {
				benchmarkPrecopyTraining(b, fid, c.codec, c.f)
			})
		}
	}
}

func benchmarkPrecopyTraining(b *testing.B, fid Fidelity, c Codec, f Filtering) {
	b.ReportAllocs()
	var rep *Report
	for b.Loop() {
		rep = migrateTrainingVM(b, fid, c, f, trainingWeightsBytes, trainingMACs, trainingStunTarget)
	}
	b.SetBytes(rep.RawBytes)
	b.ReportMetric(float64(len(rep.Rounds)), "rounds")
	b.ReportMetric(float64(rep.Rounds[0].WireBytes)/(1<<20), "round0-MiB")
	b.ReportMetric(float64(afterRoundZero(rep))/(1<<20), "after-round0-MiB")
	b.ReportMetric(rep.Stun.Seconds()*1e3, "stun-ms")
}

// TestFilteredMigrationSendsDeltas runs the fault table's migration, the
// counter oracle's VM over a slow link, without a fault, with and without
// page filters: both end with the oracle's pages at the destination (the
// stream's digests check every page), and the filtered one sends the
// pages it sends again as deltas, fewer bytes in all.
func TestFilteredMigrationSendsDeltas(t *testing.T) {
	run := func(mode faultMode) *Report {
		fw := newFaultWorld(t, false)
		m, err := fw.sim.Start(fw.vm, fw.dst, faultConfig(mode))
		must(t, err)
		rep, err := m.Run()
		must(t, err)
		fw.w.Check(t, m.VM())
		return rep
	}
	plain, filtered := run(faultMode{fid: Bytes}), run(faultMode{fid: Bytes, filtered: true})
	if plain.PreCopy.DeltaPages != 0 {
		t.Fatalf("%d delta pages without filters", plain.PreCopy.DeltaPages)
	}
	deltas := filtered.PreCopy.DeltaPages + filtered.Final.RAM.DeltaPages
	if len(filtered.Rounds) < 2 || deltas == 0 {
		t.Fatalf("%d rounds, %d delta pages: want a second round of deltas", len(filtered.Rounds), deltas)
	}
	if filtered.WireBytes >= plain.WireBytes {
		t.Fatalf("filtered stream of %d bytes, plain %d", filtered.WireBytes, plain.WireBytes)
	}
	t.Logf("%d rounds, %d delta pages (%d unchanged); wire bytes %d against %d without filters",
		len(filtered.Rounds), deltas, filtered.PreCopy.UnchangedPages+filtered.Final.RAM.UnchangedPages, filtered.WireBytes, plain.WireBytes)
}

// payloadCollector keeps the payload bytes of every batch handed to it.
type payloadCollector struct{ b []byte }

func (c *payloadCollector) WriteBatch(b checkpoint.EncodedBatch) error {
	for _, p := range b.Payload {
		c.b = append(c.b, p...)
	}
	return nil
}

// TestEngineFilteredIdentical copies a region twice through engines with
// page filters, changing pages in between, and checks that every shape of
// engine — workers, batches in flight, GOMAXPROCS — writes the one-worker
// engine's bytes in both passes: the delta cache's choices do not depend
// on the order the workers encode in, though the cache holds fewer slots
// than pages, so that pages share them.
func TestEngineFilteredIdentical(t *testing.T) {
	const ps, pages = 4096, 96
	mix := memory.Mix{Name: "t", Parts: []memory.MixPart{
		{Class: memory.ClassTrainingWeights, Weight: 3}, {Class: memory.ClassText, Weight: 1}, {Class: memory.ClassZero, Weight: 1}}}
	// Two passes: every page in use, then a third of them rewritten (the
	// training weights at their next generation), a page changed in
	// place and one sent again unchanged.
	run := func(workers, inFlight, procs int) []byte {
		defer setProcs(procs)()
		src, err := memory.New(memory.Config{SizeBytes: pages * ps, PageSize: ps, Kind: memory.Sparse, Seed: 3})
		must(t, err)
		must(t, src.FillMix(0, pages, mix))
		f, err := Filtering{Shuffle: true, DeltaCacheBytes: 2 * 80 * ps}.PageFilters([]checkpoint.RegionInfo{checkpoint.RegionInfoOf(0, src)})
		must(t, err)
		e, err := NewEngine(EngineConfig{Workers: workers, InFlight: inFlight, BatchBytes: 8 * ps, Filters: f})
		must(t, err)
		defer e.Close()
		var out payloadCollector
		_, err = e.Copy(context.Background(), &out, src, 0, nil)
		must(t, err)
		must(t, src.FillMix(0, pages/3, mix))
		_, err = src.WriteAt([]byte("changed in place"), int64(50*ps+100))
		must(t, err)
		set := memory.NewPageSet(pages)
		for p := range pages/3 + 1 {
			set.Add(p)
		}
		set.Add(50)
		set.Add(70)
		tr, err := e.Copy(context.Background(), &out, src, 0, set)
		must(t, err)
		if tr.DeltaPages == 0 {
			t.Fatal("no delta page in the second pass")
		}
		return out.b
	}
	want := run(1, 0, 1)
	for _, procs := range []int{1, 2} {
		for _, w := range []int{2, 3} {
			for _, inFlight := range []int{0, w + 1} {
				if got := run(w, inFlight, procs); !bytes.Equal(got, want) {
					t.Errorf("procs=%d workers=%d inflight=%d: %d bytes differ from one worker's %d", procs, w, inFlight, len(got), len(want))
				}
			}
		}
	}
}

// TestFidelitiesAgreeWithFilters migrates a small training VM whose
// framebuffer in use is weights under update, with shuffled and delta
// pages, in Bytes and in Model fidelity: the same rounds, and the same
// bytes on the wire within 1 %, the Model fidelity's delta cache keeping
// the pages the Bytes fidelity's keeps and its class sizes measured with
// the same encoder. Without filters the same VM moves more bytes in both.
func TestFidelitiesAgreeWithFilters(t *testing.T) {
	if raceEnabled {
		t.Skip("encodes 160 MiB for real")
	}
	const weights, macs, target = 32 * MiB, 16e9, 110 * time.Millisecond
	f := Filtering{Shuffle: true, DeltaCacheBytes: 4 * GiB}
	b := migrateTrainingVM(t, Bytes, CodecZstd, f, weights, macs, target)
	m := migrateTrainingVM(t, Model, CodecZstd, f, weights, macs, target)
	plain := migrateTrainingVM(t, Model, CodecZstd, Filtering{}, weights, macs, target)
	t.Logf("bytes: %d rounds, %d wire bytes, %d delta pages; model: %d rounds, %d wire bytes, %d delta pages; model without filters: %d rounds, %d wire bytes",
		len(b.Rounds), b.WireBytes, b.PreCopy.DeltaPages, len(m.Rounds), m.WireBytes, m.PreCopy.DeltaPages, len(plain.Rounds), plain.WireBytes)
	if len(b.Rounds) != len(m.Rounds) || len(b.Rounds) < 2 {
		t.Fatalf("%d rounds in Bytes fidelity, %d in Model: want the same, at least 2", len(b.Rounds), len(m.Rounds))
	}
	if d := rel(float64(m.WireBytes), float64(b.WireBytes)); d > 0.01 {
		t.Errorf("wire: model %d, bytes %d (%.2f %% apart)", m.WireBytes, b.WireBytes, 100*d)
	}
	if m.PreCopy.DeltaPages != b.PreCopy.DeltaPages {
		t.Errorf("delta pages: model %d, bytes %d", m.PreCopy.DeltaPages, b.PreCopy.DeltaPages)
	}
	if plain.WireBytes <= m.WireBytes {
		t.Errorf("without filters %d wire bytes, with them %d", plain.WireBytes, m.WireBytes)
	}
}
