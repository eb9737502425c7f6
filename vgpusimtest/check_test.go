package vgpusimtest_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// wantBroken fails t unless err is an *InvariantError of invariant,
// wrapping ErrInvariant; nil invariant wants no error.
func wantBroken(t *testing.T, err error, invariant string) {
	t.Helper()
	if invariant == "" {
		if err != nil {
			t.Fatalf("got %v, want no error", err)
		}
		return
	}
	var ie *vgpusimtest.InvariantError
	if !errors.As(err, &ie) || !errors.Is(err, vgpusimtest.ErrInvariant) || ie.Invariant != invariant {
		t.Fatalf("got %v, want an *InvariantError of %q wrapping ErrInvariant", err, invariant)
	}
}

// wantLost fails t unless err is a *MemoryError, wrapping ErrLost and
// ErrInvariant, about page of region on host.
func wantLost(t *testing.T, err error, host string, region, page, offset int) {
	t.Helper()
	var me *vgpusimtest.MemoryError
	if !errors.As(err, &me) || !errors.Is(err, vgpusimtest.ErrLost) || !errors.Is(err, vgpusimtest.ErrInvariant) {
		t.Fatalf("got %v, want a *MemoryError wrapping ErrLost and ErrInvariant", err)
	}
	if me.Host != host || me.Region != region || me.Page != page || (offset >= 0 && me.Offset != offset) {
		t.Fatalf("got host %s region %d page %d offset %d, want %s %d %d %d", me.Host, me.Region, me.Page, me.Offset, host, region, page, offset)
	}
}

// migrated runs an oracle workload on a VM of host "src" for a while,
// with a write of the caller's own, and migrates it byte for byte to
// host "dst".
func migrated(t *testing.T) (o *vgpusimtest.Oracle, src, dst *vgpu.Host, r *migrate.Report) {
	t.Helper()
	return migratedWith(t, migrate.Config{Fidelity: migrate.Bytes})
}

// migratedWith is migrated, the migration configured by cfg.
func migratedWith(t *testing.T, cfg migrate.Config) (o *vgpusimtest.Oracle, src, dst *vgpu.Host, r *migrate.Report) {
	t.Helper()
	src, dst = kitHost(t, "src"), kitHost(t, "dst")
	o = vgpusimtest.NewOracle()
	vm := kitVM(t, src, "vm", o.Workload(vgpusimtest.OracleConfig{PagesPerSec: 500, Seed: 3}))
	if err := o.WriteAt(vm, 0, 4096*7+11, []byte("the caller's own bytes")); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*vgpu.Host{src, dst} {
		if err := h.Advance(200 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	r, err := migrate.Migrate(vm, dst, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != migrate.PhaseDone {
		t.Fatalf("migration %v: %s", r.Outcome, r.Error)
	}
	return o, src, dst, r
}

// TestOracleCheckHostsAfterMigration: the workload moves with its VM,
// and the destination's copy holds every page the oracle recorded, as
// the workload goes on writing there — until one is zeroed.
func TestOracleCheckHostsAfterMigration(t *testing.T) {
	o, src, dst, _ := migrated(t)
	moved, ok := dst.VM("vm")
	if !ok || moved.State() != vgpu.VMRunning || moved.Workload() == nil {
		t.Fatalf("no running copy with the workload at the destination (found %v)", ok)
	}
	wantBroken(t, vgpusimtest.CheckOneOwner([]*vgpu.Host{src, dst}, "vm"), "")
	if err := o.CheckHosts(src, dst); err != nil {
		t.Fatalf("after the migration: %v", err)
	}
	if err := dst.Advance(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := o.CheckHosts(src, dst); err != nil {
		t.Fatalf("after running on: %v", err)
	}
	// The source alone no longer holds the VM: it is lost there.
	wantBroken(t, o.CheckHosts(src), "one owner")
	ram := moved.RAM()
	last := ram.Pages() - 1 // the workload owns the last pages
	if _, err := ram.WriteAt(make([]byte, ram.PageSize()), int64(last)*int64(ram.PageSize())); err != nil {
		t.Fatal(err)
	}
	wantLost(t, o.CheckHosts(src, dst), "dst", 0, last, -1)
}

// TestOracleCheckHostsTwoCopies: of two live copies, CheckHosts checks
// the one that holds the workload, as between a hand-over and the
// source's release.
func TestOracleCheckHostsTwoCopies(t *testing.T) {
	a, b := kitHost(t, "a"), kitHost(t, "b")
	if _, err := a.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: kitVMRAM, Profiles: []string{"P40-1Q"}}); err != nil {
		t.Fatal(err)
	}
	o := vgpusimtest.NewOracle()
	vm := kitVM(t, b, "vm", o.Workload(vgpusimtest.OracleConfig{PagesPerSec: 100}))
	if err := o.CheckHosts(a, b); err != nil {
		t.Fatalf("checked the copy without the workload: %v", err)
	}
	flipByte(t, vm.RAM(), kitVMRAM-1)
	wantLost(t, o.CheckHosts(a, b), "b", 0, kitVMRAM/4096-1, 4095)
}

func TestCheckOneOwner(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, a, b *vgpu.Host)
		ids   []string
		want  string
	}{
		{"running on one host", func(t *testing.T, a, _ *vgpu.Host) { kitVM(t, a, "vm", nil) }, []string{"vm"}, ""},
		{"created, never started", func(t *testing.T, a, _ *vgpu.Host) {
			if _, err := a.CreateVM(vgpu.VMSpec{ID: "vm", RAMBytes: kitVMRAM, Profiles: []string{"P40-1Q"}}); err != nil {
				t.Fatal(err)
			}
		}, []string{"vm"}, ""},
		{"one copy running, one stopped", func(t *testing.T, a, b *vgpu.Host) {
			kitVM(t, a, "vm", nil)
			if err := kitVM(t, b, "vm", nil).Stop(); err != nil {
				t.Fatal(err)
			}
		}, []string{"vm"}, ""},
		{"two running copies", func(t *testing.T, a, b *vgpu.Host) { kitVM(t, a, "vm", nil); kitVM(t, b, "vm", nil) }, []string{"vm"}, "one owner"},
		{"destroyed, on no host", func(t *testing.T, a, _ *vgpu.Host) {
			if err := kitVM(t, a, "vm", nil).Destroy(); err != nil {
				t.Fatal(err)
			}
		}, []string{"vm"}, "one owner"},
		{"unknown ID", func(t *testing.T, a, _ *vgpu.Host) { kitVM(t, a, "vm", nil) }, []string{"vm", "ghost"}, "one owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := kitHost(t, "a"), kitHost(t, "b")
			tc.setup(t, a, b)
			wantBroken(t, vgpusimtest.CheckOneOwner([]*vgpu.Host{a, b}, tc.ids...), tc.want)
		})
	}
}

func TestCheckScrubbed(t *testing.T) {
	// dirty starts a VM whose framebuffer holds pages it wrote: its own
	// and an oracle workload's.
	dirty := func(t *testing.T, h *vgpu.Host) *vgpu.VM {
		o := vgpusimtest.NewOracle()
		vm := kitVM(t, h, "vm", o.Workload(vgpusimtest.OracleConfig{PagesPerSec: 100}))
		if err := o.WriteAt(vm, 1, 0, make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		if _, err := vm.Framebuffers()[0].WriteAt([]byte("tenant secret"), 5<<20); err != nil {
			t.Fatal(err)
		}
		if err := h.Advance(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		return vm
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, h *vgpu.Host)
		want  string
	}{
		{"fresh host", func(*testing.T, *vgpu.Host) {}, ""},
		{"a VM's written framebuffer", func(t *testing.T, h *vgpu.Host) { dirty(t, h) }, ""},
		{"after the VM was destroyed", func(t *testing.T, h *vgpu.Host) {
			if err := dirty(t, h).Destroy(); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"bytes outside any window", func(t *testing.T, h *vgpu.Host) {
			dirty(t, h)
			fb := h.GPU(0).Framebuffer()
			if _, err := fb.WriteAt([]byte{1}, fb.Size()-1); err != nil {
				t.Fatal(err)
			}
		}, "scrubbed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := kitHost(t, "h")
			tc.setup(t, h)
			wantBroken(t, vgpusimtest.CheckScrubbed(h), tc.want)
		})
	}
}

func TestCheckScheduler(t *testing.T) {
	a, b := kitHost(t, "a"), kitHost(t, "b")
	if err := vgpusimtest.CheckScheduler(a, b); err != nil {
		t.Fatalf("fresh hosts: %v", err)
	}
	o := vgpusimtest.NewOracle()
	for i, id := range []string{"vm0", "vm1"} {
		d, err := vgpu.NewDesktop(vgpu.DesktopConfig{UpdatesPerSec: 20, UpdatePixels: 10000, OpsPerPixel: 3e5, SurfaceBytes: 2 << 20,
			RAMWorkingSetBytes: 1 << 20, RAMDirtyBytesPerSec: 64 << 10, Seed: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		kitVM(t, a, id, o.Workload(vgpusimtest.OracleConfig{PagesPerSec: 100, Inner: d}))
	}
	for _, h := range []*vgpu.Host{a, b} {
		if err := h.Advance(time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Heavy updates keep the GPU busy for a good part of the second, so
	// that there is time to account for.
	if busy := a.GPU(0).Scheduler().Busy(); busy < 20*time.Millisecond {
		t.Fatalf("the workloads kept the GPU busy for only %v", busy)
	}
	if err := vgpusimtest.CheckScheduler(a, b); err != nil {
		t.Fatalf("after running: %v", err)
	}
}

// TestPostCopyChecks: a post-copy migration's report adds up, its pages
// pushed and fetched after the stun counted with the rest, and the
// destination holds every page the oracle recorded, those the VM faulted
// on included.
func TestPostCopyChecks(t *testing.T) {
	for _, fid := range []migrate.Fidelity{migrate.Bytes, migrate.Model} {
		o, src, dst, r := migratedWith(t, migrate.Config{Policy: migrate.Policy{Mode: migrate.PostCopy}, Fidelity: fid})
		if r.PostCopy == nil || r.PostCopy.OwedPages == 0 {
			t.Fatalf("%v: post-copy %+v", fid, r.PostCopy)
		}
		if err := vgpusimtest.CheckReport(r); err != nil {
			t.Fatalf("%v: %v", fid, err)
		}
		if err := o.CheckHosts(src, dst); err != nil {
			t.Fatalf("%v: %v", fid, err)
		}
	}
}

// TestCheckReport: a real report adds up, and each way of breaking its
// arithmetic is caught by the check meant for it.
func TestCheckReport(t *testing.T) {
	_, _, _, real := migrated(t)
	if err := vgpusimtest.CheckReport(real); err != nil {
		t.Fatalf("a real report: %v\n%v", err, real)
	}
	if len(real.Rounds) == 0 || len(real.StunPhases) < 2 || len(real.Events) < 2 {
		t.Fatalf("a report with %d rounds and %d stun phases cannot be mutated as the test needs", len(real.Rounds), len(real.StunPhases))
	}
	longest := 0
	for i, p := range real.StunPhases {
		if p.Duration > real.StunPhases[longest].Duration {
			longest = i
		}
	}
	other := real.StunPhases[(longest+1)%len(real.StunPhases)].Phase
	for _, tc := range []struct {
		name   string
		mutate func(r *migrate.Report)
		want   string // in the detail; empty when the report still adds up
	}{
		{"failed, saying why and where", func(r *migrate.Report) {
			r.Outcome, r.Error, r.FailedIn = migrate.PhaseFailed, "link down", migrate.PhasePreCopy
		}, ""},
		{"stun not the phases' sum", func(r *migrate.Report) { r.Stun += time.Millisecond }, "phases sum"},
		{"negative stun phase", func(r *migrate.Report) { r.StunPhases[0].Duration = -1 }, "stun phase"},
		{"dominant not the longest", func(r *migrate.Report) { r.Dominant = other }, "dominant phase"},
		{"stun longer than the migration", func(r *migrate.Report) {
			r.StunPhases[longest].Duration += r.Total
			r.Stun += r.Total
		}, "longer than"},
		{"total not end minus start", func(r *migrate.Report) { r.Total++ }, "total"},
		{"end before start", func(r *migrate.Report) { r.End, r.Total = r.Start-1, -1 }, "total"},
		{"pre-copy pages not the rounds' sum", func(r *migrate.Report) { r.PreCopy.Pages++ }, "pre-copy sent"},
		{"pre-copy bytes not the rounds' sum", func(r *migrate.Report) { r.PreCopy.RawBytes += 4096 }, "pre-copy sent"},
		{"raw bytes not the pages'", func(r *migrate.Report) { r.RawBytes++ }, "on the wire"},
		{"fewer wire bytes than the pages took", func(r *migrate.Report) { r.WireBytes = 0 }, "on the wire"},
		{"done with an error", func(r *migrate.Report) { r.Error = "boom" }, "done, yet failed"},
		{"failed without an error", func(r *migrate.Report) {
			r.Outcome, r.Error, r.FailedIn = migrate.PhaseFailed, "", migrate.PhasePreCopy
		}, "failed in"},
		{"failed nowhere", func(r *migrate.Report) { r.Outcome, r.Error, r.FailedIn = migrate.PhaseFailed, "boom", 0 }, "failed in"},
		{"outcome not an end", func(r *migrate.Report) { r.Outcome = migrate.PhasePreCopy }, "not ended"},
		{"round before the start", func(r *migrate.Report) { r.Rounds[0].Start = r.Start - 1 }, "round 0"},
		{"round of negative duration", func(r *migrate.Report) { r.Rounds[0].Duration = -1 }, "round 0"},
		{"round past the end", func(r *migrate.Report) { r.Rounds[0].Duration = r.Total + 1 }, "round 0"},
		{"round misnumbered", func(r *migrate.Report) { r.Rounds[0].Index = 3 }, "round 0"},
		{"rounds' wire bytes past the stream's", func(r *migrate.Report) {
			r.Rounds[0].WireBytes = r.WireBytes + 1
		}, "rounds put"},
		{"events out of order", func(r *migrate.Report) { r.Events[0].At, r.Events[1].At = r.Events[1].At, r.Events[0].At-1 }, "event"},
		{"event after the end", func(r *migrate.Report) { r.Events[len(r.Events)-1].At = r.End + 1 }, "event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := *real
			r.StunPhases = slices.Clone(real.StunPhases)
			r.Rounds = slices.Clone(real.Rounds)
			r.Events = slices.Clone(real.Events)
			tc.mutate(&r)
			err := vgpusimtest.CheckReport(&r)
			if tc.want == "" {
				wantBroken(t, err, "")
				return
			}
			wantBroken(t, err, "report")
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want the check that says %q", err, tc.want)
			}
		})
	}
	if err := vgpusimtest.CheckReport(real); err != nil {
		t.Fatalf("the mutations reached the original: %v", err)
	}
}
