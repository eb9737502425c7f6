package vgpusimtest

import (
	"bytes"
	"testing"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

// testRegion is the 64 KiB region the test streams carry: 16 pages of the
// realistic mix, some of them zero.
func testRegion(tb testing.TB, seed uint64) *memory.Region {
	tb.Helper()
	r, err := memory.New(memory.Config{SizeBytes: 64 << 10, Kind: memory.Dense, Seed: seed})
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.FillMix(0, 16, memory.MixRealistic()); err != nil {
		tb.Fatal(err)
	}
	return r
}

// testStream writes the region of seed as a checkpoint stream of id:
// metadata, four page batches, the end of round 0, a device state and the
// end of the stream with the region's digest — eight records.
func testStream(tb testing.TB, seed uint64, id byte) []byte {
	tb.Helper()
	ram := testRegion(tb, seed)
	meta := checkpoint.Metadata{VMID: "vm-kit", GPUModel: "Tesla P40", Profiles: []string{"P40-1Q"},
		Regions: []checkpoint.RegionInfo{checkpoint.RegionInfoOf(0, ram)}}
	var buf bytes.Buffer
	w, err := checkpoint.NewWriter(&buf, meta, checkpoint.WriterOptions{
		StreamID: [checkpoint.StreamIDSize]byte{id}, Level: checkpoint.LevelNone, BatchBytes: 16 << 10})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Release()
	var all memory.PageSet
	ram.CollectDirty(&all)
	must(tb, w.WriteRegion(0, ram, &all))
	_, err = w.EndRound()
	must(tb, err)
	must(tb, w.WriteDeviceState(checkpoint.DeviceState{Device: 0, Version: 1, Data: []byte("regs")}))
	d, err := ram.Digest()
	must(tb, err)
	must(tb, w.CloseWithDigests([]checkpoint.RegionDigest{{Region: 0, Digest: d}}))
	return buf.Bytes()
}

// restore reads stream with the checkpoint package's reader, applier and
// end-of-file check (checkpoint.Restore) into a fresh region like the
// one of seed.
func restore(tb testing.TB, stream []byte, seed uint64) error {
	tb.Helper()
	dst, err := memory.New(memory.Config{SizeBytes: 64 << 10, Kind: memory.Dense, Seed: seed})
	must(tb, err)
	_, err = checkpoint.Restore(bytes.NewReader(stream), []checkpoint.RegionRef{{ID: 0, Region: dst}}, checkpoint.ReaderOptions{})
	return err
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
