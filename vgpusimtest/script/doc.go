// Package script runs scenario scripts against a simulated world
// (migrate.Sim): small text files of commands, each followed by the output
// it must print, in the style of the data-driven tests of etcd's raft. A
// script builds hosts, VMs and links, starts migrations, moves simulated
// time, injects faults, and prints reports and states; the test fails
// where an output differs from the one written in the file.
//
//	func TestScripts(t *testing.T) {
//		script.RunDir(t, "testdata/scripts")
//	}
//
// Run runs one file; RunDir runs every *.txt file under a directory, each
// as a subtest. Run takes a TB, the little of a test it reports to, so
// that a benchmark (*testing.B) or another runner can run a script;
// RunDir takes a *testing.T, since its subtests are t.Run's. The
// simulator is deterministic, so a script prints the same output on every
// machine.
//
// # Rewriting
//
// With the flag -vgpusimtest.rewrite, or the environment variable
// VGPUSIM_REWRITE=1, the runner writes each command's actual output into
// the file instead of comparing: write the commands, rewrite, then read
// what the simulator did and keep it if it is right.
//
//	go test -run TestScripts ./mypkg -vgpusimtest.rewrite
//
// Importing the package registers the flag on the global FlagSet
// (flag.CommandLine) of any binary that imports it, test binary or
// command, where its flag.Parse accepts and lists it. A test binary of a
// package that does not import it refuses the flag, so for a go test over
// several packages set the variable instead.
//
// # The format
//
// A file is a sequence of cases. A case is a command line, optionally more
// lines of its keys, a line "----", and the expected output, which ends at
// the first blank line. An output holding blank lines is written between
// "----" "----" and "----" "----" lines instead; a rewrite chooses the form.
// Lines starting with # between cases are comments. A command line is a
// command name and keys: key=value, key=(v1, v2) for a list, a bare key
// for a flag that is true, key="a value" with spaces.
//
//	# A host and a VM on it.
//	host name=h1
//	----
//	h1: 1 x P40, 768 GiB RAM, synthetic memory
//
//	vm id=a host=h1 profile=P40-4Q ram=4GiB footprint=1GiB
//	----
//	a on h1: P40-4Q on gpu 0 slot 0, running
//
// A command the simulator refuses prints "error: " and why, so that a
// script asserts refusals; a name the world does not hold (a VM, host,
// link or migration) is such an error too. A script that is wrong — an
// unknown command or key, a key twice, a value that does not parse, a
// missing key, a sim too late, a malformed file — fails the test at its
// file and line,
// and so does a panic; the rest of the file is not run, since nothing
// after it means what it says. A mismatch is reported with the file, the
// line, the command, the expected and the actual output, and the script
// runs on.
//
// Durations are Go's (time.ParseDuration: 1.5s, 200ms, 56us). Sizes are
// bytes with an optional binary unit (4096, 64KiB, 512MiB, 1.5GiB, 1TiB);
// rates of bytes are sizes with an optional "/s" (4MiB/s); bit rates take
// SI units (100Mbit, 10Gb/s, 2.5e9). Printed durations are rounded to the
// microsecond, bytes are exact.
//
// # Commands
//
// sim [max-per-host=N] [host-workers=N] configures the Sim
// (migrate.SimConfig); it must come first, or first after reset, before
// any command that makes the Sim (host, capacity, rates, advance, step,
// run), and once. Without it the first of those makes a Sim with the
// defaults; a sim after it is a mistake in the script, as the Sim already
// runs under another configuration. reset forgets the world: a script may
// hold several, one after another.
//
// host name=H [gpus=N] [gpu=P40|V100|V100D|T4|A100] [memory=synthetic|sparse]
// [ram=SIZE] [fb-page=SIZE] [ram-page=SIZE] [seed=N] [placement=breadth|depth]
// [ecc] makes a host on the Sim's clock (vgpu.HostConfig). The seed is the
// host's position, from 1, unless given. Dense memory, which allocates
// every framebuffer in full, is refused: sparse holds the same bytes.
//
// vm id=ID host=H [profile=P40-4Q | profiles=(P40-24Q, P40-24Q)] [ram=SIZE]
// [footprint=SIZE] [seed=N] [start=false] [paused] [passthrough] creates a
// VM (vgpu.VMSpec) and starts it, unless start=false, and pauses it if
// paused. ram is 4 GiB unless given; footprint, the guest RAM holding data
// at the first start, 0.
//
// workload vm=ID kind=inference|training|cad|desktop|none [seed=N] and the
// kind's keys gives a VM a workload (vgpu.VM.SetWorkload); none
// checks that it runs none. Every kind takes footprint=SIZE (the
// framebuffer holding data; footprint=usable fills the vGPU's usable
// framebuffer), ram-dirty=RATE and efficiency=F. inference takes
// model=inception|mobilenet, rate=REQUESTS/S, ram-working-set=SIZE,
// fb-dirty=RATE; training model=, batch=N, data-load=DURATION; cad fps=N,
// ram-working-set=SIZE; desktop updates=N/S, ram-working-set=SIZE. An
// absent key takes the workload's default.
//
// pause vm=ID and resume vm=ID are the VM's owner pausing and resuming it.
//
// link name=L [from=PRESET] [capacity=BITS] [efficiency=F] [latency=D]
// declares a link from a preset (migrate.LinkByName; from is name if it
// names one) with overrides; migrate uses a declared link before a preset
// of the same name. capacity link=L rate=BITS changes a link's line rate
// under the migrations on it (Sim.SetLinkCapacity).
//
// migrate vm=ID to=H [label=L] [link=L] [via=(L2, L3)] [preset=NAME]
// [mode=pre-copy|legacy] [fidelity=model|bytes] [codec=zstd|none|s2|auto]
// [stun-target=D] [stun-limit=D] [max-rounds=N]
// [on-nonconvergence=throttle|switch-over-anyway|abort] [timeout=D]
// [batch=SIZE] [metrics-window=D] [encode-workers=N] starts a migration
// (Sim.Start) and prints its label: m1, m2, ... in start order unless
// label= names it. A preset (migrate.PresetByName) sets the mode and the
// stun costs; mode= overrides its mode. The link is 10g unless given.
//
// A name of package migrate's (a mode, fidelity, codec, choice on
// non-convergence, fault or phase) is written as its String prints it,
// case and all, a space written as a hyphen: final-RAM, switch-over-anyway.
// mode=precopy and on-nonconvergence=switch are short forms the language
// keeps.
//
// advance by=D or advance to=T moves simulated time (Sim.Advance,
// Sim.AdvanceTo); run runs every migration to its end (Sim.Run), and run
// migration=L one (Migration.Run). They print each migration that ended,
// how, and the time now; with events, every event first. A migration's
// own failure is such an end; an error of the Sim or a host that stopped
// the run is printed after it as "error: ".
//
// step [n=N] [migration=L] [quiet] takes N events (1 unless given), of any
// migration (Sim.Step) or of one (Migration.Step), printing each;
// step migration=L until=PHASE [round=N] takes that migration's events
// until it is in PHASE (pre-copy, final-framebuffer, device-state, ...)
// and, with round=, in that pre-copy round. quiet prints only where the
// migration is and when.
//
// inject fault=link-down|link-stall link=L injects a fault into every
// migration on a link (Sim.FailLink); inject fault=F migration=L into one
// (Migration.Inject), refused and destination-gone too. cancel migration=L
// gives a migration up. Each prints where the migration was and what
// became of it.
//
// report migration=L [rounds] [metrics] [published=D] prints a migration's
// report: outcome, times, rounds and switchover, the stun phase by phase,
// bytes on the wire; rounds adds each round, metrics the workload's
// before, during and after, published= the stun's deviation from a
// published figure.
//
// state prints which host holds which VM in which state, and the
// migrations under way; hosts prints each host's free memory and what each
// GPU holds; rates link=L each migration's share of a link now
// (Sim.LinkRates). check checks the invariants that hold at every
// instant, the test kit's (package vgpusimtest) and the script's own: no
// VM the script made is lost or runs twice (CheckOneOwner); every
// framebuffer page outside a window reads as zero (CheckScrubbed); no GPU
// scheduler granted more time than passed or finished more jobs than it
// was given (CheckScheduler); the report of every migration that ended
// adds up (CheckReport); a VM that
// no migration holds is on one host; and a host that holds no VM holds no
// memory, vGPU or window of one. It prints ok or each violation.
package script
