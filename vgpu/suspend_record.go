package vgpu

import (
	"errors"
	"fmt"
	"slices"
)

// suspendRecordVersion is the version of the VM record's form.
const suspendRecordVersion = 1

// append appends the VM record's saved form, in the encoding of a
// workload's state (see workload_state.go):
//
//	u8   version (suspendRecordVersion)
//	str  VM id
//	u64  seed
//	i64  RAM bytes, RAM footprint bytes, RAM page size, framebuffer page size
//	str  GPU model
//	u8   n, n x str profile
//	flag the VM was running (else paused)
//	f64  the owner's throttle
//	i64  the source host's clock, in nanoseconds
//	str  the workload's StateKind, empty if none
//	flag the workload had started
//	u64  length, then the workload's state
func (r *suspendRecord) append(b []byte) ([]byte, error) {
	e := stateEncoder{b: b}
	s := &r.spec
	e.u8(suspendRecordVersion)
	e.str(s.ID, "VM id")
	e.u64(s.Seed)
	e.i64(s.RAMBytes)
	e.i64(s.RAMFootprintBytes)
	e.i64(int64(s.RAMPageSize))
	e.i64(int64(s.FramebufferPageSize))
	e.str(s.GPUModel, "GPU model")
	e.count8(len(s.Profiles), "profiles")
	for _, p := range s.Profiles {
		e.str(p, "profile")
	}
	e.flag(r.running)
	e.f64(r.throttle)
	e.i64(int64(r.nowNS))
	e.str(r.workloadKind, "workload kind")
	e.flag(r.workloadStarted)
	e.u64(uint64(len(r.workloadState)))
	e.b = append(e.b, r.workloadState...)
	if e.err != nil {
		return b, fmt.Errorf("%w: VM record: %w", ErrConfig, e.err)
	}
	return e.b, nil
}

// decodeSuspendRecord reads a VM record. Its spec is checked where it is
// used (PrepareIncoming checks it as a migration's), the rest here. The
// workload state aliases b.
func decodeSuspendRecord(b []byte) (suspendRecord, error) {
	d := &stateDecoder{r: reader{b: b}, kind: "VM record"}
	var r suspendRecord
	if v := d.u8("version"); !d.failed() && v != suspendRecordVersion {
		return r, fmt.Errorf("%w: VM record of version %d, this package reads %d", ErrSuspendFile, v, suspendRecordVersion)
	}
	s := &r.spec
	s.ID = d.str("VM id")
	s.Seed = d.u64("seed")
	s.RAMBytes = d.nonNeg("RAM bytes")
	s.RAMFootprintBytes = d.nonNeg("RAM footprint bytes")
	s.RAMPageSize = int(d.nonNeg("RAM page size"))
	s.FramebufferPageSize = int(d.nonNeg("framebuffer page size"))
	s.GPUModel = d.str("GPU model")
	n := d.count8("profiles", 1, MaxVGPUsPerVM)
	for range n {
		s.Profiles = append(s.Profiles, d.str("profile"))
	}
	r.running = d.flag("running")
	r.throttle = d.f64("throttle")
	r.nowNS = d.dur("clock")
	r.workloadKind = d.str("workload kind")
	r.workloadStarted = d.flag("workload started")
	off := d.r.off
	if size := d.u64("workload state length"); !d.failed() && size > uint64(len(b)-d.r.off) {
		d.corrupt(off, "workload state of %d bytes, %d left", size, len(b)-d.r.off)
	} else {
		r.workloadState = d.r.take(int(size), "workload state")
	}
	if err := d.finish(); err != nil {
		var e *WorkloadStateError
		if errors.As(err, &e) {
			return suspendRecord{}, fmt.Errorf("%w: VM record at byte %d: %s", ErrSuspendFile, e.Offset, e.Reason)
		}
		return suspendRecord{}, fmt.Errorf("%w: VM record: %w", ErrSuspendFile, err)
	}
	if !validThrottle(r.throttle) {
		return suspendRecord{}, fmt.Errorf("%w: VM record: throttle %v outside [0, 1)", ErrSuspendFile, r.throttle)
	}
	s.Profiles = slices.Clip(s.Profiles)
	return r, nil
}
