package migrate

import (
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
	// DeltaPages counts the pages sent as deltas against what the
	// destination held (Config.DeltaCacheBytes), UnchangedPages those of
	// them sent without bytes because they had not changed; neither is in
	// ZeroPages.
	DeltaPages     int64 `json:"delta_pages,omitempty"`
	UnchangedPages int64 `json:"unchanged_pages,omitempty"`
}

// Add counts o in t.
func (t *Traffic) Add(o Traffic) {
	t.Pages += o.Pages
	t.ZeroPages += o.ZeroPages
	t.RawBytes += o.RawBytes
	t.WireBytes += o.WireBytes
	t.DeltaPages += o.DeltaPages
	t.UnchangedPages += o.UnchangedPages
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
	// took to arrive. In a live report both are on the wall clock of the
	// side that wrote it: at the destination a round starts where the
	// previous one ended (the first, when the stream opened) and ends
	// when its end-of-round record arrived.
	Start    time.Duration `json:"start_ns"`
	Duration time.Duration `json:"duration_ns"`
	// BandwidthBytesPerSec is the rate measured: WireBytes over Duration.
	BandwidthBytesPerSec int64 `json:"bandwidth_bytes_per_sec"`
	// DirtyBytes is the raw size of the pages dirtied while the round was
	// on the wire, DirtyRateBytesPerSec the same per second. The source
	// alone knows them; a destination's report leaves them zero.
	DirtyBytes           int64 `json:"dirty_bytes"`
	DirtyRateBytesPerSec int64 `json:"dirty_rate_bytes_per_sec"`
	// DirtyWireBytes is what those pages are predicted to take on the
	// wire, from their content classes (Dirty); source only.
	DirtyWireBytes int64 `json:"dirty_wire_bytes"`
	// ExpectedStun is the switchover rule's prediction after the round;
	// source only, as is Throttle.
	ExpectedStun time.Duration `json:"expected_stun_ns"`
	// Throttle is the cut applied to the workload during the round.
	Throttle float64 `json:"throttle"`
}

// Total is what the round sent of every region.
func (r Round) Total() Traffic {
	t := r.RAM
	for _, f := range r.Framebuffers {
		t.Add(f)
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
//
// A live migration has two reports, one from each side, their times on
// that side's wall clock from its own start. Send's fills every field but
// the workload's metrics and Events. Receive's fills what the destination
// measures itself — the rounds as their records arrived, the pages and
// bytes it applied, the stun phases it saw, the digests it verified — and
// what the source declared in the handshake (Source, Mode); the fields
// only the source can know (Switchover, ExpectedStun, MaxThrottle, each
// round's dirty rate, expected stun and throttle) stay zero there. Each
// field's comment says where the two differ.
type Report struct {
	VM          string   `json:"vm"`
	Source      string   `json:"source"`
	Destination string   `json:"destination"`
	Profiles    []string `json:"profiles"`
	Mode        Mode     `json:"mode"`
	Fidelity    Fidelity `json:"fidelity"`
	// Live says the migration ran over real connections on wall time
	// (Send, Receive); its fidelity is then Bytes.
	Live bool   `json:"live,omitempty"`
	Link string `json:"link"`
	// Via are the names of the further links the stream crossed
	// (Config.Via), in order.
	Via []string `json:"via,omitempty"`

	// Outcome is PhaseDone or PhaseFailed (or the current phase while the
	// migration runs); Error and FailedIn say why and where it failed.
	Outcome  Phase  `json:"outcome"`
	Error    string `json:"error,omitempty"`
	FailedIn Phase  `json:"failed_in,omitempty"`

	// Start and End are the Sim's times; Total is End-Start. In a live
	// report they are wall time since that side's start, Start zero.
	Start time.Duration `json:"start_ns"`
	End   time.Duration `json:"end_ns"`
	Total time.Duration `json:"total_ns"`

	// Rounds are the pre-copy rounds; a destination has one for each
	// end-of-round record it received.
	Rounds []Round `json:"rounds"`
	// Switchover is why pre-copy ended and ExpectedStun the stun it
	// predicted then; source only.
	Switchover   Reason        `json:"switchover"`
	ExpectedStun time.Duration `json:"expected_stun_ns"`
	// MaxThrottle is the largest cut the migration applied to the
	// workload; source only.
	MaxThrottle float64 `json:"max_throttle"`

	// Stun is the VM's downtime, from quiesce to the destination's
	// acknowledgement of the resume, StunPhases its parts, Dominant the
	// longest of them (zero, and omitted from JSON, when there was no
	// stun, as in a migration that failed before it). A destination
	// fills them when the migration succeeded, from what it sees on its
	// own clock: the stun from the arrival of the last end-of-round
	// record, after which the source stops the VM, to its own
	// acknowledgement of the resume. PhaseFinalRAM and
	// PhaseFinalFramebuffer end when the last of those pages arrived
	// (the source's quiesce and device save, which it cannot see apart,
	// fall in the first), PhaseDeviceState when the end of the stream
	// arrived and its digests checked; PhaseRestore and PhaseResume are
	// its own.
	Stun       time.Duration `json:"stun_ns"`
	StunPhases []StunPhase   `json:"stun_phases"`
	Dominant   Phase         `json:"dominant,omitempty"`

	// PreCopy and Final are the pages sent while the VM ran and during the
	// stun; DeviceStateBytes the saved device states' size. At the
	// destination they are the pages applied before and after the last
	// end-of-round record, and the device states received; their
	// WireBytes count their records whole, framing included.
	PreCopy          Traffic      `json:"precopy"`
	Final            FinalTraffic `json:"final"`
	DeviceStateBytes int64        `json:"device_state_bytes"`
	// WireBytes is every byte of the stream (at the destination, every
	// byte of it read), and of a post-copy's: the list of the pages that
	// follow, the stream that pushes them and its demand fetches; RawBytes the pages' size (at the destination, of
	// the pages applied); CompressionRatio RawBytes over the pages' wire
	// bytes.
	WireBytes        int64   `json:"wire_bytes"`
	RawBytes         int64   `json:"raw_bytes"`
	CompressionRatio float64 `json:"compression_ratio"`
	// RegionDigests are the xxhash64 digests of guest RAM and each
	// framebuffer, taken during the stun of a live migration (Send) or
	// after the stream verified (Receive); the destination's must equal
	// the source's.
	RegionDigests []Digest `json:"region_digests,omitempty"`

	// Before, During and After are the workload's metrics over
	// MetricsWindow before the start, during the migration, and over
	// MetricsWindow after its end (as much of it as has passed). Work
	// counts in the window in which it completed: what the stun held up
	// completes after the resume, so the stun's cost to latency shows in
	// After, not During.
	Before vgpu.Metrics `json:"before"`
	During vgpu.Metrics `json:"during"`
	After  vgpu.Metrics `json:"after"`

	// PostCopy is the account of the post-copy phase, for a migration
	// that switched over into it (PostCopy mode, SwitchToPostCopy); nil
	// otherwise.
	PostCopy *PostCopyReport `json:"post_copy,omitempty"`

	// Remote is the account of the VM's remote GPUs (vgpu.VMSpec.Remote),
	// for a VM that has them; nil otherwise.
	Remote *RemoteReport `json:"remote,omitempty"`

	Events []Event `json:"events"`
}

// RemoteReport is what a migration did with the VM's remote GPU sessions.
// Their framebuffers are their servers', so no page of them moves: the
// sessions are handed over to the destination at the commit, and answer
// again once the VM's connection to each server is made from its new host.
type RemoteReport struct {
	// Sessions is the VM's remote GPUs; Servers the hosts they are on,
	// one entry a session.
	Sessions int      `json:"sessions"`
	Servers  []string `json:"servers"`
	// Handover is the time from the commit until the sessions answer the
	// destination (vgpu.VM.HandOverRemote): the VM's GPU work waits that
	// long after the stun. Zero unless the destination kept them.
	Handover time.Duration `json:"handover_ns"`
}

// MeetsStandard reports whether the migration succeeded with a stun under
// vMotion's one-second standard.
func (r *Report) MeetsStandard() bool { return r.Outcome == PhaseDone && r.Stun < time.Second }

// AddStun adds d to the stun and to phase p's part of it.
func (r *Report) AddStun(p Phase, d time.Duration) {
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

// Settle sets what the report derives from its other fields: the dominant
// stun phase, the pages' raw size and the compression ratio. A driver
// that fills a report itself (a live destination) calls it last.
func (r *Report) Settle() {
	var best StunPhase
	for _, p := range r.StunPhases {
		if p.Duration > best.Duration {
			best = p
		}
	}
	r.Dominant = best.Phase
	pages := r.PreCopy
	pages.Add(r.Final.RAM)
	for _, f := range r.Final.Framebuffers {
		pages.Add(f)
	}
	if pc := r.PostCopy; pc != nil {
		pages.Add(pc.Pushed)
		pages.Add(pc.Faulted)
	}
	r.RawBytes = pages.RawBytes
	if pages.WireBytes > 0 {
		r.CompressionRatio = float64(pages.RawBytes) / float64(pages.WireBytes)
	}
}

// Report returns the migration's report as it stands. After the end its
// After metrics grow with the time the Sim has advanced since, up to
// MetricsWindow.
func (m *Migration) Report() *Report {
	r := m.core.Report()
	if m.core.Phase() == PhasePostCopy {
		// The window and a pause run on to now, not to the last event.
		r.PostCopy = m.core.postCopyReport(m.sim.now)
	}
	r.Source, r.Destination, r.Fidelity, r.Link = m.srcHost.Name(), m.dst.Name(), m.cfg.Fidelity, m.cfg.Link.Name
	for _, l := range m.cfg.Via {
		r.Via = append(r.Via, l.Name)
	}
	for _, p := range m.vm.Profiles() {
		r.Profiles = append(r.Profiles, p.Name)
	}
	if len(m.remote) > 0 {
		r.Remote = &RemoteReport{Sessions: len(m.remote), Handover: m.remoteHandover}
		for _, s := range m.remote {
			r.Remote.Servers = append(r.Remote.Servers, s.Server().Name())
		}
	}
	if m.Done() {
		r.WireBytes, r.Before, r.During = m.wireBytes, m.before, m.during
		r.After = m.metrics(r.End, min(m.sim.now, r.End+m.cfg.MetricsWindow))
	}
	return r
}

// metrics returns the workload's metrics over [from, to) of the Sim's
// time, which is also the clock of the host the workload runs on.
func (m *Migration) metrics(from, to time.Duration) vgpu.Metrics {
	vm := m.vm
	if m.handedOver || m.core.Phase() == PhaseDone {
		vm = m.in
	}
	w := vm.Workload()
	if w == nil || to <= from {
		return vgpu.Metrics{}
	}
	return w.Metrics(from, to)
}
