package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/sweep"
	"github.com/vgpusim/vgpusim/vgpu"
)

// params describes the experiment.
type params struct {
	link   migrate.Link
	warmup time.Duration // the workload runs this long before the migration starts
	seed   uint64

	// Every P40 VM has the same guest RAM, so that rows differ only in
	// their framebuffer: 16 GiB, 4 GiB of it holding the guest OS and the
	// serving stack, an ordinary size for a VM with one vGPU.
	ramBytes, ramFootprintBytes int64
	// v100RAMFootprintBytes is the guest RAM in use of the V100 VMs, whose
	// size the published 7.0 table gives (4 GB): the guest OS's share of it.
	v100RAMFootprintBytes int64
	// requestsPerSec is the inference service's load: the vgpu package's
	// default, a steady service that keeps rewriting its activation arena.
	requestsPerSec float64
}

func defaultParams() params {
	return params{
		link:                  migrate.GbE10(),
		warmup:                5 * time.Second,
		seed:                  1,
		ramBytes:              16 * vgpu.GiB,
		ramFootprintBytes:     4 * vgpu.GiB,
		v100RAMFootprintBytes: 1 * vgpu.GiB,
		requestsPerSec:        50,
	}
}

// modes are the three ways vGPU memory moves, in the order the sweep's
// rows print.
var modes = []migrate.Mode{migrate.Legacy, migrate.PreCopy, migrate.PostCopy}

// The tables rows belong to, as the table column names them: the sweep,
// and two of VMware's published tables (migrate.PublishedStunTables), by
// their names.
const (
	tableProfiles  = "p40-profiles"
	tablePublished = "vsphere-6.7u1-p40"
	tableV100      = "vsphere-7.0-v100-worst"
	// tableV100Expected is the 7.0 table for a framebuffer not all in use,
	// shown beside tableV100 for reference.
	tableV100Expected = "vsphere-7.0-v100-expected"
)

// The presets each kind of migration runs under (migrate.Presets). The
// sweep's are its modes' defaults: Legacy's is vsphere-6.7u1's costs,
// PreCopy's fb-precopy's. PostCopy has no preset of its own: its rows run
// fb-precopy's stun costs (quiesce, device checkpoint, resume) in
// PostCopy mode, so that its stun differs from PreCopy's only in what the
// stun sends.
const (
	presetLegacy67  = "vsphere-6.7u1"
	presetLegacy70  = "vsphere-7.0"
	presetFBPreCopy = "fb-precopy"
)

// modePreset is the preset of the sweep's rows of mode m: PostCopy's
// costs are PreCopy's.
func modePreset(m migrate.Mode) string {
	if m == migrate.Legacy {
		return presetLegacy67
	}
	return presetFBPreCopy
}

// Outcomes, as printed. A refused migration never paused the VM.
const (
	outcomeMoved   = "moved"
	outcomeRefused = "refused"
)

// row is one migration.
type row struct {
	table     string // which table it belongs to: tableProfiles, tablePublished or tableV100
	profile   string
	fbBytes   int64 // the profile's framebuffer
	usedBytes int64 // what the workload fills
	mode      migrate.Mode
	preset    string
	outcome   string
	endsOn    string        // the host the VM runs on afterwards
	limit     time.Duration // the stun limit it ran under; 0 for none
	estimate  time.Duration // for a refused migration, the estimated stun it was refused on

	// published is the published stun of this VM's size, for the Legacy
	// rows of a published table; 0 elsewhere. resolution is its rounding.
	published, resolution time.Duration
	// expected is the 7.0 "expected" table's figure for the size, a
	// reference for tableV100's Legacy rows, and expectedResolution its
	// rounding; 0 elsewhere.
	expected, expectedResolution time.Duration

	// For a migration that ran; zero for a refused one.
	stun, total time.Duration
	rounds      int
	wireBytes   int64
	meets       bool

	// The degradation after the stun, for a migration that ran: zero
	// unless it post-copied (migrate.PostCopyReport). window is the time
	// from the resume at the destination until the last page arrived;
	// faults the pages the VM touched before they came, which it waited
	// faultP50 and faultP99 for (the median and 99th percentile), stall
	// in all.
	window, stall      time.Duration
	faults             int64
	faultP50, faultP99 time.Duration
}

// errorPct is the simulated stun's error against the published figure, in
// per cent; ok is false where there is no figure or no stun.
func (r row) errorPct() (pct float64, ok bool) {
	if r.published <= 0 || r.outcome != outcomeMoved {
		return 0, false
	}
	return 100 * (r.stun.Seconds() - r.published.Seconds()) / r.published.Seconds(), true
}

// job is one migration to run: a VM of workload footprint used on a
// profile, between a pair of new hosts with GPUs of model gpu.
type job struct {
	table        string
	gpu          vgpu.GPUSpec
	prof         vgpu.Profile
	used         int64
	ram, ramUsed int64
	preset       migrate.Preset
	mode         migrate.Mode // the preset's, or PostCopy with fb-precopy's costs
	link         migrate.Link
	stunLimit    time.Duration

	// The published figures the row shows (row's fields of the same
	// names): the plan sets them, so that a job's row needs no other.
	published, resolution        time.Duration
	expected, expectedResolution time.Duration
}

// simulate runs the migrations of cfg's shard of the three tables (all of
// them for the zero shard), cfg.Workers at a time: the sweep, then the
// published 6.7 U1 points, then the 7.0 V100 points. Each VM migrates
// between hosts of its own, so that no row depends on another and the
// rows are the same for any number of workers.
func simulate(p params, cfg sweep.Config) ([]row, error) {
	if p.warmup < 0 {
		return nil, fmt.Errorf("-warmup %v is negative", p.warmup)
	}
	jobs, err := plan(p)
	if err != nil {
		return nil, err
	}
	return sweep.Run(context.Background(), jobs, cfg, func(_ context.Context, _ int, j job) (row, error) {
		r, err := migrateOne(p, j)
		if err != nil {
			return row{}, fmt.Errorf("%s %s %s: %w", j.table, j.prof.Name, j.preset.Name, err)
		}
		return r, nil
	})
}

// plan lists the migrations, in the order their rows print.
func plan(p params) ([]job, error) {
	presets := map[string]migrate.Preset{}
	for _, pr := range migrate.Presets() {
		presets[pr.Name] = pr
	}
	preset := func(name string) migrate.Preset { return presets[name] }
	for _, name := range []string{presetLegacy67, presetLegacy70, presetFBPreCopy} {
		if _, ok := presets[name]; !ok {
			return nil, fmt.Errorf("no preset %q", name)
		}
	}
	var jobs []job

	// The sweep: every P40 Q profile with its whole usable framebuffer in
	// use (what a guest can use: the profile's framebuffer less the part
	// the vGPU manager reserves, ECC off as vGPU requires on a P40), each
	// in the three modes. Legacy runs under 6.7 U1's 100 s stun timeout, as a
	// limit: a migration whose estimate is over it is refused and the VM
	// stays where it is (6.7 U1 itself failed such a migration at the
	// timeout).
	var qs []vgpu.Profile
	for _, prof := range vgpu.Profiles("P40") {
		if prof.Series == vgpu.SeriesQ {
			qs = append(qs, prof)
		}
	}
	for _, prof := range qs {
		for _, m := range modes {
			j := job{table: tableProfiles, gpu: vgpu.P40(), prof: prof, used: prof.UsableFramebufferBytes(),
				ram: p.ramBytes, ramUsed: p.ramFootprintBytes, preset: preset(modePreset(m)), mode: m, link: p.link}
			if m == migrate.Legacy {
				j.stunLimit = migrate.VSphere67U1StunLimit
			}
			jobs = append(jobs, j)
		}
	}

	// The published 6.7 U1 points, at their GiB in use: a workload of
	// exactly that footprint on the smallest Q profile that holds it.
	pub, err := stunTable(tablePublished)
	if err != nil {
		return nil, err
	}
	for _, pt := range pub.Points {
		used := int64(pt.UsedGiB) * vgpu.GiB
		i := 0
		for i < len(qs) && qs[i].UsableFramebufferBytes() < used {
			i++
		}
		if i == len(qs) {
			return nil, fmt.Errorf("no P40 Q profile holds %d GiB", pt.UsedGiB)
		}
		jobs = append(jobs, job{table: tablePublished, gpu: vgpu.P40(), prof: qs[i], used: used,
			ram: p.ramBytes, ramUsed: p.ramFootprintBytes, preset: preset(presetLegacy67), mode: migrate.Legacy, link: p.link,
			stunLimit: migrate.VSphere67U1StunLimit, published: pt.Stun, resolution: pub.Resolution})
	}

	// The 7.0 worst-case points on the V100: a VM of the table's memory
	// on each V100D Q type of its sizes, the type's usable framebuffer all
	// in use, over the table's link, under the vsphere-7.0 preset and
	// beside it fb-precopy. The Legacy job shows the published figure and
	// the 7.0 expected table's.
	tb, err := stunTable(tableV100)
	if err != nil {
		return nil, err
	}
	if !tb.AllInUse || tb.VMRAMGiB <= 0 {
		return nil, fmt.Errorf("%s: want a table of types with all their framebuffer in use, and the VM's memory", tb.Name)
	}
	ex, err := stunTable(tableV100Expected)
	if err != nil {
		return nil, err
	}
	if len(ex.Points) != len(tb.Points) {
		return nil, fmt.Errorf("%s has %d points, %s %d", ex.Name, len(ex.Points), tb.Name, len(tb.Points))
	}
	gpu, err := vgpu.SpecByModel(tb.GPUModel)
	if err != nil {
		return nil, err
	}
	link, err := migrate.LinkByName(tb.Link)
	if err != nil {
		return nil, err
	}
	for n, pt := range tb.Points {
		prof, err := vgpu.ParseProfile(fmt.Sprintf("%s-%dQ", tb.GPUModel, pt.UsedGiB))
		if err != nil {
			return nil, err
		}
		for _, name := range []string{presetLegacy70, presetFBPreCopy} {
			j := job{table: tableV100, gpu: gpu, prof: prof, used: prof.UsableFramebufferBytes(),
				ram: int64(tb.VMRAMGiB) * vgpu.GiB, ramUsed: p.v100RAMFootprintBytes, preset: preset(name), mode: preset(name).Mode, link: link}
			if name == presetLegacy70 {
				j.published, j.resolution = pt.Stun, tb.Resolution
				j.expected, j.expectedResolution = ex.Points[n].Stun, ex.Resolution
			}
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// stunTable returns the published table named name.
func stunTable(name string) (migrate.StunTable, error) {
	for _, tb := range migrate.PublishedStunTables() {
		if tb.Name == name {
			return tb, nil
		}
	}
	return migrate.StunTable{}, fmt.Errorf("no published stun table %q", name)
}

// migrateOne builds a source and a destination host, starts the job's VM
// serving inference on the source, lets it run for the warm-up, and
// migrates it.
func migrateOne(p params, j job) (row, error) {
	// Synthetic memory (the default backing) stores no bytes for generated
	// content, so a 24 GB framebuffer costs only metadata, and Model
	// fidelity below sizes pages from one compressed sample per content
	// class instead of encoding every page: together they keep each row
	// to about a third of a second of wall time.
	src, err := vgpu.NewHost(vgpu.HostConfig{Name: "source", GPU: j.gpu, Seed: p.seed})
	if err != nil {
		return row{}, err
	}
	dst, err := vgpu.NewHost(vgpu.HostConfig{Name: "destination", GPU: j.gpu, Seed: p.seed + 1})
	if err != nil {
		return row{}, err
	}
	w, err := vgpu.NewInference(vgpu.InferenceConfig{
		Model:          vgpu.InceptionV3(),
		RequestsPerSec: p.requestsPerSec,
		FootprintBytes: j.used,
		Seed:           p.seed,
	})
	if err != nil {
		return row{}, err
	}
	vm, err := src.CreateVM(vgpu.VMSpec{
		ID:                "vm-" + j.prof.Name,
		RAMBytes:          j.ram,
		RAMFootprintBytes: j.ramUsed,
		Profiles:          []string{j.prof.Name},
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

	r := row{table: j.table, profile: j.prof.Name, fbBytes: j.prof.FramebufferBytes, usedBytes: j.used,
		mode: j.mode, preset: j.preset.Name, limit: j.stunLimit,
		published: j.published, resolution: j.resolution, expected: j.expected, expectedResolution: j.expectedResolution}
	cfg := j.preset.Apply(migrate.Config{Fidelity: migrate.Model, Link: j.link})
	cfg.Mode, cfg.StunLimit = j.mode, j.stunLimit
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
		est, err := migrate.EstimateStun(vm, cfg)
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
	if pc := rep.PostCopy; pc != nil {
		r.window, r.stall, r.faults = pc.Window, pc.Stall, pc.Faults
		r.faultP50, r.faultP99 = pc.FaultLatencyP50, pc.FaultLatencyP99
	}
	return r, nil
}
