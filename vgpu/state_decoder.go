package vgpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/vgpusim/vgpusim/memory"
)

// stateDecoder reads the layout of a saved workload state (see
// workload_state.go) with state.go's reader, checking every value against
// the format and against env's VM. Its first error stops it: later reads
// return zero values. A suspend file's VM record is read with it too.
type stateDecoder struct {
	r       reader
	kind    string
	version uint8 // of the layout, read from the header
	env     *Env
	err     *WorkloadStateError
}

// errStopped marks the reader of a decoder that has failed, so that it
// reads nothing more.
var errStopped = errors.New("stopped")

func newStateDecoder(env *Env, kind string, code uint8, b []byte) *stateDecoder {
	d := &stateDecoder{r: reader{b: b}, kind: kind, env: env}
	v := d.r.u8("version")
	if d.r.err == nil && (v < workloadStateVersion || v > newestStateVersion) {
		d.refuse(0, ErrStateVersion, nil, "version %d, this package reads %d to %d", v, workloadStateVersion, newestStateVersion)
	}
	d.version = v
	k := d.r.u8("kind")
	switch {
	case d.r.err != nil:
	case k != code:
		d.corrupt(1, "kind %d, a %s state is kind %d", k, kind, code)
	case v > maxStateVersion(code):
		d.refuse(0, ErrStateVersion, nil, "version %d, a %s state is at most version %d", v, kind, maxStateVersion(code))
	}
	return d
}

// refuse records the first error and stops the reader.
func (d *stateDecoder) refuse(off int, sentinel, cause error, format string, args ...any) {
	if d.failed() {
		return
	}
	d.err = &WorkloadStateError{Kind: d.kind, Offset: off, Reason: fmt.Sprintf(format, args...), Err: sentinel, Cause: cause}
	d.r.err = errStopped
}

func (d *stateDecoder) corrupt(off int, format string, args ...any) {
	d.refuse(off, ErrCorruptState, nil, format, args...)
}

func (d *stateDecoder) incompatible(off int, format string, args ...any) {
	d.refuse(off, ErrIncompatibleState, nil, format, args...)
}

func (d *stateDecoder) failed() bool { return d.err != nil || d.r.err != nil }

// finish checks that nothing follows and returns the first error.
func (d *stateDecoder) finish() error {
	if !d.failed() && d.r.off != len(d.r.b) {
		d.corrupt(d.r.off, "%d bytes after the last field", len(d.r.b)-d.r.off)
	}
	if d.err != nil {
		return d.err
	}
	var c *CorruptStateError
	if errors.As(d.r.err, &c) {
		return &WorkloadStateError{Kind: d.kind, Offset: c.Offset, Reason: c.Reason, Err: ErrCorruptState}
	}
	if d.r.err != nil {
		return &WorkloadStateError{Kind: d.kind, Offset: d.r.off, Reason: "unreadable", Err: ErrCorruptState, Cause: d.r.err}
	}
	return nil
}

// canonical checks that the bytes read since off are the ones enc writes
// for what was decoded of them: a value the decoder or a constructor would
// change (a default filled in, a bit pattern of its own) is refused, so
// that decoding and encoding again gives back the same bytes.
func (d *stateDecoder) canonical(off int, what string, enc func(*stateEncoder)) {
	if d.failed() {
		return
	}
	e := stateEncoder{}
	enc(&e)
	if e.err != nil || !bytes.Equal(e.b, d.r.b[off:d.r.off]) {
		d.corrupt(off, "%s not in the form this package writes", what)
	}
}

func (d *stateDecoder) u8(what string) uint8   { return d.r.u8(what) }
func (d *stateDecoder) u64(what string) uint64 { return d.r.u64(what) }
func (d *stateDecoder) i64(what string) int64  { return int64(d.r.u64(what)) }
func (d *stateDecoder) f64(what string) float64 {
	return math.Float64frombits(d.r.u64(what))
}

// dur reads a time or duration; any value is one (times may be negative
// after a Shift to a host whose clock is behind).
func (d *stateDecoder) dur(what string) time.Duration { return time.Duration(d.i64(what)) }

// nonNeg reads an i64 that must be at least 0.
func (d *stateDecoder) nonNeg(what string) int64 {
	off := d.r.off
	v := d.i64(what)
	if !d.failed() && v < 0 {
		d.corrupt(off, "%s %d is negative", what, v)
	}
	return v
}

func (d *stateDecoder) flag(what string) bool {
	off := d.r.off
	v := d.r.u8(what)
	if !d.failed() && v > 1 {
		d.corrupt(off, "%s flag %d is neither 0 nor 1", what, v)
	}
	return v == 1
}

func (d *stateDecoder) str(what string) string {
	n := int(d.r.u8(what + " length"))
	return string(d.r.take(n, what))
}

// count8 reads a u8 count and count32 a u32 one, of elements of at least
// elemBytes each, refusing one above limit or above what the remaining
// bytes can hold, before anything is allocated for them.
func (d *stateDecoder) count8(what string, elemBytes, limit int) int {
	off := d.r.off
	return d.checkCount(off, int(d.r.u8(what)), what, elemBytes, limit)
}

func (d *stateDecoder) count32(what string, elemBytes, limit int) int {
	off := d.r.off
	return d.checkCount(off, int(d.r.u32(what)), what, elemBytes, limit)
}

func (d *stateDecoder) checkCount(off, n int, what string, elemBytes, limit int) int {
	switch {
	case d.failed():
		return 0
	case n > limit:
		d.corrupt(off, "%d %s, at most %d", n, what, limit)
		return 0
	case n > (len(d.r.b)-d.r.off)/elemBytes:
		d.corrupt(off, "%d %s of %d bytes each, %d bytes left", n, what, elemBytes, len(d.r.b)-d.r.off)
		return 0
	}
	return n
}

// devices reads a count of per-vGPU elements, at most the VM's vGPUs.
func (d *stateDecoder) devices(what string, elemBytes int) int {
	off := d.r.off
	n := d.count8(what, elemBytes, MaxVGPUsPerVM)
	if !d.failed() && n > d.env.Devices() {
		d.incompatible(off, "%d %s, the VM has %d vGPUs", n, what, d.env.Devices())
		return 0
	}
	return n
}

// framebuffer returns vGPU i's framebuffer; i < env.Devices() is checked.
func (d *stateDecoder) framebuffer(i int) *memory.Region {
	fb, err := d.env.Framebuffer(i)
	if err != nil {
		d.refuse(d.r.off, ErrIncompatibleState, err, "vGPU %d", i)
		return nil
	}
	return fb
}

func (d *stateDecoder) model(what string) Model {
	var m Model
	m.Name = d.str(what + " name")
	m.MACs = d.i64(what + " MACs")
	m.Layers = int(d.i64(what + " layers"))
	m.Parameters = d.i64(what + " parameters")
	m.InputBytes = d.i64(what + " input bytes")
	m.ActivationBytes = d.i64(what + " activation bytes")
	return m
}

func (d *stateDecoder) inferenceConfig() InferenceConfig {
	var c InferenceConfig
	c.Model = d.model("model")
	c.RequestsPerSec = d.f64("request rate")
	c.Precision = Precision(d.u8("precision"))
	c.Efficiency = d.f64("efficiency")
	c.FootprintBytes = d.i64("footprint")
	c.WeightsBytes = d.i64("weights")
	c.ActivationsBytes = d.i64("activations")
	c.RAMWorkingSetBytes = d.i64("RAM working set")
	c.RAMDirtyBytesPerSec = d.i64("RAM dirty rate")
	c.RAMDirtyPattern = memory.PatternKind(d.u8("RAM dirty pattern"))
	c.FramebufferDirtyBytesPerSec = d.i64("framebuffer dirty rate")
	c.HistoryLimit = int(d.i64("history limit"))
	c.Seed = d.u64("seed")
	return c
}

func (d *stateDecoder) trainingConfig() TrainingConfig {
	var c TrainingConfig
	c.Model = d.model("model")
	c.BatchSize = int(d.i64("batch size"))
	c.Precision = Precision(d.u8("precision"))
	c.Efficiency = d.f64("efficiency")
	c.FootprintBytes = d.i64("footprint")
	c.WeightsBytes = d.i64("weights")
	c.ActivationsBytes = d.i64("activations")
	c.OptimizerStateBytes = d.i64("optimizer state")
	c.RAMDirtyBytesPerSec = d.i64("RAM dirty rate")
	c.QueueDepth = int(d.i64("queue depth"))
	c.PollInterval = d.dur("poll interval")
	c.HistoryLimit = int(d.i64("history limit"))
	c.Seed = d.u64("seed")
	if d.version == trainingDataLoadVersion {
		c.DataLoad = d.dur("data load")
		c.DataLoadRatio = d.f64("data-load ratio")
		c.DataLoadJitter = d.f64("data-load jitter")
	}
	return c
}

func (d *stateDecoder) cadConfig() CADConfig {
	var c CADConfig
	c.TargetFPS = d.f64("target frame rate")
	c.WidthPixels = d.i64("width")
	c.HeightPixels = d.i64("height")
	c.OpsPerPixel = d.i64("ops per pixel")
	c.Efficiency = d.f64("efficiency")
	c.SceneBytes = d.i64("scene")
	c.RenderBuffers = int(d.i64("render buffers"))
	c.FootprintBytes = d.i64("footprint")
	c.RAMWorkingSetBytes = d.i64("RAM working set")
	c.RAMDirtyBytesPerSec = d.i64("RAM dirty rate")
	c.RAMDirtyPattern = memory.PatternKind(d.u8("RAM dirty pattern"))
	c.HistoryLimit = int(d.i64("history limit"))
	c.Seed = d.u64("seed")
	return c
}

func (d *stateDecoder) desktopConfig() DesktopConfig {
	var c DesktopConfig
	c.UpdatesPerSec = d.f64("update rate")
	c.UpdatePixels = d.i64("update pixels")
	c.OpsPerPixel = d.i64("ops per pixel")
	c.Efficiency = d.f64("efficiency")
	c.SurfaceBytes = d.i64("surfaces")
	c.RAMWorkingSetBytes = d.i64("RAM working set")
	c.RAMDirtyBytesPerSec = d.i64("RAM dirty rate")
	c.RAMDirtyPattern = memory.PatternKind(d.u8("RAM dirty pattern"))
	c.HistoryLimit = int(d.i64("history limit"))
	c.Seed = d.u64("seed")
	return c
}
