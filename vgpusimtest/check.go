package vgpusimtest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The invariant checkers. Each returns nil or an error wrapping
// ErrInvariant, so that a test calls them after any step, from a
// *testing.T or a *rapid.T alike:
//
//	if err := vgpusimtest.CheckOneOwner(hosts, ids...); err != nil {
//		t.Fatal(err)
//	}

var (
	// ErrInvariant reports an invariant of the library broken: a VM lost
	// or running twice, memory readable after a scrub, a scheduler that
	// granted more time than passed, a report that does not add up.
	ErrInvariant = errors.New("vgpusimtest: invariant broken")
	// ErrLost reports a page that does not hold what the oracle recorded.
	// It is wrapped by a *MemoryError, which also wraps ErrInvariant.
	ErrLost = errors.New("vgpusimtest: memory differs from the oracle")
)

// InvariantError is the error of a broken invariant.
type InvariantError struct {
	// Invariant names it: "one owner", "scrubbed", "scheduler",
	// "report", or (World) "failed migration", "lost VM", "finished".
	Invariant string
	// Detail says what broke.
	Detail string
}

// Error names the invariant and says what broke.
func (e *InvariantError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvariant, e.Invariant, e.Detail)
}

// Unwrap returns ErrInvariant.
func (e *InvariantError) Unwrap() error { return ErrInvariant }

func broken(invariant, format string, args ...any) error {
	return &InvariantError{Invariant: invariant, Detail: fmt.Sprintf(format, args...)}
}

// MemoryError reports a page of a VM's copy that differs from what the
// oracle recorded, or could not be read.
type MemoryError struct {
	VM, Host string
	// Region is 0 for guest RAM and 1+i for framebuffer i; Page the page
	// in it and Offset the first byte that differs.
	Region, Page, Offset int
	// Err is why the page could not be read; nil when it was read and
	// differs.
	Err error
}

// Error names the VM, its host and the page, and where it differs or why
// it could not be read.
func (e *MemoryError) Error() string {
	what := fmt.Sprintf("VM %q on %s, region %d page %d", e.VM, e.Host, e.Region, e.Page)
	if e.Err != nil {
		return fmt.Sprintf("%v: %s: %v", ErrLost, what, e.Err)
	}
	return fmt.Sprintf("%v: %s differs from byte %d", ErrLost, what, e.Offset)
}

// Unwrap returns ErrLost, ErrInvariant and, if set, Err.
func (e *MemoryError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrLost, ErrInvariant, e.Err}
	}
	return []error{ErrLost, ErrInvariant}
}

// live reports whether a copy of a VM is one: created, running, paused or
// stopped. An incoming copy is not yet one, a destroyed one no longer.
func live(s vgpu.VMState) bool {
	return s == vgpu.VMCreated || s == vgpu.VMRunning || s == vgpu.VMPaused || s == vgpu.VMStopped
}

// CheckOneOwner checks that each VM of ids is never lost and never runs
// twice: across hosts, at most one copy of it runs and at least one copy
// is live (created, running, paused or stopped).
func CheckOneOwner(hosts []*vgpu.Host, ids ...string) error {
	for _, id := range ids {
		running, alive := 0, 0
		for _, h := range hosts {
			vm, ok := h.VM(id)
			if !ok {
				continue
			}
			if vm.State() == vgpu.VMRunning {
				running++
			}
			if live(vm.State()) {
				alive++
			}
		}
		if running > 1 || alive == 0 {
			return broken("one owner", "VM %q has %d running and %d live copies", id, running, alive)
		}
	}
	return nil
}

// CheckScrubbed checks that nothing is readable after a scrub: on every
// GPU of every host, each framebuffer page that no vGPU's window maps
// reads as zero, whatever a tenant that had it wrote there. It assumes
// the caller wrote nothing to a GPU's framebuffer outside windows.
func CheckScrubbed(hosts ...*vgpu.Host) error {
	for _, h := range hosts {
		for _, g := range h.GPUs() {
			fb := g.Framebuffer()
			used := memory.NewPageSet(fb.Pages())
			if err := fb.UsedPages(used); err != nil {
				return err
			}
			windows := fb.Windows()
			for p := range used.All() {
				if !slices.ContainsFunc(windows, func(w *memory.Region) bool { return p >= w.FirstPage() && p < w.FirstPage()+w.Pages() }) {
					return broken("scrubbed", "%s GPU %d: framebuffer page %d is mapped by no vGPU and not zero", h.Name(), g.Index(), p)
				}
			}
		}
	}
	return nil
}

// CheckScheduler checks each GPU scheduler's conservation of time: it
// granted no more GPU time than passed since it started, no tenant
// finished more jobs than it was given, and its utilization over the
// last second lies in [0, 1].
func CheckScheduler(hosts ...*vgpu.Host) error {
	for _, h := range hosts {
		for _, g := range h.GPUs() {
			v := g.Scheduler()
			elapsed := v.Now() - v.Config().Start
			if busy := v.Busy(); busy < 0 || busy > elapsed {
				return broken("scheduler", "%s GPU %d granted %v in %v", h.Name(), g.Index(), busy, elapsed)
			}
			for _, ti := range v.Tenants() {
				if ti.Completed+ti.Dropped > ti.Submitted || ti.Granted < 0 || ti.Debt < 0 {
					return broken("scheduler", "%s GPU %d tenant %d: %d submitted, %d completed, %d dropped, %v granted, %v debt",
						h.Name(), g.Index(), ti.ID, ti.Submitted, ti.Completed, ti.Dropped, ti.Granted, ti.Debt)
				}
			}
			if now := h.Now(); now > 0 {
				u, err := g.Utilization(max(0, now-time.Second), now)
				if err == nil && (u < 0 || u > 1) {
					return broken("scheduler", "%s GPU %d utilization %v", h.Name(), g.Index(), u)
				}
			}
		}
	}
	return nil
}

// CheckHosts compares with the oracle the one copy of each VM it follows
// that is live on hosts: the copy that runs its workload, or, before a
// migration's end, the source's. A VM the oracle follows with no live
// copy on hosts is lost, and so reported; check CheckOneOwner first for
// the plainer message.
func (o *Oracle) CheckHosts(hosts ...*vgpu.Host) error {
	for _, id := range o.VMs() {
		var copies []*vgpu.VM
		for _, h := range hosts {
			if vm, ok := h.VM(id); ok && live(vm.State()) {
				copies = append(copies, vm)
			}
		}
		if len(copies) == 0 {
			return broken("one owner", "VM %q, which the oracle follows, has no live copy", id)
		}
		// Between a hand-over and the source's release two copies are
		// live; the one holding the workload is the VM.
		vm := copies[0]
		if i := slices.IndexFunc(copies, func(v *vgpu.VM) bool { return v.Workload() != nil }); i >= 0 {
			vm = copies[i]
		}
		if err := o.Check(vm); err != nil {
			return err
		}
	}
	return nil
}
