package checkpoint

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vgpusim/vgpusim/memory"
	"pgregory.net/rapid"
)

// TestPropertyRounds: any sequence of rounds — pages filled with
// generated content, written explicitly, zeroed, left alone — written
// round by round as a migration does (collect the dirty pages, send them,
// end the round) and applied at the destination reproduces the final
// contents of every region, under every level, batch size, backing and
// encryption.
func TestPropertyRounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ps := rapid.SampledFrom([]int{256, 1024, 4096}).Draw(t, "pageSize")
		nreg := rapid.IntRange(1, 3).Draw(t, "regions")
		kind := rapid.SampledFrom([]memory.Kind{memory.Dense, memory.Sparse, memory.Synthetic}).Draw(t, "kind")
		var srcs []*memory.Region
		var meta Metadata
		for i := range nreg {
			pages := rapid.IntRange(1, 48).Draw(t, fmt.Sprintf("pages%d", i))
			r, err := memory.New(memory.Config{SizeBytes: int64(pages * ps), PageSize: ps, Kind: kind, Seed: uint64(100 + i)})
			if err != nil {
				t.Fatal(err)
			}
			srcs = append(srcs, r)
			meta.Regions = append(meta.Regions, RegionInfoOf(uint32(i*3), r))
		}
		meta.Profiles = []string{"P40-3q"}
		level := Level(rapid.IntRange(0, int(LevelNone)).Draw(t, "level"))
		wopts := WriterOptions{Level: level, BatchBytes: ps * rapid.IntRange(1, 20).Draw(t, "batchPages")}
		ropts := drawEncryption(t, &wopts)
		var stream bytes.Buffer
		w, err := NewWriter(&stream, meta, wopts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Release()
		var set memory.PageSet
		rounds := rapid.IntRange(1, 5).Draw(t, "rounds")
		for range rounds {
			writes := rapid.IntRange(0, 30).Draw(t, "writes")
			for range writes {
				ri := rapid.IntRange(0, nreg-1).Draw(t, "region")
				r := srcs[ri]
				p := rapid.IntRange(0, r.Pages()-1).Draw(t, "page")
				switch rapid.IntRange(0, 3).Draw(t, "op") {
				case 0:
					c := rapid.SampledFrom([]memory.Class{memory.ClassZero, memory.ClassWeights, memory.ClassActivations, memory.ClassText, memory.ClassRandom}).Draw(t, "class")
					err = r.Fill(p, 1, c)
				case 1:
					data := rapid.SliceOfN(rapid.Byte(), 1, 64).Draw(t, "bytes")
					off := rapid.IntRange(0, ps-len(data)).Draw(t, "offset")
					_, err = r.WriteAt(data, int64(p*ps+off))
				case 2:
					_, err = r.WriteAt(make([]byte, ps), int64(p*ps))
				case 3:
					err = r.FillMix(p, 1, memory.MixRealistic())
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for i, r := range srcs {
				r.CollectDirty(&set)
				if err := w.WriteRegion(uint32(i*3), r, &set); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.EndRound(); err != nil {
				t.Fatal(err)
			}
		}
		blob := rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, "device")
		if err := w.WriteDeviceState(DeviceState{Device: 0, Version: 9, Data: blob}); err != nil {
			t.Fatal(err)
		}
		var digests []RegionDigest
		for i, r := range srcs {
			d, err := r.Digest()
			if err != nil {
				t.Fatal(err)
			}
			digests = append(digests, RegionDigest{uint32(i * 3), d})
		}
		if err := w.CloseWithDigests(digests); err != nil {
			t.Fatal(err)
		}

		var dst []RegionRef
		for i, r := range srcs {
			d, err := memory.New(memory.Config{SizeBytes: r.Size(), PageSize: ps, Kind: memory.Sparse, Seed: r.Seed()})
			if err != nil {
				t.Fatal(err)
			}
			dst = append(dst, RegionRef{uint32(i * 3), d})
		}
		res, err := Restore(bytes.NewReader(stream.Bytes()), dst, ropts)
		if err != nil {
			t.Fatal(err)
		}
		devices := res.Devices
		for i, r := range srcs {
			if p, err := memory.FirstDiff(r, dst[i].Region); err != nil || p >= 0 {
				t.Fatalf("region %d differs at page %d (%v)", i, p, err)
			}
		}
		if len(devices) != 1 || !bytes.Equal(devices[0].Data, blob) || devices[0].Version != 9 {
			t.Fatalf("device states %+v", devices)
		}
	})
}
