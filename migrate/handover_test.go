package migrate

import (
	"errors"
	"testing"
)

// TestHandoverEnumeration runs the commit rule of both ends through every
// combination of what can happen to the commit and the acknowledgement —
// delivered, dropped, delivered after the reader gave up, duplicated,
// replaced by a forgery or a replay (which authentication refuses) — and
// of either end failing before, between or after them, and checks each:
// never two running copies, never none when the VM ran, and each end's
// copy as its Fate says. package live's TestWireMatrix proves the same on
// the wire.
func TestHandoverEnumeration(t *testing.T) {
	type fate int
	const (
		delivered fate = iota
		dropped
		late // arrives after the reader's timeout
		duplicated
		forged // the real one dropped, a forged or replayed one refused
		fates
	)
	// An end fails before the commit, between commit and acknowledgement,
	// or never.
	const (
		failBefore = iota
		failBetween
		failNever
		fails
	)
	cells := 0
	for commit := range fates {
		for ack := range fates {
			for sFail := range fails {
				for dFail := range fails {
					cells++
					src, dst := NewHandover(SourceEnd), NewHandover(DestinationEnd)
					srcAlive, dstAlive := sFail != failBefore, dFail != failBefore
					// The source sends the commit only while alive.
					if srcAlive {
						if err := src.CommitSent(); err != nil {
							t.Fatal(err)
						}
						srcAlive = sFail != failBetween
					}
					sent := src.Holder() == HeldInDoubt
					if sent && dstAlive && (commit == delivered || commit == duplicated) {
						if err := dst.CommitRead(); err != nil {
							t.Fatal(err)
						}
						if commit == duplicated {
							// The second copy finds the VM taken: refused.
							if err := dst.CommitRead(); !errors.Is(err, ErrConfig) {
								t.Fatalf("duplicate commit: %v", err)
							}
						}
					}
					// A commit that came late found the destination gone.
					ackSent := dst.Holder() == HeldByDestination && dFail != failBetween
					if ackSent && srcAlive && (ack == delivered || ack == duplicated) {
						if err := src.Acknowledged(); err != nil {
							t.Fatal(err)
						}
					}
					succeeded := src.Holder() == HeldByDestination
					srcCopy, dstCopy := outcome(&src, succeeded), outcome(&dst, dst.Holder() == HeldByDestination)
					running := 0
					for _, c := range []copyState{srcCopy, dstCopy} {
						if c == runningCopy {
							running++
						}
					}
					if running > 1 || srcCopy == noCopy && dstCopy == noCopy {
						t.Errorf("commit %d, ack %d, source fails %d, destination fails %d: source %v, destination %v",
							commit, ack, sFail, dFail, srcCopy, dstCopy)
					}
				}
			}
		}
	}
	t.Logf("%d cells, every one with one copy of the VM and at most one running", cells)
}

type copyState int

const (
	noCopy copyState = iota
	pausedCopy
	runningCopy
)

func (c copyState) String() string { return [...]string{"gone", "paused", "running"}[c] }

// outcome is what an end's copy becomes: its fate on a failure, or the
// success's.
func outcome(h *Handover, succeeded bool) copyState {
	if succeeded {
		if h.End() == SourceEnd {
			return noCopy
		}
		return runningCopy
	}
	switch h.OnFailure() {
	case RollBack, Keep:
		return runningCopy
	case KeepPaused:
		return pausedCopy
	}
	return noCopy
}

func TestHandoverMisuse(t *testing.T) {
	src, dst := NewHandover(SourceEnd), NewHandover(DestinationEnd)
	for name, err := range map[string]error{
		"source reads a commit":      src.CommitRead(),
		"acknowledged before commit": src.Acknowledged(),
		"destination sends a commit": dst.CommitSent(),
		"destination acknowledged":   dst.Acknowledged(),
	} {
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if !src.MayRun() || dst.MayRun() || src.OnFailure() != RollBack || dst.OnFailure() != Discard {
		t.Errorf("before the commit: source may run %v (%v), destination %v (%v)", src.MayRun(), src.OnFailure(), dst.MayRun(), dst.OnFailure())
	}
}
