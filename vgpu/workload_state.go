package vgpu

// A workload's state, for a suspend file: everything a workload of this
// package holds, so that one decoded on another host goes on exactly as
// the original would have after a pause and resume in place — the same
// arrivals, the same page writes, the same metrics, history included.
//
// The layout, every integer little-endian and fixed-width (i64 and u64 are
// 8 bytes, f64 is the IEEE 754 bits as a u64, a flag is one byte 0 or 1,
// str is a u8 length and that many bytes); times are nanoseconds on the
// saving host's clock:
//
//	header    u8 version (workloadStateVersion; see below for 2), u8
//	          kind (1 inference, 2 training, 3 cad, 4 desktop)
//	config    the configuration, defaults filled in, field by field in
//	          declaration order (Model: str name, i64 MACs, Layers,
//	          Parameters, InputBytes, ActivationBytes; Precision and
//	          PatternKind u8; Durations and ints i64; floats f64)
//	base      f64 throttle, i64 last, u8 flags (1 running, 2 paused),
//	          history, dirtier of guest RAM, u8 n, n dirtiers (vGPU i's
//	          framebuffer)
//	history   i64 limit, flag evicted, i64 oldest (the end of the last
//	          record evicted; 0 if none was), u32 n, n x (i64 start,
//	          i64 end, flag dropped), oldest record first
//	dirtier   i64 rate, flag pattern, then if set: u8 kind, i64 rate,
//	          i64 first page, i64 pages, mix, u64 seed, str random state,
//	          u64 carry, i64 cursor, i64 written, i64 passes
//	mix       str name, u8 n, n x (u8 class, u32 weight)
//	span      i64 offset, i64 size (its mix is the workload's for it)
//	sweeper   span, i64 cursor, i64 carry
//	service   str random state, i64 next, u64 seq, i64 rr, u32 n,
//	          n x (u64 tag, i64 arrival) in increasing tag order, i64 work,
//	          i64 chunk, i64 in bytes, i64 out bytes, sweeper (requests in
//	          RAM), u8 n, n sweepers (vGPU i's outputs)
//
// After the base, inference and desktop write their service; training
// writes i64 work, i64 clock, u64 next iteration, u32 n, n x (u64
// iteration, i64 jobs left) in increasing order, i64 in flight, i64 ready
// at, i64 last done and its weights, activations and optimizer spans; CAD
// writes f64 fps, i64 period, i64 next, u64 seq, flag in flight, u64 tag,
// i64 sent at, i64 work, i64 render-target bytes and its render-target
// sweeper. Nothing follows.
//
// Version 2 is a training's with a host phase (DataLoad or DataLoadRatio
// set), and a training's only: its configuration goes on to the host
// phase's fields (i64 DataLoad, f64 DataLoadRatio, f64 DataLoadJitter),
// and after its optimizer span come str the jitter's random state and i64
// the host phase left at a pause mid-phase (0 unless paused so). Every
// other state, a training's without a host phase included, is version 1,
// as it was before the phase existed.
//
// Not carried: a Model's ConvLayers and OutputBytes, and what a service
// derives from them (its JobIO), which only a remote GPU uses; a VM with
// a remote GPU is never suspended, its live migration is refused, and
// its simulated migration hands its workload over in memory, never
// encoded. A decoded model has them zero (RemoteCalls then counts one
// layer, and no output bytes).
//
// The encoding is canonical: a decoder accepts exactly what AppendState
// writes, so decoding and encoding again gives back the same bytes.

import (
	"fmt"
	"math"
	"slices"
)

// StatefulWorkload is a Workload whose whole state can be written to a
// suspend file and read back, so that a VM suspended on one host resumes
// on another with its workload as it was. Every workload of this package is
// one.
type StatefulWorkload interface {
	Workload
	// StateKind names the workload's type: the key of the WorkloadDecoder
	// that reads its state back ("inference", "training", "cad",
	// "desktop" for this package's).
	StateKind() string
	// AppendState appends the workload's whole state to dst:
	// configuration, random state, position of every writer, in-flight
	// bookkeeping, throttle, clock and metrics history. It is called
	// between the host's steps, with the VM paused or stopped. The same
	// state gives the same bytes.
	AppendState(dst []byte) ([]byte, error)
}

// WorkloadDecoder makes a workload of a state AppendState wrote, bound to
// env's VM (its regions, its vGPUs), in the lifecycle state the original
// was in (e.g. started and paused); the caller then calls its Resume. Its
// times are the saving host's: the caller calls Workload.Shift first on a
// host whose clock differs. It writes nothing to the VM. It returns an
// error wrapping ErrWorkload (or a more specific sentinel of the package,
// if one fits) for any state it cannot honour, never panics, and allocates
// no more than a small multiple of len(state).
type WorkloadDecoder func(env *Env, state []byte) (Workload, error)

// The state kinds of this package's workloads.
const (
	StateKindInference = "inference"
	StateKindTraining  = "training"
	StateKindCAD       = "cad"
	StateKindDesktop   = "desktop"
)

// WorkloadDecoders returns a new map of the decoders of this package's
// workloads, by StateKind. The decoders' errors are *WorkloadStateError.
func WorkloadDecoders() map[string]WorkloadDecoder {
	return map[string]WorkloadDecoder{
		StateKindInference: decodeInference,
		StateKindTraining:  decodeTraining,
		StateKindCAD:       decodeCAD,
		StateKindDesktop:   decodeDesktop,
	}
}

// workloadStateVersion is the version of the layout above, and
// trainingDataLoadVersion that of a training's with a host phase, the
// newest.
const (
	workloadStateVersion    = 1
	trainingDataLoadVersion = 2
	newestStateVersion      = trainingDataLoadVersion
)

// maxStateVersion is the newest layout of a kind's state.
func maxStateVersion(code uint8) uint8 {
	if code == kindCodeTraining {
		return trainingDataLoadVersion
	}
	return workloadStateVersion
}

// The kind byte after the version: a state handed to the decoder of
// another kind is refused at once, not misread.
const (
	kindCodeInference = 1 + iota
	kindCodeTraining
	kindCodeCAD
	kindCodeDesktop
)

// Fixed sizes the decoder checks counts against before it allocates.
const (
	recordStateBytes   = 8 + 8 + 1
	inflightStateBytes = 8 + 8
	iterStateBytes     = 8 + 8
	dirtierMinBytes    = 8 + 1
	sweeperStateBytes  = 4 * 8
	mixPartStateBytes  = 1 + 4
	maxStrBytes        = math.MaxUint8
)

// WorkloadStateError reports a workload state a decoder cannot honour: the
// byte offset of the offending field and what is wrong. Err is
// ErrCorruptState for malformed bytes, ErrStateVersion for a format this
// package does not read, ErrIncompatibleState for a well-formed state
// that does not fit the Env's VM (a span outside its regions, more vGPUs
// than it has). It wraps ErrWorkload, Err and Cause, if any.
type WorkloadStateError struct {
	Kind   string // the decoder's StateKind
	Offset int
	Reason string
	Err    error
	// Cause is the error of the check that refused the state, if another
	// package's (a configuration NewX refused, a pattern memory refused).
	Cause error
}

// Error says which workload's state, where and why.
func (e *WorkloadStateError) Error() string {
	s := fmt.Sprintf("vgpu: %s workload state at offset %d: %s", e.Kind, e.Offset, e.Reason)
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns ErrWorkload, Err and Cause.
func (e *WorkloadStateError) Unwrap() []error {
	errs := []error{ErrWorkload, e.Err}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// Every workload of the package is a StatefulWorkload.
var (
	_ StatefulWorkload = (*Inference)(nil)
	_ StatefulWorkload = (*Training)(nil)
	_ StatefulWorkload = (*CAD)(nil)
	_ StatefulWorkload = (*Desktop)(nil)
)

// StateKind returns "inference".
func (w *Inference) StateKind() string { return StateKindInference }

// StateKind returns "training".
func (w *Training) StateKind() string { return StateKindTraining }

// StateKind returns "cad".
func (w *CAD) StateKind() string { return StateKindCAD }

// StateKind returns "desktop".
func (w *Desktop) StateKind() string { return StateKindDesktop }

// AppendState appends the service's whole state to dst (see
// StatefulWorkload).
func (w *Inference) AppendState(dst []byte) ([]byte, error) {
	e := stateEncoder{b: dst}
	e.header(kindCodeInference)
	e.inferenceConfig(w.cfg)
	e.base(&w.base)
	e.service(&w.service)
	return e.result(dst, w.StateKind())
}

// AppendState appends the training's whole state to dst (see
// StatefulWorkload).
func (w *Training) AppendState(dst []byte) ([]byte, error) {
	e := stateEncoder{b: dst}
	phase := w.cfg.hasDataLoad()
	if phase {
		e.headerVersion(trainingDataLoadVersion, kindCodeTraining)
	} else {
		e.header(kindCodeTraining)
	}
	e.trainingConfig(w.cfg)
	e.base(&w.base)
	e.i64(int64(w.work))
	e.i64(int64(w.clock))
	e.u64(w.nextIter)
	iters := make([]uint64, 0, len(w.remaining))
	for it := range w.remaining {
		iters = append(iters, it)
	}
	slices.Sort(iters)
	e.count32(len(iters), "iterations in flight")
	for _, it := range iters {
		e.u64(it)
		e.i64(int64(w.remaining[it]))
	}
	e.i64(int64(w.inFlight))
	e.i64(int64(w.readyAt))
	e.i64(int64(w.lastDone))
	e.span(w.weights)
	e.span(w.acts)
	e.span(w.optimizer)
	if phase {
		e.rng(w.loader, "data-load random state")
		e.i64(int64(w.loadLeft))
	}
	return e.result(dst, w.StateKind())
}

// AppendState appends the renderer's whole state to dst (see
// StatefulWorkload).
func (w *CAD) AppendState(dst []byte) ([]byte, error) {
	e := stateEncoder{b: dst}
	e.header(kindCodeCAD)
	e.cadConfig(w.cfg)
	e.base(&w.base)
	e.f64(w.fps)
	e.i64(int64(w.period))
	e.i64(int64(w.next))
	e.u64(w.seq)
	e.flag(w.inFlight)
	e.u64(w.tag)
	e.i64(int64(w.sentAt))
	e.i64(int64(w.work))
	e.i64(w.rtBytes)
	e.sweeper(w.targets)
	return e.result(dst, w.StateKind())
}

// AppendState appends the desktop's whole state to dst (see
// StatefulWorkload).
func (w *Desktop) AppendState(dst []byte) ([]byte, error) {
	e := stateEncoder{b: dst}
	e.header(kindCodeDesktop)
	e.desktopConfig(w.cfg)
	e.base(&w.base)
	e.service(&w.service)
	return e.result(dst, w.StateKind())
}

// adoptWorkload attaches w, a workload a WorkloadDecoder made of a suspend
// file, to vm, as VM.HandOverWorkload attaches a live VM's: vm has no
// workload and is not running. started is whether the workload had been
// started on the VM it was saved from (Start called and no Stop since; the
// VM then is incoming or paused here), and throttle is that VM's owner
// throttle (VM.Throttle); VM.Resume, or VM.Start for a workload not
// started, then continues the workload as it would have there. The workload's times are the saving host's: the
// caller shifts them (Workload.Shift) first when the clocks differ.
func (vm *VM) adoptWorkload(w Workload, started bool, throttle float64) error {
	switch {
	case w == nil:
		return fmt.Errorf("%w: nil workload", ErrWorkload)
	case vm.state == VMRunning || vm.state == VMDestroyed:
		return vm.refuse("adopt workload")
	case started && vm.state != VMIncoming && vm.state != VMPaused:
		// A created or stopped VM starts its workload afresh: a started
		// one would be resumed on memory it never wrote.
		return vm.refuse("adopt a started workload")
	case vm.workload != nil:
		return fmt.Errorf("%w: VM %q already runs %s", ErrWorkload, vm.id, vm.workload.Name())
	case !validThrottle(throttle):
		return configError("throttle %v outside [0, 1)", throttle)
	}
	if err := vm.held("adopt workload"); err != nil {
		return err
	}
	vm.workload, vm.wlStarted, vm.throttle = w, started, throttle
	return nil
}
