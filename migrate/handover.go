package migrate

import "fmt"

// The commit rule: at most one running copy of a VM, whatever the wire
// between its two ends does. Each end holds a Handover and asks it, at a
// failure, what to do with its copy. The source hands the VM over by
// sending a commit and learns that it has gone by the destination's
// acknowledgement; the destination takes it by reading the commit. Until
// the commit is sent, only the source may run the VM; once the
// destination has read it, only the destination may. Between the two, the
// source cannot know whether the commit arrived: it keeps its copy paused,
// and the VM is never lost, because a destination that did not read the
// commit discards nothing but its own copy. A commit can be neither forged
// nor replayed (package live authenticates it and binds it to its
// migration), so the only ways for the destination to hold the VM are the
// source's own.

// End is one end of a migration.
type End uint8

const (
	// SourceEnd is the end that runs the VM when the migration starts.
	SourceEnd End = iota
	// DestinationEnd is the end the VM moves to.
	DestinationEnd
)

func (e End) String() string {
	if e == SourceEnd {
		return "source"
	}
	return "destination"
}

// Holder says who may run the VM, as one end of its migration knows it.
type Holder uint8

const (
	// HeldBySource: the source may run the VM; the commit has not been
	// sent (at the source) or read (at the destination).
	HeldBySource Holder = iota
	// HeldInDoubt: the source sent the commit and has not heard back. It
	// may not run its copy, and may not discard it either.
	HeldInDoubt
	// HeldByDestination: the destination read the commit (at the
	// destination), or acknowledged it (at the source).
	HeldByDestination
)

var holderNames = [...]string{"source", "in doubt", "destination"}

func (h Holder) String() string {
	if int(h) < len(holderNames) {
		return holderNames[h]
	}
	return fmt.Sprintf("Holder(%d)", uint8(h))
}

// Fate is what one end does with its copy of the VM when its migration
// fails.
type Fate uint8

const (
	// RollBack: the source gives the VM back as it was, running if it ran.
	RollBack Fate = iota
	// KeepPaused: the source keeps its copy paused and unchanged; the
	// outcome is in doubt.
	KeepPaused
	// Release: the source lets its copy go; the destination runs the VM.
	Release
	// Discard: the destination gives up its copy and holds nothing.
	Discard
	// Keep: the destination keeps the VM it took.
	Keep
)

var fateNames = [...]string{"roll back", "keep paused", "release", "discard", "keep"}

func (f Fate) String() string {
	if int(f) < len(fateNames) {
		return fateNames[f]
	}
	return fmt.Sprintf("Fate(%d)", uint8(f))
}

// Handover is one end's commit rule. The zero value is a source's before
// its commit; NewHandover makes either end's. It is not safe for
// concurrent use.
type Handover struct {
	end    End
	holder Holder
}

// NewHandover returns the commit rule of end e, before the commit.
func NewHandover(e End) Handover { return Handover{end: e} }

// End returns the end the Handover is of.
func (h *Handover) End() End { return h.end }

// Holder returns who may run the VM, as this end knows it.
func (h *Handover) Holder() Holder { return h.holder }

// CommitSent records, at the source, that it sent the commit.
func (h *Handover) CommitSent() error {
	return h.move(SourceEnd, HeldBySource, HeldInDoubt, "send the commit")
}

// Acknowledged records, at the source, that the destination acknowledged
// the commit: the VM is the destination's.
func (h *Handover) Acknowledged() error {
	return h.move(SourceEnd, HeldInDoubt, HeldByDestination, "read the acknowledgement")
}

// CommitRead records, at the destination, that it read an authentic
// commit: the VM is its own.
func (h *Handover) CommitRead() error {
	return h.move(DestinationEnd, HeldBySource, HeldByDestination, "read the commit")
}

// Stranded records, at the source, that a post-copy lost its VM after the
// destination took it (migrate.ErrVMLost): the destination's copy, which
// lacks pages, is gone, and the source's, whole as of the stun, may be
// neither run nor discarded until someone decides: in doubt.
func (h *Handover) Stranded() {
	if h.end == SourceEnd && h.holder == HeldByDestination {
		h.holder = HeldInDoubt
	}
}

func (h *Handover) move(e End, from, to Holder, what string) error {
	if h.end != e || h.holder != from {
		return fmt.Errorf("%w: the %v cannot %s when the VM is held by the %v", ErrConfig, h.end, what, h.holder)
	}
	h.holder = to
	return nil
}

// MayRun reports whether this end may run its copy of the VM.
func (h *Handover) MayRun() bool {
	if h.end == SourceEnd {
		return h.holder == HeldBySource
	}
	return h.holder == HeldByDestination
}

// OnFailure returns what this end does with its copy when the migration
// fails now.
func (h *Handover) OnFailure() Fate {
	switch {
	case h.end == DestinationEnd && h.holder == HeldByDestination:
		return Keep
	case h.end == DestinationEnd:
		return Discard
	case h.holder == HeldBySource:
		return RollBack
	case h.holder == HeldInDoubt:
		return KeepPaused
	}
	return Release
}
