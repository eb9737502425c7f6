package checkpoint

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpusim/vgpusim/memory"
)

// TestSaveRestoreEveryMix suspends a VM with a RAM region and a
// framebuffer region to a stream and resumes it, for every content mix,
// backing, level and encryption: the regions come back equal byte for
// byte, generation for generation, and the device states field for field.
func TestSaveRestoreEveryMix(t *testing.T) {
	mixes := append(memory.Mixes(), memory.MixActivations())
	type config struct {
		name  string
		kind  memory.Kind
		wopts WriterOptions
		ropts ReaderOptions
	}
	configs := []config{
		{"dense/fastest", memory.Dense, WriterOptions{}, ReaderOptions{}},
		{"sparse/none", memory.Sparse, WriterOptions{Level: LevelNone}, ReaderOptions{}},
		{"dense/s2", memory.Dense, WriterOptions{Level: LevelS2}, ReaderOptions{}},
		{"synthetic/mixed", memory.Synthetic, WriterOptions{Mixed: true, Level: LevelS2, BatchBytes: 20 << 10}, ReaderOptions{}},
		{"synthetic/default/small-batches", memory.Synthetic, WriterOptions{Level: LevelDefault, BatchBytes: 20 << 10}, ReaderOptions{}},
		{"dense/encrypted", memory.Dense,
			WriterOptions{Encryption: EncryptionRequired, Key: testKey},
			ReaderOptions{Encryption: EncryptionRequired, Key: testKey}},
	}
	for _, m := range mixes {
		for _, c := range configs {
			t.Run(fmt.Sprintf("mix=%s/%s", m.Name, c.name), func(t *testing.T) {
				ram := newRegion(t, c.kind, 96, 4096, 11, m)
				fb := newRegion(t, c.kind, 8, 64<<10, 12, m)
				devices := []DeviceState{
					{Device: 1, Version: 3, Data: []byte("registers and channels")},
					{Device: 0, Version: 3, Data: bytes.Repeat([]byte{7}, 5000)},
				}
				snap := Snapshot{
					VMID: "vm-7", GPUModel: "Tesla P40", Profiles: []string{"P40-2q", "P40-2q"},
					Regions: []RegionRef{{ID: 0, Region: ram}, {ID: 1, Region: fb}},
					Devices: devices,
				}
				var file bytes.Buffer
				c.wopts.StreamID = testStreamID
				if err := Save(&file, snap, c.wopts); err != nil {
					t.Fatal(err)
				}
				ram2, fb2 := emptyLike(t, ram, c.kind), emptyLike(t, fb, memory.Sparse)
				res, err := Restore(bytes.NewReader(file.Bytes()), []RegionRef{{ID: 1, Region: fb2}, {ID: 0, Region: ram2}}, c.ropts)
				if err != nil {
					t.Fatal(err)
				}
				meta, got := res.Metadata, res.Devices
				sameRegion(t, ram, ram2)
				sameRegion(t, fb, fb2)
				if diff := cmp.Diff(devices, got); diff != "" {
					t.Errorf("device states (-saved +restored):\n%s", diff)
				}
				if meta.VMID != "vm-7" || meta.GPUModel != "Tesla P40" || len(meta.Regions) != 2 {
					t.Errorf("metadata %+v", meta)
				}
			})
		}
	}
}

// TestSaveRestoreFile suspends a VM to a real file and resumes it from the
// file, through buffered I/O as a caller would: the file holds exactly the
// stream, and the VM comes back equal.
func TestSaveRestoreFile(t *testing.T) {
	ram := newRegion(t, memory.Sparse, 128, 4096, 21, memory.MixRealistic())
	fb := newRegion(t, memory.Dense, 16, 64<<10, 22, memory.MixRealistic())
	devices := []DeviceState{{Device: 0, Version: 1, Data: []byte("contexts, channels, registers")}}
	snap := Snapshot{
		VMID: "vm-suspended", GPUModel: "Tesla P40", Profiles: []string{"P40-4q"},
		Regions: []RegionRef{{ID: 0, Region: ram}, {ID: 1, Region: fb}},
		Devices: devices,
	}
	path := filepath.Join(t.TempDir(), "vm.ckpt")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	if err := Save(bw, snap, WriterOptions{StreamID: testStreamID}); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f, err = os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ram2, fb2 := emptyLike(t, ram, memory.Sparse), emptyLike(t, fb, memory.Dense)
	res, err := Restore(bufio.NewReader(f), []RegionRef{{ID: 0, Region: ram2}, {ID: 1, Region: fb2}}, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := res.Devices
	sameRegion(t, ram, ram2)
	sameRegion(t, fb, fb2)
	if diff := cmp.Diff(devices, got); diff != "" {
		t.Errorf("device states (-saved +restored):\n%s", diff)
	}
}
