package vgpusimtest

import (
	"fmt"
	"time"
)

// End names one of a Relay's two connections; as a set, either or both.
type End uint8

const (
	// EndA is the relay's connection a, the first NewRelay is given.
	EndA End = 1 << iota
	// EndB is its connection b.
	EndB
)

// String names the set: "a", "b", "a+b" or "none".
func (e End) String() string {
	switch e {
	case 0:
		return "none"
	case EndA:
		return "a"
	case EndB:
		return "b"
	case EndA | EndB:
		return "a+b"
	}
	return fmt.Sprintf("End(%d)", uint8(e))
}

// other is the end a message from e goes to.
func (e End) other() End { return (EndA | EndB) &^ e }

// A Framer splits the bytes that come from one end of a Relay into
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
	// From is the end that sent it; it goes to the other.
	From End
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
	// Delay holds it, and everything after it from its end, back this
	// long before it goes, as a congested or a malicious middlebox does.
	// Close cuts the wait short.
	Delay time.Duration
	// Close closes the relay's connection to these ends once it has gone,
	// or been dropped: a cut where the message lies. A closed
	// end sends nothing more, not even what the relay read of it already.
	Close End
}

// Validate reports an action that cannot be carried out: a negative
// bit, repeat count or delay, or an unknown end. The error wraps
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
	case a.Close&^(EndA|EndB) != 0:
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
// for one message at a time, in the order each end sent them, so a Rule
// keeps state (what it saw, whether its target came) without a lock of
// its own; what it kept is the caller's to read once Wait or Close has
// returned.
type Rule func(m Message) Action

// RelayPlan is what a Relay does: how it frames each end's bytes and
// what it does with each message.
type RelayPlan struct {
	// Framing returns the Framer of the bytes that come from end. It is
	// called once for each end, when the relay starts. Nil, or a nil
	// Framer, passes that end's bytes on as they come, unframed.
	Framing func(from End) Framer
	// Rule chooses each message's Action. Nil passes every message on.
	Rule Rule
}
