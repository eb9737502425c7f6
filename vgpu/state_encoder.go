package vgpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/vgpusim/vgpusim/memory"
)

// stateEncoder appends the layout of a saved workload state (see
// workload_state.go), remembering the first value that does not fit it.
// A suspend file's VM record is written with it too.
type stateEncoder struct {
	b   []byte
	err error
}

func (e *stateEncoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *stateEncoder) u64(v uint64) { e.b = le.AppendUint64(e.b, v) }
func (e *stateEncoder) i64(v int64)  { e.u64(uint64(v)) }
func (e *stateEncoder) f64(v float64) {
	e.u64(math.Float64bits(v))
}

func (e *stateEncoder) flag(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

func (e *stateEncoder) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf(format, args...)
	}
}

func (e *stateEncoder) str(s, what string) {
	if len(s) > maxStrBytes {
		e.fail("%s of %d bytes, the format holds %d", what, len(s), maxStrBytes)
		return
	}
	e.u8(uint8(len(s)))
	e.b = append(e.b, s...)
}

// count8 writes a count of at most math.MaxUint8 as a u8.
func (e *stateEncoder) count8(n int, what string) {
	if n > math.MaxUint8 {
		e.fail("%d %s, the format holds %d", n, what, math.MaxUint8)
		return
	}
	e.u8(uint8(n))
}

// count32 writes a count of at most math.MaxUint32 as a u32.
func (e *stateEncoder) count32(n int, what string) {
	if uint64(n) > math.MaxUint32 {
		e.fail("%d %s, the format holds %d", n, what, uint64(math.MaxUint32))
		return
	}
	e.b = le.AppendUint32(e.b, uint32(n))
}

func (e *stateEncoder) header(kind uint8) { e.headerVersion(workloadStateVersion, kind) }

func (e *stateEncoder) headerVersion(version, kind uint8) {
	e.u8(version)
	e.u8(kind)
}

func (e *stateEncoder) result(dst []byte, kind string) ([]byte, error) {
	if e.err != nil {
		return dst, fmt.Errorf("%w: %s state: %w", ErrWorkload, kind, e.err)
	}
	return e.b, nil
}

func (e *stateEncoder) model(m Model) {
	e.str(m.Name, "model name")
	e.i64(m.MACs)
	e.i64(int64(m.Layers))
	e.i64(m.Parameters)
	e.i64(m.InputBytes)
	e.i64(m.ActivationBytes)
}

func (e *stateEncoder) inferenceConfig(c InferenceConfig) {
	e.model(c.Model)
	e.f64(c.RequestsPerSec)
	e.u8(uint8(c.Precision))
	e.f64(c.Efficiency)
	e.i64(c.FootprintBytes)
	e.i64(c.WeightsBytes)
	e.i64(c.ActivationsBytes)
	e.i64(c.RAMWorkingSetBytes)
	e.i64(c.RAMDirtyBytesPerSec)
	e.u8(uint8(c.RAMDirtyPattern))
	e.i64(c.FramebufferDirtyBytesPerSec)
	e.i64(int64(c.HistoryLimit))
	e.u64(c.Seed)
}

func (e *stateEncoder) trainingConfig(c TrainingConfig) {
	e.model(c.Model)
	e.i64(int64(c.BatchSize))
	e.u8(uint8(c.Precision))
	e.f64(c.Efficiency)
	e.i64(c.FootprintBytes)
	e.i64(c.WeightsBytes)
	e.i64(c.ActivationsBytes)
	e.i64(c.OptimizerStateBytes)
	e.i64(c.RAMDirtyBytesPerSec)
	e.i64(int64(c.QueueDepth))
	e.i64(int64(c.PollInterval))
	e.i64(int64(c.HistoryLimit))
	e.u64(c.Seed)
	if c.hasDataLoad() {
		e.i64(int64(c.DataLoad))
		e.f64(c.DataLoadRatio)
		e.f64(c.DataLoadJitter)
	}
}

func (e *stateEncoder) cadConfig(c CADConfig) {
	e.f64(c.TargetFPS)
	e.i64(c.WidthPixels)
	e.i64(c.HeightPixels)
	e.i64(c.OpsPerPixel)
	e.f64(c.Efficiency)
	e.i64(c.SceneBytes)
	e.i64(int64(c.RenderBuffers))
	e.i64(c.FootprintBytes)
	e.i64(c.RAMWorkingSetBytes)
	e.i64(c.RAMDirtyBytesPerSec)
	e.u8(uint8(c.RAMDirtyPattern))
	e.i64(int64(c.HistoryLimit))
	e.u64(c.Seed)
}

func (e *stateEncoder) desktopConfig(c DesktopConfig) {
	e.f64(c.UpdatesPerSec)
	e.i64(c.UpdatePixels)
	e.i64(c.OpsPerPixel)
	e.f64(c.Efficiency)
	e.i64(c.SurfaceBytes)
	e.i64(c.RAMWorkingSetBytes)
	e.i64(c.RAMDirtyBytesPerSec)
	e.u8(uint8(c.RAMDirtyPattern))
	e.i64(int64(c.HistoryLimit))
	e.u64(c.Seed)
}

func (e *stateEncoder) base(b *base) {
	e.f64(b.throttle)
	e.i64(int64(b.last))
	var flags uint8
	if b.running {
		flags |= 1
	}
	if b.paused {
		flags |= 2
	}
	e.u8(flags)
	e.history(&b.hist)
	e.dirtier(b.ram)
	e.count8(len(b.fb), "framebuffer dirtiers")
	for _, d := range b.fb {
		e.dirtier(d)
	}
}

func (e *stateEncoder) history(h *history) {
	e.i64(int64(h.limit))
	e.flag(h.evicted)
	e.i64(int64(h.oldest))
	e.count32(h.n, "history records")
	for i := range h.n {
		r := h.buf[(h.head+i)%len(h.buf)]
		e.i64(int64(r.start))
		e.i64(int64(r.end))
		e.flag(r.dropped)
	}
}

func (e *stateEncoder) dirtier(d dirtier) {
	e.i64(d.rate)
	e.flag(d.p != nil)
	if d.p != nil {
		e.pattern(d.p.State())
	}
}

func (e *stateEncoder) pattern(s memory.PatternState) {
	c := s.Config
	e.u8(uint8(c.Kind))
	e.i64(c.RateBytesPerSec)
	e.i64(int64(c.FirstPage))
	e.i64(int64(c.Pages))
	e.mix(c.Mix)
	e.u64(c.Seed)
	e.str(string(s.RNG), "pattern random state")
	e.u64(s.CarryByteNS)
	e.i64(int64(s.Cursor))
	e.i64(s.Written)
	e.i64(s.Passes)
}

func (e *stateEncoder) mix(m memory.Mix) {
	e.str(m.Name, "mix name")
	e.count8(len(m.Parts), "mix parts")
	for _, p := range m.Parts {
		e.u8(uint8(p.Class))
		e.b = le.AppendUint32(e.b, p.Weight)
	}
}

// rng writes a rand.PCG's marshalled state as a str.
func (e *stateEncoder) rng(p *rand.PCG, what string) {
	b, err := p.MarshalBinary()
	if err != nil {
		e.fail("%s: %v", what, err)
	}
	e.str(string(b), what)
}

func (e *stateEncoder) span(s span) {
	e.i64(s.off)
	e.i64(s.size)
}

func (e *stateEncoder) sweeper(s sweeper) {
	e.span(s.span)
	e.i64(int64(s.cursor))
	e.i64(s.carry)
}

func (e *stateEncoder) service(s *service) {
	e.rng(s.arrivals, "arrival random state")
	e.i64(int64(s.next))
	e.u64(s.seq)
	e.i64(int64(s.rr))
	tags := make([]uint64, 0, len(s.inflight))
	for tag := range s.inflight {
		tags = append(tags, tag)
	}
	slices.Sort(tags)
	e.count32(len(tags), "requests in flight")
	for _, tag := range tags {
		e.u64(tag)
		e.i64(int64(s.inflight[tag]))
	}
	e.i64(int64(s.work))
	e.i64(int64(s.chunk))
	e.i64(s.inBytes)
	e.i64(s.outBytes)
	e.sweeper(s.reqRing)
	e.count8(len(s.out), "output sweepers")
	for _, o := range s.out {
		e.sweeper(o)
	}
}
