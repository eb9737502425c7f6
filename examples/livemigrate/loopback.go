package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"

	"github.com/vgpusim/vgpusim/migrate"
)

var errSourceFailed = errors.New("the source failed")

// runLoopback runs a destination and a source in this process, over
// 127.0.0.1, and checks that the destination's digests equal the source's.
func runLoopback(ctx context.Context, p params, jsonPath string, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return finish(stderr, err)
	}
	outer := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	srcOut := &lineWriter{mu: &mu, w: stdout, prefix: "src: "}
	dstOut := &lineWriter{mu: &mu, w: stdout, prefix: "dst: "}
	fmt.Fprintf(dstOut, "listening on %s for %d connection(s)\n", ln.Addr(), p.conns)

	var dstRep *migrate.Report
	var dstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		// runDestination closes ln when it returns, so a source that has
		// not dialled yet finds nobody listening instead of waiting.
		dstRep, dstErr = runDestination(ctx, p, ln, dstOut)
	}()
	srcRep, srcErr := runSource(ctx, p, ln.Addr().String(), srcOut)
	if srcErr != nil {
		// The destination may still wait for connections that will not
		// come.
		cancel(errSourceFailed)
	}
	<-done
	srcOut.flush()
	dstOut.flush()

	var errs []error
	if srcErr != nil {
		errs = append(errs, fmt.Errorf("src: %w", srcErr))
	}
	// A destination stopped because the source failed, or interrupted with
	// it, has nothing to add to the source's error.
	if dstErr != nil && !(srcErr != nil && (errors.Is(dstErr, errSourceFailed) || outer.Err() != nil)) {
		errs = append(errs, fmt.Errorf("dst: %w", dstErr))
	}
	if srcErr == nil && dstErr == nil && dstRep.PostCopy != nil {
		// The destination checked that every page came; the VM ran there
		// meanwhile, so there is no digest to compare.
		fmt.Fprintln(stdout, "every page landed")
	} else if srcErr == nil && dstErr == nil {
		if len(srcRep.RegionDigests) == 0 || !slices.Equal(srcRep.RegionDigests, dstRep.RegionDigests) {
			errs = append(errs, errors.New("digests differ"))
		} else {
			fmt.Fprintln(stdout, "digests match")
		}
	}
	if jsonPath != "" && (srcRep != nil || dstRep != nil) {
		errs = append(errs, writeJSON(jsonPath, struct {
			Source      *migrate.Report `json:"source"`
			Destination *migrate.Report `json:"destination"`
		}{srcRep, dstRep}))
	}
	return finish(stderr, errs...)
}
