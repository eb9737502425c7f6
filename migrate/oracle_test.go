package migrate

import (
	"testing"
	"time"
)

// slowLink is 100 Mb/s, so that a small VM's migration lasts long enough
// for its workload to rewrite all its pages.
var slowLink = Link{Name: "100m", BandwidthBitsPerSec: 100e6, Efficiency: ethernetEfficiency, Latency: datacentreLatency}

// runToRelease steps m until the destination has acknowledged the resume:
// the source is still intact and paused, the destination resumed, and no
// time has passed since the stun's end.
func runToRelease(t tb, m *Migration) {
	t.Helper()
	runTo(t, m, PhaseRelease)
}

// runTo steps m until it enters phase p.
func runTo(t tb, m *Migration, p Phase) {
	t.Helper()
	for m.Phase() != p {
		if _, ok, err := m.Step(); err != nil || !ok {
			t.Fatalf("migration ended in %v before %v: %v", m.Phase(), p, m.Err())
		}
	}
}

// TestMemoryOracle: after the migration the destination's counters show
// one clean step, in both fidelities and modes; the pages the workload
// re-dirtied after round 0 sent them were sent again (later rounds or the
// stun carried pages, and the counts, which only grow, are the latest).
func TestMemoryOracle(t *testing.T) {
	for _, fid := range []Fidelity{Bytes, Model} {
		for _, mode := range []Mode{PreCopy, Legacy} {
			t.Run(fid.String()+"/"+mode.String(), func(t *testing.T) {
				src, dst := smallPageHosts(t)
				// 400 pages a second over 200 pages: every page is
				// rewritten twice a second, while the migration runs.
				w := &counterWorkload{PagesPerSec: 400, Pages: 200}
				vm := counterVM(t, src, w)
				must(t, src.Advance(1300*time.Millisecond))
				w.Check(t, vm)
				sameClock(t, src, dst)
				s, err := NewSim(SimConfig{}, src, dst)
				must(t, err)
				m, err := s.Start(vm, dst, Config{Policy: Policy{Mode: mode}, Fidelity: fid, Link: slowLink})
				must(t, err)
				before := w.Pos
				runToRelease(t, m)
				if w.Pos-before < int64(w.Pages) {
					t.Fatalf("only %d writes during the migration", w.Pos-before)
				}
				w.Check(t, vm)
				w.Check(t, m.VM())
				rep := m.Report()
				resent := rep.Final.RAM.Pages + rep.Final.Framebuffers[0].Pages
				for _, r := range rep.Rounds[1:] {
					resent += r.Total().Pages
				}
				if resent == 0 {
					t.Fatal("no page was sent twice: the resend path did not run")
				}
				_, err = m.Run()
				must(t, err)
				// The destination runs the workload on.
				_, err = s.Advance(time.Second)
				must(t, err)
				w.Check(t, m.VM())
			})
		}
	}
}
