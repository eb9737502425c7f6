// Package vgpusimtest is the test kit of the vgpusim library, public so
// that anyone's tests can use it the way net/http/httptest serves
// net/http: the library's own tests use it first.
//
// It holds five parts.
//
// Generators (rapid) draw the library's inputs, each shrinking towards the
// plainest value: GPUs, Profiles, Links, Policies, Configs, Workloads,
// SimFaults and ConnFaults. Scenario draws a whole Spec — hosts of one GPU
// model, VMs on them running workloads under the oracle, and up to twelve
// steps (migrate, advance, step, inject, cancel, write, pause-resume) —
// and NewWorld builds it in a migrate.Sim, so that a property test starts
// from
//
//	rapid.Check(t, func(t *rapid.T) {
//		w, err := vgpusimtest.NewWorld(vgpusimtest.Scenario(t))
//		if err != nil {
//			t.Fatal(err)
//		}
//		w.OnEvent = myAgent // the code under test, reacting to migrations
//		w.Run(t)            // every step, every invariant after each
//	})
//
// and a failure prints the scenario rapid shrank it to, one line a host, a
// VM or a step.
//
// Invariant checkers, called after any step: CheckOneOwner (a VM is never
// lost and never runs twice), Oracle.CheckHosts (nothing lost, by
// content), CheckScrubbed (no framebuffer page outside a window holds
// anything), CheckScheduler (no GPU granted more time than passed) and
// CheckReport (a report's phases sum to its stun, its rounds to its
// pre-copy traffic). World.Check runs them all, and also holds a failed
// migration's VM to its source, running or paused as the steps (or the
// caller, through World.SetRunState) left it.
//
// The memory oracle, Oracle, records what a VM's memory must hold: the
// pages its workload (Oracle.Workload, alone or around another workload)
// rewrites at a steady rate, and the caller's own writes (Oracle.WriteAt).
// The workload moves with its VM, so the oracle follows the VM across
// migrations and compares any host's copy with its record.
//
// Fault injectors: FaultConn, a net.Conn that breaks as its Fault plan
// says (closed or gone silent after a number of bytes in either
// direction, bits flipped at given offsets, writes delayed, rate-capped or
// split into pieces), honouring deadlines so that a library's timeouts
// fire on it as on a dead peer; and Relay, a man in the middle between two
// connections, which splits each direction into messages with a Framer the
// caller gives (the kit knows no protocol) and lets a Rule drop, delay,
// corrupt, duplicate, replace or cut at any one message.
//
// Stream mutators for checkpoint streams (package checkpoint): Flip and
// Truncate work on bytes; DuplicateRecord, DropRecord, SwapRecords,
// Splice, ReplayRecord and ReplaceRecord on whole records, found by
// Records from the stream's framing. Each returns a new slice and leaves
// its input as it was.
//
// Scenario scripts, text files of commands with their expected output, run
// with package vgpusimtest/script.
//
// # Determinism
//
// Nothing in the kit draws from a global random source or reads the
// clock to decide what to break: a Fault's randomness comes from its
// Seed, an oracle workload's from its OracleConfig.Seed, and a mutator's
// output depends on its arguments alone; a Relay acts on a message by its
// place and bytes, as its Rule says. The same plan over the same writes
// breaks the same byte, and the same Spec plays the same World. Only the
// timing of a stall, a delay or a rate cap follows wall time, as the
// deadlines they honour do.
//
// # Errors
//
// A broken invariant is an *InvariantError wrapping ErrInvariant; a page
// that differs from the oracle's record a *MemoryError wrapping ErrLost
// and ErrInvariant. A Spec that names what it does not have, or a Step
// NewWorld cannot play, is an error wrapping ErrInvalid. An injected failure is a *FaultError wrapping
// ErrInjected (and, for a stall, what ended it: os.ErrDeadlineExceeded or
// net.ErrClosed). A mutator that cannot do what it is asked returns an
// error wrapping ErrOutOfRange (an index or offset past the stream) or
// ErrFraming (a stream whose framing does not reach the record asked
// for). A Relay's Wait reports a Framer's error wrapped in ErrFraming, and
// an Action it cannot carry out, or a plan whose Rule no Framer lets see a
// message, wrapped in ErrInvalid or ErrOutOfRange.
// Every sentinel's message starts with "vgpusimtest: ".
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
