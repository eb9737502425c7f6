package live

import (
	"errors"
	"fmt"
)

// wrap joins a sentinel and the error that caused it, so that errors.Is
// finds both and errors.As finds the cause's type. A cause that wraps the
// sentinel already is returned as it is: its message names the sentinel,
// and naming it twice would read "canceled: migrate: canceled".
func wrap(sentinel error, cause error) error {
	if cause == nil {
		return sentinel
	}
	if errors.Is(cause, sentinel) {
		return cause
	}
	return fmt.Errorf("%w: %w", sentinel, cause)
}

// wrap0 is wrap that keeps nil nil.
func wrap0(sentinel, err error) error {
	if err == nil {
		return nil
	}
	return wrap(sentinel, err)
}

// labeledError reads as msg and matches each of errs with errors.Is and
// errors.As. It is for a failure whose causes' messages would repeat what
// msg says already, as a refusal whose reason names its sentinel, or would
// only be noise, as the closed connection a cancel provokes.
type labeledError struct {
	msg  string
	errs []error
}

func (e *labeledError) Error() string   { return e.msg }
func (e *labeledError) Unwrap() []error { return e.errs }
