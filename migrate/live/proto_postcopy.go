package live

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
)

// The messages of post-copy (see the package doc). A source that may
// switch over into post-copy says so in its hello; after its first
// stream it then says which pages follow (owed, then the bitmaps), and,
// once the destination runs the VM, opens a second stream on every
// connection, which carries those pages: pushed in order, and those the
// destination asks for (fetch) ahead of the next push. The destination
// says when every page has landed (landed).

// owed heads the list of the pages that follow in post-copy: Pages pages
// in all, in Chunks bitmap messages (msgOwedBits) that cover every
// region in order. No pages, no chunks: the migration converged, and no
// post-copy follows.
type owed struct {
	Pages  int64 `json:"pages"`
	Chunks int   `json:"chunks"`
}

// fetch asks the source for page Page of region Region, which the VM
// touched before it arrived.
type fetch struct {
	Region int `json:"region"`
	Page   int `json:"page"`
}

// landed says every page has landed at the destination, with what the
// destination measured of its faults (migrate.FaultWaits).
type landed struct {
	Faults  int64 `json:"faults"`
	Fetches int64 `json:"fetches"`
	P50NS   int64 `json:"p50_ns"`
	P99NS   int64 `json:"p99_ns"`
	MaxNS   int64 `json:"max_ns"`
	StallNS int64 `json:"stall_ns"`
}

// owedChunkHeader is a bitmap message's region and first page, and
// owedChunkBits the most bitmap bytes one carries: 32 KiB, 262,144 pages.
const (
	owedChunkHeader = 8
	owedChunkBits   = 32 << 10
)

// owedChunk is one bitmap message: the pages of region Region from First
// on that follow, a bit each, least significant first.
type owedChunk struct {
	Region, First int
	Bits          []byte
}

func (c owedChunk) encode() []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(c.Region))
	b = binary.LittleEndian.AppendUint32(b, uint32(c.First))
	return append(b, c.Bits...)
}

// owedChunks cuts the sets of the pages that follow, one a region, into
// bitmap messages, and counts their pages.
func owedChunks(sets []*memory.PageSet) ([]owedChunk, int64) {
	var chunks []owedChunk
	var pages int64
	for r, set := range sets {
		n := set.Cap()
		for first := 0; first < n; first += 8 * owedChunkBits {
			end := min(n, first+8*owedChunkBits)
			bits := make([]byte, (end-first+7)/8)
			for p := set.Next(first); p >= 0 && p < end; p = set.Next(p + 1) {
				bits[(p-first)/8] |= 1 << ((p - first) % 8)
				pages++
			}
			chunks = append(chunks, owedChunk{Region: r, First: first, Bits: bits})
		}
	}
	return chunks, pages
}

// owedReader rebuilds, at the destination, the sets the chunks describe:
// it takes them only in the order owedChunks cuts them, each the right
// size, with no bit past its region's end, so that a peer cannot make it
// hold more than a bit a page of the regions it already holds.
type owedReader struct {
	sets          []*memory.PageSet
	region, first int
	pages         int64
}

func newOwedReader(pagesByRegion []int) *owedReader {
	o := &owedReader{}
	for _, n := range pagesByRegion {
		o.sets = append(o.sets, memory.NewPageSet(n))
	}
	o.skipEmpty()
	return o
}

// skipEmpty moves past regions of no page, which no chunk covers.
func (o *owedReader) skipEmpty() {
	for o.region < len(o.sets) && o.sets[o.region].Cap() == 0 {
		o.region++
	}
}

// add takes the next chunk's body.
func (o *owedReader) add(body []byte) error {
	if len(body) < owedChunkHeader {
		return fmt.Errorf("%w: a page bitmap of %d bytes", migrate.ErrStream, len(body))
	}
	region := int(binary.LittleEndian.Uint32(body))
	first := int(binary.LittleEndian.Uint32(body[4:]))
	bitmap := body[owedChunkHeader:]
	if o.region >= len(o.sets) || region != o.region || first != o.first {
		return fmt.Errorf("%w: a page bitmap of region %d from page %d, where region %d from page %d belongs", migrate.ErrStream, region, first, o.region, o.first)
	}
	set := o.sets[region]
	end := min(set.Cap(), first+8*owedChunkBits)
	if len(bitmap) != (end-first+7)/8 {
		return fmt.Errorf("%w: a page bitmap of %d bytes for pages %d to %d of region %d", migrate.ErrStream, len(bitmap), first, end-1, region)
	}
	for i, b := range bitmap {
		for ; b != 0; b &= b - 1 {
			p := first + 8*i + bits.TrailingZeros8(b)
			if p >= end {
				return fmt.Errorf("%w: page %d of region %d, which has %d", migrate.ErrStream, p, region, set.Cap())
			}
			set.Add(p)
			o.pages++
		}
	}
	o.first = end
	if o.first >= set.Cap() {
		o.region, o.first = o.region+1, 0
		o.skipEmpty()
	}
	return nil
}

// done checks that the chunks covered every region and held the pages
// the header announced.
func (o *owedReader) done(pages int64) error {
	if o.region < len(o.sets) || o.pages != pages {
		return fmt.Errorf("%w: the page bitmaps end at region %d of %d with %d pages, the list announced %d", migrate.ErrStream, o.region, len(o.sets), o.pages, pages)
	}
	return nil
}
