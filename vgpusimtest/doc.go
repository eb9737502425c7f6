// Package vgpusimtest is the test kit of the vgpusim library, public so
// that anyone's tests can use it the way net/http/httptest serves
// net/http: the library's own tests use it first.
//
// So far it holds the fault injectors:
//
//   - FaultConn, a net.Conn that breaks as its Fault plan says: closed or
//     gone silent after a number of bytes in either direction, bits
//     flipped at given offsets, writes delayed, rate-capped or split into
//     pieces. It honours deadlines, so a library's timeouts fire on it as
//     they do on a dead peer, and it counts the bytes each way.
//   - Stream mutators for checkpoint streams (package checkpoint): Flip
//     and Truncate work on bytes; DuplicateRecord, SwapRecords, Splice and
//     ReplayRecord work on whole records, found by Records from the
//     stream's framing. Each returns a new slice and leaves its input as
//     it was.
//
// Later parts of the kit add generators, invariant checkers and a memory
// oracle beside them.
//
// # Determinism
//
// Nothing in the kit draws from a global random source or reads the
// clock to decide what to break: a Fault's randomness comes from its
// Seed, and a mutator's output depends on its arguments alone. The same
// plan over the same writes breaks the same byte. Only the timing of a
// stall, a delay or a rate cap follows wall time, as the deadlines they
// honour do.
//
// # Errors
//
// An injected failure is a *FaultError wrapping ErrInjected (and, for a
// stall, what ended it: os.ErrDeadlineExceeded or net.ErrClosed). A
// mutator that cannot do what it is asked returns an error wrapping
// ErrOutOfRange (an index or offset past the stream) or ErrFraming (a
// stream whose framing does not reach the record asked for). Every
// sentinel's message starts with "vgpusimtest: ".
//
// # Framing
//
// Records reads only the framing FORMAT.md documents for package
// checkpoint — the header's size field and each record's 14-byte header —
// and checks nothing else, so that it splits damaged, hostile and
// encrypted streams alike. checkpoint.RecordReader is not used: it
// verifies what it reads, and refuses the very streams the mutators make.
// Records is bounded by its input and never panics on it.
package vgpusimtest
