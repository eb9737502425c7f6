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

// Policy bits (PP, bits 7-0).
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

// DecodeRmPVMRL decodes an RmPVMRL registry value in the given layout into
// a Config (MaxTenants, MaxQueue and Start are left zero, their defaults).
//
// Legacy layout, 0x00TT00PP: PP 0x00 best effort, 0x01 equal share, 0x11
// fixed share; TT the slice in ms, 0x00 meaning the profile's default and
// anything above 0x1E capped at 30 ms. Releases of that era had no strict
// round-robin, so the share policies decode with DisableStrictRoundRobin.
//
// Round-robin layout: PP 0x01 / 0x11 (and 0x00, best effort) use strict
// round-robin, with AA in bits 31-24 (averaging factor; 0x00 means 33,
// above 0x3C capped at 60) and FFF in bits 23-12 (scheduling frequency in
// Hz: 0x000 the profile's default, 0x001-0x03E raised to 63, above 0x3C0
// capped at 960; the slice is 1/frequency). PP 0x03 / 0x13 are equal /
// fixed share without strict round-robin, with TT in bits 23-16 as in the
// legacy layout.
//
// Any other PP, a bit set outside the layout's fields, or an unknown layout
// is an *RmPVMRLError.
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
		return Config{
			Policy:                  p,
			Slice:                   timesliceField(v >> 16 & 0xFF),
			AveragingFactor:         DefaultAveragingFactor,
			DisableStrictRoundRobin: p != BestEffort,
		}, nil

	case LayoutRoundRobin:
		switch pp {
		case ppBestEffort, ppEqualShare, ppFixedShare:
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
// the inverse of DecodeRmPVMRL. A configuration the layout cannot express
// (strict round-robin in the legacy layout, a slice that is not a whole
// number of milliseconds or of a frequency in Hz, a non-default averaging
// factor where there is no field for it) is an error wrapping
// ErrInvalidConfig.
func (c Config) RmPVMRL(layout Layout) (uint32, error) {
	cc := c
	if err := cc.validate(); err != nil {
		return 0, err
	}
	pp := uint32(ppBestEffort)
	switch cc.Policy {
	case EqualShare:
		pp = ppEqualShare
	case FixedShare:
		pp = ppFixedShare
	}
	var v uint32
	if layout == LayoutRoundRobin && cc.strictRoundRobin() {
		var fff uint32
		if cc.Slice != 0 {
			fff = uint32((time.Second + cc.Slice/2) / cc.Slice)
		}
		v = uint32(cc.AveragingFactor)<<24 | fff<<12 | pp
	} else {
		if layout == LayoutRoundRobin {
			pp |= 0x02 // 0x01 -> 0x03, 0x11 -> 0x13: strict round-robin off
		}
		v = uint32(cc.Slice/time.Millisecond)<<16 | pp
	}
	// The value is right only if it decodes back to the same configuration:
	// that one check covers every field the layout cannot carry.
	back, err := DecodeRmPVMRL(v, layout)
	if err != nil {
		return 0, fmt.Errorf("%w: not expressible in the %s RmPVMRL layout: %v", ErrInvalidConfig, layout, err)
	}
	if back.Policy != cc.Policy || back.Slice != cc.Slice || back.strictRoundRobin() != cc.strictRoundRobin() ||
		(cc.strictRoundRobin() && back.AveragingFactor != cc.AveragingFactor) {
		return 0, fmt.Errorf("%w: %s is not expressible in the %s RmPVMRL layout", ErrInvalidConfig, cc, layout)
	}
	return v, nil
}
