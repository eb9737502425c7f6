// Package migtest builds the worlds the tests of package migrate and
// package live migrate: hosts, VMs, the counter oracle, secrets in a
// window, and the checks that follow a migration. It is shared so that a
// live result compares with a simulated one built alike.
package migtest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The worlds these tests migrate, as package migrate's own tests build
// them: the same hosts, VMs, counter oracle and secrets, so that a live
// result compares with a simulated one.

// TB is what the helpers need of a *testing.T, a *testing.B or a
// *rapid.T.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// BenchWorkers are the engine workers the benchmarks of the copy engine and
// of the live path try: 1 and 2 everywhere, and 4, 8 and 14 as far as
// GOMAXPROCS goes, so that one run on a bigger machine (go test -cpu 16)
// gives the scaling table.
func BenchWorkers() []int {
	ws := []int{1, 2}
	for _, w := range []int{4, 8, 14} {
		if w <= runtime.GOMAXPROCS(0) {
			ws = append(ws, w)
		}
	}
	return ws
}

func Must(t TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// HostPair returns a source and a destination host of the given backing,
// on one clock, as a Sim requires.
func HostPair(t testing.TB, kind memory.Kind, gpus int) (*vgpu.Host, *vgpu.Host) {
	t.Helper()
	src, err := vgpu.NewHost(vgpu.HostConfig{Name: "src", GPUs: gpus, Memory: kind, Seed: 1, RAMBytes: 256 * GiB})
	Must(t, err)
	dst, err := vgpu.NewHost(vgpu.HostConfig{Name: "dst", GPUs: gpus, Memory: kind, Seed: 2, RAMBytes: 256 * GiB})
	Must(t, err)
	return src, dst
}

// SameClock advances every host to the latest clock among them, as a Sim
// requires of the hosts it drives.
func SameClock(t TB, hosts ...*vgpu.Host) {
	t.Helper()
	var now time.Duration
	for _, h := range hosts {
		now = max(now, h.Now())
	}
	for _, h := range hosts {
		Must(t, h.Advance(now-h.Now()))
	}
}

// HostPairApart is HostPair with the destination's clock an hour ahead of
// the source's, as two real hosts' clocks differ: a live migration, which
// no Sim drives, must carry its VM across them.
func HostPairApart(t testing.TB, kind memory.Kind, gpus int) (*vgpu.Host, *vgpu.Host) {
	t.Helper()
	src, _ := HostPair(t, kind, gpus)
	dst, err := vgpu.NewHost(vgpu.HostConfig{Name: "dst", GPUs: gpus, Memory: kind, Seed: 2, RAMBytes: 256 * GiB, Start: time.Hour})
	Must(t, err)
	return src, dst
}

// TinyModel keeps byte-exact tests fast.
func TinyModel() vgpu.Model {
	return vgpu.Model{Name: "tiny", MACs: 50_000_000, Layers: 10, Parameters: 1_000_000, InputBytes: 64 << 10, ActivationBytes: 256 << 10}
}

// InferenceVM creates and starts a VM serving inference.
func InferenceVM(t testing.TB, h *vgpu.Host, id, profile string, ramBytes, footprint int64, model vgpu.Model, seed uint64) *vgpu.VM {
	t.Helper()
	w, err := vgpu.NewInference(vgpu.InferenceConfig{Model: model, RequestsPerSec: 100, FootprintBytes: footprint,
		RAMWorkingSetBytes: 16 * MiB, FramebufferDirtyBytesPerSec: 4 * MiB, Seed: seed})
	Must(t, err)
	vm, err := h.CreateVM(vgpu.VMSpec{ID: id, RAMBytes: ramBytes, RAMFootprintBytes: ramBytes / 8, Profiles: []string{profile}, Workload: w})
	Must(t, err)
	Must(t, vm.Start())
	return vm
}

// SourceImage is what must not change at the source when a migration
// fails: every region's digest and every device state.
type SourceImage struct {
	Digests []uint64           // each region's content digest
	States  []vgpu.DeviceState // each vGPU's state
	VMState vgpu.VMState
}

// CheckNothingAt verifies the destination holds nothing of a failed
// migration: no VM, no vGPU, no window, its guest memory free and, on a
// Sparse host, no framebuffer byte resident.
func CheckNothingAt(t testing.TB, dst *vgpu.Host) {
	t.Helper()
	if len(dst.VMs()) != 0 || dst.FreeRAMBytes() != dst.RAMBytes() {
		t.Fatalf("destination holds %d VMs, %d bytes of RAM reserved", len(dst.VMs()), dst.RAMBytes()-dst.FreeRAMBytes())
	}
	for _, g := range dst.GPUs() {
		if g.VGPUCount() != 0 || len(g.Framebuffer().Windows()) != 0 || g.Framebuffer().ResidentBytes() != 0 {
			t.Fatalf("destination GPU holds %d vGPUs, %d windows, %d resident bytes",
				g.VGPUCount(), len(g.Framebuffer().Windows()), g.Framebuffer().ResidentBytes())
		}
	}
}

// IsolationVMID names the migrating VM of the isolation tests.
const IsolationVMID = "oracle"

// SecretFramebufferPages are the framebuffer pages where the migrating VM
// keeps a secret, clear of the counter oracle's pages 0-199: those that
// exist at the window's page size, and its last page.
var SecretFramebufferPages = []int{300, 301, 302, 303, 4096, 4097, 65535, 65536}

// SecretPages returns where the secret lives in r: fb chooses the
// framebuffer pages, else the last 16 pages of guest RAM.
func SecretPages(r *memory.Region, fb bool) []int {
	if fb {
		var out []int
		for _, p := range SecretFramebufferPages {
			if p < r.Pages()-1 {
				out = append(out, p)
			}
		}
		return append(out, r.Pages()-1)
	}
	var out []int
	for p := r.Pages() - 16; p < r.Pages(); p++ {
		out = append(out, p)
	}
	return out
}

// SecretPage is the secret's content of page p: seeded non-zero bytes.
func SecretPage(p, size int) []byte {
	rng := rand.New(rand.NewPCG(uint64(p), 0x5ec7e7))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.Uint32()) | 1
	}
	return b
}

// WriteSecret writes the secret into vm's guest RAM and first framebuffer.
func WriteSecret(t testing.TB, vm *vgpu.VM) {
	t.Helper()
	for i, r := range []*memory.Region{vm.RAM(), vm.Framebuffers()[0]} {
		for _, p := range SecretPages(r, i == 1) {
			_, err := r.WriteAt(SecretPage(p, r.PageSize()), int64(p)*int64(r.PageSize()))
			Must(t, err)
		}
	}
}

// SecretPagesIn counts the secret's framebuffer pages r holds.
func SecretPagesIn(t testing.TB, r *memory.Region) int {
	t.Helper()
	n, buf := 0, make([]byte, r.PageSize())
	for _, p := range SecretPages(r, true) {
		_, err := r.ReadAt(buf, int64(p)*int64(r.PageSize()))
		Must(t, err)
		if bytes.Equal(buf, SecretPage(p, len(buf))) {
			n++
		}
	}
	return n
}

// WindowAt records where a vGPU's window lies on its host.
type WindowAt struct {
	gpu, slot, firstPage int
}

func WindowOf(v *vgpu.VGPU) WindowAt {
	return WindowAt{v.GPU().Index(), v.Slot(), v.Framebuffer().FirstPage()}
}

// NextTenantReadsZeros places a new VM of the same profile on host, checks
// that it gets the window at, and that its framebuffer reads zeros at
// every page in pages, or everywhere if pages is nil, and its guest RAM
// everywhere. The tenant is destroyed again.
func NextTenantReadsZeros(t testing.TB, host *vgpu.Host, at WindowAt, pages []int) {
	t.Helper()
	next, err := host.CreateVM(vgpu.VMSpec{ID: "next-tenant", RAMBytes: 16 * MiB, Profiles: []string{"P40-1Q"}})
	Must(t, err)
	defer func() { Must(t, next.Destroy()) }()
	v := next.VGPUs()[0]
	if got := WindowOf(v); got != at {
		t.Fatalf("the next tenant got window %+v, the migrating VM had %+v", got, at)
	}
	fb := v.Framebuffer()
	ps := fb.PageSize()
	if pages == nil {
		ReadsZeros(t, "the next tenant's framebuffer", fb, 0, fb.Size())
	}
	for _, p := range pages {
		ReadsZeros(t, "the next tenant's framebuffer", fb, int64(p)*int64(ps), int64(ps))
	}
	ReadsZeros(t, "the next tenant's guest RAM", next.RAM(), 0, next.RAM().Size())
}

// ReadsZeros fails t unless n bytes of r from off read as zero.
func ReadsZeros(t testing.TB, what string, r *memory.Region, off, n int64) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for end := off + n; off < end; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), end-off)]
		_, err := r.ReadAt(b, off)
		Must(t, err)
		if !memory.IsZero(b) {
			t.Fatalf("%s: bytes from %d are not zero", what, off)
		}
	}
}

// SmallPageHosts are Sparse hosts with 4 KiB framebuffer pages, which the
// oracle dirties at a rate a slow link can follow.
func SmallPageHosts(t testing.TB) (*vgpu.Host, *vgpu.Host) {
	src, err := vgpu.NewHost(vgpu.HostConfig{Name: "src", Memory: memory.Sparse, FramebufferPageSize: 4096, Seed: 1, RAMBytes: 4 * GiB})
	Must(t, err)
	dst, err := vgpu.NewHost(vgpu.HostConfig{Name: "dst", Memory: memory.Sparse, FramebufferPageSize: 4096, Seed: 2, RAMBytes: 4 * GiB})
	Must(t, err)
	return src, dst
}

// OracleWorld is a source running the counter oracle, a destination and a
// third host, all in one Sim; the same arguments build the same world.
// OracleWorld is a source running the counter oracle, a destination and a
// third host, as the simulated fault table builds it (there in one Sim).
type OracleWorld struct {
	Src, Dst, Third *vgpu.Host
	VM              *vgpu.VM
	W               *Counter
}

func NewOracleWorld(t testing.TB, paused bool) *OracleWorld {
	t.Helper()
	src, dst := SmallPageHosts(t)
	third, err := vgpu.NewHost(vgpu.HostConfig{Name: "third", Memory: memory.Sparse, FramebufferPageSize: 4096, Seed: 3,
		RAMBytes: 4 * GiB})
	Must(t, err)
	// 400 pages a second over 200 pages on a 100 Mb/s link: several
	// pre-copy rounds, every page rewritten during the migration.
	w := &Counter{PagesPerSec: 400, Pages: 200}
	vm, err := src.CreateVM(vgpu.VMSpec{ID: "oracle", RAMBytes: 16 * MiB, RAMFootprintBytes: 2 * MiB, Profiles: []string{"P40-1Q"}, Workload: w})
	Must(t, err)
	Must(t, vm.Start())
	for _, h := range []*vgpu.Host{src, dst, third} {
		Must(t, h.Advance(time.Second))
	}
	if paused {
		Must(t, vm.Pause())
	}
	return &OracleWorld{Src: src, Dst: dst, Third: third, VM: vm, W: w}
}

// CheckOneOwner is the invariant that a VM is never lost and never runs
// twice: across hosts at most one copy runs and at least one copy lives
// (created, running, paused or stopped; an incoming copy is not yet one).
func CheckOneOwner(t testing.TB, id string, hosts ...*vgpu.Host) {
	t.Helper()
	running, live := 0, 0
	for _, h := range hosts {
		vm, ok := h.VM(id)
		if !ok {
			continue
		}
		switch vm.State() {
		case vgpu.VMRunning:
			running++
			live++
		case vgpu.VMCreated, vgpu.VMPaused, vgpu.VMStopped:
			live++
		}
	}
	if running > 1 || live == 0 {
		t.Fatalf("VM %q: %d running copies, %d live copies", id, running, live)
	}
}

// CheckSettled is the invariant once no migration of the VM is under way:
// exactly one host holds it.
func CheckSettled(t testing.TB, id string, hosts ...*vgpu.Host) *vgpu.Host {
	t.Helper()
	var at []*vgpu.Host
	for _, h := range hosts {
		if _, ok := h.VM(id); ok {
			at = append(at, h)
		}
	}
	if len(at) != 1 {
		t.Fatalf("VM %q is held by %d hosts", id, len(at))
	}
	return at[0]
}

const (
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)

// Counter is the memory oracle of QEMU's migration tests: it walks
// its pages in order, incrementing a counter at the start of each, in
// guest RAM (after the guest OS footprint) and in the first framebuffer in
// lockstep. At any moment every page holds the same count but one step: the
// pages before the cursor one more than the rest.
type Counter struct {
	PagesPerSec int64 // page writes a second, in each region
	Pages       int   // pages walked in each region
	Pos         int64 // writes done: pass pos/pages, cursor pos%pages
	carry       int64 // page-nanoseconds not yet making a page
	last        time.Duration
	running     bool
	paused      bool
	throttle    float64
	ramFirst    int
}

func (w *Counter) Name() string { return "counter" }

// Running reports whether the workload runs: started and not stopped.
func (w *Counter) Running() bool { return w.running }

func (w *Counter) Start(env *vgpu.Env) error {
	fb, err := env.Framebuffer(0)
	if err != nil {
		return err
	}
	ps := int64(env.RAM().PageSize())
	w.ramFirst = int((env.RAMWorkloadBase() + ps - 1) / ps)
	if w.ramFirst+w.Pages > env.RAM().Pages() || w.Pages > fb.Pages() {
		return errors.New("counter: does not fit")
	}
	w.running, w.paused, w.last = true, false, env.Now()
	return nil
}

func (w *Counter) Pause(*vgpu.Env)          { w.paused = true }
func (w *Counter) Stop(*vgpu.Env)           { w.running = false }
func (w *Counter) NextEvent() time.Duration { return vgpu.NoEvent }
func (w *Counter) Fire(*vgpu.Env) error     { return nil }
func (w *Counter) Shift(d time.Duration)    { w.last += d }
func (w *Counter) Complete(*vgpu.Env, int, sched.Completion) error {
	return nil
}
func (w *Counter) SetThrottle(f float64) error { w.throttle = f; return nil }

// Throttle returns the throttle the VM last gave the workload.
func (w *Counter) Throttle() float64 { return w.throttle }
func (w *Counter) Metrics(from, to time.Duration) vgpu.Metrics {
	return vgpu.Metrics{Workload: "counter", From: from, To: to}
}

func (w *Counter) Resume(env *vgpu.Env) error {
	w.paused, w.last = false, env.Now()
	return nil
}

func (w *Counter) AdvanceTo(env *vgpu.Env, t time.Duration) error {
	if !w.running || w.paused || t <= w.last {
		w.last = max(w.last, t)
		return nil
	}
	rate := int64(float64(w.PagesPerSec) * (1 - w.throttle))
	num := int64(t-w.last)*rate + w.carry
	w.last = t
	n := num / int64(time.Second)
	w.carry = num % int64(time.Second)
	fb, err := env.Framebuffer(0)
	if err != nil {
		return err
	}
	for range n {
		j := int(w.Pos % int64(w.Pages))
		if err := Bump(env.RAM(), w.ramFirst+j); err != nil {
			return err
		}
		if err := Bump(fb, j); err != nil {
			return err
		}
		w.Pos++
	}
	return nil
}

func Bump(r *memory.Region, page int) error {
	var b [8]byte
	off := int64(page) * int64(r.PageSize())
	if _, err := r.ReadAt(b[:], off); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b[:], binary.LittleEndian.Uint64(b[:])+1)
	_, err := r.WriteAt(b[:], off)
	return err
}

// Check verifies the oracle on the regions of vm: pass c+1 before the
// cursor, c from it on.
func (w *Counter) Check(t TB, vm *vgpu.VM) {
	t.Helper()
	c, k := uint64(w.Pos/int64(w.Pages)), int(w.Pos%int64(w.Pages))
	for _, rg := range []struct {
		r     *memory.Region
		first int
	}{{vm.RAM(), w.ramFirst}, {vm.Framebuffers()[0], 0}} {
		var b [8]byte
		for j := range w.Pages {
			_, err := rg.r.ReadAt(b[:], int64(rg.first+j)*int64(rg.r.PageSize()))
			Must(t, err)
			want := c
			if j < k {
				want++
			}
			if got := binary.LittleEndian.Uint64(b[:]); got != want {
				t.Fatalf("%s page %d holds %d, want %d (pass %d, cursor %d)", vm.Host().Name(), j, got, want, c, k)
			}
		}
	}
}

func ImageOf(t testing.TB, vm *vgpu.VM) SourceImage {
	t.Helper()
	img := SourceImage{Digests: RegionDigests(t, vm)}
	var err error
	img.States, err = vm.Snapshots()
	Must(t, err)
	for i := range img.States {
		// The run state is compared on its own: a stun pauses the device
		// and a failure resumes it.
		img.States[i].Registers[vgpu.RegControl] &^= 2
	}
	img.VMState = vm.State()
	return img
}

func CounterVM(t testing.TB, h *vgpu.Host, w *Counter) *vgpu.VM {
	t.Helper()
	vm, err := h.CreateVM(vgpu.VMSpec{ID: "oracle", RAMBytes: 128 * MiB, RAMFootprintBytes: 32 * MiB, Profiles: []string{"P40-1Q"}, Workload: w})
	Must(t, err)
	Must(t, vm.Start())
	return vm
}

// RegionDigests returns the content digests of vm's guest RAM and of each
// framebuffer, in that order.
func RegionDigests(t TB, vm *vgpu.VM) []uint64 {
	t.Helper()
	var out []uint64
	for _, r := range append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...) {
		d, err := r.Digest()
		Must(t, err)
		out = append(out, d)
	}
	return out
}
