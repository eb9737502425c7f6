package script

import (
	"fmt"
	"strings"

	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// cmdReport prints a migration's report: the fields that say what
// happened, each in a stable form. rounds adds a line per pre-copy round,
// metrics the workload's before, during and after, and published=D the
// stun's deviation from a published figure.
func (w *world) cmdReport(a *args) (string, error) {
	label := a.need("migration")
	rounds, metrics := a.flag("rounds"), a.flag("metrics")
	published := a.dur("published", 0)
	if a.err != nil {
		return "", a.err
	}
	m, err := w.migration(label)
	if err != nil {
		return "", err
	}
	r := m.m.Report()
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %v %s -> %s over %s, %v mode, %v fidelity\n", label, r.VM, r.Profiles, r.Source,
		r.Destination, strings.Join(m.route, " > "), r.Mode, r.Fidelity)
	if r.Error != "" {
		fmt.Fprintf(&b, "outcome: %v in %v: %s\n", r.Outcome, r.FailedIn, r.Error)
	} else {
		fmt.Fprintf(&b, "outcome: %v\n", r.Outcome)
	}
	fmt.Fprintf(&b, "time: %s to %s, total %s\n", dur(r.Start), dur(r.End), dur(r.Total))
	fmt.Fprintf(&b, "rounds: %d, switchover: %v, expected stun %s\n", len(r.Rounds), r.Switchover, dur(r.ExpectedStun))
	if rounds {
		for _, rd := range r.Rounds {
			t := rd.Total()
			fmt.Fprintf(&b, "  round %d: %d pages, raw %d B, wire %d B in %s, dirtied %d B/s, expected stun %s", rd.Index,
				t.Pages, t.RawBytes, rd.WireBytes, dur(rd.Duration), rd.DirtyRateBytesPerSec, dur(rd.ExpectedStun))
			if rd.Throttle > 0 {
				fmt.Fprintf(&b, ", throttle %.0f %%", 100*rd.Throttle)
			}
			b.WriteByte('\n')
		}
	}
	if r.Stun == 0 {
		b.WriteString("stun: none\n")
	} else {
		fmt.Fprintf(&b, "stun: %s, dominant %v\n", dur(r.Stun), r.Dominant)
		for _, p := range r.StunPhases {
			fmt.Fprintf(&b, "  %v %s\n", p.Phase, dur(p.Duration))
		}
	}
	fmt.Fprintf(&b, "wire: %s for %s of pages, ratio %.3f; device state %d B\n", bytesOf(r.WireBytes), bytesOf(r.RawBytes),
		r.CompressionRatio, r.DeviceStateBytes)
	fmt.Fprintf(&b, "max throttle: %.0f %%\n", 100*r.MaxThrottle)
	if metrics {
		for _, x := range []struct {
			name string
			m    vgpu.Metrics
		}{{"before", r.Before}, {"during", r.During}, {"after", r.After}} {
			b.WriteString(metricsLine(x.name, x.m))
		}
	}
	if published > 0 {
		fmt.Fprintf(&b, "published: %s, simulated %+.2f %%\n", dur(published), 100*float64(r.Stun-published)/float64(published))
	}
	return b.String(), nil
}

// metricsLine prints a workload's metrics over one window of the report.
func metricsLine(name string, m vgpu.Metrics) string {
	if m.To == m.From {
		return fmt.Sprintf("%s: no time yet\n", name)
	}
	if m.Workload == "" {
		return fmt.Sprintf("%s: no workload\n", name)
	}
	return fmt.Sprintf("%s: %s over %s: %d completed (%.1f/s), %d dropped, latency p50 %s p99 %s max %s\n", name, m.Workload,
		dur(m.To-m.From), m.Completed, m.ThroughputPerSec, m.Dropped, dur(m.LatencyP50), dur(m.LatencyP99), dur(m.LatencyMax))
}

// cmdState prints which host holds which VM in which state, and the
// migrations under way.
func (w *world) cmdState(*args) (string, error) {
	var b strings.Builder
	for _, h := range w.hosts {
		var vms []string
		for _, vm := range h.VMs() {
			vms = append(vms, fmt.Sprintf("%s %v", vm.ID(), vm.State()))
		}
		if len(vms) == 0 {
			vms = []string{"-"}
		}
		fmt.Fprintf(&b, "%s: %s\n", h.Name(), strings.Join(vms, ", "))
	}
	for _, m := range w.running() {
		fmt.Fprintf(&b, "%s: %s %s -> %s in %s\n", m.label, m.vm, m.src, m.dst, where(m.m))
	}
	if b.Len() == 0 {
		return "empty\n", nil
	}
	return b.String(), nil
}

// cmdHosts prints each host's memory and GPUs: what it has free.
func (w *world) cmdHosts(*args) (string, error) {
	var b strings.Builder
	for _, h := range w.hosts {
		fmt.Fprintf(&b, "%s: %s of %s RAM free\n", h.Name(), gib(h.FreeRAMBytes()), gib(h.RAMBytes()))
		for _, g := range h.GPUs() {
			var vgpus []string
			for _, v := range g.VGPUs() {
				owner := "remote session"
				if v.VM() != nil {
					owner = v.VM().ID()
				}
				vgpus = append(vgpus, fmt.Sprintf("%s slot %d (%s)", owner, v.Slot(), v.Profile().Name))
			}
			if vm := g.PassthroughVM(); vm != nil {
				vgpus = append(vgpus, vm.ID()+" passthrough")
			}
			if len(vgpus) == 0 {
				vgpus = []string{"-"}
			}
			fmt.Fprintf(&b, "  gpu %d: %s\n", g.Index(), strings.Join(vgpus, ", "))
		}
	}
	if b.Len() == 0 {
		return "no hosts\n", nil
	}
	return b.String(), nil
}

// cmdRates prints each migration's share of a link now.
func (w *world) cmdRates(a *args) (string, error) {
	name := a.need("link")
	if a.err != nil {
		return "", a.err
	}
	s, err := w.ensureSim()
	if err != nil {
		return "", err
	}
	rates, total := s.LinkRates(name)
	var on []*migration
	for _, m := range w.running() {
		for _, l := range m.route {
			if l == name {
				on = append(on, m)
				break
			}
		}
	}
	var b strings.Builder
	for i, r := range rates {
		label := "?"
		if len(on) == len(rates) {
			label = on[i].label
		}
		fmt.Fprintf(&b, "%s: %d B/s\n", label, r)
	}
	goodput := int64(0)
	for _, l := range s.Links() {
		if l.Name == name {
			goodput = l.GoodputBytesPerSec()
		}
	}
	fmt.Fprintf(&b, "total %d B/s of %d B/s\n", total, goodput)
	return b.String(), nil
}

// cmdCheck holds the world to the test kit's invariants (package
// vgpusimtest): a VM the script made is never lost and never runs twice,
// no framebuffer page outside a window holds anything, no scheduler
// granted more time than passed, and the report of every migration that
// ended adds up. Beyond them: a VM that no migration holds is on one host,
// and a host that holds no VM holds nothing of one.
func (w *world) cmdCheck(*args) (string, error) {
	var bad []string
	for _, err := range []error{vgpusimtest.CheckOneOwner(w.hosts, w.vms...), vgpusimtest.CheckScrubbed(w.hosts...),
		vgpusimtest.CheckScheduler(w.hosts...)} {
		if err != nil {
			bad = append(bad, err.Error())
		}
	}
	for _, m := range w.migs {
		if m.m.Done() {
			if err := vgpusimtest.CheckReport(m.m.Report()); err != nil {
				bad = append(bad, err.Error())
			}
		}
	}
	for _, id := range w.vms {
		holders := 0
		for _, h := range w.hosts {
			if _, ok := h.VM(id); ok {
				holders++
			}
		}
		if !w.migrating(id) && holders != 1 {
			bad = append(bad, fmt.Sprintf("VM %s: no migration under way, held by %d hosts", id, holders))
		}
	}
	for _, h := range w.hosts {
		if len(h.VMs()) != 0 {
			continue
		}
		if h.FreeRAMBytes() != h.RAMBytes() {
			bad = append(bad, fmt.Sprintf("host %s holds no VM and %d B of RAM reserved", h.Name(), h.RAMBytes()-h.FreeRAMBytes()))
		}
		for _, g := range h.GPUs() {
			if n, wins := g.VGPUCount(), len(g.Framebuffer().Windows()); n != 0 || wins != 0 {
				bad = append(bad, fmt.Sprintf("host %s holds no VM and gpu %d has %d vGPUs, %d windows", h.Name(), g.Index(), n, wins))
			}
		}
	}
	if len(bad) == 0 {
		return "ok\n", nil
	}
	return "violated: " + strings.Join(bad, "\nviolated: ") + "\n", nil
}

// migrating reports whether a migration of VM id is under way.
func (w *world) migrating(id string) bool {
	for _, m := range w.running() {
		if m.vm == id {
			return true
		}
	}
	return false
}
