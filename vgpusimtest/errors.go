package vgpusimtest

import (
	"errors"
	"fmt"
	"os"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrInjected reports a failure a FaultConn injected: a cut
	// connection or a stall. It is wrapped by a *FaultError.
	ErrInjected = errors.New("vgpusimtest: injected fault")
	// ErrOutOfRange reports a mutator's argument past its stream: a bit,
	// a length or a record index.
	ErrOutOfRange = errors.New("vgpusimtest: out of range")
	// ErrFraming reports a stream whose framing cannot be followed as far
	// as a mutator needs (a header size out of range, or bytes after the
	// last whole record that are not a whole record), or a Relay's Framer
	// that gave up on a direction.
	ErrFraming = errors.New("vgpusimtest: broken stream framing")
	// ErrInvalid reports a plan that cannot be carried out: a Fault plan,
	// a Relay's Action, or a scenario's Spec or Step.
	ErrInvalid = errors.New("vgpusimtest: invalid plan")
)

// FaultError is the error of a failure a FaultConn injected. It wraps
// ErrInjected and, for a stall, Err.
type FaultError struct {
	// Op is "read" or "write": the direction that broke.
	Op string
	// Offset is the bytes of that direction that went through before the
	// fault.
	Offset int64
	// Mode is how it broke.
	Mode CutMode
	// Err is what ended a stall: os.ErrDeadlineExceeded when the
	// deadline passed, net.ErrClosed when the connection was closed. Nil
	// for a close.
	Err error
}

// Error says what broke, where and, for a stall, how it ended.
func (e *FaultError) Error() string {
	s := fmt.Sprintf("%v: %s %v at byte %d", ErrInjected, e.Op, e.Mode, e.Offset)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrInjected and, if set, Err, so that errors.Is matches
// either.
func (e *FaultError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInjected, e.Err}
	}
	return []error{ErrInjected}
}

// Timeout reports whether a stall ended at its deadline, as a net.Error's
// does.
func (e *FaultError) Timeout() bool { return errors.Is(e.Err, os.ErrDeadlineExceeded) }

// Temporary reports false: an injected failure does not go away. It is
// here, deprecated as it is in net.Error, so that a *FaultError is one.
func (e *FaultError) Temporary() bool { return false }
