package checkpoint

import (
	"unicode/utf8"

	"github.com/vgpusim/vgpusim/memory"
)

// Metadata describes a stream: which VM, on which GPU model, with which
// vGPU profiles, and the regions whose pages follow. It is the payload of
// the first record.
type Metadata struct {
	// VMID names the VM.
	VMID string
	// GPUModel names the physical GPU, e.g. "Tesla P40".
	GPUModel string
	// Profiles names the profile of each of the VM's vGPUs, e.g.
	// "P40-1q". A device state record's Device is an index into it.
	Profiles []string
	// Regions lists the address spaces whose pages the stream carries.
	Regions []RegionInfo
}

// RegionInfo declares one region of a stream.
type RegionInfo struct {
	// ID is how page batches name the region; unique in a stream.
	ID uint32
	// SizeBytes is the region's size, a multiple of PageSize.
	SizeBytes int64
	// PageSize is a power of two in [memory.MinPageSize,
	// memory.MaxPageSize].
	PageSize int
	// Seed keys the region's generated content; a destination maps its
	// window with the same seed, so that what the VM generates after
	// resuming is what it would have generated at the source.
	Seed uint64
}

// Pages returns the number of pages of the region.
func (ri RegionInfo) Pages() int { return int(ri.SizeBytes / int64(ri.PageSize)) }

// RegionInfoOf returns the declaration of region r under id.
func RegionInfoOf(id uint32, r *memory.Region) RegionInfo {
	return RegionInfo{ID: id, SizeBytes: r.Size(), PageSize: r.PageSize(), Seed: r.Seed()}
}

// Bounds on metadata fields a writer may declare (and a reader accepts).
const (
	// MaxNameBytes bounds VMID, GPUModel and each profile name.
	MaxNameBytes = 256
	// MaxProfiles bounds the number of vGPU profiles, hence devices.
	MaxProfiles = 256
)

// validate checks m as a writer is about to declare it, or as a reader
// decoded it; it returns a description of the first problem, or "".
func (m *Metadata) validate(maxRegions int) string {
	badName := func(s string) bool { return len(s) > MaxNameBytes || !utf8.ValidString(s) }
	if badName(m.VMID) || badName(m.GPUModel) {
		return "VM id or GPU model is not UTF-8 of at most 256 bytes"
	}
	for _, s := range m.Profiles {
		if badName(s) {
			return "profile " + quoteShort(s) + " is not UTF-8 of at most 256 bytes"
		}
	}
	if len(m.Profiles) > MaxProfiles {
		return "too many profiles"
	}
	if len(m.Regions) > maxRegions {
		return "too many regions"
	}
	for i, r := range m.Regions {
		ps := r.PageSize
		if ps < memory.MinPageSize || ps > memory.MaxPageSize || ps&(ps-1) != 0 {
			return "region page size is not a power of two in range"
		}
		if r.SizeBytes <= 0 || r.SizeBytes%int64(ps) != 0 || r.SizeBytes/int64(ps) > memory.MaxPages {
			return "region size is not a positive multiple of its page size within memory.MaxPages"
		}
		for _, o := range m.Regions[:i] {
			if o.ID == r.ID {
				return "region id declared twice"
			}
		}
	}
	return ""
}

// region returns the index in m.Regions of the region with the given id,
// or -1.
func (m *Metadata) region(id uint32) int {
	for i := range m.Regions {
		if m.Regions[i].ID == id {
			return i
		}
	}
	return -1
}

func quoteShort(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	return "\"" + s + "\""
}

// appendMetadata appends the payload of a metadata record.
func appendMetadata(b []byte, m *Metadata) []byte {
	b = appendString(b, m.VMID)
	b = appendString(b, m.GPUModel)
	b = appendUvarint(b, uint64(len(m.Profiles)))
	for _, p := range m.Profiles {
		b = appendString(b, p)
	}
	b = appendUvarint(b, uint64(len(m.Regions)))
	for _, r := range m.Regions {
		b = appendUvarint(b, uint64(r.ID))
		b = appendUvarint(b, uint64(r.SizeBytes))
		b = appendUvarint(b, uint64(r.PageSize))
		b = appendUint64(b, r.Seed)
	}
	return b
}

// decodeMetadata decodes a metadata payload into m, reusing m's slices
// and, where the bytes are equal, its strings. newer reports a stream of a
// newer minor version, whose records may carry fields appended after the
// ones this version knows.
func decodeMetadata(p []byte, m *Metadata, lim *Limits, newer bool) (why string, overLimit bool) {
	d := newDecoder(p)
	m.VMID = d.string("vm id", MaxNameBytes, m.VMID)
	m.GPUModel = d.string("gpu model", MaxNameBytes, m.GPUModel)
	np := int(d.uvarintMax("profile count", MaxProfiles))
	prev := m.Profiles
	m.Profiles = m.Profiles[:0]
	for i := 0; i < np && d.ok; i++ {
		old := ""
		if i < len(prev) {
			old = prev[i] // read before the append below overwrites it
		}
		m.Profiles = append(m.Profiles, d.string("profile", MaxNameBytes, old))
	}
	nr := int(d.uvarintLimit("region count", uint64(lim.MaxRegions)))
	m.Regions = m.Regions[:0]
	for i := 0; i < nr && d.ok; i++ {
		var r RegionInfo
		r.ID = d.uint32("region id")
		r.SizeBytes = int64(d.uvarintMax("region size", uint64(memory.MaxPages)*memory.MaxPageSize))
		r.PageSize = int(d.uvarintMax("page size", memory.MaxPageSize))
		r.Seed = d.uint64("region seed")
		m.Regions = append(m.Regions, r)
	}
	d.end(newer)
	if !d.ok {
		return d.problem()
	}
	return m.validate(lim.MaxRegions), false
}
