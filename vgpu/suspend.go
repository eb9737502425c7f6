package vgpu

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
)

// SuspendOptions configure VM.Suspend.
type SuspendOptions struct {
	// Writer configures the file's stream: compression, encryption, its
	// id. Suspend declares it a snapshot (checkpoint.WriterOptions.Snapshot).
	Writer checkpoint.WriterOptions
	// Bytes writes every page's bytes, with the regions' content digests,
	// even on a Synthetic host. By default a VM on a Synthetic host is
	// written in compact form: its memory as runs of pages, each a content
	// class at a generation (checkpoint.Writer.WriteRegionRuns), kilobytes
	// for a guest filled in large runs whatever its size.
	Bytes bool
}

// ResumeOptions configure Host.Resume.
type ResumeOptions struct {
	// Reader configures the reading of the file: limits, decryption.
	Reader checkpoint.ReaderOptions
	// Workloads decode the state of workloads of other packages, by
	// StateKind; this package's own (WorkloadDecoders) are known without.
	Workloads map[string]WorkloadDecoder
}

// vmAttachment names the attachment of a suspend file that holds the VM:
// its spec, its run state and its workload's state.
const vmAttachment = "vgpu.vm"

// Suspend stops the VM where it is and writes it to w as one checkpoint
// stream: its spec and run state and its workload's state (attachments),
// its guest memory and framebuffers, and its vGPUs' device states. On
// success the VM is destroyed on this host, its memory scrubbed and its
// vGPUs released: the file is the VM now, and Host.Resume brings it back,
// on this host or another, running or paused as it was. On failure the VM
// is left as it was, running or paused; the one exception, said so by the
// error, is a release that fails after the file is whole. A stalled VM
// (VM.Stall) is written running, its stall ended; one that fails to be
// suspended is stalled again until the stall's end.
//
// The VM must be running or paused, not migrating, with vGPUs (a
// passthrough GPU's state cannot be saved) and a workload, if any, that
// is a StatefulWorkload whose state, with the VM's spec, fits what a
// resume reads by default (checkpoint.Limits.MaxAttachmentBytes: a
// history of a few million items). The workload object itself is stopped:
// the resumed VM runs a new one, decoded from the file.
func (vm *VM) Suspend(w io.Writer, opts SuspendOptions) error {
	if vm.Migrating() {
		// Not even in pre-copy: the file would hold the VM beside the
		// copy the migration makes.
		return fmt.Errorf("%w: VM %q cannot be suspended while it migrates", ErrMigrating, vm.id)
	}
	if vm.passthrough {
		return &NotMigratableError{VM: vm.id, Reason: "a passthrough GPU has no device state the hypervisor can save"}
	}
	if len(vm.remotes) > 0 {
		return &NotMigratableError{VM: vm.id, Reason: "it uses a remote GPU, whose session stays on its server"}
	}
	if vm.state != VMRunning && vm.state != VMPaused {
		return vm.refuse("suspend")
	}
	if w := vm.workload; w != nil {
		if _, ok := w.(StatefulWorkload); !ok {
			return fmt.Errorf("%w: VM %q runs %s, whose state cannot be saved (not a StatefulWorkload)", ErrWorkload, vm.id, w.Name())
		}
	}
	wasRunning := vm.state == VMRunning
	// A stall ends with the pause (the file holds the VM running); a
	// suspend that fails stalls the VM again for the rest of it.
	stallEnd, stalled := vm.StalledUntil()
	if wasRunning {
		if err := vm.pause(); err != nil {
			return err
		}
	}
	err := vm.save(w, opts, wasRunning)
	if err == nil {
		if err := vm.destroy(); err != nil {
			return fmt.Errorf("VM %q: its file is whole, but releasing it here failed: %w", vm.id, err)
		}
		return nil
	}
	if wasRunning {
		// Paused and resumed at one instant: nothing of the VM changed.
		if rerr := vm.resume(); rerr != nil {
			return fmt.Errorf("%w (and resuming the VM again: %w)", err, rerr)
		}
		if stalled {
			if rerr := vm.Stall(stallEnd - vm.host.now); rerr != nil {
				return fmt.Errorf("%w (and stalling the VM again: %w)", err, rerr)
			}
		}
	}
	return err
}

// save writes the paused VM to w.
func (vm *VM) save(w io.Writer, opts SuspendOptions, running bool) error {
	rec, err := vm.suspendRecord(running)
	if err != nil {
		return err
	}
	blobs, err := vm.SaveDeviceStates()
	if err != nil {
		return err
	}
	snap := checkpoint.Snapshot{
		VMID: vm.id, GPUModel: vm.GPUModel(),
		Attachments: []checkpoint.Attachment{{Name: vmAttachment, Data: rec}},
		Compact:     vm.host.cfg.Memory == memory.Synthetic && !opts.Bytes,
	}
	for _, p := range vm.Profiles() {
		snap.Profiles = append(snap.Profiles, p.Name)
	}
	for i, r := range vm.regions() {
		snap.Regions = append(snap.Regions, checkpoint.RegionRef{ID: uint32(i), Region: r})
	}
	for i, b := range blobs {
		snap.Devices = append(snap.Devices, checkpoint.DeviceState{Device: uint32(i), Version: StateVersion, Data: b})
	}
	return checkpoint.Save(w, snap, opts.Writer)
}

// regions returns the VM's guest memory then its framebuffers: the regions
// of a suspend file, whose ids are their indices.
func (vm *VM) regions() []*memory.Region {
	return append([]*memory.Region{vm.ram}, vm.Framebuffers()...)
}

// Resume reads a file VM.Suspend wrote from r and brings its VM back on
// this host: it prepares the VM the file describes (as a migration's
// destination does, with the same checks and vGPU placement), restores its
// memory (every record checked, the regions' digests compared when the file
// carries them), its device states and its workload, and leaves it running
// or paused as it was when suspended. The workload's times move to this
// host's clock. On failure nothing of the VM is left on the host.
func (h *Host) Resume(r io.Reader, opts ResumeOptions) (*VM, error) {
	var (
		vm  *VM
		rec suspendRecord
	)
	prepare := func(meta checkpoint.Metadata, atts []checkpoint.Attachment) ([]checkpoint.RegionRef, error) {
		var err error
		if rec, err = findSuspendRecord(meta, atts); err != nil {
			return nil, err
		}
		if vm, err = h.PrepareIncoming(rec.spec); err != nil {
			return nil, err
		}
		if err := vm.resumeWorkload(rec, opts.Workloads); err != nil {
			return nil, err
		}
		var refs []checkpoint.RegionRef
		for i, reg := range vm.regions() {
			refs = append(refs, checkpoint.RegionRef{ID: uint32(i), Region: reg})
		}
		return refs, nil
	}
	res, err := checkpoint.RestorePrepared(r, prepare, opts.Reader)
	if err == nil {
		err = vm.restoreDevices(res.Devices)
	}
	if err == nil && rec.running {
		err = vm.Resume()
	}
	if err != nil {
		if vm != nil && vm.state != VMDestroyed {
			_ = vm.destroy()
		}
		return nil, err
	}
	return vm, nil
}

// resumeWorkload gives the incoming VM the workload and throttle of rec,
// decoded onto it, its times moved to the host's clock.
func (vm *VM) resumeWorkload(rec suspendRecord, extra map[string]WorkloadDecoder) error {
	if rec.workloadKind == "" {
		vm.throttle = rec.throttle
		return nil
	}
	dec := extra[rec.workloadKind]
	if dec == nil {
		dec = WorkloadDecoders()[rec.workloadKind]
	}
	if dec == nil {
		return fmt.Errorf("%w: VM %q runs a workload of kind %q, which no decoder reads", ErrWorkload, vm.id, rec.workloadKind)
	}
	w, err := dec(&vm.env, rec.workloadState)
	if err != nil {
		if errors.Is(err, ErrWorkload) {
			return fmt.Errorf("VM %q: %w", vm.id, err)
		}
		return fmt.Errorf("%w: VM %q: workload of kind %q: %w", ErrWorkload, vm.id, rec.workloadKind, err)
	}
	if w == nil {
		return fmt.Errorf("%w: VM %q: the %q decoder made no workload", ErrWorkload, vm.id, rec.workloadKind)
	}
	if d := vm.host.now - rec.nowNS; d != 0 {
		w.Shift(d)
	}
	return vm.adoptWorkload(w, rec.workloadStarted, rec.throttle)
}

// restoreDevices installs the device states of a suspend file, one per
// vGPU, leaving the VM paused.
func (vm *VM) restoreDevices(devices []checkpoint.DeviceState) error {
	states := make([][]byte, len(vm.devices))
	for _, d := range devices {
		if int(d.Device) >= len(states) || d.Version != StateVersion {
			return fmt.Errorf("%w: device state %d of version %d in a suspend file of %d vGPUs",
				ErrSuspendFile, d.Device, d.Version, len(states))
		}
		states[d.Device] = d.Data
	}
	return vm.Restore(states)
}

// suspendRecord is the VM attachment of a suspend file.
type suspendRecord struct {
	spec            IncomingSpec
	running         bool // running when suspended, else paused
	throttle        float64
	nowNS           time.Duration // the source host's clock at the suspend
	workloadKind    string        // "" if the VM had no workload
	workloadStarted bool
	workloadState   []byte
}

// suspendRecord returns the encoded VM attachment of the paused VM.
func (vm *VM) suspendRecord(running bool) ([]byte, error) {
	rec := suspendRecord{spec: vm.IncomingSpec(), running: running, throttle: vm.throttle, nowNS: vm.host.now}
	if w := vm.workload; w != nil {
		sw := w.(StatefulWorkload) // Suspend checked
		state, err := sw.AppendState(nil)
		if err != nil {
			return nil, vm.hookError(w, "save state", err)
		}
		rec.workloadKind, rec.workloadStarted, rec.workloadState = sw.StateKind(), vm.wlStarted, state
	}
	b, err := rec.append(nil)
	if err != nil {
		return nil, err
	}
	if limit := checkpoint.DefaultLimits().MaxAttachmentBytes; int64(len(b)) > limit {
		// A file a resume with default limits could not read would be
		// the VM lost.
		return nil, fmt.Errorf("%w: VM %q: its record (spec and workload state, history included) is %d bytes, over the %d a resume reads by default",
			ErrWorkload, vm.id, len(b), limit)
	}
	return b, nil
}

// findSuspendRecord returns the decoded VM attachment of a suspend file
// with metadata meta, checked against it.
func findSuspendRecord(meta checkpoint.Metadata, atts []checkpoint.Attachment) (suspendRecord, error) {
	for _, a := range atts {
		if a.Name != vmAttachment {
			continue
		}
		rec, err := decodeSuspendRecord(a.Data)
		if err != nil {
			return rec, err
		}
		s := rec.spec
		if meta.VMID != s.ID || !equalModel(meta.GPUModel, s.GPUModel) || !slices.Equal(meta.Profiles, s.Profiles) {
			return rec, fmt.Errorf("%w: the file's metadata (VM %q, %s, %d vGPUs) and its VM (%q, %s, %d) differ",
				ErrSuspendFile, meta.VMID, meta.GPUModel, len(meta.Profiles), s.ID, s.GPUModel, len(s.Profiles))
		}
		return rec, nil
	}
	return suspendRecord{}, fmt.Errorf("%w: no %q attachment before the first page", ErrSuspendFile, vmAttachment)
}
