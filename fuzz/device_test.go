package fuzz_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// deviceFramebufferPage is the framebuffer page size of every host here. A
// device state does not depend on it, and with 1 MiB pages even a P40-24Q
// window is 24576 pages, so that preparing and scrubbing one costs a
// couple of milliseconds, not the tens it costs at the default size.
const deviceFramebufferPage = 1 << 20

func deviceNewHost(name string, seed uint64) (*vgpu.Host, error) {
	return vgpu.NewHost(vgpu.HostConfig{Name: name, FramebufferPageSize: deviceFramebufferPage, Seed: seed, RAMBytes: 4 * seedGiB})
}

// deviceProfiles are the vGPU types an input's profile byte chooses from:
// every P40 type.
var deviceProfiles = func() []string {
	var out []string
	for _, p := range vgpu.Profiles("P40") {
		if !p.Passthrough {
			out = append(out, p.Name)
		}
	}
	return out
}()

var deviceHost seedSharedHost

// FuzzDeviceRestore restores bytes as the device state of a vGPU the way a
// migration's destination does: it prepares an incoming VM with one vGPU
// of the type the profile byte chooses, restores the state into it and
// resumes it. With reseal set the input's CRC-32C is put right first, so
// that mutants reach the checks behind it. Whatever the bytes, nothing
// panics, and:
//   - DecodeState fails with a *CorruptStateError or ErrStateVersion, or
//     what it decodes encodes back to the same bytes and decodes again to
//     an equal state;
//   - a failed restore is typed, leaves the VM incoming, and once it is
//     aborted the host holds nothing;
//   - a successful restore was of a state that decodes, for this model and
//     type, and the device then holds that state but for its generation
//     ID; what it saves decodes to what it holds; it resumes; and once
//     destroyed the host holds nothing.
func FuzzDeviceRestore(f *testing.F) {
	for i, src := range deviceSeeds(f) {
		f.Add(deviceProfileIndex(src.profile), false, src.state)
		// The same state offered to the next source's type.
		f.Add(deviceProfileIndex(deviceSources[(i+1)%len(deviceSources)].profile), true, src.state)
	}
	f.Fuzz(func(t *testing.T, profile uint8, reseal bool, state []byte) {
		host := deviceHost.get(t, func() (*vgpu.Host, error) { return deviceNewHost("device-dst", 2) })
		if reseal {
			state = deviceReseal(state)
		}
		deviceCheckRestore(t, host, deviceProfiles[int(profile)%len(deviceProfiles)], state)
	})
}

// deviceProfileIndex returns the profile byte that chooses name, one of
// deviceProfiles.
func deviceProfileIndex(name string) uint8 {
	i := slices.Index(deviceProfiles, name)
	if i < 0 {
		panic("not a P40 vGPU type: " + name)
	}
	return uint8(i)
}

var deviceCastagnoli = crc32.MakeTable(crc32.Castagnoli)

// deviceReseal returns a copy of b with its last four bytes the CRC-32C of
// the rest, as a saved state ends.
func deviceReseal(b []byte) []byte {
	b = slices.Clone(b)
	if len(b) >= 4 {
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], deviceCastagnoli))
	}
	return b
}

// deviceIgnoreGeneration compares two states but for the generation ID,
// which a restore replaces.
var deviceIgnoreGeneration = cmpopts.IgnoreFields(vgpu.DeviceState{}, "GenerationID")

// deviceCheckRestore restores state into an incoming VM of host with one
// vGPU of type profile, checks every invariant FuzzDeviceRestore states,
// leaves host holding nothing, and returns the restore's error.
func deviceCheckRestore(t *testing.T, host *vgpu.Host, profile string, state []byte) error {
	t.Helper()
	s, decErr := vgpu.DecodeState(state)
	if decErr != nil {
		var ce *vgpu.CorruptStateError
		if !errors.As(decErr, &ce) && !errors.Is(decErr, vgpu.ErrStateVersion) {
			t.Fatalf("DecodeState: error %v (%T) is neither a *CorruptStateError nor ErrStateVersion", decErr, decErr)
		}
	} else {
		again, err := vgpu.EncodeState(nil, s)
		if err != nil || string(again) != string(state) {
			t.Fatalf("a decoded state encodes to other bytes (%d, want %d) or fails: %v", len(again), len(state), err)
		}
		s2, err := vgpu.DecodeState(again)
		if diff := cmp.Diff(s, s2); err != nil || diff != "" {
			t.Fatalf("decoding a re-encoded state: %v\n%s", err, diff)
		}
	}
	in, err := host.PrepareIncoming(vgpu.IncomingSpec{ID: "device-in", Seed: 9, RAMBytes: 64 << 10, RAMPageSize: host.Config().RAMPageSize,
		FramebufferPageSize: deviceFramebufferPage, GPUModel: "P40", Profiles: []string{profile}})
	seedMust(t, err)
	// What a destination that checks the state must find wrong before
	// anything else: another GPU model, then another type.
	var mismatch string
	switch {
	case decErr != nil:
	case s.GPUModel != "P40":
		mismatch = "GPU model"
	case s.Profile != profile:
		mismatch = "profile"
	}
	restoreErr := in.Restore([][]byte{state})
	if restoreErr != nil {
		deviceCheckFailure(t, restoreErr, decErr, mismatch)
		if st := in.State(); st != vgpu.VMIncoming {
			t.Fatalf("after a failed restore (%v) the VM is %v, want incoming", restoreErr, st)
		}
		seedMust(t, in.Abort())
		seedHoldsNothing(t, host)
		return restoreErr
	}
	if decErr != nil || mismatch != "" {
		t.Fatalf("restored a state that does not decode (%v) or is for another %s (%s %s on a %s)",
			decErr, mismatch, s.GPUModel, s.Profile, profile)
	}
	snaps, err := in.Snapshots()
	seedMust(t, err)
	if diff := cmp.Diff(s, snaps[0], deviceIgnoreGeneration); diff != "" {
		t.Fatalf("the restored device holds another state (-saved +device):\n%s", diff)
	}
	saved, err := in.VGPUs()[0].SaveState(nil)
	seedMust(t, err)
	back, err := vgpu.DecodeState(saved)
	seedMust(t, err)
	if diff := cmp.Diff(snaps[0], back); diff != "" {
		t.Fatalf("the restored device saves another state than it holds:\n%s", diff)
	}
	seedMust(t, in.Resume())
	seedMust(t, in.Destroy())
	seedHoldsNothing(t, host)
	return nil
}

// deviceCheckFailure checks that a failed restore's error says what is
// wrong: what DecodeState said of a state that does not decode, an
// *IncompatibleStateError naming the field of a state for another device,
// and otherwise one of the package's state errors.
func deviceCheckFailure(t *testing.T, err, decErr error, mismatch string) {
	t.Helper()
	var ie *vgpu.IncompatibleStateError
	switch {
	case decErr != nil:
		if !errors.Is(err, vgpu.ErrCorruptState) && !errors.Is(err, vgpu.ErrStateVersion) {
			t.Fatalf("restoring a state that does not decode (%v): error %v", decErr, err)
		}
	case mismatch != "":
		if !errors.As(err, &ie) || ie.Field != mismatch {
			t.Fatalf("restoring a state for another %s: error %v, want an *IncompatibleStateError of that field", mismatch, err)
		}
	case !errors.Is(err, vgpu.ErrCorruptState) && !errors.Is(err, vgpu.ErrIncompatibleState) && !errors.Is(err, vgpu.ErrStateVersion):
		t.Fatalf("restore error %v (%T) is none of the package's state errors", err, err)
	}
}

// deviceMutant is a way of spoiling a saved state, and how its restore
// must fail.
type deviceMutant struct {
	name string
	// mutate returns the mutant of b, which decodes to s; resealed mutants
	// have their CRC-32C put right, so that a check behind it fails.
	mutate func(b []byte, s vgpu.DeviceState) ([]byte, error)
	// other says the destination prepares a vGPU of another type than
	// the state's.
	other bool
	// want is the sentinel the restore's error wraps, nil for a state
	// that restores; field, the *IncompatibleStateError's field.
	want  error
	field string
}

// deviceReencoded returns a mutant that changes a field of the decoded
// state and encodes it again.
func deviceReencoded(change func(s *vgpu.DeviceState)) func([]byte, vgpu.DeviceState) ([]byte, error) {
	return func(_ []byte, s vgpu.DeviceState) ([]byte, error) {
		s.Channels, s.Contexts, s.Sched = slices.Clone(s.Channels), slices.Clone(s.Contexts), slices.Clone(s.Sched)
		change(&s)
		return vgpu.EncodeState(nil, s)
	}
}

// deviceResealed returns a mutant that changes the saved bytes and puts
// the CRC-32C right.
func deviceResealed(change func(b []byte)) func([]byte, vgpu.DeviceState) ([]byte, error) {
	return func(b []byte, _ vgpu.DeviceState) ([]byte, error) {
		b = slices.Clone(b)
		change(b)
		return deviceReseal(b), nil
	}
}

// deviceChannelsOff is the offset of a saved state's channel count
// (vgpu.DeviceState documents the layout).
func deviceChannelsOff(b []byte) int {
	model := 16
	profile := model + 1 + int(b[model])
	return profile + 1 + int(b[profile]) + vgpu.PCIConfigBytes + 4*vgpu.NumRegisters
}

var deviceMutants = []deviceMutant{
	{name: "as-saved", mutate: func(b []byte, _ vgpu.DeviceState) ([]byte, error) { return b, nil }},
	{name: "empty", mutate: func([]byte, vgpu.DeviceState) ([]byte, error) { return nil, nil }, want: vgpu.ErrCorruptState},
	{name: "truncated", mutate: func(b []byte, _ vgpu.DeviceState) ([]byte, error) { return vgpusimtest.Truncate(b, len(b)-1) },
		want: vgpu.ErrCorruptState},
	// The top bit of the CRC-32C's last byte.
	{name: "checksum", mutate: func(b []byte, _ vgpu.DeviceState) ([]byte, error) { return vgpusimtest.Flip(b, 8*int64(len(b))-1) },
		want: vgpu.ErrCorruptState},
	{name: "magic", mutate: deviceResealed(func(b []byte) { b[0] = 'X' }), want: vgpu.ErrCorruptState},
	{name: "version", mutate: deviceResealed(func(b []byte) { binary.LittleEndian.PutUint16(b[4:], vgpu.StateVersion+1) }), want: vgpu.ErrStateVersion},
	{name: "flags", mutate: deviceResealed(func(b []byte) { b[6] = 1 }), want: vgpu.ErrCorruptState},
	{name: "channel-ids-repeat", mutate: deviceResealed(func(b []byte) {
		first := deviceChannelsOff(b) + 2
		copy(b[first+24:first+28], b[first:first+4])
	}), want: vgpu.ErrCorruptState},
	{name: "channel-count-past-end", mutate: deviceResealed(func(b []byte) {
		binary.LittleEndian.PutUint16(b[deviceChannelsOff(b):], vgpu.MaxChannels)
	}), want: vgpu.ErrCorruptState},
	{name: "other-profile", other: true, mutate: func(b []byte, _ vgpu.DeviceState) ([]byte, error) { return b, nil },
		want: vgpu.ErrIncompatibleState, field: "profile"},
	{name: "other-model", mutate: deviceReencoded(func(s *vgpu.DeviceState) { s.GPUModel = "V100" }),
		want: vgpu.ErrIncompatibleState, field: "GPU model"},
	{name: "gpfifo-outside", mutate: deviceReencoded(func(s *vgpu.DeviceState) {
		p, _ := vgpu.ParseProfile(s.Profile)
		s.Channels[0].GPFIFOOffset = uint64(p.FramebufferBytes)
	}), want: vgpu.ErrCorruptState},
	{name: "page-tables-outside", mutate: deviceReencoded(func(s *vgpu.DeviceState) { s.Contexts[0].PageTableRoot = 1 << 62 }),
		want: vgpu.ErrCorruptState},
	{name: "sched-truncated", mutate: deviceReencoded(func(s *vgpu.DeviceState) { s.Sched = s.Sched[:len(s.Sched)-1] }),
		want: vgpu.ErrCorruptState},
	{name: "model-lower-case", mutate: deviceReencoded(func(s *vgpu.DeviceState) { s.GPUModel = "p40" }),
		want: vgpu.ErrIncompatibleState, field: "GPU model"},
	// A state that names its profile but shows the guest another's PCI
	// subsystem and framebuffer size.
	{name: "identity-of-another-profile", mutate: deviceReencoded(func(s *vgpu.DeviceState) {
		s.PCIConfig[0x2e] ^= 1
		s.Registers[vgpu.RegFramebufferMiB] *= 2
	}), want: vgpu.ErrCorruptState},
	{name: "generation", mutate: deviceReencoded(func(s *vgpu.DeviceState) { s.GenerationID ^= 1 })},
}

// deviceMutantSource is the source whose mutants are committed corpus
// files: an inference service that has submitted and completed requests
// and has one queued in its scheduler state.
const deviceMutantSource = "P40-4Q-inference"

// TestDeviceRestoreSeeds checks the documented outcome of restoring every
// source's state, and each of deviceMutants of it, through
// deviceCheckRestore (which checks FuzzDeviceRestore's invariants too). It
// keeps the committed corpus files (each source's state, and the mutants
// of deviceMutantSource's) equal to what the generators make, and
// rewrites them with -update-seeds.
func TestDeviceRestoreSeeds(t *testing.T) {
	host, err := deviceNewHost("device-check", 3)
	seedMust(t, err)
	// An idle device's scheduler state is the shortest there is: no job
	// queued.
	idleSched := -1
	for _, src := range deviceSeeds(t) {
		if s, err := vgpu.DecodeState(src.state); err == nil && src.make == nil {
			idleSched = len(s.Sched)
		}
	}
	for i, src := range deviceSeeds(t) {
		s, err := vgpu.DecodeState(src.state)
		seedMust(t, err)
		if len(s.Channels) < 2 || len(s.Contexts) == 0 {
			t.Fatalf("%v: the saved state has %d channels and %d contexts", src, len(s.Channels), len(s.Contexts))
		}
		if src.String() == deviceMutantSource && (s.Registers[vgpu.RegCompleted] == 0 || len(s.Sched) <= idleSched) {
			t.Fatalf("%v: no completed work (%d) or nothing queued (%d bytes of scheduler state, idle %d)",
				src, s.Registers[vgpu.RegCompleted], len(s.Sched), idleSched)
		}
		for _, m := range deviceMutants {
			b, err := m.mutate(src.state, s)
			seedMust(t, err)
			profile := src.profile
			if m.other {
				profile = deviceSources[(i+1)%len(deviceSources)].profile
			}
			err = deviceCheckRestore(t, host, profile, b)
			var ie *vgpu.IncompatibleStateError
			switch {
			case m.want == nil && err != nil:
				t.Errorf("%v, %s: restore failed: %v", src, m.name, err)
			case m.want != nil && !errors.Is(err, m.want):
				t.Errorf("%v, %s: error %v, want %v", src, m.name, err, m.want)
			case m.field != "" && (!errors.As(err, &ie) || ie.Field != m.field):
				t.Errorf("%v, %s: error %v, want an *IncompatibleStateError of field %q", src, m.name, err, m.field)
			}
			if src.String() == deviceMutantSource || m.name == "as-saved" {
				name := src.String()
				if m.name != "as-saved" {
					name += "-" + m.name
				}
				seedSyncCorpus(t, "FuzzDeviceRestore", name, deviceProfileIndex(profile), false, b)
			}
		}
	}
}
