package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/migrate/live"
	"github.com/vgpusim/vgpusim/vgpu"
)

// newHost returns a host with one P40. Sparse memory holds the bytes the
// workload writes, so that the stream carries real pages and the digests
// cover them, while pages never written cost nothing.
func newHost(name string, seed uint64) (*vgpu.Host, error) {
	return vgpu.NewHost(vgpu.HostConfig{Name: name, Memory: memory.Sparse, Seed: seed})
}

// runSource creates the VM on a host of its own, runs it for the warm-up,
// migrates it to addr, and prints the progress, the report and the digests
// to out. The report is nil if the migration did not start.
func runSource(ctx context.Context, p params, addr string, out io.Writer) (rep *migrate.Report, err error) {
	host, err := newHost("source", p.seed)
	if err != nil {
		return nil, err
	}
	w, err := newWorkload(p)
	if err != nil {
		return nil, err
	}
	vm, err := host.CreateVM(vgpu.VMSpec{
		ID:       p.vmID,
		RAMBytes: int64(p.ramBytes),
		// An eighth of the guest RAM holds the guest OS and applications,
		// whole MiB so that it ends on a page boundary.
		RAMFootprintBytes: int64(p.ramBytes) / 8 &^ (vgpu.MiB - 1),
		Profiles:          []string{p.profile.Name},
		Workload:          w,
	})
	if err != nil {
		return nil, err
	}
	if err := vm.Start(); err != nil {
		return nil, err
	}

	// From here the Runner owns the host: everything else that touches it
	// holds the Runner's lock, as Send does.
	runner := live.NewRunner(host, 0)
	runner.Start()
	defer func() {
		if rerr := runner.Stop(); rerr != nil && err == nil {
			err = fmt.Errorf("running the source host: %w", rerr)
		}
	}()
	fmt.Fprintf(out, "%s: %s, %v guest RAM, %s workload (dirty rate %v/s), running %v before the migration\n",
		p.vmID, p.profile.Name, p.ramBytes, p.workload, p.dirtyBytesPerSec, p.warmup)
	if err := sleep(ctx, p.warmup); err != nil {
		return nil, err
	}
	if err := runner.Err(); err != nil {
		return nil, fmt.Errorf("running the source host: %w", err)
	}

	conns, err := dial(ctx, addr, p.conns, p.timeout)
	if err != nil {
		return nil, err
	}
	// Send closes the connections when it fails; after a success they are
	// still open, and done with.
	defer closeAll(conns)
	prog := &sourceProgress{out: out}
	rep, err = live.Send(ctx, vm, readWriters(conns), live.SendConfig{Policy: p.policy(), Engine: p.engine, AdaptiveCodec: p.codec == migrate.CodecAuto, Filtering: p.filters, Timeout: p.timeout, EncryptionKey: p.key, Lock: runner, Progress: prog.print})
	printReport(out, rep)
	if err != nil && rep != nil {
		// A failed migration leaves the VM where it was, as it was.
		runner.Lock()
		state := vm.State()
		runner.Unlock()
		fmt.Fprintf(out, "%s is %v on %s\n", vm.ID(), state, host.Name())
	}
	return rep, err
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// dial opens n connections to addr, one after another so that the
// destination accepts them in the order the stream deals its frames.
func dial(ctx context.Context, addr string, n int, timeout time.Duration) ([]net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("connection %d of %d: %w", i+1, n, err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		// Send and Receive close the connections when they fail, so an
		// error here says only that.
		_ = c.Close()
	}
}

func readWriters(conns []net.Conn) []io.ReadWriter {
	rws := make([]io.ReadWriter, len(conns))
	for i, c := range conns {
		rws[i] = c
	}
	return rws
}

// sourceProgress prints the source's progress: a line per round and one at
// the switchover.
type sourceProgress struct {
	out    io.Writer
	rounds int
}

func (s *sourceProgress) print(p migrate.Event) {
	switch p.Kind {
	case migrate.RoundEnded:
		s.rounds++
		// an event carries no page count; the report's round lines have it.
		fmt.Fprintf(s.out, "round %d: %s on the wire at %.1f MB/s, dirtied %.1f MB/s, expected stun %v\n",
			p.Round, megabytes(p.WireBytes), mbps(p.BandwidthBytesPerSec), mbps(p.DirtyRateBytesPerSec),
			p.ExpectedStun.Round(time.Microsecond))
	case migrate.SwitchedOver:
		fmt.Fprintf(s.out, "switchover after %d round(s) at %v: expected stun %v\n",
			s.rounds, p.At.Round(time.Millisecond), p.ExpectedStun.Round(time.Microsecond))
	}
}
