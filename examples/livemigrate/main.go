// Command livemigrate live-migrates a running vGPU VM over real TCP
// connections with the migrate package's live mode: the source pre-copies
// guest RAM and the vGPU framebuffer round after round while the VM's
// workload keeps writing them on wall time, then stuns the VM, sends what
// is still dirty and the device states, and hands the VM to the destination,
// which resumes it.
//
// A destination (-listen) holds one Tesla P40 and takes in one migration
// (or, with -serve, one after another until interrupted); a source (-send)
// creates a VM, lets its workload run for the warm-up, and migrates it.
// -loopback runs both in one process over 127.0.0.1, its lines prefixed
// "src: " and "dst: ", and checks that the destination's digests equal the
// source's. Each side prints a line per pre-copy round, the migration's
// report, and a digest line per region ("ram", "fb0", ...); a failure is
// printed on standard error and exits 1.
//
// Usage:
//
//	go run ./examples/livemigrate -listen ADDR [-serve] [-conns N] [-workers N] [-timeout D] [-json FILE]
//	go run ./examples/livemigrate -send ADDR [-profile NAME] [-ram SIZE] [-workload KIND] [-dirty RATE]
//	        [-warmup D] [-conns N] [-workers N] [-mode precopy|legacy|postcopy|hybrid] [-codec none|s2|zstd|auto]
//	        [-stun-target D] [-timeout D] [-json FILE]
//	go run ./examples/livemigrate -loopback [source flags]
//
// Sizes take binary units (512MiB, 2GiB) or decimal ones (64MB). Both ends
// must use the same -conns: the destination refuses a stream spread over a
// number of connections other than its own. The stream carries memory and
// device state, not the workload, so the VM runs idle at the destination,
// but in post-copy: there the destination gives the VM a workload of its
// own -workload as it resumes, so that it touches pages that have not come
// yet, and prints the faults it took.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command without the process around it: arguments in, exit
// status out.
func run(args []string, stdout, stderr io.Writer) int {
	p := defaultParams()
	fs := flag.NewFlagSet("livemigrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "run a destination listening on `ADDR` (host:port)")
	send := fs.String("send", "", "run a source migrating its VM to the destination at `ADDR`")
	loopback := fs.Bool("loopback", false, "run a source and a destination in this process over 127.0.0.1")
	serve := fs.Bool("serve", false, "with -listen, keep taking migrations in until interrupted")
	jsonPath := fs.String("json", "", "also write the report as JSON to `FILE` (with -loopback, both sides')")
	profile := fs.String("profile", p.profile.Name, "the VM's vGPU type, `NAME` as P40-1Q or nvidia-51")
	mode := fs.String("mode", "precopy", "`precopy` pre-copies the framebuffer with guest RAM; legacy sends it during the stun;\npostcopy resumes the VM at the destination at once and its pages follow; hybrid pre-copies, then post-copies if pre-copy does not converge")
	codec := fs.String("codec", "zstd", "page compression: none, s2, `zstd` (at its fastest) or auto, chosen batch by batch from the measured link and encoder rates")
	fs.StringVar(&p.vmID, "vm", p.vmID, "the VM's `ID`")
	fs.Var(&p.ramBytes, "ram", "the VM's guest RAM, `SIZE` as 512MiB or 2GiB")
	fs.StringVar(&p.workload, "workload", p.workload, "what the VM runs, `KIND` inference, training or idle")
	fs.Var(&p.dirtyBytesPerSec, "dirty", "the workload's background dirty `RATE` per second, in guest RAM and (inference) in\nthe framebuffer each; 0 takes the workload's own default, idle dirties nothing")
	fs.DurationVar(&p.warmup, "warmup", p.warmup, "wall time the workload runs before the migration starts")
	fs.IntVar(&p.conns, "conns", p.conns, "TCP connections the stream is spread over, the same `N` on both ends")
	fs.IntVar(&p.engine.Workers, "workers", p.engine.Workers, "goroutines encoding pages at the source, decoding and applying them at the destination")
	fs.BoolVar(&p.filters.Shuffle, "shuffle", false, "group the bytes of float32 pages (weights, their deltas) by significance before compression")
	fs.Var(&p.deltaCache, "delta-cache", "send a page sent again as its XOR with what the destination holds, from a cache of `SIZE`\nof what was sent, as 64MiB (QEMU's XBZRLE default); 0 sends every page whole")
	fs.DurationVar(&p.stunTarget, "stun-target", p.stunTarget, "the stun pre-copy aims under; 0 takes vMotion's one second")
	fs.DurationVar(&p.timeout, "timeout", p.timeout, "how long either end waits on a connection that makes no progress")
	fs.Uint64Var(&p.seed, "seed", p.seed, "seed for the VM's memory contents and its workload")
	keyFile := fs.String("key-file", "", "authenticate the migration and encrypt its stream with the key in `FILE`,\n64 hex digits, the same on both ends (SECURITY.md); without it, trust the network")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n"+
			"  livemigrate -listen ADDR [flags]   destination: take a VM in and resume it\n"+
			"  livemigrate -send ADDR [flags]     source: run a VM, then migrate it to ADDR\n"+
			"  livemigrate -loopback [flags]      both, in one process, and compare the digests\n\n"+
			"Live-migrates a VM with one Tesla P40 vGPU over TCP: pre-copy rounds while its workload\n"+
			"writes memory on wall time, then the stun and the hand-over. Prints a line per round,\n"+
			"the report and a digest of every memory region at each end.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "livemigrate: "+format+"\n", a...)
		fs.Usage()
		return 2
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	roles := 0
	for _, set := range []bool{*listen != "", *send != "", *loopback} {
		if set {
			roles++
		}
	}
	if roles != 1 {
		return usageErr("give exactly one of -listen, -send and -loopback")
	}
	if *serve && *listen == "" {
		return usageErr("-serve goes with -listen")
	}
	if *serve && *jsonPath != "" {
		return usageErr("-json writes one migration's report; it does not go with -serve")
	}
	if err := p.set(*profile, *mode, *codec); err != nil {
		return usageErr("%v", err)
	}
	if *keyFile != "" {
		var err error
		if p.key, err = readKey(*keyFile); err != nil {
			return usageErr("%v", err)
		}
	}

	// An interrupt cancels the migration under way, which closes its
	// connections: the VM stays on the source and the destination lets go
	// of what it received.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case *loopback:
		return runLoopback(ctx, p, *jsonPath, stdout, stderr)
	case *send != "":
		rep, err := runSource(ctx, p, *send, stdout)
		return finish(stderr, err, writeReport(*jsonPath, rep))
	default:
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return finish(stderr, err)
		}
		fmt.Fprintf(stdout, "listening on %s for %d connection(s)\n", ln.Addr(), p.conns)
		if *serve {
			return finish(stderr, serveDestination(ctx, p, ln, stdout, stderr))
		}
		rep, err := runDestination(ctx, p, ln, stdout)
		return finish(stderr, err, writeReport(*jsonPath, rep))
	}
}

// finish prints the errors that are not nil and returns the exit status.
func finish(stderr io.Writer, errs ...error) int {
	code := 0
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(stderr, "livemigrate:", err)
			code = 1
		}
	}
	return code
}

// params is what the flags set.
type params struct {
	vmID             string
	profile          vgpu.Profile
	ramBytes         byteSize
	workload         string
	dirtyBytesPerSec byteSize
	warmup           time.Duration
	conns            int
	mode             migrate.Mode
	hybrid           bool // pre-copy, then post-copy if it does not converge
	stunTarget       time.Duration
	engine           migrate.EngineConfig
	codec            migrate.Codec
	filters          migrate.Filtering
	deltaCache       byteSize
	timeout          time.Duration
	seed             uint64
	key              []byte // the migration key; nil for none
}

func defaultParams() params {
	prof, err := vgpu.ParseProfile("P40-2Q")
	if err != nil {
		panic(err) // the profile table lacks its own P40-2Q
	}
	return params{
		vmID:             "vm1",
		profile:          prof,
		ramBytes:         byteSize(vgpu.GiB),
		workload:         workloadInference,
		dirtyBytesPerSec: byteSize(32 * vgpu.MiB),
		warmup:           500 * time.Millisecond,
		conns:            1,
		mode:             migrate.PreCopy,
		engine:           migrate.EngineConfig{Workers: runtime.GOMAXPROCS(0), Level: checkpoint.LevelFastest},
		timeout:          30 * time.Second,
		seed:             1,
	}
}
