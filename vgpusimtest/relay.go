package vgpusimtest

import (
	"fmt"
	"time"
)

// Side names one of a Relay's two connections; as a set, either or both.
// It is not migrate.End: a relay knows no source or destination, only
// the order NewRelay was given its connections in.
type Side uint8

const (
	// SideA is the relay's connection a, the first NewRelay is given.
	SideA Side = 1 << iota
	// SideB is its connection b.
	SideB
)

// String names the set: "a", "b", "a+b" or "none".
func (e Side) String() string {
	switch e {
	case 0:
		return "none"
	case SideA:
		return "a"
	case SideB:
		return "b"
	case SideA | SideB:
		return "a+b"
	}
	return fmt.Sprintf("Side(%d)", uint8(e))
}

// other is the side a message from e goes to.
func (e Side) other() Side { return (SideA | SideB) &^ e }

// A Framer splits the bytes that come from one side of a Relay into
// messages, as the protocol on the wire frames them: the protocol is the
// caller's, and the kit knows none. It is given pending, the bytes from
// the first one not yet in a message on, and returns the length of the
// message they start with and, for the Rule, a name for it (or none).
//
// A length of 0 says pending does not show it yet: the relay reads more
// and asks again, with the same bytes and those after them. A length may
// be more than len(pending), as soon as a header says it: the relay reads
// on until the message is whole. Since it may be asked about the same
// bytes more than once, a Framer changes its own state (a protocol's
// stage, a count of messages) only when it returns a length.
//
// An error, or a negative length, says the bytes cannot be framed: the
// relay passes the rest of that direction on as it comes, unframed, and
// Wait reports the error, wrapped in ErrFraming. pending is the relay's
// buffer: a Framer reads it, and neither keeps nor changes it.
type Framer func(pending []byte) (n int, name string, err error)

// Message is one framed message, as a Rule sees it.
type Message struct {
	// From is the side that sent it; it goes to the other.
	From Side
	// Index is its place among the messages from that end, from 0.
	Index int
	// Name is what the Framer called it.
	Name string
	// Data is the message as its sender wrote it: a copy the Rule may
	// keep, to replay it later, or change.
	Data []byte
}

// Action is what a Relay does with one message. Its zero value passes
// the message on as it came. The fields combine: Replace chooses the
// bytes, FlipBits damages them, Repeat sends them more than once, Delay
// holds them back, and Close cuts connections after them.
type Action struct {
	// Drop sends nothing in the message's place. Close still applies.
	Drop bool
	// Replace, if not nil, is sent in the message's place: a message
	// replayed from another run or connection, one forged, or the
	// message cut short (Truncate) before a Close.
	Replace []byte
	// FlipBits are bits of what is sent that arrive flipped, numbered as
	// Flip numbers them. A bit past it is ErrOutOfRange.
	FlipBits []int64
	// Repeat sends it this many more times, back to back: a message
	// duplicated.
	Repeat int
	// Delay holds it, and everything after it from its side, back this
	// long before it goes, as a congested or a malicious middlebox does.
	// The wait ends, and the message is lost, as soon as the relay's
	// connections are closed: by Close, by an Action's Close, or because
	// either side's connection ended; a held message has nowhere to go.
	Delay time.Duration
	// Close cuts the relay where the message lies, once it has gone or
	// been dropped. Since the relay is never half-open, any non-empty set
	// closes both connections, and nothing more crosses either way, not
	// even what the relay read already: the set only decides the order.
	// The relay closes its connections to the sides in the set first, and
	// the other's right after, so the set's side is the first to see
	// the cut (its Read ends, its Write fails), as when a line is cut
	// next to one side. The other sees it a moment later, and what each
	// side does in that moment is the caller's to test; a side blocked
	// elsewhere may well notice its close after the other's, so a test
	// must not rely on the order alone.
	Close Side
}

// Validate reports an action that cannot be carried out: a negative
// bit, repeat count or delay, or an unknown side. The error wraps
// ErrInvalid.
func (a Action) Validate() error {
	for _, b := range a.FlipBits {
		if b < 0 {
			return fmt.Errorf("%w: flip of bit %d", ErrInvalid, b)
		}
	}
	switch {
	case a.Repeat < 0:
		return fmt.Errorf("%w: repeat %d times", ErrInvalid, a.Repeat)
	case a.Delay < 0:
		return fmt.Errorf("%w: delay %v", ErrInvalid, a.Delay)
	case a.Close&^(SideA|SideB) != 0:
		return fmt.Errorf("%w: close %v", ErrInvalid, a.Close)
	}
	return nil
}

// payload returns the bytes a carries out for message m, or why it
// cannot.
func (a Action) payload(m []byte) ([]byte, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	out := m
	if a.Replace != nil {
		out = a.Replace
	}
	for _, b := range a.FlipBits {
		var err error
		if out, err = Flip(out, b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Rule chooses what a Relay does with each message. The relay calls it
// for one message at a time, in the order each side sent them, so a Rule
// keeps state (what it saw, whether its target came) without a lock of
// its own; what it kept is the caller's to read once Wait or Close has
// returned.
type Rule func(m Message) Action

// RelayPlan is what a Relay does: how it frames each side's bytes and
// what it does with each message.
type RelayPlan struct {
	// Framing returns the Framer of the bytes that come from a side. It
	// is called once for each side, when the relay starts. A nil Framer
	// passes that side's bytes on as they come, unframed, and the Rule
	// sees none of them: a plan frames the direction its Rule acts on.
	// With no Framing, or a nil Framer for both sides, the relay is a
	// plain pipe both ways, which only a plan without a Rule may ask for.
	Framing func(from Side) Framer
	// Rule chooses each message's Action. Nil passes every message on.
	// A Rule needs a Framer for at least one side: a plan whose Rule
	// could never be called is a mistake, which the relay reports at
	// once (see NewRelay) rather than pass everything untouched.
	Rule Rule
}
