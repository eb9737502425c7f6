package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/migrate/live"
	"github.com/vgpusim/vgpusim/vgpu"
)

// destination is a host that takes VMs in and runs them on wall time.
type destination struct {
	p      params
	host   *vgpu.Host
	runner *live.Runner
	out    io.Writer
}

func newDestination(p params, out io.Writer) (*destination, error) {
	// Its own seed, as another machine's would be: nothing at the
	// destination may depend on matching the source's.
	host, err := newHost("destination", p.seed+1)
	if err != nil {
		return nil, err
	}
	return &destination{p: p, host: host, runner: live.NewRunner(host, 0), out: out}, nil
}

// stop stops running the host.
func (d *destination) stop() error {
	if err := d.runner.Stop(); err != nil {
		return fmt.Errorf("running the destination host: %w", err)
	}
	return nil
}

// runDestination takes one migration in on ln and closes ln.
func runDestination(ctx context.Context, p params, ln net.Listener, out io.Writer) (rep *migrate.Report, err error) {
	defer ln.Close()
	stopClosing := context.AfterFunc(ctx, func() { ln.Close() })
	defer stopClosing()
	d, err := newDestination(p, out)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := d.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	conns, err := accept(ctx, ln, p.conns, p.timeout)
	if err != nil {
		return nil, err
	}
	return d.receive(ctx, conns)
}

// serveDestination takes migrations in on ln, one after another, until ctx
// is done; a failed one is reported on errOut and the next awaited. It
// returns an error if any failed.
func serveDestination(ctx context.Context, p params, ln net.Listener, out, errOut io.Writer) (err error) {
	defer ln.Close()
	stopClosing := context.AfterFunc(ctx, func() { ln.Close() })
	defer stopClosing()
	d, err := newDestination(p, out)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.stop()) }()
	failed := 0
	for ctx.Err() == nil {
		conns, err := accept(ctx, ln, p.conns, p.timeout)
		switch {
		case ctx.Err() != nil:
			closeAll(conns) // a migration that came in as we stopped
			continue
		case errors.Is(err, net.ErrClosed):
			return err // nothing more can come in
		case err == nil:
			_, err = d.receive(ctx, conns)
		}
		if err != nil {
			fmt.Fprintln(errOut, "livemigrate:", err)
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d migration(s) failed", failed)
	}
	return nil
}

// accept accepts the n connections of one migration. It waits for the
// first as long as it takes, and for each of the others at most timeout,
// so that a source that dies between two dials does not hang it.
func accept(ctx context.Context, ln net.Listener, n int, timeout time.Duration) ([]net.Conn, error) {
	dl, _ := ln.(interface{ SetDeadline(time.Time) error })
	if dl != nil {
		// The next migration's first connection may take its time again.
		defer dl.SetDeadline(time.Time{})
	}
	conns := make([]net.Conn, 0, n)
	for len(conns) < n {
		if dl != nil && len(conns) == 1 {
			_ = dl.SetDeadline(time.Now().Add(timeout))
		}
		c, err := ln.Accept()
		if err != nil {
			closeAll(conns)
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, fmt.Errorf("accepting connection %d of %d: %w", len(conns)+1, n, err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// receive takes one migration in over conns and closes them. Once the VM
// is in, it checks the VM's memory against the digests the stream carried
// and runs the host, so that the VM, resumed, runs.
func (d *destination) receive(ctx context.Context, conns []net.Conn) (*migrate.Report, error) {
	defer closeAll(conns)
	round := 0
	in, rep, err := live.Receive(ctx, d.host, readWriters(conns), live.ReceiveConfig{
		Timeout:       d.p.timeout,
		Workers:       d.p.engine.Workers,
		EncryptionKey: d.p.key,
		Lock:          d.runner,
		OnResume:      d.postCopyWorkload,
		Progress: func(p migrate.Event) {
			switch p.Kind {
			case migrate.RoundEnded:
				fmt.Fprintf(d.out, "round %d received: %s so far, at %v\n", round, megabytes(p.WireBytes), p.At.Round(time.Millisecond))
				round++
			case migrate.Done:
				fmt.Fprintf(d.out, "received %s in %v\n", megabytes(p.WireBytes), p.At.Round(time.Millisecond))
			}
		},
	})
	if err != nil {
		printReport(d.out, rep)
		return rep, err
	}
	if rep.PostCopy != nil {
		// The VM ran here while its pages came: no digest of the source's
		// can match it, but none of its pages may be missing.
		d.runner.Lock()
		absent := absentPages(in)
		d.runner.Unlock()
		printReport(d.out, rep)
		if absent > 0 {
			return rep, fmt.Errorf("%s: %d pages absent after the post-copy", in.ID(), absent)
		}
		fmt.Fprintf(d.out, "%s runs on %s with every page: %d followed in post-copy, %d touched before they came\n",
			in.ID(), d.host.Name(), rep.PostCopy.OwedPages, rep.PostCopy.Faults)
		return rep, nil
	}
	// Receive checked the regions against the stream's digests before the
	// restore; hashing them again here, as the VM now stands, is the
	// end-to-end check that what runs here is what ran there.
	d.runner.Lock()
	got, derr := regionDigests(in)
	state := in.State()
	d.runner.Unlock()
	d.runner.Start()
	fmt.Fprintf(d.out, "%s is %v on %s\n", in.ID(), state, d.host.Name())
	printReport(d.out, rep)
	if derr != nil {
		return rep, derr
	}
	if !slices.Equal(got, rep.RegionDigests) {
		return rep, fmt.Errorf("%s: the resumed VM's regions hash to %v, the stream's digests are %v", in.ID(), got, rep.RegionDigests)
	}
	return rep, nil
}

// regionDigests hashes vm's guest RAM and framebuffers as the migration's
// digests do. The caller holds the host still.
func regionDigests(vm *vgpu.VM) ([]migrate.Digest, error) {
	var out []migrate.Digest
	for _, r := range append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...) {
		dg, err := r.Digest()
		if err != nil {
			return nil, err
		}
		out = append(out, migrate.Digest(dg))
	}
	return out, nil
}

// postCopyWorkload gives the VM that resumed here a workload of -workload's
// kind and runs the host, if the VM resumed with pages still to come: a
// post-copy, during which the VM runs, touching pages before they came.
// The workload's state stayed at the source (the stream carries memory and
// device state), so it starts afresh on the VM's memory.
func (d *destination) postCopyWorkload(in *vgpu.VM) {
	d.runner.Lock()
	w, err := newWorkload(d.p)
	if absentPages(in) > 0 && in.State() == vgpu.VMRunning && w != nil && err == nil {
		err = in.SetWorkload(w)
	}
	d.runner.Unlock()
	if err != nil {
		fmt.Fprintf(d.out, "no workload for %s while its pages come: %v\n", in.ID(), err)
		return
	}
	d.runner.Start()
}

// absentPages counts the pages of vm's regions that have not come.
func absentPages(vm *vgpu.VM) int {
	n := 0
	for _, r := range append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...) {
		n += r.AbsentPages()
	}
	return n
}
