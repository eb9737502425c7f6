package checkpoint

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns is an *Error wrapping
// exactly one of them; test with errors.Is, and get the offset with
// errors.As.
var (
	// ErrBadMagic reports a stream that does not start with the magic.
	ErrBadMagic = errors.New("checkpoint: bad magic")
	// ErrVersion reports a stream whose major version differs from this
	// package's, or whose header asks for a feature (a critical flag, a
	// codec) this version does not know.
	ErrVersion = errors.New("checkpoint: unsupported version")
	// ErrChecksum reports a check value or digest that does not match.
	ErrChecksum = errors.New("checkpoint: checksum mismatch")
	// ErrSequence reports a record out of sequence: dropped, duplicated,
	// reordered or replayed.
	ErrSequence = errors.New("checkpoint: record out of sequence")
	// ErrTruncated reports a stream that ends before its end-of-stream
	// record, or whose io.Reader failed before it (the Cause says how).
	ErrTruncated = errors.New("checkpoint: truncated stream")
	// ErrLimit reports a stream that would exceed one of the reader's
	// Limits: a record, batch, window, device state, metadata or total too
	// large, too many pages in a batch or regions in the metadata, or a
	// page index past the end of its region.
	ErrLimit = errors.New("checkpoint: limit exceeded")
	// ErrMalformed reports a record whose payload does not follow the
	// format, or records that contradict each other.
	ErrMalformed = errors.New("checkpoint: malformed record")
	// ErrUnknownRecord reports a critical record type this version does
	// not know.
	ErrUnknownRecord = errors.New("checkpoint: unknown critical record")
	// ErrAuth reports a record that fails authentication: a modified,
	// replayed or reordered encrypted record, or a wrong key.
	ErrAuth = errors.New("checkpoint: authentication failed")
	// ErrEncryptionMode reports a stream whose encryption the reader's
	// mode does not accept: plaintext to a reader that requires
	// encryption, or an encrypted stream to a reader without a key.
	ErrEncryptionMode = errors.New("checkpoint: encryption mode mismatch")
	// ErrWrite reports that the io.Writer under a Writer failed; the
	// stream written so far ends mid-record and is unusable. The Cause
	// says why.
	ErrWrite = errors.New("checkpoint: write failed")
	// ErrInvalid reports an invalid option or argument given by the
	// caller. Nothing was written or applied because of it.
	ErrInvalid = errors.New("checkpoint: invalid argument")
	// ErrDeltaBase reports a delta page whose base, the content the
	// sender believed the reader held, is not what the destination holds:
	// the delta is not applied, and the stream fails rather than leave a
	// page that is neither the old content nor the new. Since version 1.3.
	ErrDeltaBase = errors.New("checkpoint: delta against content the destination does not hold")
	// ErrState reports a call that the object's state does not allow:
	// writing after Close, committing before the end of the stream was
	// verified, using an Applier after it failed.
	ErrState = errors.New("checkpoint: invalid state")
)

// Error is the error type of the package. It carries the byte offset in
// the stream at which the problem was found: the start of the record at
// fault, the header field, or where the input ended.
type Error struct {
	// Err is one of the package's sentinel errors.
	Err error
	// Offset is the byte offset from the start of the stream.
	Offset int64
	// Seq is the sequence number of the record at fault, or -1 when the
	// problem is not in a record (the header, a truncation between
	// records, an argument).
	Seq int64
	// Detail says what exactly was wrong.
	Detail string
	// Cause is the underlying error (from the io.Reader, io.Writer or the
	// zstd codec), if any.
	Cause error
}

// Error describes the error: sentinel, offset, record, detail, cause.
func (e *Error) Error() string {
	s := fmt.Sprintf("%v at offset %d", e.Err, e.Offset)
	if e.Seq >= 0 {
		s += fmt.Sprintf(" (record %d)", e.Seq)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the sentinel and, if there is one, the cause, so that
// errors.Is matches either.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// newError returns an *Error for sentinel err at offset off in record seq
// (-1 if none).
func newError(err error, off, seq int64, format string, args ...any) *Error {
	detail := format
	if len(args) > 0 {
		detail = fmt.Sprintf(format, args...)
	}
	return &Error{Err: err, Offset: off, Seq: seq, Detail: detail}
}

// withCause sets e.Cause and returns e.
func (e *Error) withCause(cause error) *Error {
	e.Cause = cause
	return e
}

// invalid returns an ErrInvalid error for an argument the caller gave.
func invalid(format string, args ...any) *Error {
	return newError(ErrInvalid, 0, -1, format, args...)
}
