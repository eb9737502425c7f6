package migrate

import (
	"fmt"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/vgpu"
)

// Traffic counts pages moved and the bytes they took.
type Traffic struct {
	// Pages counts the pages sent, ZeroPages those of them that were zero
	// (sent as a page table entry only).
	Pages     int64 `json:"pages"`
	ZeroPages int64 `json:"zero_pages"`
	// RawBytes is the pages' size; WireBytes what they took on the wire,
	// after zero elision and compression, with their records' framing.
	RawBytes  int64 `json:"raw_bytes"`
	WireBytes int64 `json:"wire_bytes"`
}

func (t *Traffic) add(o Traffic) {
	t.Pages += o.Pages
	t.ZeroPages += o.ZeroPages
	t.RawBytes += o.RawBytes
	t.WireBytes += o.WireBytes
}

// Round is one pre-copy round.
type Round struct {
	Index int `json:"index"`
	// RAM and Framebuffers (one per vGPU) are what the round sent of each
	// region.
	RAM          Traffic   `json:"ram"`
	Framebuffers []Traffic `json:"framebuffers"`
	// WireBytes is everything the round put on the wire, framing and the
	// end-of-round record included.
	WireBytes int64 `json:"wire_bytes"`
	// Start is the Sim's time at the round's start; Duration how long it
	// took to arrive.
	Start    time.Duration `json:"start_ns"`
	Duration time.Duration `json:"duration_ns"`
	// BandwidthBytesPerSec is the rate measured: WireBytes over Duration.
	BandwidthBytesPerSec int64 `json:"bandwidth_bytes_per_sec"`
	// DirtyBytes is the raw size of the pages dirtied while the round was
	// on the wire, DirtyRateBytesPerSec the same per second.
	DirtyBytes           int64 `json:"dirty_bytes"`
	DirtyRateBytesPerSec int64 `json:"dirty_rate_bytes_per_sec"`
	// ExpectedStun is the switchover rule's prediction after the round.
	ExpectedStun time.Duration `json:"expected_stun_ns"`
	// Throttle is the cut applied to the workload during the round.
	Throttle float64 `json:"throttle"`
}

func (r Round) total() Traffic {
	t := r.RAM
	for _, f := range r.Framebuffers {
		t.add(f)
	}
	return t
}

// StunPhase is the time one phase of the stun took.
type StunPhase struct {
	Phase    Phase         `json:"phase"`
	Duration time.Duration `json:"duration_ns"`
}

// FinalTraffic is what the stun sent.
type FinalTraffic struct {
	RAM          Traffic   `json:"ram"`
	Framebuffers []Traffic `json:"framebuffers"`
}

// Report is the account of one migration. It marshals to JSON with units
// in the field names; String prints it for a person.
type Report struct {
	VM          string   `json:"vm"`
	Source      string   `json:"source"`
	Destination string   `json:"destination"`
	Profiles    []string `json:"profiles"`
	Mode        Mode     `json:"mode"`
	Fidelity    Fidelity `json:"fidelity"`
	Link        string   `json:"link"`

	// Outcome is PhaseDone or PhaseFailed (or the current phase while the
	// migration runs); Error and FailedIn say why and where it failed.
	Outcome  Phase  `json:"outcome"`
	Error    string `json:"error,omitempty"`
	FailedIn Phase  `json:"failed_in,omitempty"`

	// Start and End are the Sim's times; Total is End-Start.
	Start time.Duration `json:"start_ns"`
	End   time.Duration `json:"end_ns"`
	Total time.Duration `json:"total_ns"`

	Rounds       []Round       `json:"rounds"`
	Switchover   Reason        `json:"switchover"`
	ExpectedStun time.Duration `json:"expected_stun_ns"`
	// MaxThrottle is the largest cut the migration applied to the workload.
	MaxThrottle float64 `json:"max_throttle"`

	// Stun is the VM's downtime, from quiesce to the destination's
	// acknowledgement of the resume, StunPhases its parts, Dominant the
	// longest of them.
	Stun       time.Duration `json:"stun_ns"`
	StunPhases []StunPhase   `json:"stun_phases"`
	Dominant   Phase         `json:"dominant"`

	// PreCopy and Final are the pages sent while the VM ran and during the
	// stun; DeviceStateBytes the saved device states' size.
	PreCopy          Traffic      `json:"precopy"`
	Final            FinalTraffic `json:"final"`
	DeviceStateBytes int64        `json:"device_state_bytes"`
	// WireBytes is every byte of the stream; RawBytes the pages' size;
	// CompressionRatio RawBytes over the pages' wire bytes.
	WireBytes        int64   `json:"wire_bytes"`
	RawBytes         int64   `json:"raw_bytes"`
	CompressionRatio float64 `json:"compression_ratio"`

	// Before, During and After are the workload's metrics over
	// MetricsWindow before the start, during the migration, and over
	// MetricsWindow after its end (as much of it as has passed).
	Before vgpu.Metrics `json:"before"`
	During vgpu.Metrics `json:"during"`
	After  vgpu.Metrics `json:"after"`

	Events []Event `json:"events"`
}

// MeetsStandard reports whether the migration succeeded with a stun under
// vMotion's one-second standard.
func (r *Report) MeetsStandard() bool { return r.Outcome == PhaseDone && r.Stun < time.Second }

func (r *Report) addStun(p Phase, d time.Duration) {
	for i := range r.StunPhases {
		if r.StunPhases[i].Phase == p {
			r.StunPhases[i].Duration += d
			r.Stun += d
			return
		}
	}
	r.StunPhases = append(r.StunPhases, StunPhase{Phase: p, Duration: d})
	r.Stun += d
}

func (m *Migration) initReport() {
	r := &m.rep
	r.VM, r.Source, r.Destination = m.vm.ID(), m.src.Name(), m.dst.Name()
	for _, p := range m.vm.Profiles() {
		r.Profiles = append(r.Profiles, p.Name)
	}
	r.Mode, r.Fidelity, r.Link = m.cfg.Mode, m.cfg.Fidelity, m.cfg.Link.Name
	r.Start = m.sim.now
	r.Final.Framebuffers = make([]Traffic, len(m.srcRegs)-1)
}

// closeReport totals the report when the migration ends.
func (m *Migration) closeReport() {
	r := &m.rep
	r.Outcome, r.End = m.phase, m.sim.now
	r.Total = r.End - r.Start
	if pe, ok := m.err.(*PhaseError); ok {
		r.Error, r.FailedIn = pe.Error(), pe.Phase
	}
	var best StunPhase
	for _, p := range r.StunPhases {
		if p.Duration > best.Duration {
			best = p
		}
	}
	r.Dominant = best.Phase
	pages := r.PreCopy
	pages.add(r.Final.RAM)
	for _, f := range r.Final.Framebuffers {
		pages.add(f)
	}
	r.RawBytes = pages.RawBytes
	r.WireBytes = m.xfer.total()
	if pages.WireBytes > 0 {
		r.CompressionRatio = float64(pages.RawBytes) / float64(pages.WireBytes)
	}
	w := m.cfg.MetricsWindow
	r.Before = m.metrics(r.Start-w, r.Start)
	r.During = m.metrics(r.Start, r.End)
}

// Report returns the migration's report as it stands. After the end its
// After metrics grow with the time the Sim has advanced since, up to
// MetricsWindow.
func (m *Migration) Report() *Report {
	r := m.rep
	r.Outcome = m.phase
	r.Rounds = append([]Round(nil), r.Rounds...)
	r.StunPhases = append([]StunPhase(nil), r.StunPhases...)
	r.Events = m.Events()
	if m.Done() {
		r.After = m.metrics(r.End, min(m.sim.now, r.End+m.cfg.MetricsWindow))
	}
	return &r
}

// metrics returns the workload's metrics over [from, to) of the Sim's
// time, on the clock of the host the workload runs on.
func (m *Migration) metrics(from, to time.Duration) vgpu.Metrics {
	vm, base := m.vm, m.srcBase
	if m.handedOver || m.phase == PhaseDone {
		vm, base = m.in, m.dstBase
	}
	w := vm.Workload()
	if w == nil || to <= from {
		return vgpu.Metrics{}
	}
	return w.Metrics(from+base, to+base)
}

// String prints the report for a person.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v -> %s over %s, %v mode, %v fidelity: %v\n", r.VM, r.Profiles, r.Destination, r.Link, r.Mode, r.Fidelity, r.Outcome)
	if r.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", r.Error)
	}
	fmt.Fprintf(&b, "  total %v, stun %v (dominant: %v), %d round(s), switchover: %v\n", r.Total, r.Stun, r.Dominant, len(r.Rounds), r.Switchover)
	for _, rd := range r.Rounds {
		t := rd.total()
		fmt.Fprintf(&b, "  round %2d: %8d pages %12d B raw %12d B wire in %v; dirtied %d B/s; expected stun %v", rd.Index, t.Pages, t.RawBytes, rd.WireBytes, rd.Duration, rd.DirtyRateBytesPerSec, rd.ExpectedStun)
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
