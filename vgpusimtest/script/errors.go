package script

import "errors"

// The sentinels of a script that cannot run as written. The runner reports
// each as a test failure naming the file and line, never as a command's
// output: a misspelt key must not be blessed by a rewrite. Errors of the
// simulator itself (a refused migration, an unknown VM) are output.
var (
	// errSyntax reports a malformed file: a separator without a command,
	// an unterminated block, an unbalanced quote or parenthesis.
	errSyntax = errors.New("script: syntax error")
	// errUnknownCommand reports a command the language does not have.
	errUnknownCommand = errors.New("script: unknown command")
	// errUnknownKey reports a key the command does not take, or takes
	// twice.
	errUnknownKey = errors.New("script: unknown key")
	// errBadValue reports a value that does not parse as its key needs.
	errBadValue = errors.New("script: bad value")
	// errMissingKey reports a key the command needs and was not given.
	errMissingKey = errors.New("script: missing key")
	// errOrder reports a command that comes too late: sim after a command
	// that made the Sim. The Sim it would configure is already running
	// under another configuration, so nothing after it means what it
	// says.
	errOrder = errors.New("script: out of order")
	// errMismatch reports a command whose output differs from the
	// expected output.
	errMismatch = errors.New("script: output mismatch")
)

// errNotFound reports a host, VM, link or migration the script names and
// the world does not hold. It is a command's output, not a failure: a VM
// that left a host is not found there, and a script may say so.
var errNotFound = errors.New("script: not found")

// Further refusals of the world, printed as output like errNotFound.
var (
	// errExists reports a host, VM, link or label made twice.
	errExists = errors.New("script: already exists")
	// errNotReached reports a step until= whose migration ended, or took
	// too many events, before the phase.
	errNotReached = errors.New("script: phase not reached")
	// errUnsupported reports what the language refuses to do: a host of
	// dense memory, which would allocate every framebuffer in full.
	errUnsupported = errors.New("script: not supported")
)

// isScriptError reports whether err means the script itself is wrong.
func isScriptError(err error) bool {
	for _, s := range []error{errSyntax, errUnknownCommand, errUnknownKey, errBadValue, errMissingKey, errOrder} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
