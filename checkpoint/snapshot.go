package checkpoint

import (
	"io"
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
}

// Save writes s to w as one stream: metadata declaring each region as it
// is, one round with every page not in its initial state, the device
// states, and an end-of-stream record carrying each region's content
// digest. The regions must not change while Save runs.
func Save(w io.Writer, s Snapshot, opts WriterOptions) error {
	meta := Metadata{VMID: s.VMID, GPUModel: s.GPUModel, Profiles: s.Profiles}
	digests := make([]RegionDigest, 0, len(s.Regions))
	for _, r := range s.Regions {
		if r.Region == nil {
			return invalid("region %d is nil", r.ID)
		}
		meta.Regions = append(meta.Regions, RegionInfoOf(r.ID, r.Region))
	}
	wr, err := NewWriter(w, meta, opts)
	if err != nil {
		return err
	}
	defer wr.Release()
	for _, r := range s.Regions {
		if err := wr.WriteRegion(r.ID, r.Region, nil); err != nil {
			return err
		}
		d, err := r.Region.Digest()
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
// into the destination regions dst, and returns its metadata and device
// states. On any error the destinations are scrubbed. A file holds one
// stream: bytes after the end-of-stream record are malformed.
func Restore(r io.Reader, dst []RegionRef, opts ReaderOptions) (Metadata, []DeviceState, error) {
	rd, err := NewReader(r, opts)
	if err != nil {
		return Metadata{}, nil, err
	}
	defer rd.Close()
	a, err := NewApplier(rd, dst)
	if err != nil {
		return Metadata{}, nil, err
	}
	if err := a.Run(); err != nil {
		return Metadata{}, nil, err
	}
	var probe [1]byte
	if n, _ := io.ReadFull(r, probe[:]); n != 0 {
		err := newError(ErrMalformed, rd.Offset(), -1, "data after the end-of-stream record")
		a.fail(err)
		return Metadata{}, nil, err
	}
	if err := a.Commit(); err != nil {
		return Metadata{}, nil, err
	}
	meta := *rd.Metadata()
	meta.Profiles = append([]string(nil), meta.Profiles...)
	meta.Regions = append([]RegionInfo(nil), meta.Regions...)
	return meta, a.DeviceStates(), nil
}
