package checkpoint_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

// A migration stream: metadata, two pre-copy rounds, then the device state
// and the end of the stream. The destination reads it back record by
// record.
func Example() {
	ram, _ := memory.New(memory.Config{SizeBytes: 64 << 10, Kind: memory.Dense, Seed: 1})
	_ = ram.FillMix(0, 16, memory.MixRealistic())

	meta := checkpoint.Metadata{
		VMID: "vm-1", GPUModel: "Tesla P40", Profiles: []string{"P40-1q"},
		Regions: []checkpoint.RegionInfo{checkpoint.RegionInfoOf(0, ram)},
	}
	var stream bytes.Buffer
	w, _ := checkpoint.NewWriter(&stream, meta, checkpoint.WriterOptions{StreamID: [16]byte{1}})
	defer w.Release()

	// Round 0 sends every page written so far; round 1 the pages dirtied
	// since.
	var dirty memory.PageSet
	ram.CollectDirty(&dirty)
	_ = w.WriteRegion(0, ram, &dirty)
	r0, _ := w.EndRound()
	_, _ = ram.WriteAt([]byte("dirty"), 4096*3)
	ram.CollectDirty(&dirty)
	_ = w.WriteRegion(0, ram, &dirty)
	r1, _ := w.EndRound()
	_ = w.WriteDeviceState(checkpoint.DeviceState{Device: 0, Version: 1, Data: []byte("regs")})
	_ = w.Close()
	fmt.Printf("round 0: %d pages, %d zero; round 1: %d page\n", r0.Pages, r0.ZeroPages, r1.Pages)

	rd, err := checkpoint.NewReader(&stream, checkpoint.ReaderOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rd.Close()
	fmt.Println("vm:", rd.Metadata().VMID)
	for {
		t, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		switch t {
		case checkpoint.RecordPageBatch:
			fmt.Printf("batch: %d pages of region %d\n", rd.Batch().Len(), rd.Batch().Region)
		case checkpoint.RecordEndRound:
			fmt.Printf("end of round %d\n", rd.RoundEnd().Round)
		case checkpoint.RecordDeviceState:
			fmt.Printf("device %d: %q\n", rd.DeviceState().Device, rd.DeviceState().Data)
		case checkpoint.RecordEndStream:
			fmt.Printf("end of stream: %d pages in %d rounds\n", rd.StreamEnd().Pages, rd.StreamEnd().Rounds)
		}
	}
	// Output:
	// round 0: 16 pages, 6 zero; round 1: 1 page
	// vm: vm-1
	// batch: 16 pages of region 0
	// end of round 0
	// batch: 1 pages of region 0
	// end of round 1
	// device 0: "regs"
	// end of stream: 17 pages in 2 rounds
}

// Suspend a VM to a file and resume it: Save writes every region and
// device state, Restore applies them to fresh regions and verifies them
// end to end before handing them back.
func ExampleSave() {
	ram, _ := memory.New(memory.Config{SizeBytes: 1 << 20, Kind: memory.Sparse, Seed: 7})
	_ = ram.FillMix(0, 256, memory.MixRealistic())
	key := bytes.Repeat([]byte{9}, checkpoint.KeySize) // one-time key, from the caller

	var file bytes.Buffer
	err := checkpoint.Save(&file, checkpoint.Snapshot{
		VMID: "vm-2", GPUModel: "Tesla P40", Profiles: []string{"P40-2q"},
		Regions: []checkpoint.RegionRef{{ID: 0, Region: ram}},
		Devices: []checkpoint.DeviceState{{Device: 0, Version: 1, Data: []byte("ctx")}},
	}, checkpoint.WriterOptions{Encryption: checkpoint.EncryptionRequired, Key: key})
	if err != nil {
		fmt.Println(err)
		return
	}

	dst, _ := memory.New(memory.Config{SizeBytes: 1 << 20, Kind: memory.Sparse, Seed: 7})
	res, err := checkpoint.Restore(&file, []checkpoint.RegionRef{{ID: 0, Region: dst}},
		checkpoint.ReaderOptions{Encryption: checkpoint.EncryptionRequired, Key: key})
	if err != nil {
		fmt.Println(err)
		return
	}
	diff, _ := memory.FirstDiff(ram, dst)
	fmt.Printf("%s restored, first difference %d, device state %q\n", res.Metadata.VMID, diff, res.Devices[0].Data)
	// Output:
	// vm-2 restored, first difference -1, device state "ctx"
}

// A hostile or damaged stream fails with a typed error that says where.
func ExampleError() {
	var stream bytes.Buffer
	w, _ := checkpoint.NewWriter(&stream, checkpoint.Metadata{VMID: "vm-3"}, checkpoint.WriterOptions{})
	_ = w.Close()
	data := stream.Bytes()
	data[len(data)-3] ^= 0x10 // flip a bit in the last check value

	rd, err := checkpoint.NewReader(bytes.NewReader(data), checkpoint.ReaderOptions{})
	if err == nil {
		_, err = rd.Next()
	}
	var e *checkpoint.Error
	if errors.As(err, &e) && errors.Is(err, checkpoint.ErrChecksum) {
		fmt.Println("checksum mismatch in record", e.Seq, "at offset", e.Offset)
	}
	// Output:
	// checksum mismatch in record 1 at offset 70
}
