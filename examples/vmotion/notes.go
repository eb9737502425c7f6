package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
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
	if _, err := fmt.Fprintf(w, "Stun under vMotion's 1 s standard over %s: %v %d of %d profiles, %v %d of %d, %v %d of %d.\n",
		p.link.Name, migrate.PreCopy, meets[migrate.PreCopy], profiles, migrate.PostCopy, meets[migrate.PostCopy], profiles,
		migrate.Legacy, meets[migrate.Legacy], profiles); err != nil {
		return err
	}
	return writePostCopyNotes(w, rows)
}

// span is the least and greatest of vs, formatted by f: "a to b", or "a"
// when they print alike.
func span[T cmp.Ordered](vs []T, f func(T) string) string {
	if len(vs) == 0 {
		return ""
	}
	if lo, hi := f(slices.Min(vs)), f(slices.Max(vs)); lo != hi {
		return lo + " to " + hi
	}
	return f(vs[0])
}

// seconds formats a duration as the table's seconds.
func seconds(d time.Duration) string { return formatSeconds(d, 0) }

// writePostCopyNotes prints what post-copy buys against pre-copy, the
// stun, and what it costs, the degradation after it, from the profiles
// that both moved.
func writePostCopyNotes(w io.Writer, rows []row) error {
	pre := map[string]row{}
	for _, r := range rows {
		if r.mode == migrate.PreCopy && r.outcome == outcomeMoved {
			pre[r.profile] = r
		}
	}
	var (
		preStun, postStun, windows, stalls, p50s, p99s, paused []time.Duration
		faults                                                 []int64
		n, lower, longer, growing                              int
		last                                                   row
	)
	for _, r := range rows {
		pr, ok := pre[r.profile]
		if r.mode != migrate.PostCopy || r.outcome != outcomeMoved || !ok {
			continue
		}
		preStun, postStun = append(preStun, pr.stun), append(postStun, r.stun)
		windows, stalls, faults = append(windows, r.window), append(stalls, r.stall), append(faults, r.faults)
		paused = append(paused, r.stun+r.stall)
		if r.faults > 0 {
			p50s, p99s = append(p50s, r.faultP50), append(p99s, r.faultP99)
		}
		if r.stun < pr.stun {
			lower++
		}
		if r.stun+r.stall > pr.stun {
			longer++
		}
		if n > 0 && r.usedBytes > last.usedBytes && r.window > last.window {
			growing++
		}
		last = r
		n++
	}
	if n == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Against %v, on the same stun costs (%s), %v's stun sends the device states and a list of the pages that follow, "+
		"not the pages: %s s against %s s, shorter on %d of %d profiles. ",
		migrate.PreCopy, presetFBPreCopy, migrate.PostCopy, span(postStun, seconds), span(preStun, seconds), lower, n)
	fmt.Fprintf(&b, "The pages follow the VM, which runs at the destination degraded until the last arrives: a window (%s) of %s s",
		colWindow, span(windows, seconds))
	if growing == n-1 && n > 1 {
		b.WriteString(", growing with the framebuffer in use")
	}
	if len(p50s) == 0 {
		b.WriteString(". It touches no page before it arrives.")
	} else {
		fmt.Fprintf(&b, ". It touches %s pages before they arrive (faults) and waits for each to be fetched from the source, "+
			"%s ms at the median and %s ms at the 99th percentile: %s s of stall in all (stall_s)",
			span(faults, func(v int64) string { return strconv.FormatInt(v, 10) }),
			span(p50s, formatMillis), span(p99s, formatMillis), span(stalls, seconds))
	}
	fmt.Fprintf(&b, ". The stun and the stall together, %s s, hold the VM up longer than pre-copy's stun on %d of %d profiles. "+
		"And in the window the source holds pages the VM lacks: should the source fail, the VM is lost (migrate.ErrVMLost), "+
		"where a pre-copy migration that fails before the resume rolls back to the source.",
		span(paused, seconds), longer, n)
	_, err := io.WriteString(w, wrap(b.String(), noteWidth))
	return err
}

// noteWidth is the longest line of a note that wrap fills.
const noteWidth = 115

// wrap fills the words of s into lines of at most width characters (a
// longer word alone on its line), each ending in a newline.
func wrap(s string, width int) string {
	var out, line strings.Builder
	for _, word := range strings.Fields(s) {
		if line.Len() > 0 && len([]rune(line.String()))+1+len([]rune(word)) > width {
			out.WriteString(line.String() + "\n")
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(word)
	}
	if line.Len() > 0 {
		out.WriteString(line.String() + "\n")
	}
	return out.String()
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
