package sched

import (
	"fmt"
	"time"
)

// Layout names one of the two layouts of the RmPVMRL registry DWORD that
// NVIDIA's vGPU user guides document. The value alone does not say which
// layout it is in; the caller, who knows the driver release, does.
type Layout uint8

const (
	// LayoutLegacy is the layout of the vGPU releases of the P40 era:
	// 0x00TT00PP, without strict round-robin.
	LayoutLegacy Layout = iota + 1
	// LayoutRoundRobin is the layout of later releases, which made strict
	// round-robin the default: 0xAAFFF0PP, or 0x00TT00PP to switch strict
	// round-robin off.
	LayoutRoundRobin
)

// String returns "legacy" or "round-robin".
func (l Layout) String() string {
	switch l {
	case LayoutLegacy:
		return "legacy"
	case LayoutRoundRobin:
		return "round-robin"
	}
	return fmt.Sprintf("Layout(%d)", uint8(l))
}

// Policy bits (PP, bits 7-0), and the field ranges NVIDIA documents for
// them (NVIDIA AI Enterprise User Guide v5.0, 2024, section 7.3 "RmPVMRL
// Registry Key"): FFF from 63 to 960 Hz, TT up to 30 ms.
const (
	ppBestEffort        = 0x00
	ppEqualShare        = 0x01
	ppFixedShare        = 0x11
	ppEqualShareNoRR    = 0x03 // round-robin layout: equal share, strict round-robin off
	ppFixedShareNoRR    = 0x13 // round-robin layout: fixed share, strict round-robin off
	maskTTLayout        = 0xFF00FF00
	maskFFFLayout       = 0x00000F00
	minFrequencyHz      = 0x3F  // 63 Hz: a slice of 15.9 ms
	maxFrequencyHz      = 0x3C0 // 960 Hz: a slice of 1.04 ms
	maxTimesliceFieldMS = 0x1E  // 30 ms
)

// Fields, where a layout has them.
const (
	maskTT    = 0x00FF0000 // 0x00TT00PP: time slice in ms
	maskAAFFF = 0xFFFFF000 // 0xAAFFF0PP: averaging factor and frequency
)

// DecodeRmPVMRL decodes an RmPVMRL registry value in the given layout into
// a Config (MaxTenants, MaxQueue and Start are left zero, their defaults).
//
// Legacy layout, 0x00TT00PP: PP 0x00 best effort, 0x01 equal share, 0x11
// fixed share; TT the slice in ms, 0x00 meaning the profile's default and
// anything above 0x1E capped at 30 ms. Releases of that era had no strict
// round-robin, so the share policies decode with DisableStrictRoundRobin.
//
// Round-robin layout: PP 0x00 best effort; PP 0x01 / 0x11 equal / fixed
// share with strict round-robin, AA in bits 31-24 (averaging factor; 0x00
// means 33, above 0x3C capped at 60) and FFF in bits 23-12 (scheduling
// frequency in Hz: 0x000 the profile's default, 0x001-0x03E raised to 63,
// above 0x3C0 capped at 960; the slice is 1/frequency); PP 0x03 / 0x13
// equal / fixed share without strict round-robin, with TT in bits 23-16 as
// in the legacy layout.
//
// # Best effort
//
// Best effort is the single value 0x00000000, in both layouts: a value
// with PP 0x00 and a nonzero TT (legacy) or AA or FFF (round-robin) is an
// *RmPVMRLError. The guides define TT, AA and FFF for the equal share and
// fixed share schedulers only, and their table of values gives best effort
// no field: NVIDIA, NVIDIA AI Enterprise User Guide, release 5.0, §7.2
// "Scheduler Time Slice for Time-Sliced vGPUs" and §7.3 "RmPVMRL Registry
// Key"; for the legacy layout, the "RmPVMRL Registry Key" table of the
// vGPU software user guides before release 15.0, as NVIDIA's Omniverse
// Enterprise deployment guide reproduces it ("Advanced GPU configuration").
// Such a value is refused, like any other undocumented one, rather than
// ignored: ignoring it would hide from the operator a setting that no
// guide says takes effect, and refusing leaves best effort one encoding,
// which is then also its canonical form.
//
// Any other PP, a bit set outside the layout's fields, or an unknown layout
// is an *RmPVMRLError too. Every Config this returns is accepted by New and
// encodes again with Config.RmPVMRL, to the value's canonical form.
func DecodeRmPVMRL(v uint32, layout Layout) (Config, error) {
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, &RmPVMRLError{Value: v, Layout: layout, Reason: fmt.Sprintf(format, args...)}
	}
	pp := v & 0xFF
	switch layout {
	case LayoutLegacy:
		p, ok := policyBits(pp)
		if !ok {
			return fail("unknown policy bits %#02x", pp)
		}
		if v&maskTTLayout != 0 {
			return fail("bits outside 0x00TT00PP are set")
		}
		if p == BestEffort {
			if v&maskTT != 0 {
				return fail("a time slice (TT) is defined for equal and fixed share only, not best effort")
			}
			return Config{Policy: BestEffort, AveragingFactor: DefaultAveragingFactor}, nil
		}
		return Config{
			Policy:                  p,
			Slice:                   timesliceField(v >> 16 & 0xFF),
			AveragingFactor:         DefaultAveragingFactor,
			DisableStrictRoundRobin: true,
		}, nil

	case LayoutRoundRobin:
		switch pp {
		case ppBestEffort:
			if v&maskAAFFF != 0 {
				return fail("an averaging factor (AA) and a frequency (FFF) are defined for equal and fixed share only, not best effort")
			}
			if v&maskFFFLayout != 0 {
				return fail("bits 11-8 are set")
			}
			return Config{Policy: BestEffort, AveragingFactor: DefaultAveragingFactor}, nil
		case ppEqualShare, ppFixedShare:
			if v&maskFFFLayout != 0 {
				return fail("bits 11-8 are set")
			}
			p, _ := policyBits(pp)
			return Config{
				Policy:          p,
				Slice:           frequencyField(v >> 12 & 0xFFF),
				AveragingFactor: averagingField(v >> 24),
			}, nil
		case ppEqualShareNoRR, ppFixedShareNoRR:
			if v&maskTTLayout != 0 {
				return fail("bits outside 0x00TT00PP are set")
			}
			p := EqualShare
			if pp == ppFixedShareNoRR {
				p = FixedShare
			}
			return Config{
				Policy:                  p,
				Slice:                   timesliceField(v >> 16 & 0xFF),
				AveragingFactor:         DefaultAveragingFactor,
				DisableStrictRoundRobin: true,
			}, nil
		}
		return fail("unknown policy bits %#02x", pp)
	}
	return fail("unknown layout")
}

// policyBits decodes the PP values the two layouts share.
func policyBits(pp uint32) (Policy, bool) {
	switch pp {
	case ppBestEffort:
		return BestEffort, true
	case ppEqualShare:
		return EqualShare, true
	case ppFixedShare:
		return FixedShare, true
	}
	return 0, false
}

// timesliceField decodes TT: milliseconds, 0 for the profile's default,
// capped at 30.
func timesliceField(tt uint32) time.Duration {
	if tt > maxTimesliceFieldMS {
		tt = maxTimesliceFieldMS
	}
	return time.Duration(tt) * time.Millisecond
}

// frequencyField decodes FFF: a frequency in Hz clamped to [63, 960], 0 for
// the profile's default; the slice is its period.
func frequencyField(f uint32) time.Duration {
	switch {
	case f == 0:
		return 0
	case f < minFrequencyHz:
		f = minFrequencyHz
	case f > maxFrequencyHz:
		f = maxFrequencyHz
	}
	return time.Second / time.Duration(f)
}

// averagingField decodes AA: 0 for the default, capped at 60.
func averagingField(aa uint32) int {
	switch {
	case aa == 0:
		return DefaultAveragingFactor
	case aa > MaxAveragingFactor:
		return MaxAveragingFactor
	}
	return int(aa)
}

// RmPVMRL encodes the configuration as an RmPVMRL value in the given layout,
// the inverse of DecodeRmPVMRL. The value decodes back to a Config that
// schedules exactly as c does; fields c's scheduling does not use are not
// carried (MaxTenants, MaxQueue, Start; the averaging factor without strict
// round-robin; DisableStrictRoundRobin under best effort). A configuration
// the layout cannot express (strict round-robin in the legacy layout, a
// slice that is not a whole number of milliseconds or the period of a
// whole frequency from 63 to 960 Hz, a slice or a non-default averaging
// factor with best effort, which has no field for them) is an error
// wrapping ErrInvalidConfig, as is an unknown layout.
//
// # Canonical values
//
// A registry value can say one thing several ways: AA 0x00 and 0x21 both
// mean a factor of 33, TT 0x1F and 0xFF both mean 30 ms, FFF 0x001 and
// 0x03E both mean 63 Hz. RmPVMRL writes one of them, the canonical one:
//
//   - a default is written as 0: AA 0x00 for a factor of 33, TT 0x00 or
//     FFF 0x000 for the profile's slice, the way the guides' own examples
//     (0x01, 0x11) leave them out;
//   - a field the decoder clamps is written clamped: TT at most 0x1E, AA at
//     most 0x3C, FFF 0x000 or from 0x03F to 0x3C0;
//   - best effort is 0x00000000.
//
// So the canonical values are, in the legacy layout, 0x00000000 and
// 0x00TT0001 / 0x00TT0011 with TT from 0x00 to 0x1E; in the round-robin
// layout, 0x00000000, 0xAAFFF001 / 0xAAFFF011 with AA from 0x00 to 0x3C
// but not 0x21 and FFF 0x000 or from 0x03F to 0x3C0, and 0x00TT0003 /
// 0x00TT0013 with TT from 0x00 to 0x1E. For every v that DecodeRmPVMRL
// accepts, encoding the Config it returns gives a canonical value that
// decodes to that same Config, and a canonical value encodes back to
// itself, so re-encoding is idempotent. Two values that configure the
// scheduler alike thus have one canonical form to be compared by, and a
// value carried from one host to another (a migration, a saved
// configuration) is written the way the guides write it.
func (c Config) RmPVMRL(layout Layout) (uint32, error) {
	cc := c
	if err := cc.validate(); err != nil {
		return 0, err
	}
	refuse := func(why string) (uint32, error) {
		return 0, fmt.Errorf("%w: %s is not expressible in the %s RmPVMRL layout: %s", ErrInvalidConfig, cc, layout, why)
	}
	if layout != LayoutLegacy && layout != LayoutRoundRobin {
		return 0, fmt.Errorf("%w: unknown RmPVMRL layout %s", ErrInvalidConfig, layout)
	}
	var v uint32
	switch {
	case cc.Policy == BestEffort:
		// Both layouts give best effort no field (see DecodeRmPVMRL).
		if cc.Slice != 0 {
			return refuse("best effort has no time slice field")
		}
		if cc.AveragingFactor != DefaultAveragingFactor {
			return refuse("best effort has no averaging factor field")
		}
		v = ppBestEffort

	case cc.strictRoundRobin():
		if layout == LayoutLegacy {
			return refuse("the legacy layout has no strict round-robin")
		}
		fff, ok := frequencyBits(cc.Slice)
		if !ok {
			return refuse("the slice is not the period of a whole frequency from 63 to 960 Hz")
		}
		aa := uint32(cc.AveragingFactor)
		if aa == DefaultAveragingFactor {
			aa = 0 // canonical: the default is left out
		}
		v = aa<<24 | fff<<12 | sharePolicyBits(cc.Policy)

	default: // equal or fixed share without strict round-robin: 0x00TT00PP
		tt, ok := timesliceBits(cc.Slice)
		if !ok {
			return refuse("the slice is not a whole number of milliseconds")
		}
		pp := sharePolicyBits(cc.Policy)
		if layout == LayoutRoundRobin {
			pp |= 0x02 // 0x01 -> 0x03, 0x11 -> 0x13: strict round-robin off
		}
		v = tt<<16 | pp
	}
	// What was written must read back as what was meant. The checks above
	// make this unreachable; should a later change break that, the caller
	// gets an error, never a value that means something else.
	back, err := DecodeRmPVMRL(v, layout)
	if err != nil || back.Policy != cc.Policy || back.Slice != cc.Slice ||
		back.strictRoundRobin() != cc.strictRoundRobin() ||
		(cc.strictRoundRobin() && back.AveragingFactor != cc.AveragingFactor) {
		return refuse(fmt.Sprintf("%#08x would decode to %+v (%v)", v, back, err))
	}
	return v, nil
}

// sharePolicyBits is PP for equal and fixed share with strict round-robin
// (both layouts share it).
func sharePolicyBits(p Policy) uint32 {
	if p == FixedShare {
		return ppFixedShare
	}
	return ppEqualShare
}

// timesliceBits encodes a slice as TT: 0 for the profile's default, else
// whole milliseconds from 1 to 30.
func timesliceBits(slice time.Duration) (uint32, bool) {
	if slice%time.Millisecond != 0 || slice < 0 || slice > maxTimesliceFieldMS*time.Millisecond {
		return 0, false
	}
	return uint32(slice / time.Millisecond), true
}

// frequencyBits encodes a slice as FFF: 0 for the profile's default, else
// the frequency in Hz, from 63 to 960, whose period (as frequencyField
// computes it) is exactly the slice.
func frequencyBits(slice time.Duration) (uint32, bool) {
	if slice == 0 {
		return 0, true
	}
	if slice < 0 {
		return 0, false
	}
	f := (time.Second + slice/2) / slice
	if f < minFrequencyHz || f > maxFrequencyHz || time.Second/f != slice {
		return 0, false
	}
	return uint32(f), true
}
