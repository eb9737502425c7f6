package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// params describes the experiment.
type params struct {
	link   migrate.Link
	warmup time.Duration // the workload runs this long before the migration starts
	seed   uint64

	// Every VM has the same guest RAM, so that rows differ only in their
	// framebuffer: 16 GiB, 4 GiB of it holding the guest OS and the
	// serving stack, an ordinary size for a VM with one vGPU.
	ramBytes, ramFootprintBytes int64
	// requestsPerSec is the inference service's load: the vgpu package's
	// default, a steady service that keeps rewriting its activation arena.
	requestsPerSec float64
}

func defaultParams() params {
	return params{
		link:              migrate.GbE10(),
		warmup:            5 * time.Second,
		seed:              1,
		ramBytes:          16 * vgpu.GiB,
		ramFootprintBytes: 4 * vgpu.GiB,
		requestsPerSec:    50,
	}
}

// modes are the two ways vGPU memory moves, in the order rows print.
var modes = []migrate.Mode{migrate.Legacy, migrate.PreCopy}

// Outcomes, as printed. A refused migration never paused the VM.
const (
	outcomeMoved   = "moved"
	outcomeRefused = "refused"
)

// row is one migration.
type row struct {
	profile   string
	fbBytes   int64 // the profile's framebuffer
	usedBytes int64 // what the workload fills: the framebuffer less the vGPU manager's reservation
	mode      migrate.Mode
	outcome   string
	endsOn    string        // the host the VM runs on afterwards
	published time.Duration // VMware's 6.7 U1 stun for fbBytes in use; 0 where it has none or for PreCopy
	estimate  time.Duration // for a refused migration, the estimated stun it was refused on

	// For a migration that ran; zero for a refused one.
	stun, total time.Duration
	rounds      int
	wireBytes   int64
	meets       bool
}

// simulate migrates one VM per Q profile and mode, each between hosts of
// its own, so that no row depends on another.
func simulate(p params) ([]row, error) {
	if p.warmup < 0 {
		return nil, fmt.Errorf("-warmup %v is negative", p.warmup)
	}
	var rows []row
	for _, prof := range vgpu.Profiles("P40") {
		if prof.Series != vgpu.SeriesQ {
			continue
		}
		for _, mode := range modes {
			r, err := migrateOne(p, prof, mode)
			if err != nil {
				return nil, fmt.Errorf("%s %v: %w", prof.Name, mode, err)
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// migrateOne builds a source and a destination host, starts a VM of
// profile prof serving inference on the source, lets it run for the warm-up,
// and migrates it.
func migrateOne(p params, prof vgpu.Profile, mode migrate.Mode) (row, error) {
	// Synthetic memory (the default backing) stores no bytes for generated
	// content, so a 24 GB framebuffer costs only metadata, and Model
	// fidelity below sizes pages from one compressed sample per content
	// class instead of encoding every page: together they keep each row
	// to about half a second of wall time.
	src, err := vgpu.NewHost(vgpu.HostConfig{Name: "source", Seed: p.seed})
	if err != nil {
		return row{}, err
	}
	dst, err := vgpu.NewHost(vgpu.HostConfig{Name: "destination", Seed: p.seed + 1})
	if err != nil {
		return row{}, err
	}
	// The "used framebuffer" the published table is indexed by: all a
	// guest can use, the profile's framebuffer less the part the vGPU
	// manager reserves (ECC is off, as vGPU requires on a P40).
	used := prof.UsableFramebufferBytes()
	w, err := vgpu.NewInference(vgpu.InferenceConfig{
		Model:          vgpu.InceptionV3(),
		RequestsPerSec: p.requestsPerSec,
		FootprintBytes: used,
		Seed:           p.seed,
	})
	if err != nil {
		return row{}, err
	}
	vm, err := src.CreateVM(vgpu.VMSpec{
		ID:                "vm-" + prof.Name,
		RAMBytes:          p.ramBytes,
		RAMFootprintBytes: p.ramFootprintBytes,
		Profiles:          []string{prof.Name},
		Workload:          w,
	})
	if err != nil {
		return row{}, err
	}
	if err := vm.Start(); err != nil {
		return row{}, err
	}
	// The destination's clock keeps pace: a migration's hosts read one.
	for _, h := range []*vgpu.Host{src, dst} {
		if err := h.Advance(p.warmup); err != nil {
			return row{}, err
		}
	}

	r := row{profile: prof.Name, fbBytes: prof.FramebufferBytes, usedBytes: used, mode: mode}
	cfg := migrate.Config{Policy: migrate.Policy{Mode: mode}, Fidelity: migrate.Model, Link: p.link}
	if mode == migrate.Legacy {
		r.published = publishedStun(prof.FramebufferBytes)
		// 6.7 U1's 100 s stun timeout, as a limit: a migration whose
		// estimate is over it is refused and the VM stays where it is
		// (6.7 U1 itself failed such a migration at the timeout).
		cfg.StunLimit = migrate.VSphere67U1StunLimit
	}
	rep, err := migrate.Migrate(vm, dst, cfg)
	var pe *migrate.PhaseError
	switch {
	case errors.Is(err, migrate.ErrStunLimit) && errors.As(err, &pe) && pe.Phase == migrate.PhaseSetup:
		if vm.Host() != src || vm.State() != vgpu.VMRunning || len(dst.VMs()) != 0 {
			return row{}, fmt.Errorf("refused, yet the VM is %v on %s and the destination holds %d VMs",
				vm.State(), vm.Host().Name(), len(dst.VMs()))
		}
		// The refusal changed nothing, so the estimate it was judged on
		// can be asked for again: vSphere shows it per link.
		est, err := migrate.EstimateStun(vm, p.link, mode)
		if err != nil {
			return row{}, err
		}
		r.outcome, r.endsOn, r.estimate = outcomeRefused, src.Name(), est.Total
		return r, nil
	case err != nil:
		return row{}, err
	}
	r.outcome, r.endsOn = outcomeMoved, rep.Destination
	r.stun, r.total, r.rounds, r.wireBytes = rep.Stun, rep.Total, len(rep.Rounds), rep.WireBytes
	r.meets = rep.MeetsStandard()
	return r, nil
}

// publishedStun returns VMware's 6.7 U1 stun time for a framebuffer of
// fbBytes in use, or 0 if the table has no such size.
func publishedStun(fbBytes int64) time.Duration {
	for _, p := range migrate.PublishedStun() {
		if int64(p.UsedGiB)*vgpu.GiB == fbBytes {
			return p.Stun
		}
	}
	return 0
}
