package vgpu

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vgpusim/vgpusim/sched"
	"pgregory.net/rapid"
)

// busyVM returns a VM that has run an inference workload for a while and
// is paused with work queued: its device state has everything in it.
func busyVM(t tb, h *Host, id, profile string) *VM {
	t.Helper()
	w, err := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: 2000, WeightsBytes: 16 * MiB, ActivationsBytes: 8 * MiB, RAMWorkingSetBytes: 16 * MiB, Seed: 5})
	must(t, err)
	vm := mustVM(t, h, VMSpec{ID: id, RAMBytes: 256 * MiB, Profiles: []string{profile}, Workload: w})
	must(t, vm.Start())
	advance(t, h, 50*time.Millisecond+123457)
	must(t, vm.Pause())
	return vm
}

func TestStateEncoding(t *testing.T) {
	h := newHost(t, HostConfig{})
	vm := busyVM(t, h, "vm", "P40-1Q")
	b, err := vm.VGPUs()[0].SaveState(nil)
	must(t, err)
	s, err := DecodeState(b)
	must(t, err)
	snap, err := vm.VGPUs()[0].Snapshot()
	must(t, err)
	if diff := cmp.Diff(snap, s); diff != "" {
		t.Fatalf("decoded state differs from the snapshot:\n%s", diff)
	}
	if len(s.Channels) != 3 || len(s.Contexts) != 1 || s.Registers[RegSubmitted] == 0 || s.Registers[RegCompleted] == 0 {
		t.Errorf("state lacks activity: %+v", s.Registers[:8])
	}
	info, _ := vm.VGPUs()[0].GPU().Scheduler().Tenant(vm.VGPUs()[0].Tenant())
	if info.Queued == 0 || len(s.Sched) != 40+48*info.Queued {
		t.Errorf("%d queued jobs, %d bytes of scheduler state", info.Queued, len(s.Sched))
	}
	again, err := EncodeState(nil, s)
	must(t, err)
	if !bytes.Equal(again, b) {
		t.Fatal("decode then encode changed the bytes")
	}
	if s.Diff(snap) != nil {
		t.Errorf("Diff of equal states: %v", s.Diff(snap))
	}
	s2 := s
	s2.Profile, s2.Registers[3] = "P40-2Q", 9
	if d := s.Diff(s2); !slices.Equal(d, []string{"Profile", "Registers"}) {
		t.Errorf("Diff = %v", d)
	}
	if len(b) > MaxStateBytes || MaxStateBytes > 4<<20 {
		t.Errorf("state %d bytes, limit %d", len(b), MaxStateBytes)
	}
}

// TestSaveRestoreSave: a checkpoint restored on another host saves back to
// the same state but for the generation ID, and two restores of one
// checkpoint get different generation IDs.
func TestSaveRestoreSave(t *testing.T) {
	src := newHost(t, HostConfig{Name: "src", Seed: 1})
	vm := busyVM(t, src, "vm", "P40-2Q")
	states, err := vm.SaveDeviceStates()
	must(t, err)
	gens := map[uint64]bool{vm.VGPUs()[0].GenerationID(): true}
	for _, name := range []string{"dst1", "dst2"} {
		dst := newHost(t, HostConfig{Name: name, Seed: 2, Start: time.Hour})
		in, err := dst.PrepareIncoming(vm.IncomingSpec())
		must(t, err)
		must(t, in.Restore(states))
		if in.State() != VMPaused || in.VGPUs()[0].State() != DevicePaused {
			t.Fatalf("restored VM %v, vGPU %v", in.State(), in.VGPUs()[0].State())
		}
		again, err := in.SaveDeviceStates()
		must(t, err)
		a, _ := DecodeState(states[0])
		b, _ := DecodeState(again[0])
		if d := a.Diff(b); !slices.Equal(d, []string{"GenerationID"}) {
			t.Errorf("%s: save, restore, save differs in %v", name, d)
		}
		if diff := cmp.Diff(a, b, cmpopts.IgnoreFields(DeviceState{}, "GenerationID")); diff != "" {
			t.Errorf("%s:\n%s", name, diff)
		}
		g := in.VGPUs()[0].GenerationID()
		if gens[g] || g != b.GenerationID {
			t.Errorf("%s: generation %x not new", name, g)
		}
		gens[g] = true
		// Restoring the same checkpoint again on the same host gives yet
		// another generation.
		must(t, in.Restore(states))
		if g2 := in.VGPUs()[0].GenerationID(); gens[g2] {
			t.Errorf("%s: second restore reuses generation %x", name, g2)
		} else {
			gens[g2] = true
		}
	}
}

// corrupt returns b with its checksum recomputed after f changed it, so
// that the field checks behind the checksum are reached.
func corrupt(b []byte, f func([]byte) []byte) []byte {
	c := f(slices.Clone(b))
	body := len(c) - 4
	if body < 0 {
		return c
	}
	le.PutUint32(c[body:], crc32c(c[:body]))
	return c
}

func TestStateCorruption(t *testing.T) {
	h := newHost(t, HostConfig{})
	vm := busyVM(t, h, "vm", "P40-3Q")
	good, err := vm.VGPUs()[0].SaveState(nil)
	must(t, err)
	s, _ := DecodeState(good)
	reencode := func(f func(*DeviceState)) []byte {
		c := s
		c.Channels, c.Contexts, c.Sched = slices.Clone(s.Channels), slices.Clone(s.Contexts), slices.Clone(s.Sched)
		f(&c)
		b, err := EncodeState(nil, c)
		must(t, err)
		return b
	}
	modelOff := 16
	chanCountOff := 16 + 1 + len(s.GPUModel) + 1 + len(s.Profile) + PCIConfigBytes + 4*NumRegisters
	tests := []struct {
		name string
		b    []byte
		want error
		off  int // expected CorruptStateError offset, -1 to skip
	}{
		{"empty", nil, ErrCorruptState, 0},
		{"short magic", good[:3], ErrCorruptState, 3},
		{"bad magic", corrupt(good, func(b []byte) []byte { b[0] = 'X'; return b }), ErrCorruptState, 0},
		{"version 2", corrupt(good, func(b []byte) []byte { b[4] = 2; return b }), ErrStateVersion, -1},
		{"truncated", good[:len(good)-1], ErrCorruptState, -1},
		{"truncated header", good[:40], ErrCorruptState, 40},
		{"bit flip", func() []byte { b := slices.Clone(good); b[100] ^= 1; return b }(), ErrCorruptState, len(good) - 4},
		{"flags", corrupt(good, func(b []byte) []byte { b[6] = 1; return b }), ErrCorruptState, 6},
		{"model name", corrupt(good, func(b []byte) []byte { b[modelOff+1] = 0; return b }), ErrCorruptState, modelOff},
		{"channel count", corrupt(good, func(b []byte) []byte { b[chanCountOff] = 200; return b }), ErrCorruptState, chanCountOff},
		{"trailing bytes", corrupt(append(slices.Clone(good[:len(good)-4]), 0, 0, 0, 0, 0), func(b []byte) []byte { return b }), ErrCorruptState, -1},
		{"channel order", reencode(func(c *DeviceState) { c.Channels[1].ID = 0 }), ErrCorruptState, -1},
		{"engine", corrupt(good, func(b []byte) []byte { b[chanCountOff+2+4] = 9; return b }), ErrCorruptState, chanCountOff + 2 + 4},
		{"padding", corrupt(good, func(b []byte) []byte { b[chanCountOff+2+5] = 1; return b }), ErrCorruptState, chanCountOff + 2 + 5},
		{"oversize", make([]byte, MaxStateBytes+1), ErrCorruptState, MaxStateBytes},
		{"other model", reencode(func(c *DeviceState) { c.GPUModel = "T4" }), ErrIncompatibleState, -1},
		{"other profile", reencode(func(c *DeviceState) { c.Profile = "P40-3A" }), ErrIncompatibleState, -1},
		{"model in other case", reencode(func(c *DeviceState) { c.GPUModel = strings.ToLower(c.GPUModel) }), ErrIncompatibleState, -1},
		{"PCI device ID", reencode(func(c *DeviceState) { c.PCIConfig[0x02]++ }), ErrCorruptState, -1},
		{"PCI subsystem ID", reencode(func(c *DeviceState) { c.PCIConfig[0x2e]++ }), ErrCorruptState, -1},
		{"framebuffer register", reencode(func(c *DeviceState) { c.Registers[RegFramebufferMiB] *= 2 }), ErrCorruptState, -1},
		{"subsystem register", reencode(func(c *DeviceState) { c.Registers[RegSubsystem]++ }), ErrCorruptState, -1},
		{"boot register", reencode(func(c *DeviceState) { c.Registers[RegBoot0]++ }), ErrCorruptState, -1},
		{"GPFIFO outside", reencode(func(c *DeviceState) { c.Channels[0].GPFIFOOffset = 3 << 30 }), ErrCorruptState, -1},
		{"page tables outside", reencode(func(c *DeviceState) { c.Contexts[0].PageTableRoot = 1 << 40 }), ErrCorruptState, -1},
		{"scheduler bytes", reencode(func(c *DeviceState) { c.Sched[10] ^= 0xff }), ErrCorruptState, -1},
		{"scheduler profile", reencode(func(c *DeviceState) { c.Sched = schedStateFor(t, 24) }), ErrIncompatibleState, -1},
	}
	target := newHost(t, HostConfig{})
	in, err := target.PrepareIncoming(vm.IncomingSpec())
	must(t, err)
	v := in.VGPUs()[0]
	before, _ := v.Snapshot()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := v.RestoreState(tc.b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			var ce *CorruptStateError
			if tc.off >= 0 && errors.As(err, &ce) && ce.Offset != tc.off {
				t.Errorf("offset %d, want %d: %v", ce.Offset, tc.off, err)
			}
			if errors.Is(tc.want, ErrIncompatibleState) && !errors.Is(err, ErrIncompatibleState) {
				t.Errorf("not an incompatibility: %v", err)
			}
			after, _ := v.Snapshot()
			if diff := cmp.Diff(before, after); diff != "" || v.State() != DeviceCreated {
				t.Fatalf("a failed restore changed the device (%v):\n%s", v.State(), diff)
			}
		})
	}
	// The VM-level restore is all or nothing, and checks the count.
	if err := in.Restore(nil); !errors.Is(err, ErrIncompatibleState) {
		t.Errorf("restore of no state: %v", err)
	}
	// A running device refuses a restore before looking further than the
	// profile.
	running := busyVM(t, target, "r", "P40-3Q")
	must(t, running.Resume())
	if err := running.VGPUs()[0].RestoreState(good); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("restore into a running vGPU: %v", err)
	}
	if _, err := running.VGPUs()[0].SaveState(nil); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("save of a running vGPU: %v", err)
	}
}

// schedStateFor returns a valid scheduler state of a tenant of another
// profile (maxInstances).
func schedStateFor(t tb, maxInstances int) []byte {
	s, err := sched.New(sched.Config{})
	must(t, err)
	id, err := s.AddTenant(maxInstances)
	must(t, err)
	b, err := s.SaveTenant(nil, id)
	must(t, err)
	return b
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// TestStateRoundTripProperty: any state within the limits encodes and
// decodes to itself, and the encoding is canonical.
func TestStateRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.StringMatching(`[!-~]{1,32}`)
		s := DeviceState{Version: StateVersion, GPUModel: name.Draw(rt, "model"), Profile: name.Draw(rt, "profile"),
			GenerationID: rapid.Uint64().Draw(rt, "gen")}
		copy(s.PCIConfig[:], rapid.SliceOfN(rapid.Byte(), PCIConfigBytes, PCIConfigBytes).Draw(rt, "pci"))
		for i := range s.Registers {
			s.Registers[i] = rapid.Uint32().Draw(rt, "reg")
		}
		id := uint32(0)
		for range rapid.IntRange(0, MaxChannels).Draw(rt, "channels") {
			id += rapid.Uint32Range(1, 1000).Draw(rt, "id")
			s.Channels = append(s.Channels, Channel{ID: id, Engine: Engine(rapid.IntRange(1, 3).Draw(rt, "e")),
				GPFIFOOffset: rapid.Uint64().Draw(rt, "gp"), Put: rapid.Uint32().Draw(rt, "put"), Get: rapid.Uint32().Draw(rt, "get")})
		}
		id = 0
		for range rapid.IntRange(0, MaxContexts).Draw(rt, "contexts") {
			id += rapid.Uint32Range(1, 1000).Draw(rt, "id")
			s.Contexts = append(s.Contexts, Context{ID: id, Engine: Engine(rapid.IntRange(1, 3).Draw(rt, "e")), PageTableRoot: rapid.Uint64().Draw(rt, "pt")})
		}
		if n := rapid.IntRange(0, 300).Draw(rt, "sched"); n > 0 {
			s.Sched = rapid.SliceOfN(rapid.Byte(), n, n).Draw(rt, "schedBytes")
		}
		b, err := EncodeState(nil, s)
		if err != nil {
			rt.Fatal(err)
		}
		got, err := DecodeState(b)
		if err != nil {
			rt.Fatal(err)
		}
		if diff := cmp.Diff(s, got); diff != "" {
			rt.Fatal(diff)
		}
		again, _ := EncodeState(nil, got)
		if !bytes.Equal(again, b) {
			rt.Fatal("not canonical")
		}
	})
}

// TestRestoreProperty: after random activity and a stun, a VM restored on
// another host has every vGPU's state equal to the source's but for the
// generation, and runs on.
func TestRestoreProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		profile := rapid.SampledFrom([]string{"P40-1Q", "P40-4C", "P40-8Q", "P40-24Q"}).Draw(rt, "profile")
		src := newHost(rt, HostConfig{Name: "src", Seed: rapid.Uint64().Draw(rt, "seed"), FramebufferPageSize: 1 << 20, RAMPageSize: 64 << 10})
		w, err := NewInference(InferenceConfig{Model: MobileNet(), RequestsPerSec: float64(rapid.IntRange(10, 5000).Draw(rt, "rate")),
			WeightsBytes: 8 * MiB, ActivationsBytes: 4 * MiB, RAMWorkingSetBytes: 8 * MiB, Seed: rapid.Uint64().Draw(rt, "wseed")})
		must(rt, err)
		vm := mustVM(rt, src, VMSpec{ID: "vm", RAMBytes: 64 * MiB, Profiles: []string{profile}, Workload: w})
		must(rt, vm.Start())
		advance(rt, src, time.Duration(rapid.Int64Range(0, 200e6).Draw(rt, "run")))
		must(rt, vm.Pause())
		states, err := vm.SaveDeviceStates()
		must(rt, err)
		dst := newHost(rt, HostConfig{Name: "dst", Start: time.Duration(rapid.Int64Range(0, 1e12).Draw(rt, "start")), FramebufferPageSize: 1 << 20, RAMPageSize: 64 << 10})
		in, err := dst.PrepareIncoming(vm.IncomingSpec())
		must(rt, err)
		must(rt, vm.HandOverWorkload(in))
		must(rt, in.Restore(states))
		a, _ := vm.Snapshots()
		b, _ := in.Snapshots()
		if d := a[0].Diff(b[0]); !slices.Equal(d, []string{"GenerationID"}) {
			rt.Fatalf("states differ in %v", d)
		}
		must(rt, in.Resume())
		must(rt, vm.Destroy())
		advance(rt, dst, time.Second)
		if m := in.Workload().Metrics(dst.Now()-time.Second, dst.Now()); m.Completed == 0 {
			rt.Fatalf("nothing completed after the restore: %v", m)
		}
	})
}

// FuzzRestoreState restores arbitrary bytes into a vGPU: it must never
// panic; whatever decodes must encode back to the same bytes; a state that
// restores must save back equal but for the generation.
func FuzzRestoreState(f *testing.F) {
	h, err := NewHost(HostConfig{})
	if err != nil {
		f.Fatal(err)
	}
	vm := busyVM(f, h, "vm", "P40-4Q")
	good, err := vm.VGPUs()[0].SaveState(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("VGPU\x01\x00"))
	in, err := h.PrepareIncoming(IncomingSpec{ID: "in", Seed: 9, RAMBytes: 64 * MiB, RAMPageSize: DefaultRAMPageSize,
		FramebufferPageSize: DefaultFramebufferPageSize, GPUModel: "P40", Profiles: []string{"P40-4Q"}})
	if err != nil {
		f.Fatal(err)
	}
	v := in.VGPUs()[0]
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeState(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptState) && !errors.Is(err, ErrStateVersion) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := EncodeState(nil, s)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding: %v", err)
		}
		before, _ := v.Snapshot()
		if err := v.RestoreState(b); err != nil {
			if !errors.Is(err, ErrCorruptState) && !errors.Is(err, ErrIncompatibleState) && !errors.Is(err, ErrStateVersion) {
				t.Fatalf("untyped restore error %v", err)
			}
			after, _ := v.Snapshot()
			if diff := cmp.Diff(before, after); diff != "" {
				t.Fatalf("failed restore changed the device:\n%s", diff)
			}
			return
		}
		got, err := v.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if d := s.Diff(got); len(d) > 1 || len(d) == 1 && d[0] != "GenerationID" {
			t.Fatalf("restored state differs in %v", d)
		}
	})
}

// TestWriteFuzzCorpus regenerates the seed corpus of FuzzRestoreState under
// testdata/fuzz when VGPU_WRITE_CORPUS is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("VGPU_WRITE_CORPUS") == "" {
		t.Skip("set VGPU_WRITE_CORPUS=1 to regenerate the corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzRestoreState")
	must(t, os.MkdirAll(dir, 0o755))
	h := newHost(t, HostConfig{GPUs: 3})
	for i, p := range []string{"P40-4Q", "P40-1Q", "P40-24C"} {
		vm := busyVM(t, h, fmt.Sprint("vm", i), p)
		b, err := vm.VGPUs()[0].SaveState(nil)
		must(t, err)
		for j, c := range [][]byte{b, b[:len(b)-1], corrupt(b, func(x []byte) []byte { x[6] = 1; return x })} {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", c)
			must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%s-%d", p, j)), []byte(body), 0o644))
		}
	}
}
