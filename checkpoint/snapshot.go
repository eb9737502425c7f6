package checkpoint

import (
	"io"
	"runtime"

	"github.com/vgpusim/vgpusim/memory"
)

// Snapshot is a suspended VM as Save writes it: its identity, its regions
// (guest RAM, vGPU framebuffers) and its devices' states.
type Snapshot struct {
	// VMID, GPUModel and Profiles are as in Metadata.
	VMID     string
	GPUModel string
	Profiles []string
	// Regions are the VM's regions; Save declares each as it is.
	Regions []RegionRef
	// Devices are the vGPUs' states, at most one per profile.
	Devices []DeviceState
	// Attachments are data of the caller's the file carries, written
	// before any page so that a restore can read them first (Prepare).
	Attachments []Attachment
	// Compact writes the regions as page runs (Writer.WriteRegionRuns):
	// a region filled in runs, as a Synthetic VM's is, then takes
	// kilobytes whatever its size. Their content digests are not sent,
	// since computing them would generate every page; the runs and
	// batches are checked record by record as always.
	Compact bool
	// Workers is the goroutines that read and compress the regions'
	// pages when they are written as bytes; 0 means GOMAXPROCS. The
	// file's bytes do not depend on it.
	Workers int
}

// Restored is what Restore read: the stream's metadata, its device
// states and its attachments, all copies the caller owns.
type Restored struct {
	Metadata    Metadata
	Devices     []DeviceState
	Attachments []Attachment
}

// Save writes s to w as one stream: metadata declaring each region as it
// is, its attachments, one round with every page not in its initial
// state, the device states, and an end-of-stream record carrying each
// region's content digest (unless it is Compact). Pages are read, hashed
// for the digest and compressed in one pass, on Workers goroutines. The
// regions must not change while Save runs.
func Save(w io.Writer, s Snapshot, opts WriterOptions) error {
	meta := Metadata{VMID: s.VMID, GPUModel: s.GPUModel, Profiles: s.Profiles}
	for _, r := range s.Regions {
		if r.Region == nil {
			return invalid("region %d is nil", r.ID)
		}
		meta.Regions = append(meta.Regions, RegionInfoOf(r.ID, r.Region))
	}
	opts.Snapshot = opts.Snapshot || s.Compact || len(s.Attachments) > 0
	wr, err := NewWriter(w, meta, opts)
	if err != nil {
		return err
	}
	defer wr.Release()
	for _, a := range s.Attachments {
		if err := wr.WriteAttachment(a); err != nil {
			return err
		}
	}
	var (
		digests []RegionDigest
		used    memory.PageSet
	)
	workers := s.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var encs *batchEncoders
	if !s.Compact && len(s.Regions) > 0 {
		if encs, err = newBatchEncoders(workers, opts.Level, PageFilters{Shuffle: opts.Filters}); err != nil {
			return err
		}
		defer encs.close()
	}
	for _, r := range s.Regions {
		if s.Compact {
			if err := wr.WriteRegionRuns(r.ID, r.Region); err != nil {
				return err
			}
			continue
		}
		if err := r.Region.UsedPages(&used); err != nil {
			return invalid("region %d", r.ID).withCause(err)
		}
		if err := wr.writeRegionParallel(r.ID, r.Region, &used, encs); err != nil {
			return err
		}
		// The workers learnt every page's sum as they read it: the
		// digest hashes those, and reads again only what changed.
		d, err := r.Region.DigestParallel(workers)
		if err != nil {
			return invalid("region %d", r.ID).withCause(err)
		}
		digests = append(digests, RegionDigest{Region: r.ID, Digest: d})
	}
	if _, err := wr.EndRound(); err != nil {
		return err
	}
	for _, ds := range s.Devices {
		if err := wr.WriteDeviceState(ds); err != nil {
			return err
		}
	}
	return wr.CloseWithDigests(digests)
}

// Restore reads a stream written by Save (or any complete stream) from r
// into the destination regions dst. On any error the destinations are
// scrubbed. A file holds one stream: bytes after the end-of-stream record
// are malformed.
func Restore(r io.Reader, dst []RegionRef, opts ReaderOptions) (Restored, error) {
	return restore(r, opts, func(rd *Reader) (*Applier, error) { return NewApplier(rd, dst) })
}

// RestorePrepared is Restore into the destinations prepare gives, once
// the stream's metadata and the attachments before its first page have
// been read (see NewPreparedApplier): how a suspended VM is brought back
// on a host that must first make the VM its file describes.
func RestorePrepared(r io.Reader, prepare Prepare, opts ReaderOptions) (Restored, error) {
	return restore(r, opts, func(rd *Reader) (*Applier, error) { return NewPreparedApplier(rd, prepare) })
}

func restore(r io.Reader, opts ReaderOptions, applier func(*Reader) (*Applier, error)) (Restored, error) {
	rd, err := NewReader(r, opts)
	if err != nil {
		return Restored{}, err
	}
	defer rd.Close()
	a, err := applier(rd)
	if err != nil {
		return Restored{}, err
	}
	if err := a.Run(); err != nil {
		return Restored{}, err
	}
	var probe [1]byte
	if n, _ := io.ReadFull(r, probe[:]); n != 0 {
		err := newError(ErrMalformed, rd.Offset(), -1, "data after the end-of-stream record")
		a.fail(err)
		return Restored{}, err
	}
	if err := a.Commit(); err != nil {
		return Restored{}, err
	}
	meta := *rd.Metadata()
	meta.Profiles = append([]string(nil), meta.Profiles...)
	meta.Regions = append([]RegionInfo(nil), meta.Regions...)
	return Restored{Metadata: meta, Devices: a.DeviceStates(), Attachments: a.Attachments()}, nil
}
