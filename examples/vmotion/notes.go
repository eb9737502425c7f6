package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vgpusim/vgpusim/migrate"
)

// limit is the stun-time limit Legacy rows run under, 6.7 U1's.
const limit = migrate.VSphere67U1StunLimit

// writeNotes prints, under the table, what its columns cannot say: where
// the published figures come from and why Legacy differs from them, what a
// refusal leaves behind, and the tally against the standard.
func writeNotes(w io.Writer, p params, rows []row) error {
	var sizes []string
	for _, s := range migrate.PublishedStun() {
		sizes = append(sizes, strconv.Itoa(s.UsedGiB))
	}
	fmt.Fprintln(w, "published_stun_s: VMware's vSphere 6.7 U1 stun times with a vGPU over 10 GbE, by GB of framebuffer in use")
	fmt.Fprintf(w, "(%s GB), the figures Legacy mode's constants are fitted to; the table has no figure for the other\n", strings.Join(sizes, ", "))
	fmt.Fprintln(w, "profiles' sizes.")
	lo, hi, n := 0.0, 0.0, 0
	var minRes, maxRes int64
	for _, r := range rows {
		res := r.fbBytes - r.usedBytes
		if minRes == 0 || res < minRes {
			minRes = res
		}
		maxRes = max(maxRes, res)
		if r.published == 0 || r.outcome != outcomeMoved {
			continue
		}
		dev := 100 * (r.stun.Seconds() - r.published.Seconds()) / r.published.Seconds()
		if n == 0 || dev < lo {
			lo = dev
		}
		if n == 0 || dev > hi {
			hi = dev
		}
		n++
	}
	switch {
	case n == 0:
	case hi <= 0:
		fmt.Fprintf(w, "Legacy stun is %.1f %% to %.1f %% below the published figure: the vGPU manager reserves %d to %d MiB of\n",
			-hi, -lo, minRes>>20, maxRes>>20)
		fmt.Fprintln(w, "each profile's framebuffer, so the framebuffer in use (used_gib) is a little under its nominal size (fb_gib).")
	case p.link.GoodputBytesPerSec() < migrate.LegacyCheckpointPathBytesPerSec:
		fmt.Fprintf(w, "Legacy stun is %+.1f %% to %+.1f %% off the published figure: %s carries %.1f MB/s, less than the %.1f MB/s\n",
			lo, hi, p.link.Name, float64(p.link.GoodputBytesPerSec())/1e6, float64(migrate.LegacyCheckpointPathBytesPerSec)/1e6)
		fmt.Fprintln(w, "at which 6.7 U1's device checkpoint path moved the framebuffer during the stun.")
	default:
		fmt.Fprintf(w, "Legacy stun is %+.1f %% to %+.1f %% off the published figure.\n", lo, hi)
	}
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
	fmt.Fprintf(w, "Stun under vMotion's 1 s standard over %s: %v %d of %d profiles, %v %d of %d.\n",
		p.link.Name, migrate.PreCopy, meets[migrate.PreCopy], profiles, migrate.Legacy, meets[migrate.Legacy], profiles)
	c := migrate.PreCopyCosts()
	_, err := fmt.Fprintf(w, "Pre-copy stun rests on assumed fixed costs, unmeasured: quiesce %v, device checkpoint %v, resume %v.\n",
		c.Quiesce, c.DeviceCheckpoint, c.Resume)
	return err
}
