package sched

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// RmPVMRL values as NVIDIA's vGPU user guides document them, decoded.
func TestDecodeRmPVMRL(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		fact   string
		value  uint32
		layout Layout
		want   Config
	}{
		// Legacy layout 0x00TT00PP (P40-era releases, no strict round-robin).
		{"legacy 0x00: best effort, profile default slice", 0x00000000, LayoutLegacy,
			Config{Policy: BestEffort, AveragingFactor: 33}},
		{"legacy 0x01: equal share, profile default slice", 0x00000001, LayoutLegacy,
			Config{Policy: EqualShare, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"legacy 0x11: fixed share, profile default slice", 0x00000011, LayoutLegacy,
			Config{Policy: FixedShare, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"legacy 0x000A0001: equal share, TT=0x0A slice 10 ms", 0x000A0001, LayoutLegacy,
			Config{Policy: EqualShare, Slice: 10 * ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"legacy 0x00010011: fixed share, TT=0x01 slice 1 ms", 0x00010011, LayoutLegacy,
			Config{Policy: FixedShare, Slice: ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"legacy 0x001E0011: fixed share, TT=0x1E slice 30 ms", 0x001E0011, LayoutLegacy,
			Config{Policy: FixedShare, Slice: 30 * ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"legacy 0x001F0001: TT above 0x1E capped at 30 ms", 0x001F0001, LayoutLegacy,
			Config{Policy: EqualShare, Slice: 30 * ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"legacy 0x00FF0000: best effort, TT=0xFF capped at 30 ms", 0x00FF0000, LayoutLegacy,
			Config{Policy: BestEffort, Slice: 30 * ms, AveragingFactor: 33}},

		// Round-robin layout 0xAAFFF0PP (strict round-robin) ...
		{"round-robin 0x01: equal share, AA 0 -> 33, FFF 0 -> profile default", 0x00000001, LayoutRoundRobin,
			Config{Policy: EqualShare, AveragingFactor: 33}},
		{"round-robin 0x11: fixed share, strict", 0x00000011, LayoutRoundRobin,
			Config{Policy: FixedShare, AveragingFactor: 33}},
		{"round-robin 0x1E1E0001: AA=30, FFF=0x1E0 480 Hz", 0x1E1E0001, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: time.Second / 480, AveragingFactor: 30}},
		{"round-robin 0x3C3C0011: AA=60, FFF=0x3C0 960 Hz", 0x3C3C0011, LayoutRoundRobin,
			Config{Policy: FixedShare, Slice: time.Second / 960, AveragingFactor: 60}},
		{"round-robin 0x0103F001: AA=1, FFF=0x03F 63 Hz, the lowest", 0x0103F001, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: time.Second / 63, AveragingFactor: 1}},
		{"round-robin 0x00001011: FFF=0x001 raised to 63 Hz", 0x00001011, LayoutRoundRobin,
			Config{Policy: FixedShare, Slice: time.Second / 63, AveragingFactor: 33}},
		{"round-robin 0x0003E001: FFF=0x03E raised to 63 Hz", 0x0003E001, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: time.Second / 63, AveragingFactor: 33}},
		{"round-robin 0x003C1001: FFF=0x3C1 capped at 960 Hz", 0x003C1001, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: time.Second / 960, AveragingFactor: 33}},
		{"round-robin 0xFFFFF011: AA=0xFF capped at 60, FFF=0xFFF capped at 960 Hz", 0xFFFFF011, LayoutRoundRobin,
			Config{Policy: FixedShare, Slice: time.Second / 960, AveragingFactor: 60}},
		{"round-robin 0x3D000001: AA=0x3D capped at 60", 0x3D000001, LayoutRoundRobin,
			Config{Policy: EqualShare, AveragingFactor: 60}},
		{"round-robin 0x00000000: best effort (the driver default)", 0x00000000, LayoutRoundRobin,
			Config{Policy: BestEffort, AveragingFactor: 33}},
		// ... and 0x00TT00PP with PP 0x03 / 0x13: strict round-robin off.
		{"round-robin 0x03: equal share without strict round-robin", 0x00000003, LayoutRoundRobin,
			Config{Policy: EqualShare, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"round-robin 0x00050013: fixed share without strict round-robin, TT 5 ms", 0x00050013, LayoutRoundRobin,
			Config{Policy: FixedShare, Slice: 5 * ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"round-robin 0x00400003: TT=0x40 capped at 30 ms", 0x00400003, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: 30 * ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"round-robin 0x13: fixed share without strict round-robin, profile default slice", 0x00000013, LayoutRoundRobin,
			Config{Policy: FixedShare, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"round-robin 0x00010003: TT=0x01 slice 1 ms", 0x00010003, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"round-robin 0x001E0013: TT=0x1E slice 30 ms", 0x001E0013, LayoutRoundRobin,
			Config{Policy: FixedShare, Slice: 30 * ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"round-robin 0x001F0013: TT=0x1F capped at 30 ms", 0x001F0013, LayoutRoundRobin,
			Config{Policy: FixedShare, Slice: 30 * ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"round-robin 0x00FF0003: TT=0xFF capped at 30 ms", 0x00FF0003, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: 30 * ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"round-robin 0x3C000011: AA=0x3C, 60, the highest", 0x3C000011, LayoutRoundRobin,
			Config{Policy: FixedShare, AveragingFactor: 60}},
		{"round-robin 0x0003F011: FFF=0x03F 63 Hz kept", 0x0003F011, LayoutRoundRobin,
			Config{Policy: FixedShare, Slice: time.Second / 63, AveragingFactor: 33}},
		{"round-robin 0x003C0011: FFF=0x3C0 960 Hz kept", 0x003C0011, LayoutRoundRobin,
			Config{Policy: FixedShare, Slice: time.Second / 960, AveragingFactor: 33}},
	} {
		t.Run(tc.fact, func(t *testing.T) {
			got, err := DecodeRmPVMRL(tc.value, tc.layout)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("DecodeRmPVMRL(%#08x, %s) = %+v, want %+v", tc.value, tc.layout, got, tc.want)
			}
			if _, err := New(got); err != nil {
				t.Fatalf("decoded config is not valid: %v", err)
			}
		})
	}
}

// Values outside the documented ones are typed errors.
func TestDecodeRmPVMRLRejects(t *testing.T) {
	for _, tc := range []struct {
		fact   string
		value  uint32
		layout Layout
	}{
		{"legacy PP 0x02 is no policy", 0x00000002, LayoutLegacy},
		{"legacy PP 0x03 exists only in the round-robin layout", 0x00000003, LayoutLegacy},
		{"legacy PP 0x13 exists only in the round-robin layout", 0x00000013, LayoutLegacy},
		{"legacy PP 0x10 is no policy", 0x00000010, LayoutLegacy},
		{"legacy has no AA field (bits 31-24)", 0x21000001, LayoutLegacy},
		{"legacy has nothing in bits 15-8", 0x00000101, LayoutLegacy},
		{"round-robin PP 0x21 is no policy", 0x00000021, LayoutRoundRobin},
		{"round-robin PP 0xFF is no policy", 0x000000FF, LayoutRoundRobin},
		{"round-robin has nothing in bits 11-8", 0x00000801, LayoutRoundRobin},
		{"round-robin 0x03 has no AA field", 0x21000003, LayoutRoundRobin},
		{"round-robin 0x13 has nothing in bits 15-8", 0x00000113, LayoutRoundRobin},
		{"unknown layout", 0x00000001, 0},
	} {
		t.Run(tc.fact, func(t *testing.T) {
			_, err := DecodeRmPVMRL(tc.value, tc.layout)
			var re *RmPVMRLError
			if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRmPVMRL) {
				t.Fatalf("DecodeRmPVMRL(%#08x, %s) = %v, want an *RmPVMRLError", tc.value, tc.layout, err)
			}
			if re.Value != tc.value || re.Layout != tc.layout {
				t.Fatalf("error carries %#08x/%s", re.Value, re.Layout)
			}
		})
	}
}

// Every PP value, in both layouts, with the other fields zero: exactly the
// documented ones decode, to the documented policy and order; every other
// one is an *RmPVMRLError.
func TestDecodeRmPVMRLEveryPolicyByte(t *testing.T) {
	type decoded struct {
		p      Policy
		strict bool
	}
	valid := map[Layout]map[uint32]decoded{
		LayoutLegacy: {
			0x00: {BestEffort, true}, // best effort always goes round-robin
			0x01: {EqualShare, false},
			0x11: {FixedShare, false},
		},
		LayoutRoundRobin: {
			0x00: {BestEffort, true},
			0x01: {EqualShare, true},
			0x11: {FixedShare, true},
			0x03: {EqualShare, false},
			0x13: {FixedShare, false},
		},
	}
	for layout, want := range valid {
		for pp := range uint32(0x100) {
			c, err := DecodeRmPVMRL(pp, layout)
			w, ok := want[pp]
			switch {
			case ok && err != nil:
				t.Errorf("%s PP %#02x: %v", layout, pp, err)
			case ok && (c.Policy != w.p || c.strictRoundRobin() != w.strict || c.Slice != 0 || c.AveragingFactor != DefaultAveragingFactor):
				t.Errorf("%s PP %#02x decodes to %+v, want %v, strict round-robin %v, default slice and factor", layout, pp, c, w.p, w.strict)
			case !ok && !errors.As(err, new(*RmPVMRLError)):
				t.Errorf("%s PP %#02x: %+v, %v; want an *RmPVMRLError", layout, pp, c, err)
			}
		}
	}
}

// Every value that decodes encodes back to a value that decodes the same.
func TestPropRmPVMRLEncodeInvertsDecode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		layout := rapid.SampledFrom([]Layout{LayoutLegacy, LayoutRoundRobin}).Draw(t, "layout")
		var v uint32
		if rapid.Bool().Draw(t, "structured") {
			pp := rapid.SampledFrom([]uint32{0x00, 0x01, 0x11, 0x03, 0x13}).Draw(t, "pp")
			v = rapid.Uint32Range(0, 0xFF).Draw(t, "aa")<<24 | rapid.Uint32Range(0, 0xFFF).Draw(t, "fff")<<12 | pp
			if pp == 0x03 || pp == 0x13 || layout == LayoutLegacy {
				v = rapid.Uint32Range(0, 0xFF).Draw(t, "tt")<<16 | pp
			}
		} else {
			v = rapid.Uint32().Draw(t, "value")
		}
		c, err := DecodeRmPVMRL(v, layout)
		if err != nil {
			return
		}
		w, err := c.RmPVMRL(layout)
		if err != nil {
			t.Fatalf("%#08x decodes to %s but does not encode: %v", v, c, err)
		}
		if back, err := DecodeRmPVMRL(w, layout); err != nil || back != c {
			t.Fatalf("%#08x -> %+v -> %#08x -> %+v, %v", v, c, w, back, err)
		}
	})
}

func TestRmPVMRLEncodeRefusesWhatTheLayoutCannotSay(t *testing.T) {
	for _, tc := range []struct {
		fact   string
		cfg    Config
		layout Layout
	}{
		{"legacy layout has no strict round-robin", Config{Policy: EqualShare}, LayoutLegacy},
		{"legacy slice is whole milliseconds", Config{Policy: EqualShare, DisableStrictRoundRobin: true, Slice: 1500 * time.Microsecond}, LayoutLegacy},
		{"legacy has no averaging factor field", Config{AveragingFactor: 10}, LayoutLegacy},
		{"round-robin slice is the period of whole Hz: 3 ms is 333.3 Hz", Config{Policy: FixedShare, Slice: 3 * time.Millisecond}, LayoutRoundRobin},
	} {
		t.Run(tc.fact, func(t *testing.T) {
			if v, err := tc.cfg.RmPVMRL(tc.layout); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %#08x, %v; want ErrInvalidConfig", v, err)
			}
		})
	}
	// And what it can say, it says as documented.
	for _, tc := range []struct {
		cfg    Config
		layout Layout
		want   uint32
	}{
		{Config{Policy: FixedShare, Slice: 3 * time.Millisecond, DisableStrictRoundRobin: true}, LayoutLegacy, 0x00030011},
		{Config{Policy: EqualShare, Slice: time.Second / 480, AveragingFactor: 30}, LayoutRoundRobin, 0x1E1E0001},
		{Config{Policy: FixedShare, Slice: 4 * time.Millisecond, DisableStrictRoundRobin: true}, LayoutRoundRobin, 0x00040013},
	} {
		if got, err := tc.cfg.RmPVMRL(tc.layout); err != nil || got != tc.want {
			t.Errorf("%s in %s layout = %#08x, %v; want %#08x", tc.cfg, tc.layout, got, err, tc.want)
		}
	}
}
