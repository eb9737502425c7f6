package migrate

import (
	"fmt"
	"strings"

	"github.com/vgpusim/vgpusim/vgpu"
)

// route returns the names of the links the stream crossed, in order.
func (r *Report) route() []string { return append([]string{r.Link}, r.Via...) }

// String prints the report for a person.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v -> %s over %s, %v mode, %v fidelity: %v\n", r.VM, r.Profiles, r.Destination, joinRoute(r.route()), r.Mode, r.Fidelity, r.Outcome)
	if r.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", r.Error)
	}
	dominant := "none"
	if r.Dominant != 0 {
		dominant = r.Dominant.String()
	}
	fmt.Fprintf(&b, "  total %v, stun %v (dominant: %s), %d round(s), switchover: %v\n", r.Total, r.Stun, dominant, len(r.Rounds), r.Switchover)
	for _, rd := range r.Rounds {
		t := rd.Total()
		fmt.Fprintf(&b, "  round %2d: %8d pages %12d B raw %12d B wire in %v", rd.Index, t.Pages, t.RawBytes, rd.WireBytes, rd.Duration)
		// A destination's rounds have neither: only the source knows them.
		if rd.DirtyRateBytesPerSec != 0 || rd.ExpectedStun != 0 {
			fmt.Fprintf(&b, "; dirtied %d B/s; expected stun %v", rd.DirtyRateBytesPerSec, rd.ExpectedStun)
		}
		if rd.Throttle > 0 {
			fmt.Fprintf(&b, "; throttle %.0f %%", 100*rd.Throttle)
		}
		b.WriteByte('\n')
	}
	for _, p := range r.StunPhases {
		fmt.Fprintf(&b, "  stun %-18v %v\n", p.Phase.String()+":", p.Duration)
	}
	fmt.Fprintf(&b, "  wire %d B for %d B of pages (ratio %.2f), device state %d B, max throttle %.0f %%\n",
		r.WireBytes, r.RawBytes, r.CompressionRatio, r.DeviceStateBytes, 100*r.MaxThrottle)
	if p := r.PostCopy; p != nil {
		fmt.Fprintf(&b, "  post-copy: window %v, %d pages owed, %d pushed, %d faults in %d fetches (p50 %v, p99 %v, max %v), stall %v, paused %v\n",
			p.Window, p.OwedPages, p.Pushed.Pages, p.Faults, p.Fetches, p.FaultLatencyP50, p.FaultLatencyP99, p.FaultLatencyMax, p.Stall, p.Paused)
	}
	if rr := r.Remote; rr != nil {
		fmt.Fprintf(&b, "  remote GPUs: %d on %v, no framebuffer moved, handed over in %v\n", rr.Sessions, rr.Servers, rr.Handover)
	}
	for _, m := range []struct {
		name string
		m    vgpu.Metrics
	}{{"before", r.Before}, {"during", r.During}, {"after", r.After}} {
		if m.m.Workload != "" {
			fmt.Fprintf(&b, "  workload %-7s %v\n", m.name+":", m.m)
		}
	}
	return b.String()
}
