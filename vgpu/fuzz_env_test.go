package vgpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
)

// FuzzWorkloadEnv drives a VM whose workload calls every method of its Env,
// and every method of the memory regions the Env hands out, with arguments
// decoded from the input — vGPU indices, offsets, lengths, page numbers,
// content classes, mixes, job fields, negative and huge values alike — from
// each of its hooks (Start, Resume, AdvanceTo, Fire, Complete, Pause, Stop)
// and outside them, while the test advances, pauses, resumes, stops,
// restarts, throttles and finally destroys the VM. Nothing may panic; every
// error must be typed: an Env's wraps ErrWorkload, a region's wraps a
// memory sentinel, and an error a hook returns reaches the caller of
// Host.Advance, VM.Start or VM.Resume wrapping both ErrWorkload and the
// hook's own error.
//
// The input: one byte of configuration (which VM: one P40-1Q, two P40-24Q,
// a passthrough GPU, one P40-1Q under the equal-share scheduler), then the
// stream that the driver and the workload's hooks read in turn (see
// envFuzz.driverOp and fuzzWorkload.hook). Bytes read past the end are
// zero, and once the input is exhausted the workload schedules no more
// events, so every run ends. Memory is Synthetic, the default, so that
// filling a 24 GiB framebuffer costs metadata only; the operations that
// store bytes (WriteAt, StorePage) and those that read a whole region
// (DigestParallel, FirstDiff) are bounded so that a run stays small.
func FuzzWorkloadEnv(f *testing.F) {
	// A valid seed built here, besides the corpus in testdata: start, one
	// second of events that submit work and write the framebuffer.
	f.Add([]byte{0,
		0, 0, 0, 100, // Start: no op, return nil, next event in 100 µs
		drvAdvance, 1, 0xe8, 3, // Advance 1000 ms
		// AdvanceTo at 100 µs: one op, Framebuffer(0); return nil.
		1, opFramebuffer, 0, 0,
		// Fire: Submit(0, Job{Work: 1 ms, Chunk: 0, Tag: 7}); return
		// nil; the input ends, so no next event.
		1, opSubmit, 0, 1, 1, 0, 3, 7, 0,
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		envFuzzRun(t, data)
	})
}

// The operations a fuzzWorkload performs on its Env.
const (
	opFramebuffer = iota
	opUsable
	opFrameRate
	opSubmit
	opAccessors
	opReadAt
	opWriteAt
	opFill
	opFillMix
	opReadPage
	opPageState
	opStorePage
	opStoreGenerated
	opDirty
	opUsed
	opMapUnmap
	opDigest
	opFirstDiff
	opNoVM
	opCount
)

// The driver's operations on the VM.
const (
	drvAdvance = iota
	drvPause
	drvResume
	drvStop
	drvStart
	drvThrottle
	drvEnvOps
	drvDestroy
	drvCount
)

// errHookFailed is the plain, untyped error a fuzzWorkload's hook returns
// when the input says so.
var errHookFailed = errors.New("fuzz workload: hook failed")

// fuzzInput hands out the fuzz input byte by byte; past its end every byte
// is zero.
type fuzzInput struct {
	data []byte
	pos  int
}

func (in *fuzzInput) exhausted() bool { return in.pos >= len(in.data) }

func (in *fuzzInput) u8() uint8 {
	if in.exhausted() {
		return 0
	}
	b := in.data[in.pos]
	in.pos++
	return b
}

func (in *fuzzInput) u16() uint16 { return uint16(in.u8()) | uint16(in.u8())<<8 }

func (in *fuzzInput) u64() uint64 {
	var b [8]byte
	for i := range b {
		b[i] = in.u8()
	}
	return binary.LittleEndian.Uint64(b[:])
}

// index returns a small signed number (-128 to 127), or, after the byte
// 0x80, a raw 64-bit one: vGPU indices, pages, counts.
func (in *fuzzInput) index() int {
	b := in.u8()
	if b == 0x80 {
		return int(int64(in.u64()))
	}
	return int(int8(b))
}

// offset returns a byte offset or length for a region of size bytes and
// pages of ps bytes: small and signed, page-sized steps, near the end of
// the region, or raw 64 bits.
func (in *fuzzInput) offset(size int64, ps int) int64 {
	switch in.u8() % 4 {
	case 0:
		return int64(int8(in.u8()))
	case 1:
		return int64(in.u16()) * int64(ps)
	case 2:
		return size - int64(in.u16())
	}
	return int64(in.u64())
}

// length returns a buffer length, up to 64 KiB and a page and a byte past
// the pages of ps bytes, so that one access spans pages.
func (in *fuzzInput) length(ps int) int {
	switch in.u8() % 3 {
	case 0:
		return int(in.u8())
	case 1:
		return min(ps+int(int8(in.u8())), 64<<10+1)
	}
	return int(in.u16())
}

// duration returns a duration: microseconds, milliseconds, raw 64 bits
// (negative and huge included), or zero.
func (in *fuzzInput) duration() time.Duration {
	switch in.u8() % 4 {
	case 0:
		return time.Duration(in.u8()) * time.Microsecond
	case 1:
		return time.Duration(in.u16()) * time.Millisecond
	case 2:
		return time.Duration(int64(in.u64()))
	}
	return 0
}

// envFuzz is one run of FuzzWorkloadEnv.
type envFuzz struct {
	t    *testing.T
	in   *fuzzInput
	host *Host
	vm   *VM
	w    *fuzzWorkload
	// windows are the windows the workload mapped on its guest RAM.
	windows []*memory.Region
	ps      memory.PageSet
	// stores counts the operations that may store bytes; past
	// envFuzzMaxStores they are skipped.
	stores int
}

// envFuzzMaxStores bounds the operations of a run that store bytes: each
// stores at most two 1 MiB framebuffer pages.
const envFuzzMaxStores = 32

// envFuzzMaxReadAll bounds the size of a region that DigestParallel and
// FirstDiff read whole.
const envFuzzMaxReadAll = 64 << 20

func envFuzzRun(t *testing.T, data []byte) {
	in := &fuzzInput{data: data}
	cfg := in.u8()
	hc := HostConfig{Memory: memory.Synthetic, FramebufferPageSize: 1 << 20, RAMBytes: 1 * GiB}
	spec := VMSpec{ID: "fuzz", RAMBytes: 16 * MiB, RAMFootprintBytes: 64 << 10, Profiles: []string{"P40-1Q"}}
	switch cfg % 4 {
	case 1:
		hc.GPUs, spec.Profiles = 2, []string{"P40-24Q", "P40-24Q"}
	case 2:
		spec.Passthrough, spec.Profiles = true, nil
	case 3:
		hc.Sched.Policy = sched.EqualShare
	}
	h, err := NewHost(hc)
	if err != nil {
		t.Fatal(err)
	}
	e := &envFuzz{t: t, in: in, host: h}
	e.w = &fuzzWorkload{e: e, next: NoEvent}
	spec.Workload = e.w
	if e.vm, err = h.CreateVM(spec); err != nil {
		t.Fatal(err)
	}
	e.driverCall("start", e.vm.Start)
	for steps := 0; !in.exhausted() && steps < 1<<12; steps++ {
		if !e.driverOp() {
			return
		}
	}
}

// driverOp performs one operation on the VM, as its owner would; it
// reports false when the VM is gone.
func (e *envFuzz) driverOp() bool {
	switch e.in.u8() % drvCount {
	case drvAdvance:
		d := e.in.duration()
		e.driverCall(fmt.Sprintf("advance %v", d), func() error { return e.host.Advance(d) })
	case drvPause:
		e.driverCall("pause", e.vm.Pause)
	case drvResume:
		e.driverCall("resume", e.vm.Resume)
	case drvStop:
		e.driverCall("stop", e.vm.Stop)
	case drvStart:
		e.driverCall("start", e.vm.Start)
	case drvThrottle:
		f := float64(e.in.u16())/math.MaxUint16*1.5 - 0.25
		e.driverCall(fmt.Sprintf("throttle %v", f), func() error { return e.vm.SetThrottle(f) })
	case drvEnvOps:
		// The Env outside any hook, as a workload that kept it would.
		for range e.in.u8() % 4 {
			e.envOp(&e.vm.env)
		}
	case drvDestroy:
		env := &e.vm.env
		e.driverCall("destroy", e.vm.Destroy)
		// An Env of a destroyed VM: its windows are unmapped, its vGPUs
		// destroyed, and still nothing panics.
		for !e.in.exhausted() {
			e.envOp(env)
		}
		return false
	}
	return true
}

// driverCall runs a VM or host operation. Its error must wrap a vgpu
// sentinel; if a hook of the workload failed on the way, it must wrap
// ErrWorkload and the hook's error.
func (e *envFuzz) driverCall(what string, call func() error) {
	e.w.failed = nil
	err := call()
	if err == nil {
		if e.w.failed != nil {
			e.t.Fatalf("%s: the workload's hook failed with %v, the call returned nil", what, e.w.failed)
		}
		return
	}
	if !wrapsAny(err, vgpuSentinels) {
		e.t.Fatalf("%s: error %q wraps no vgpu sentinel", what, err)
	}
	if e.w.failed != nil && (!errors.Is(err, ErrWorkload) || !errors.Is(err, e.w.failed)) {
		e.t.Fatalf("%s: the workload's hook failed with %q, the call returned %q", what, e.w.failed, err)
	}
}

// envOp performs one operation on env with arguments from the input and
// checks its outcome; it returns the operation's error.
func (e *envFuzz) envOp(env *Env) error {
	in, t := e.in, e.t
	op := in.u8() % opCount
	switch op {
	case opFramebuffer, opUsable, opFrameRate:
		i := in.index()
		var err error
		var ok bool
		switch op {
		case opFramebuffer:
			var fb *memory.Region
			fb, err = env.Framebuffer(i)
			ok = fb != nil
		case opUsable:
			var n int64
			n, err = env.UsableFramebufferBytes(i)
			ok = n > 0
		default:
			var fps int
			fps, err = env.FrameRateLimitFPS(i)
			ok = fps >= 0
		}
		valid := i >= 0 && i < env.Devices()
		if valid != (err == nil) || err == nil && !ok {
			t.Fatalf("op %d on vGPU %d of %d: %v", op, i, env.Devices(), err)
		}
		return e.envError(fmt.Sprintf("op %d on vGPU %d", op, i), err)
	case opSubmit:
		i := in.index()
		j := sched.Job{Work: in.duration(), Chunk: in.duration(), Tag: uint64(in.u8())}
		err := env.Submit(i, j)
		if err == nil && (i < 0 || i >= env.Devices() || j.Work <= 0 || j.Chunk < 0) {
			t.Fatalf("Submit(%d, %+v) on %d vGPUs accepted", i, j, env.Devices())
		}
		return e.envError(fmt.Sprintf("Submit(%d, %+v)", i, j), err)
	case opAccessors:
		_, _, _, _ = env.Now(), env.VMID(), env.Devices(), env.GPU()
		if ram := env.RAM(); ram != nil {
			if b := env.RAMWorkloadBase(); b < 0 || b > ram.Size() {
				t.Fatalf("RAMWorkloadBase %d outside guest memory of %d bytes", b, ram.Size())
			}
		}
		return nil
	case opNoVM:
		// Envs that no host made.
		var zero Env
		for _, z := range []*Env{&zero, nil} {
			_, _, _, _, _, _ = z.Now(), z.VMID(), z.RAM(), z.RAMWorkloadBase(), z.Devices(), z.GPU()
			i := in.index()
			_, err1 := z.Framebuffer(i)
			_, err2 := z.UsableFramebufferBytes(i)
			_, err3 := z.FrameRateLimitFPS(i)
			err4 := z.Submit(i, sched.Job{Work: time.Millisecond})
			for _, err := range []error{err1, err2, err3, err4} {
				if !errors.Is(err, ErrWorkload) {
					t.Fatalf("an Env without a VM: %v", err)
				}
			}
		}
		return nil
	}
	r := e.region(env)
	if r == nil {
		return nil
	}
	return e.regionOp(op, r, env)
}

// envError checks that err, from a method of Env, wraps ErrWorkload.
func (e *envFuzz) envError(what string, err error) error {
	if err != nil && !errors.Is(err, ErrWorkload) {
		e.t.Fatalf("%s: error %q does not wrap ErrWorkload", what, err)
	}
	return err
}

// region returns the region an operation works on: the guest RAM, a
// framebuffer (by an index the Env accepted) or a window the workload
// mapped on its RAM.
func (e *envFuzz) region(env *Env) *memory.Region {
	switch k := e.in.u8(); {
	case k%3 == 0:
		return env.RAM()
	case k%3 == 1 && len(e.windows) > 0:
		return e.windows[int(k/3)%len(e.windows)]
	}
	fb, err := env.Framebuffer(e.in.index())
	if err != nil {
		_ = e.envError("Framebuffer", err)
		return nil
	}
	return fb
}

// regionOp performs op on r with arguments from the input; every error
// must wrap a memory sentinel, and an access out of range be a
// *memory.AccessError.
func (e *envFuzz) regionOp(op uint8, r *memory.Region, env *Env) error {
	in := e.in
	ps := r.PageSize()
	var err error
	what := fmt.Sprintf("op %d on a region of %d pages", op, r.Pages())
	switch op {
	case opReadAt, opWriteAt:
		buf := make([]byte, in.length(ps))
		off := in.offset(r.Size(), ps)
		if op == opReadAt {
			_, err = r.ReadAt(buf, off)
		} else {
			if e.stores++; e.stores > envFuzzMaxStores {
				return nil
			}
			for i := range buf {
				buf[i] = byte(i) | 1
			}
			_, err = r.WriteAt(buf, off)
		}
		// An unmapped window refuses every access; a mapped region
		// refuses exactly those out of range, with a *memory.AccessError.
		inside := off >= 0 && off <= r.Size()-int64(len(buf))
		var ae *memory.AccessError
		if !errors.Is(err, memory.ErrUnmapped) && (inside != (err == nil) || err != nil && !errors.As(err, &ae)) {
			e.t.Fatalf("%s: [%d, +%d) of %d: %v", what, off, len(buf), r.Size(), err)
		}
	case opFill:
		err = r.Fill(in.index(), in.index(), memory.Class(in.u8()))
	case opFillMix:
		var m memory.Mix
		for range in.u8() % 4 {
			m.Parts = append(m.Parts, memory.MixPart{Class: memory.Class(in.u8() % 8), Weight: uint32(in.u64())})
		}
		err = r.FillMix(in.index(), in.index(), m)
	case opReadPage:
		_, err = r.ReadPage(in.index(), make([]byte, in.length(ps)))
	case opPageState:
		p := in.index()
		_, err = r.PageState(p)
		_, err2 := r.IsZeroPage(p)
		err = errors.Join(err, err2)
	case opStorePage:
		_, err = r.ReadPage(0, nil) // a nil buffer: ErrPageSize
		if e.stores++; e.stores > envFuzzMaxStores {
			break
		}
		data := make([]byte, in.length(ps))
		if len(data) > 0 {
			data[len(data)/2] = in.u8()
		}
		err = errors.Join(err, r.StorePage(in.index(), data, uint32(in.u64())))
	case opStoreGenerated:
		err = r.StoreGenerated(in.index(), memory.Class(in.u8()), uint32(in.u64()))
	case opDirty:
		switch in.u8() % 5 {
		case 0:
			r.CollectDirty(&e.ps)
		case 1:
			r.StopDirtyLog()
		case 2:
			r.StartDirtyLog()
		case 3:
			before := r.DirtyCount()
			if n := r.CollectDirty(nil); n != 0 || r.DirtyCount() < before {
				e.t.Fatalf("CollectDirty(nil) returned %d, dirty pages %d -> %d", n, before, r.DirtyCount())
			}
		}
		_, _ = r.DirtyCount(), r.DirtyLogging()
	case opUsed:
		ps := &e.ps
		if in.u8()%4 == 0 {
			ps = nil
		}
		err = r.UsedPages(ps)
		if ps == nil && err == nil {
			e.t.Fatal("UsedPages(nil) succeeded")
		}
		_, err2 := r.UsedBytes()
		err = errors.Join(err, err2)
	case opMapUnmap:
		if in.u8()%2 == 0 {
			var w *memory.Region
			w, err = r.Map(in.index(), in.index(), in.u64())
			if err == nil {
				e.windows = append(e.windows, w)
			}
		} else {
			err = r.Unmap()
		}
	case opDigest:
		if r.Size() <= envFuzzMaxReadAll {
			_, err = r.DigestParallel(in.index())
		}
	case opFirstDiff:
		// other is nil when the index names no vGPU: FirstDiff refuses it.
		if other := e.region(env); r.Size() <= envFuzzMaxReadAll && (other == nil || other.Size() <= envFuzzMaxReadAll) {
			_, err = memory.FirstDiff(r, other)
			if other == nil && err == nil {
				e.t.Fatal("FirstDiff with a nil region succeeded")
			}
		}
	}
	if err != nil && !wrapsAny(err, memorySentinels) {
		e.t.Fatalf("%s: error %q wraps no memory sentinel", what, err)
	}
	return err
}

var vgpuSentinels = []error{ErrConfig, ErrUnknownProfile, ErrUnknownGPU, ErrECCEnabled, ErrGPUBusy,
	ErrNoCapacity, ErrInsufficientRAM, ErrMultiVGPU, ErrDuplicateVM, ErrPassthrough, ErrIllegalTransition,
	ErrCorruptState, ErrStateVersion, ErrIncompatibleState, ErrIncompatibleHost, ErrInvalidDuration, ErrWorkload}

var memorySentinels = []error{memory.ErrOutOfRange, memory.ErrConfig, memory.ErrOverlap, memory.ErrUnmapped,
	memory.ErrNotRoot, memory.ErrPageSize, memory.ErrClass, memory.ErrRate}

func wrapsAny(err error, sentinels []error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// fuzzWorkload performs, in each hook, the operations the input says and
// returns what it says: nil, the last operation's error, or
// errHookFailed.
type fuzzWorkload struct {
	e        *envFuzz
	next     time.Duration
	throttle float64
	// failed is the error a hook returned last, for driverCall to find in
	// the error of the call that ran the hook.
	failed error
}

// hook runs the operations of one hook: a count (0 to 3), the operations,
// then how the hook ends (nil, the last operation's error, errHookFailed).
func (w *fuzzWorkload) hook(env *Env) error {
	in := w.e.in
	var last error
	for range in.u8() % 4 {
		last = w.e.envOp(env)
	}
	switch in.u8() % 4 {
	case 1:
		return last
	case 2:
		return errHookFailed
	}
	return nil
}

// fail records err, returned by a hook whose error the host passes on.
func (w *fuzzWorkload) fail(err error) error {
	if err != nil {
		w.failed = err
	}
	return err
}

// schedule sets the next event from the input: after now by a decoded
// duration (0 or less: due at once, which Fire must not leave), or none
// once the input is exhausted.
func (w *fuzzWorkload) schedule(env *Env) {
	d := w.e.in.duration()
	switch {
	case w.e.in.exhausted():
		w.next = NoEvent
	case d > NoEvent-env.Now():
		w.next = NoEvent
	default:
		w.next = env.Now() + d
	}
}

func (w *fuzzWorkload) Name() string { return "fuzz" }

func (w *fuzzWorkload) Start(env *Env) error {
	err := w.hook(env)
	w.schedule(env)
	return w.fail(err)
}

func (w *fuzzWorkload) Pause(env *Env) { _ = w.hook(env) }

func (w *fuzzWorkload) Resume(env *Env) error {
	err := w.hook(env)
	w.schedule(env)
	return w.fail(err)
}

func (w *fuzzWorkload) Stop(env *Env) {
	_ = w.hook(env)
	w.next = NoEvent
}

func (w *fuzzWorkload) AdvanceTo(env *Env, t time.Duration) error {
	if t != env.Now() {
		w.e.t.Fatalf("AdvanceTo(%v) at %v", t, env.Now())
	}
	return w.fail(w.hook(env))
}

func (w *fuzzWorkload) NextEvent() time.Duration { return w.next }

func (w *fuzzWorkload) Fire(env *Env) error {
	err := w.hook(env)
	w.schedule(env)
	return w.fail(err)
}

func (w *fuzzWorkload) Complete(env *Env, dev int, c sched.Completion) error {
	if dev < 0 || dev >= env.Devices() {
		w.e.t.Fatalf("completion of vGPU %d of %d", dev, env.Devices())
	}
	return w.fail(w.hook(env))
}

func (w *fuzzWorkload) SetThrottle(f float64) error {
	if w.e.in.u8()%8 == 7 {
		return w.fail(errHookFailed)
	}
	w.throttle = f
	return nil
}

func (w *fuzzWorkload) Shift(d time.Duration) {
	if w.next != NoEvent {
		w.next += d
	}
}

func (w *fuzzWorkload) Metrics(from, to time.Duration) Metrics {
	return Metrics{Workload: "fuzz", From: from, To: to}
}
