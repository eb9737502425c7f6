package live

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
)

// zstd bombs: frames of a few tens of KiB that expand to a GiB, written
// by hand (RFC 8878) so that no encoder has to produce the GiB first.
// Each frame is a run of RLE blocks: a 3-byte block header and one byte,
// which the decoder repeats block-size times.

const (
	zstdMagic        = 0xFD2FB528
	zstdMaxBlock     = 128 << 10
	hostileBombBytes = 1 << 30 // what the bombs expand to
)

// zstdRLEFrame returns a frame declaring content size fcs that holds
// blocks RLE blocks of blockSize bytes of fill. window zero makes a
// single-segment frame (its window is its content size); otherwise the
// frame asks for a window of window bytes, a power of two from 1 KiB.
func zstdRLEFrame(fcs uint64, window, blockSize, blocks int, fill byte) []byte {
	out := binary.LittleEndian.AppendUint32(nil, zstdMagic)
	const fcs8 = 3 << 6 // Frame_Content_Size_Flag 3: an 8-byte size
	if window == 0 {
		out = append(out, fcs8|1<<5) // Single_Segment_Flag
	} else {
		log := 0
		for 1<<log < window {
			log++
		}
		out = append(out, fcs8, byte(log-10)<<3) // Window_Descriptor: exponent, mantissa 0
	}
	out = binary.LittleEndian.AppendUint64(out, fcs)
	for i := range blocks {
		h := uint32(blockSize)<<3 | 1<<1 // Block_Type 1: RLE
		if i == blocks-1 {
			h |= 1 // Last_Block
		}
		out = append(out, byte(h), byte(h>>8), byte(h>>16), fill)
	}
	return out
}

// TestHostileZstdFrames checks the hand-written frames against the zstd
// decoder the checkpoint package uses: honest ones (content size equal to
// what the blocks hold) decode to the bytes they describe, so the bombs,
// built the same way, are well-formed frames and only their sizes are
// hostile.
func TestHostileZstdFrames(t *testing.T) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	must(t, err)
	defer dec.Close()
	for _, c := range []struct {
		name                     string
		window, blockSize, count int
	}{
		{"single-segment", 0, zstdMaxBlock, 4},
		{"window=128KiB", 128 << 10, zstdMaxBlock, 3},
		{"window=4KiB", 4 << 10, 4 << 10, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			size := c.blockSize * c.count
			frame := zstdRLEFrame(uint64(size), c.window, c.blockSize, c.count, 0x2a)
			got, err := dec.DecodeAll(frame, nil)
			must(t, err)
			if !bytes.Equal(got, bytes.Repeat([]byte{0x2a}, size)) {
				t.Fatalf("frame of %d bytes decodes to %d bytes, not %d of the fill", len(frame), len(got), size)
			}
		})
	}
}

// hostileBombs returns the zstd bomb mutations of s: its first guest RAM
// batch replaced by a batch whose zstd frame is a bomb, the header's
// codec set to zstd (so the uncompressed variants carry them too) and
// the whole stream re-sealed, so that the batch decoder, not a check
// value, is what meets the bomb. Each must fail with ErrLimit, and the
// harness checks that none allocates more than the limits allow.
func hostileBombs(s *hostileStream, lim checkpoint.Limits) []hostileCase {
	ram := -1
	for i, r := range s.records {
		if r.typ == checkpoint.RecordPageBatch && hostileParseBatch(r.plain).region == 0 {
			ram = i
			break
		}
	}
	const ramPage = 4 << 10
	onePage := func(frame []byte) hostileBatch {
		return hostileBatch{region: 0, index: []uint64{hostileTextPage}, kinds: []byte{byte(checkpoint.PageZstd)}, gens: []uint64{1}, frame: frame}
	}
	bombBlocks := hostileBombBytes / zstdMaxBlock
	bombs := []struct {
		name  string
		batch hostileBatch
	}{
		// Declares one page and holds a GiB: the decoder must stop at
		// the page, not at the end of the frame.
		{"lying-size", onePage(zstdRLEFrame(ramPage, zstdMaxBlock, zstdMaxBlock, bombBlocks, 0))},
		// Declares the GiB it holds.
		{"declared-size", onePage(zstdRLEFrame(hostileBombBytes, 0, zstdMaxBlock, bombBlocks, 0))},
		// Declares one page, but a 1 GiB window for it.
		{"window", onePage(zstdRLEFrame(ramPage, hostileBombBytes, ramPage, 1, 0))},
		// A batch of more compressed framebuffer pages than a batch may
		// hold, with a frame declaring all of them.
		{"pages", func() hostileBatch {
			n := lim.MaxBatchBytes/(64<<10) + 1
			b := hostileBatch{region: 1, kinds: bytes.Repeat([]byte{byte(checkpoint.PageZstd)}, n)}
			for i := range n {
				b.index, b.gens = append(b.index, uint64(i)), append(b.gens, 1)
			}
			b.frame = zstdRLEFrame(uint64(n)<<16, 0, 64<<10, n, 0)
			return b
		}()},
	}
	var out []hostileCase
	for _, b := range bombs {
		recs := s.sealed()
		recs[ram].plain = b.batch.encode()
		h := bytes.Clone(s.header())
		binary.LittleEndian.PutUint16(h[12:], binary.LittleEndian.Uint16(h[12:])&^0xf|uint16(checkpoint.CodecZstd))
		out = append(out, hostileCase{name: "zstd-bomb=" + b.name, data: s.withStream(hostileBuild(h, recs)),
			all: []error{migrate.ErrStream, checkpoint.ErrLimit}})
	}
	return out
}
