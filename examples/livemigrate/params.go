package main

import (
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The workloads -workload names.
const (
	workloadInference = "inference"
	workloadTraining  = "training"
	workloadIdle      = "idle"
)

// set checks the flags that are names and the numbers that have bounds, and
// stores what they name.
func (p *params) set(profile, mode, codec string) error {
	prof, err := vgpu.ParseProfile(profile)
	if err != nil {
		return err
	}
	p.profile = prof
	// "precopy", the flag's default, and any case are the flag's own
	// spellings, kept for the command lines written with them: package
	// migrate parses only the names the modes print.
	// "hybrid" pre-copies and switches over into post-copy if pre-copy
	// does not converge.
	m := strings.ToLower(mode)
	p.hybrid = m == "hybrid"
	switch m {
	case "precopy", "hybrid":
		m = migrate.PreCopy.String()
	case "postcopy":
		m = migrate.PostCopy.String()
	}
	if p.mode, err = migrate.ParseMode(m); err != nil {
		return fmt.Errorf("-mode %q: want precopy, legacy, postcopy or hybrid", mode)
	}
	if p.codec, err = migrate.ParseCodec(strings.ToLower(codec)); err != nil {
		return fmt.Errorf("-codec %q: want none, s2, zstd or auto", codec)
	}
	p.engine.Level = p.codec.Level()
	switch p.workload {
	case workloadInference, workloadTraining, workloadIdle:
	default:
		return fmt.Errorf("-workload %q: want %s, %s or %s", p.workload, workloadInference, workloadTraining, workloadIdle)
	}
	switch {
	case p.conns < 1:
		return fmt.Errorf("-conns %d: want at least 1", p.conns)
	case p.engine.Workers < 1:
		return fmt.Errorf("-workers %d: want at least 1", p.engine.Workers)
	case p.ramBytes <= 0:
		return fmt.Errorf("-ram %v: want a positive size", p.ramBytes)
	case p.deltaCache < 0:
		return fmt.Errorf("-delta-cache %v: want a size, or 0 for none", p.deltaCache)
	case p.warmup < 0:
		return fmt.Errorf("-warmup %v is negative", p.warmup)
	case p.stunTarget < 0:
		return fmt.Errorf("-stun-target %v is negative", p.stunTarget)
	case p.timeout <= 0:
		return fmt.Errorf("-timeout %v: want a positive duration", p.timeout)
	case p.vmID == "":
		return fmt.Errorf("-vm: want a VM ID")
	}
	p.filters.DeltaCacheBytes = int64(p.deltaCache)
	return nil
}

// readKey reads a migration key from a file: 64 hex digits, spaces and
// newlines around them allowed. A key on the command line would show in
// the process list.
func readKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-key-file: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != checkpoint.KeySize {
		return nil, fmt.Errorf("-key-file %s: want %d hex digits", path, 2*checkpoint.KeySize)
	}
	return key, nil
}

// newWorkload returns the workload -workload names, nil for idle: a VM
// that runs and writes nothing, so pre-copy converges after one round.
//
// Every byte a workload writes is generated, in real bytes, on the Runner's
// goroutine, and the host must keep up with wall time or fall ever further
// behind while holding the lock the migration needs. So the workloads are
// sized to write about a hundred MB/s at the default dirty rate: MobileNet
// at two requests a second (an Inception V3 service at 50 rewrites 2 GB/s
// of activations), and training whose compute is Inception V3's at batch
// 32, five steps a second, but whose weights, activations and optimizer
// state are a few MiB.
func newWorkload(p params) (vgpu.Workload, error) {
	switch p.workload {
	case workloadInference:
		w, err := vgpu.NewInference(vgpu.InferenceConfig{
			Model:          vgpu.MobileNet(),
			RequestsPerSec: 2,
			// The service's default working set is 256 MiB; a quarter of
			// the guest RAM keeps it inside small VMs.
			RAMWorkingSetBytes:          min(256*vgpu.MiB, int64(p.ramBytes)/4),
			RAMDirtyBytesPerSec:         int64(p.dirtyBytesPerSec),
			FramebufferDirtyBytesPerSec: int64(p.dirtyBytesPerSec),
			Seed:                        p.seed,
		})
		if err != nil {
			return nil, err
		}
		return w, nil
	case workloadTraining:
		w, err := vgpu.NewTraining(vgpu.TrainingConfig{
			Model:               vgpu.InceptionV3(),
			BatchSize:           32,
			WeightsBytes:        4 * vgpu.MiB,
			ActivationsBytes:    4 * vgpu.MiB,
			OptimizerStateBytes: 8 * vgpu.MiB,
			RAMDirtyBytesPerSec: int64(p.dirtyBytesPerSec),
			Seed:                p.seed,
		})
		if err != nil {
			return nil, err
		}
		return w, nil
	}
	return nil, nil
}

// byteSize is a flag holding a number of bytes, written with a unit:
// binary (KiB, MiB, GiB, TiB), decimal (kB, MB, GB, TB), B or none.
type byteSize int64

var byteUnits = []struct {
	suffix string
	scale  int64
}{
	// Longest first, so that "MiB" is not read as "B" after "Mi".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

func (b *byteSize) Set(s string) error {
	num, scale := strings.TrimSpace(s), int64(1)
	lower := strings.ToLower(num)
	for _, u := range byteUnits {
		if strings.HasSuffix(lower, u.suffix) {
			num, scale = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.scale
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return fmt.Errorf("%q is not a size such as 512MiB or 2GiB", s)
	}
	n := math.Round(v * float64(scale))
	if n >= math.MaxInt64 {
		return fmt.Errorf("%q is too large", s)
	}
	*b = byteSize(n)
	return nil
}

// String writes the size in the largest binary unit that divides it.
func (b byteSize) String() string {
	n := int64(b)
	for _, u := range []struct {
		suffix string
		scale  int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.scale == 0 {
			return strconv.FormatInt(n/u.scale, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// policy is the migration's policy as the flags set it.
func (p params) policy() migrate.Policy {
	pol := migrate.Policy{Mode: p.mode, StunTarget: p.stunTarget}
	if p.hybrid {
		pol.OnNonConvergence = migrate.SwitchToPostCopy
	}
	return pol
}
