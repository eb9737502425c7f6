package live_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/migrate/live"
	"github.com/vgpusim/vgpusim/vgpu"
)

// A VM live-migrated over an in-memory connection: Send at the source,
// Receive at the destination, each on its own goroutine. Over a net.Conn
// from net.Dial and a listener's Accept it is the same; a Runner would
// keep a running VM's workload writing meanwhile.
func Example() {
	src, _ := vgpu.NewHost(vgpu.HostConfig{Name: "src"})
	dst, _ := vgpu.NewHost(vgpu.HostConfig{Name: "dst"})
	vm, _ := src.CreateVM(vgpu.VMSpec{ID: "vm1", RAMBytes: 64 << 20, RAMFootprintBytes: 8 << 20, Profiles: []string{"P40-1Q"}})
	_ = vm.Start()
	_ = vm.Pause() // nothing advances the source host here

	a, b := net.Pipe()
	type received struct {
		vm  *vgpu.VM
		err error
	}
	done := make(chan received, 1)
	go func() {
		in, _, err := live.Receive(context.Background(), dst, []io.ReadWriter{b}, live.ReceiveConfig{Timeout: 10 * time.Second})
		done <- received{in, err}
	}()
	rep, err := live.Send(context.Background(), vm, []io.ReadWriter{a}, live.SendConfig{Timeout: 10 * time.Second})
	got := <-done
	var pe *migrate.PhaseError
	fmt.Println(err, errors.As(got.err, &pe), rep.Outcome, rep.Switchover)
	fmt.Println(got.vm.ID(), "on", got.vm.Host().Name(), got.vm.State(), "; at the source:", len(src.VMs()), "VMs")
	// Output:
	// <nil> false done converged
	// vm1 on dst paused ; at the source: 0 VMs
}
