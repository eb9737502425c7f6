package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
)

// limit is the stun-time limit Legacy rows of the P40 run under, 6.7 U1's.
const limit = migrate.VSphere67U1StunLimit

// tableRows returns the rows of one table.
func tableRows(rows []row, table string) []row {
	var out []row
	for _, r := range rows {
		if r.table == table {
			out = append(out, r)
		}
	}
	return out
}

// errorRange is the least and greatest error, in per cent, of the rows
// with a published figure and a stun; n counts them.
func errorRange(rows []row) (lo, hi float64, n int) {
	for _, r := range rows {
		pct, ok := r.errorPct()
		if !ok {
			continue
		}
		if n == 0 || pct < lo {
			lo = pct
		}
		if n == 0 || pct > hi {
			hi = pct
		}
		n++
	}
	return lo, hi, n
}

// writeProfileNotes prints, under the sweep, what its columns cannot say:
// why its sizes are not the published ones, what a refusal leaves behind,
// and the tally against the standard.
func writeProfileNotes(w io.Writer, p params, rows []row) error {
	var minRes, maxRes int64
	for _, r := range rows {
		res := r.fbBytes - r.usedBytes
		if minRes == 0 || res < minRes {
			minRes = res
		}
		maxRes = max(maxRes, res)
	}
	fmt.Fprintf(w, "used_gib is all a guest can use of the profile's framebuffer (fb_gib): the vGPU manager reserves %d to %d MiB\n",
		minRes>>20, maxRes>>20)
	fmt.Fprintln(w, "of it. VMware published stun times by GB in use, not by profile: the next table runs them at their own sizes.")
	var refused []string
	for _, r := range rows {
		if r.outcome == outcomeRefused {
			refused = append(refused, r.profile+" "+r.mode.String())
		}
	}
	if len(refused) > 0 {
		fmt.Fprintf(w, "%s: refused before the VM was paused, its estimated stun over 6.7 U1's %.0f s timeout; the VM\n",
			strings.Join(refused, ", "), limit.Seconds())
		fmt.Fprintln(w, "stays on the source, running. 6.7 U1 started such a migration and failed it at the timeout, the VM")
		fmt.Fprintln(w, "left on the source: refusing it up front, on the estimate, is the model's choice.")
	}
	meets := map[migrate.Mode]int{}
	profiles := 0
	for _, r := range rows {
		if r.meets {
			meets[r.mode]++
		}
		if r.mode == modes[0] {
			profiles++
		}
	}
	_, err := fmt.Fprintf(w, "Stun under vMotion's 1 s standard over %s: %v %d of %d profiles, %v %d of %d.\n",
		p.link.Name, migrate.PreCopy, meets[migrate.PreCopy], profiles, migrate.Legacy, meets[migrate.Legacy], profiles)
	return err
}

// writePublishedNotes prints, under the 6.7 U1 points, where the figures
// come from and how far the simulation is from them.
func writePublishedNotes(w io.Writer, p params, rows []row) error {
	fmt.Fprintln(w, "published_stun_s: vSphere 6.7 documentation, table \"Expected Stun Times for vMotion of vGPU VMs\" (6.7 U1,")
	fmt.Fprintln(w, "Tesla P40, 10 Gb network), by GB of framebuffer in use.")
	lo, hi, n := errorRange(rows)
	switch {
	case n == 0:
	case p.link.GoodputBytesPerSec() < migrate.LegacyCheckpointPathBytesPerSec:
		fmt.Fprintf(w, "Simulated stun is %+.2f %% to %+.2f %% off them: %s carries %.1f MB/s, less than the %.1f MB/s at which\n",
			lo, hi, p.link.Name, float64(p.link.GoodputBytesPerSec())/1e6, float64(migrate.LegacyCheckpointPathBytesPerSec)/1e6)
		fmt.Fprintln(w, "6.7 U1's device checkpoint path moved the framebuffer during the stun: the figures, measured over 10 Gb, do")
		fmt.Fprintln(w, "not apply to it.")
	default:
		fmt.Fprintf(w, "Simulated stun is %+.2f %% to %+.2f %% off them: the fit's residuals, plus the last guest RAM pages, copied\n", lo, hi)
		fmt.Fprintln(w, "during the stun, which the published line has no term for. The preset's constants are a least-squares fit to")
		fmt.Fprintln(w, "these six figures, so this shows the model carries its fit through; fitted to any five, it predicts the sixth")
		fmt.Fprintln(w, "within 0.5 % (TestLegacyLeaveOneOut in migrate).")
	}
	for _, r := range rows {
		if r.outcome == outcomeRefused {
			fmt.Fprintf(w, "%s GiB on %s: refused, its estimated stun, %.1f s, over the %.0f s limit.\n",
				strconv.FormatInt(r.usedBytes>>30, 10), r.profile, r.estimate.Seconds(), r.limit.Seconds())
		}
	}
	return nil
}

// writeV100Notes prints, under the 7.0 points, where the figures come from,
// which of them the preset was fitted on and how far the simulation is
// from each, and what pre-copy's stun rests on.
func writeV100Notes(w io.Writer, rows []row) error {
	var fitted []row
	for _, r := range rows {
		if _, ok := r.errorPct(); ok {
			fitted = append(fitted, r)
		}
	}
	fmt.Fprintln(w, "published_stun_s: vSphere 7.0 documentation, Table 2 \"Estimated Worst-Case Stun Times\" (Tesla V100 PCIe 32 GB,")
	fmt.Fprintln(w, "10 Gb network), the 4 GB VM's column, in whole seconds.")
	if n := len(fitted); n > 1 {
		// The largest size is left out of the fit (migrate.VSphere70Costs).
		heldOut := fitted[n-1]
		fitted = fitted[:n-1]
		var over, sizes []string
		inRounding := true
		for _, r := range fitted {
			if pct, _ := r.errorPct(); pct < -3 || pct > 3 {
				over = append(over, fmt.Sprintf("%.3f s against %s", r.stun.Seconds(), formatSeconds(r.published, r.resolution)))
				sizes = append(sizes, strconv.FormatInt(r.fbBytes>>30, 10))
				d := r.stun - r.published
				inRounding = inRounding && d <= r.resolution/2 && -d <= r.resolution/2
			}
		}
		lo, hi, _ := errorRange(fitted)
		fmt.Fprintf(w, "The %s preset is fitted to the %d to %d GB points: %+.2f %% to %+.2f %% off them.\n", presetLegacy70,
			fitted[0].fbBytes>>30, fitted[len(fitted)-1].fbBytes>>30, lo, hi)
		switch {
		case len(over) > 0 && inRounding:
			fmt.Fprintf(w, "Over 3 %% only at %s GB, within the published rounding (±%s s): %s.\n",
				strings.Join(sizes, " and "), formatSeconds(fitted[0].resolution/2, fitted[0].resolution/10), strings.Join(over, ", "))
		case len(over) > 0:
			fmt.Fprintf(w, "Over 3 %% at %s GB: %s.\n", strings.Join(sizes, ", "), strings.Join(over, ", "))
		}
		pct, _ := heldOut.errorPct()
		fmt.Fprintf(w, "Left out of the fit, the %d GB point is predicted %+.2f %% off.\n", heldOut.fbBytes>>30, pct)
	}
	fmt.Fprintln(w, "expected_stun_s: the same page's Table 1, \"Expected Stun Times\", for a framebuffer not all in use (how much")
	fmt.Fprintln(w, "is, it does not say): a reference, with no error taken against it.")
	c := migrate.PreCopyCosts()
	_, err := fmt.Fprintf(w, "precopy_stun_s: the same VM with the %s preset. Its fixed stun costs, %v in all (quiesce %v, device\n"+
		"checkpoint %v, resume %v, a split no source gives), rest on gMig's published downtimes of GPU live migration\n"+
		"with graphics memory pre-copied (Ma et al., VEE 2018: %v average on Linux guests, %v on Windows).\n",
		presetFBPreCopy, c.Quiesce+c.DeviceCheckpoint+c.Resume, c.Quiesce, c.DeviceCheckpoint, c.Resume,
		119*time.Millisecond, 302*time.Millisecond)
	return err
}
