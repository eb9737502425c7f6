package sched

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// RmPVMRL values as NVIDIA's vGPU user guides document them, decoded.
// Sources: for the legacy layout, the "RmPVMRL Registry Key" table of the
// vGPU software user guides before release 15.0 (0x00, 0x01, 0x00TT0001,
// 0x11, 0x00TT0011; TT 0x01-0x1E, 0x00 the default, above 0x1E capped);
// for the round-robin layout, NVIDIA AI Enterprise User Guide, release 5.0,
// §7.3 "RmPVMRL Registry Key" (AA, FFF and TT ranges, defaults and clamps,
// and the examples 0x01, 0x00030003, 0x11, 0x3c3c0001, 0x3c3c0011); the
// default slices, §7.3 Table 1.
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
		{"legacy 0x00180011: fixed share, TT=0x18 slice 24 ms (the guides' example)", 0x00180011, LayoutLegacy,
			Config{Policy: FixedShare, Slice: 24 * ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},

		// Round-robin layout 0xAAFFF0PP (strict round-robin) ...
		{"round-robin 0x01: equal share, AA 0 -> 33, FFF 0 -> profile default", 0x00000001, LayoutRoundRobin,
			Config{Policy: EqualShare, AveragingFactor: 33}},
		{"round-robin 0x11: fixed share, strict", 0x00000011, LayoutRoundRobin,
			Config{Policy: FixedShare, AveragingFactor: 33}},
		{"round-robin 0x1E1E0001: AA=30, FFF=0x1E0 480 Hz", 0x1E1E0001, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: time.Second / 480, AveragingFactor: 30}},
		{"round-robin 0x3C3C0011: AA=60, FFF=0x3C0 960 Hz", 0x3C3C0011, LayoutRoundRobin,
			Config{Policy: FixedShare, Slice: time.Second / 960, AveragingFactor: 60}},
		{"round-robin 0x3C3C0001: equal share, AA=60, FFF=0x3C0 960 Hz (the guide's example)", 0x3C3C0001, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: time.Second / 960, AveragingFactor: 60}},
		{"round-robin 0x00030003: equal share without strict round-robin, 3 ms (the guide's example)", 0x00030003, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: 3 * ms, AveragingFactor: 33, DisableStrictRoundRobin: true}},
		{"round-robin 0x00100001: FFF=0x100 is 256 Hz (the guide's example)", 0x00100001, LayoutRoundRobin,
			Config{Policy: EqualShare, Slice: time.Second / 256, AveragingFactor: 33}},
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

		// Best effort has no field: the guides define TT, AA and FFF for the
		// equal share and fixed share schedulers only (NVIDIA AI Enterprise
		// User Guide 5.0, §7.2 and §7.3; the legacy table lists best effort
		// as 0x00 alone).
		{"legacy best effort with TT=0x01", 0x00010000, LayoutLegacy},
		{"legacy best effort with TT=0x1E", 0x001E0000, LayoutLegacy},
		{"legacy best effort with TT=0xFF", 0x00FF0000, LayoutLegacy},
		{"round-robin best effort with AA=0x01", 0x01000000, LayoutRoundRobin},
		{"round-robin best effort with AA=0x21, the default written out", 0x21000000, LayoutRoundRobin},
		{"round-robin best effort with FFF=0x001", 0x00001000, LayoutRoundRobin},
		{"round-robin best effort with FFF=0x3C0", 0x003C0000, LayoutRoundRobin},
		{"round-robin best effort with AA=0x3C, FFF=0x3C0", 0x3C3C0000, LayoutRoundRobin},
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
		{"round-robin frequency is at least 63 Hz: 20 ms is 50 Hz", Config{Policy: FixedShare, Slice: 20 * time.Millisecond}, LayoutRoundRobin},
		{"round-robin frequency is at most 960 Hz: 1 ms is 1000 Hz", Config{Policy: EqualShare, Slice: time.Millisecond}, LayoutRoundRobin},
		{"no time slice with best effort, legacy", Config{Slice: 10 * time.Millisecond}, LayoutLegacy},
		{"no time slice with best effort, round-robin", Config{Slice: time.Second / 480}, LayoutRoundRobin},
		{"no averaging factor with best effort, round-robin", Config{AveragingFactor: 60}, LayoutRoundRobin},
		{"unknown layout", Config{Policy: EqualShare}, 0},
		{"out of range slice", Config{Policy: EqualShare, DisableStrictRoundRobin: true, Slice: 31 * time.Millisecond}, LayoutLegacy},
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
		// Defaults are left out, whether given as zero or written out.
		{Config{Policy: EqualShare}, LayoutRoundRobin, 0x00000001},
		{Config{Policy: FixedShare, AveragingFactor: DefaultAveragingFactor}, LayoutRoundRobin, 0x00000011},
		{Config{Policy: BestEffort, AveragingFactor: DefaultAveragingFactor}, LayoutRoundRobin, 0x00000000},
		{Config{}, LayoutLegacy, 0x00000000},
		// Best effort ignores DisableStrictRoundRobin, and a scheduler
		// without strict round-robin ignores the averaging factor: neither
		// is carried, nor refused.
		{Config{DisableStrictRoundRobin: true}, LayoutLegacy, 0x00000000},
		{Config{DisableStrictRoundRobin: true}, LayoutRoundRobin, 0x00000000},
		{Config{Policy: EqualShare, DisableStrictRoundRobin: true, AveragingFactor: 10}, LayoutLegacy, 0x00000001},
		// The bounds of each field.
		{Config{Policy: FixedShare, Slice: time.Second / 63, AveragingFactor: 1}, LayoutRoundRobin, 0x0103F011},
		{Config{Policy: FixedShare, Slice: time.Second / 960, AveragingFactor: 60}, LayoutRoundRobin, 0x3C3C0011},
		{Config{Policy: EqualShare, Slice: 30 * time.Millisecond, DisableStrictRoundRobin: true}, LayoutLegacy, 0x001E0001},
		{Config{Policy: EqualShare, Slice: time.Millisecond, DisableStrictRoundRobin: true}, LayoutRoundRobin, 0x00010003},
	} {
		if got, err := tc.cfg.RmPVMRL(tc.layout); err != nil || got != tc.want {
			t.Errorf("%s in %s layout = %#08x, %v; want %#08x", tc.cfg, tc.layout, got, err, tc.want)
		}
	}
}

// Re-encoding a decoded value gives its canonical form, as Config.RmPVMRL
// documents it: defaults left out, clamped fields written clamped. The
// field meanings, defaults and clamps are those of NVIDIA AI Enterprise
// User Guide 5.0, §7.3 "RmPVMRL Registry Key", and of the legacy table.
func TestRmPVMRLCanonicalForm(t *testing.T) {
	for _, tc := range []struct {
		fact      string
		value     uint32
		layout    Layout
		canonical uint32
	}{
		{"legacy best effort is 0", 0x00000000, LayoutLegacy, 0x00000000},
		{"legacy equal share, default slice", 0x00000001, LayoutLegacy, 0x00000001},
		{"legacy fixed share 24 ms (the guides' example) is canonical", 0x00180011, LayoutLegacy, 0x00180011},
		{"legacy TT=0x1E is canonical", 0x001E0001, LayoutLegacy, 0x001E0001},
		{"legacy TT=0x1F is capped: written 0x1E", 0x001F0001, LayoutLegacy, 0x001E0001},
		{"legacy TT=0xFF is capped: written 0x1E", 0x00FF0011, LayoutLegacy, 0x001E0011},

		{"round-robin best effort is 0", 0x00000000, LayoutRoundRobin, 0x00000000},
		{"round-robin 0x01 (the guide's example) is canonical", 0x00000001, LayoutRoundRobin, 0x00000001},
		{"round-robin 0x11 (the guide's example) is canonical", 0x00000011, LayoutRoundRobin, 0x00000011},
		{"round-robin AA=0x21 is the default 33: written 0x00", 0x21000001, LayoutRoundRobin, 0x00000001},
		{"round-robin AA=0x21 with FFF: AA written 0x00", 0x211E0011, LayoutRoundRobin, 0x001E0011},
		{"round-robin AA=0x3C, FFF=0x3C0 (the guide's example) is canonical", 0x3C3C0001, LayoutRoundRobin, 0x3C3C0001},
		{"round-robin AA=0x3D is capped: written 0x3C", 0x3D000001, LayoutRoundRobin, 0x3C000001},
		{"round-robin AA=0xFF is capped: written 0x3C", 0xFF000011, LayoutRoundRobin, 0x3C000011},
		{"round-robin FFF=0x1E0 (480 Hz) is canonical", 0x001E0001, LayoutRoundRobin, 0x001E0001},
		{"round-robin FFF=0x100 (256 Hz) is canonical", 0x00100011, LayoutRoundRobin, 0x00100011},
		{"round-robin FFF=0x001 is raised: written 0x03F", 0x00001001, LayoutRoundRobin, 0x0003F001},
		{"round-robin FFF=0x03E is raised: written 0x03F", 0x0003E011, LayoutRoundRobin, 0x0003F011},
		{"round-robin FFF=0x3C1 is capped: written 0x3C0", 0x003C1001, LayoutRoundRobin, 0x003C0001},
		{"round-robin FFF=0xFFF is capped: written 0x3C0", 0x00FFF011, LayoutRoundRobin, 0x003C0011},
		{"round-robin 0xFFFFF011: both capped", 0xFFFFF011, LayoutRoundRobin, 0x3C3C0011},
		{"round-robin 0x00030003 (the guide's example) is canonical", 0x00030003, LayoutRoundRobin, 0x00030003},
		{"round-robin TT=0x40 without strict round-robin is capped: written 0x1E", 0x00400013, LayoutRoundRobin, 0x001E0013},
	} {
		t.Run(tc.fact, func(t *testing.T) {
			c, err := DecodeRmPVMRL(tc.value, tc.layout)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.RmPVMRL(tc.layout)
			if err != nil || got != tc.canonical {
				t.Fatalf("%#08x decodes to %s and encodes to %#08x, %v; want %#08x", tc.value, c, got, err, tc.canonical)
			}
			if err := checkRmPVMRLRoundTrip(tc.value, tc.layout); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// decodesRef says, from the documentation alone, whether v decodes in the
// layout: a documented PP, no bit outside the layout's fields, and best
// effort with no field set.
func decodesRef(v uint32, layout Layout) bool {
	pp := v & 0xFF
	switch layout {
	case LayoutLegacy:
		switch pp {
		case 0x00:
			return v == 0
		case 0x01, 0x11:
			return v&0xFF00FF00 == 0
		}
	case LayoutRoundRobin:
		switch pp {
		case 0x00:
			return v == 0
		case 0x01, 0x11:
			return v&0x00000F00 == 0
		case 0x03, 0x13:
			return v&0xFF00FF00 == 0
		}
	}
	return false
}

// canonicalRef says, from Config.RmPVMRL's documentation alone, whether v
// is a canonical value in the layout.
func canonicalRef(v uint32, layout Layout) bool {
	if !decodesRef(v, layout) {
		return false
	}
	pp := v & 0xFF
	if pp == 0x00 {
		return true // decodesRef allows 0 alone
	}
	if layout == LayoutRoundRobin && (pp == 0x01 || pp == 0x11) {
		aa, fff := v>>24, v>>12&0xFFF
		return aa <= 0x3C && aa != 0x21 && (fff == 0 || fff >= 0x3F && fff <= 0x3C0)
	}
	return v>>16&0xFF <= 0x1E // TT
}

// checkRmPVMRLRoundTrip checks, for any v, what the package promises: v
// decodes exactly when the documentation says it does; then its canonical
// form c = encode(decode(v)) exists, decodes to the same Config, is
// canonical as documented, and encodes back to itself; and v is its own
// canonical form exactly when the documentation calls it canonical.
func checkRmPVMRLRoundTrip(v uint32, layout Layout) error {
	cfg, err := DecodeRmPVMRL(v, layout)
	if ok := decodesRef(v, layout); ok != (err == nil) {
		return fmt.Errorf("%s %#08x: documented to decode: %v; DecodeRmPVMRL: %v", layout, v, ok, err)
	}
	if err != nil {
		if !errors.As(err, new(*RmPVMRLError)) || !errors.Is(err, ErrInvalidRmPVMRL) {
			return fmt.Errorf("%s %#08x: %v is not an *RmPVMRLError", layout, v, err)
		}
		return nil
	}
	c, err := cfg.RmPVMRL(layout)
	if err != nil {
		return fmt.Errorf("%s %#08x decodes to %+v, which does not encode: %v", layout, v, cfg, err)
	}
	back, err := DecodeRmPVMRL(c, layout)
	if err != nil || back != cfg {
		return fmt.Errorf("%s %#08x -> %+v -> %#08x -> %+v, %v", layout, v, cfg, c, back, err)
	}
	if again, err := back.RmPVMRL(layout); err != nil || again != c {
		return fmt.Errorf("%s canonical %#08x re-encodes to %#08x, %v", layout, c, again, err)
	}
	if !canonicalRef(c, layout) {
		return fmt.Errorf("%s %#08x encodes to %#08x, which is not documented as canonical", layout, v, c)
	}
	if canonicalRef(v, layout) != (c == v) {
		return fmt.Errorf("%s %#08x: documented canonical %v, but it encodes to %#08x", layout, v, canonicalRef(v, layout), c)
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("%s %#08x decodes to %+v, which New refuses: %v", layout, v, cfg, err)
	}
	return nil
}

// The three round-trip properties over arbitrary values in both layouts.
// Most uint32 values do not decode, so half the values are drawn from the
// documented shapes (a documented PP with arbitrary fields), which do.
func TestPropRmPVMRLCanonical(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		layout := rapid.SampledFrom([]Layout{LayoutLegacy, LayoutRoundRobin}).Draw(t, "layout")
		v := rapid.Uint32().Draw(t, "value")
		if rapid.Bool().Draw(t, "documentedShape") {
			pp := rapid.SampledFrom([]uint32{0x00, 0x01, 0x11, 0x03, 0x13}).Draw(t, "pp")
			v = v&^0xFF | pp
			if rapid.Bool().Draw(t, "noStrayBits") {
				v &^= 0x00000F00
				if pp == 0x03 || pp == 0x13 || layout == LayoutLegacy {
					v &^= 0xFF00FF00
				}
			}
		}
		if err := checkRmPVMRLRoundTrip(v, layout); err != nil {
			t.Fatal(err)
		}
	})
}

// Every value of every field, in both layouts, under each documented PP and
// one undocumented one, the other fields at their boundary values; and
// every canonical value the documentation lists, each a fixed point.
func TestRmPVMRLCanonicalExhaustive(t *testing.T) {
	pps := []uint32{0x00, 0x01, 0x03, 0x11, 0x13, 0x12}
	aas := []uint32{0x00, 0x01, 0x20, 0x21, 0x22, 0x3C, 0x3D, 0xFF}
	fffs := []uint32{0x000, 0x001, 0x03E, 0x03F, 0x100, 0x1E0, 0x3C0, 0x3C1, 0xFFF}
	check := func(v uint32) {
		for _, layout := range []Layout{LayoutLegacy, LayoutRoundRobin} {
			if err := checkRmPVMRLRoundTrip(v, layout); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, pp := range pps {
		for _, stray := range []uint32{0, 0x800} {
			for aa := range uint32(0x100) {
				for _, fff := range fffs {
					check(aa<<24 | fff<<12 | stray | pp)
				}
			}
			for fff := range uint32(0x1000) {
				for _, aa := range aas {
					check(aa<<24 | fff<<12 | stray | pp)
				}
			}
		}
	}

	want := map[Layout]int{
		LayoutLegacy:     1 + 2*31,            // best effort; TT 0x00-0x1E under 0x01 and 0x11
		LayoutRoundRobin: 1 + 2*60*899 + 2*31, // best effort; AA x FFF under 0x01, 0x11; TT under 0x03, 0x13
	}
	for layout, n := range want {
		seen := 0
		fixed := func(v uint32) {
			seen++
			if !canonicalRef(v, layout) {
				t.Fatalf("%s %#08x listed but not canonical", layout, v)
			}
			cfg, err := DecodeRmPVMRL(v, layout)
			if err != nil {
				t.Fatalf("%s canonical %#08x: %v", layout, v, err)
			}
			if got, err := cfg.RmPVMRL(layout); err != nil || got != v {
				t.Fatalf("%s canonical %#08x -> %+v -> %#08x, %v", layout, v, cfg, got, err)
			}
		}
		fixed(0)
		ttPPs := []uint32{0x01, 0x11}
		if layout == LayoutRoundRobin {
			ttPPs = []uint32{0x03, 0x13}
			for _, pp := range []uint32{0x01, 0x11} {
				for aa := range uint32(0x3D) {
					if aa == 0x21 {
						continue
					}
					fixed(aa<<24 | pp)
					for fff := uint32(0x3F); fff <= 0x3C0; fff++ {
						fixed(aa<<24 | fff<<12 | pp)
					}
				}
			}
		}
		for _, pp := range ttPPs {
			for tt := range uint32(0x1F) {
				fixed(tt<<16 | pp)
			}
		}
		if seen != n {
			t.Errorf("%s: %d canonical values, want %d", layout, seen, n)
		}
	}
}

// FuzzDecodeRmPVMRL feeds arbitrary values to DecodeRmPVMRL in either
// layout: it must refuse with an *RmPVMRLError exactly what the
// documentation does not define, and whatever it accepts must round-trip
// to its canonical form (see checkRmPVMRLRoundTrip).
func FuzzDecodeRmPVMRL(f *testing.F) {
	for _, v := range []uint32{
		0x00000000, 0x00000001, 0x00000011, 0x00000003, 0x00000013, // policies
		0x00030001, 0x00180011, 0x00030003, 0x3C3C0001, 0x3C3C0011, // the guides' examples
		0x21000001, 0x00FF0011, 0xFFFFF011, 0x00001001, // non-canonical
		0x00FF0000, 0x21000000, 0x00000801, 0x21000003, // refused
	} {
		f.Add(v, false)
		f.Add(v, true)
	}
	f.Fuzz(func(t *testing.T, v uint32, roundRobin bool) {
		layout := LayoutLegacy
		if roundRobin {
			layout = LayoutRoundRobin
		}
		if err := checkRmPVMRLRoundTrip(v, layout); err != nil {
			t.Fatal(err)
		}
	})
}
