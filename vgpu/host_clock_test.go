package vgpu

import (
	"errors"
	"testing"
	"time"
)

// TestHostClock: while a driver holds a host's clock, the host's own
// Advance and a second driver are refused with ErrDriven and only the
// driver's Clock moves the host on, running its workloads as Advance does;
// once released, the Clock is refused and Advance works again.
func TestHostClock(t *testing.T) {
	h, vms := mixedHost(t, 0)
	twin, _ := mixedHost(t, 0)
	if d, held := h.Driver(); held {
		t.Fatalf("a new host is driven by %q", d)
	}
	c, err := h.TakeClock("the test")
	must(t, err)
	if d, held := h.Driver(); !held || d != "the test" {
		t.Fatalf("Driver() = %q, %v; want the test, true", d, held)
	}
	if err := h.Advance(time.Second); !errors.Is(err, ErrDriven) {
		t.Fatalf("Advance of a driven host: %v, want ErrDriven", err)
	}
	if _, err := h.TakeClock("another"); !errors.Is(err, ErrDriven) {
		t.Fatalf("a second driver: %v, want ErrDriven", err)
	}
	if h.Now() != 0 {
		t.Fatalf("refused calls moved the clock to %v", h.Now())
	}
	must(t, c.Advance(time.Second))
	must(t, twin.Advance(time.Second))
	if h.Now() != time.Second {
		t.Fatalf("after Clock.Advance the host reads %v", h.Now())
	}
	// The Clock runs the workloads exactly as Advance runs the twin's.
	for i, vm := range vms {
		got, want := granted(t, vm), granted(t, twin.VMs()[i])
		if got != want || got == 0 {
			t.Errorf("%s: GPU time %v through the Clock, %v through Advance", vm.ID(), got, want)
		}
	}
	if err := c.Advance(-time.Second); !errors.Is(err, ErrInvalidDuration) {
		t.Errorf("Clock.Advance backwards: %v, want ErrInvalidDuration", err)
	}

	c.Release()
	c.Release() // twice does nothing
	if _, held := h.Driver(); held {
		t.Fatal("released, the host is still driven")
	}
	if err := c.Advance(time.Second); !errors.Is(err, ErrDriven) {
		t.Fatalf("a released Clock advanced: %v, want ErrDriven", err)
	}
	must(t, h.Advance(time.Second))
	next, err := h.TakeClock("next")
	must(t, err)
	c.Release() // an old Clock's release leaves the new driver's hold
	if d, held := h.Driver(); !held || d != "next" {
		t.Fatalf("an old Clock's Release freed the host: %q, %v", d, held)
	}
	next.Release()
}

// granted is the GPU time a VM's first vGPU has received.
func granted(t tb, vm *VM) time.Duration {
	v := vm.VGPUs()[0]
	info, err := v.GPU().Scheduler().Tenant(v.Tenant())
	must(t, err)
	return info.Granted
}
