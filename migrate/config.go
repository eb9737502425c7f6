package migrate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
)

// Mode selects how vGPU memory moves.
type Mode uint8

const (
	// PreCopy pre-copies every vGPU framebuffer with guest RAM, round after
	// round, from its own dirty log; the stun sends only what is still
	// dirty. The default.
	PreCopy Mode = iota + 1
	// Legacy copies vGPU memory only during the stun, through the device
	// checkpoint path, as vSphere 6.7 U1 did; guest RAM is still
	// pre-copied.
	Legacy
	// PostCopy switches over at once, with no pre-copy round: the stun
	// sends the device states and the list of pages in use, the VM
	// resumes at the destination, and guest RAM and every framebuffer
	// follow while it runs, pushed in the background and pulled on demand
	// when the VM touches a page that has not arrived (see PostCopyReport
	// for what that costs the workload). A vGPU's framebuffer moves as
	// QEMU's postcopy-ram moves guest RAM; no vGPU stack post-copies
	// framebuffer memory. The simulated mode only, for now.
	PostCopy
)

func (m Mode) String() string {
	switch m {
	case PreCopy:
		return "pre-copy"
	case Legacy:
		return "legacy"
	case PostCopy:
		return "post-copy"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// MarshalText writes the mode's name.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// ParseMode returns the mode whose String is s ("pre-copy", "legacy" or
// "post-copy"),
// so that a flag or a script names a mode as reports print it. Any other
// name is an error wrapping ErrConfig.
func ParseMode(s string) (Mode, error) {
	return parseName("mode", s, []Mode{PreCopy, Legacy, PostCopy})
}

// parseName returns the value among all whose String is s, exactly: the
// one spelling every value prints and parses in. what names the kind in
// the error, which lists the names.
func parseName[T fmt.Stringer](what, s string, all []T) (T, error) {
	names := make([]string, len(all))
	for i, v := range all {
		if v.String() == s {
			return v, nil
		}
		names[i] = v.String()
	}
	var zero T
	return zero, fmt.Errorf("%w: unknown %s %q (%s or %s)", ErrConfig, what, s,
		strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// Fidelity selects how faithfully pages are moved.
type Fidelity uint8

const (
	// Bytes reads every page, encodes it with the checkpoint writer and
	// applies it at the destination, batch by batch: the destination
	// holds the source's bytes, and the stream is checked end to end. It
	// costs the wall time of really encoding every page, hundreds of MB a
	// second; choose it to test the copy path itself.
	Bytes Fidelity = iota + 1
	// Model counts pages by content class and takes each class's wire
	// size from compressing a real sample of it once per process; the
	// destination regenerates the pages (same classes, generations and
	// window seeds). A 24 GB framebuffer migrates in well under a second
	// of wall time, with the stun and wire bytes of Bytes fidelity within
	// half a percent. The default.
	Model
)

func (f Fidelity) String() string {
	switch f {
	case Bytes:
		return "bytes"
	case Model:
		return "model"
	}
	return fmt.Sprintf("Fidelity(%d)", uint8(f))
}

// MarshalText writes the fidelity's name.
func (f Fidelity) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// ParseFidelity returns the fidelity whose String is s ("bytes" or
// "model"). Any other name is an error wrapping ErrConfig.
func ParseFidelity(s string) (Fidelity, error) {
	return parseName("fidelity", s, []Fidelity{Bytes, Model})
}

// NonConvergence is what a migration does when pre-copy does not converge:
// the dirty rate reaches the link's rate, or the round limit is reached.
type NonConvergence uint8

const (
	// Throttle slows the workload (its dirty rate and GPU share) in steps,
	// as vSphere's stun during page send and QEMU's auto-converge do, and
	// switches over when converged or when throttling is at its maximum.
	// The default.
	Throttle NonConvergence = iota + 1
	// SwitchAnyway switches over at once, accepting a longer stun.
	SwitchAnyway
	// Abort gives up; the VM stays on the source.
	Abort
	// SwitchToPostCopy switches over at once into post-copy: the pages
	// still dirty are not sent in the stun but follow while the VM runs at
	// the destination, as in PostCopy mode. With MaxRounds it bounds
	// pre-copy: the hybrid form, QEMU's postcopy-after-precopy. PreCopy
	// mode only; the simulated mode only, for now.
	SwitchToPostCopy
)

func (n NonConvergence) String() string {
	switch n {
	case Throttle:
		return "throttle"
	case SwitchAnyway:
		return "switch over anyway"
	case Abort:
		return "abort"
	case SwitchToPostCopy:
		return "switch to post-copy"
	}
	return fmt.Sprintf("NonConvergence(%d)", uint8(n))
}

// ParseNonConvergence returns the choice whose String is s ("throttle",
// "switch over anyway", "abort" or "switch to post-copy"). Any other name
// is an error wrapping ErrConfig.
func ParseNonConvergence(s string) (NonConvergence, error) {
	return parseName("non-convergence choice", s, []NonConvergence{Throttle, SwitchAnyway, Abort, SwitchToPostCopy})
}

// ThrottleSteps shape Throttle: the first cut, the step added each round
// that still does not converge, and the most that is cut.
type ThrottleSteps struct {
	Start, Step, Max float64
}

// DefaultThrottle returns QEMU auto-converge's default: 20 %, then 10 %
// more a round, at most 99 % (QEMU source, migration/migration.c, since
// moved to migration/options.c: DEFAULT_MIGRATE_CPU_THROTTLE_INITIAL
// 20, DEFAULT_MIGRATE_CPU_THROTTLE_INCREMENT 10,
// DEFAULT_MIGRATE_MAX_CPU_THROTTLE 99). The package cuts the workload's
// rates where QEMU sleeps the vCPUs.
func DefaultThrottle() ThrottleSteps { return ThrottleSteps{Start: 0.20, Step: 0.10, Max: 0.99} }

// Defaults of Config.
const (
	// DefaultStunTarget is vMotion's standard stun: one second, the
	// standard the GTC 2019 talk "vMotion for NVIDIA GRID vGPU Virtual
	// Machines: Case Study of vMotion Using MLaaS" (Sivaraman, Skarlatos,
	// Vu, Kurkure) sets for a future vGPU pre-copy to meet. For
	// comparison: vMotion stops pre-copy when what is left fits its 500 ms
	// switchover-time goal (Broadcom KB 436882), and QEMU's default
	// downtime limit is 300 ms (migration/options.c,
	// DEFAULT_MIGRATE_SET_DOWNTIME).
	DefaultStunTarget = time.Second
	// DefaultMaxRounds bounds pre-copy rounds. It is this package's
	// bound, not a modelled figure: no source used here gives a round
	// limit for vMotion or QEMU.
	DefaultMaxRounds = 30
	// DefaultBatchBytes is the raw page bytes a batch record holds.
	DefaultBatchBytes = 1 << 20
	// DefaultTimeout is how long a migration waits on a link or
	// connection that makes no progress — a read that returns nothing, a
	// write the peer does not drain, an answer that does not come —
	// before it fails: simulated time in a Sim, wall time in the live
	// mode.
	DefaultTimeout = 30 * time.Second
)

// Config describes one migration. The zero value means every default:
// pre-copy over 10 GbE, Model fidelity, a 1 s stun target, no stun limit,
// throttling when pre-copy does not converge, zstd at its fastest.
type Config struct {
	// Policy is the migration's policy (mode, stun target and limit,
	// rounds, non-convergence), shared with the live mode.
	Policy
	Fidelity Fidelity
	// Link is the network the stream crosses; migrations in one Sim whose
	// links have the same Name share one link's bandwidth.
	Link Link
	// Via are the further links the stream crosses after Link, in
	// order: a switch's uplink, the destination host's NIC where Link is
	// the source's. Each is shared by name as Link is, and a migration's
	// flow gets the max-min fair rate of the whole path (Sim). The path's
	// latency is the sum of its links', its nominal goodput, from which
	// stun estimates and CodecAuto start, the least of theirs. Nil means
	// Link alone; Link takes its default (GbE10) whether Via is set or
	// not. The migration keeps a copy.
	Via []Link
	// Costs are the fixed stun costs; zero means PreCopyCosts in PreCopy
	// mode and Legacy67U1Costs in Legacy mode.
	Costs StunCosts
	// Codec is how pages are compressed (zero pages are never sent);
	// zero means zstd at its fastest. CodecAuto chooses, region by region
	// in Model fidelity and batch by batch in Bytes fidelity, by
	// ChooseLevel from the link's goodput, the codecs' published encode
	// rates on EncodeWorkers workers and the wire sizes they give: the
	// live mode's choice, modelled. The simulated mode charges no time for
	// encoding; only the choice models it.
	Codec Codec
	// EncodeWorkers is how many cores CodecAuto takes the source to
	// encode on; zero means 1.
	EncodeWorkers int
	// Filtering selects the page filters: shuffled float pages and delta
	// pages. In Model fidelity their wire sizes are measured by class, as
	// the pages' are (WireModel), and the delta cache keeps the pages a
	// Bytes-fidelity one would.
	Filtering
	// BatchBytes is the raw page bytes of one batch record.
	BatchBytes int
	// StreamID is the caller's half of the stream's id; the Sim adds its
	// own number for the migration, so two migrations' streams differ.
	StreamID uint64
	// EncryptionKey, if set (checkpoint.KeySize bytes), encrypts every
	// record of the stream, as Encrypted vMotion does; the destination
	// requires it.
	EncryptionKey []byte
	// MetricsWindow is how long before the start and after the end the
	// report's workload metrics cover; zero means one second.
	MetricsWindow time.Duration
	// Timeout is how long, in simulated time, the source waits on a link
	// that stopped carrying bytes (FaultLinkStall) before it gives the
	// migration up; zero means DefaultTimeout.
	Timeout time.Duration
}

// level is the checkpoint compression level the configuration asks for:
// under CodecAuto, the level a stream starts at.
func (c Config) level() checkpoint.Level { return c.Codec.Level() }

// Filtering selects the page filters of a migration's stream
// (checkpoint.PageFilters), in the simulated mode (Config) and the live
// one (live.SendConfig) alike.
type Filtering struct {
	// Shuffle groups the bytes of the pages that look like float32 data
	// (model weights, their deltas) by significance before compression,
	// as HDF5's and Blosc's shuffle filters do: weights that zstd sends
	// whole shrink by about 15 %.
	Shuffle bool
	// DeltaCacheBytes, if positive, keeps a cache of that many bytes of
	// what the source sent, and sends a page sent again as the XOR of
	// its new content with what the destination holds when that has
	// enough zero bytes, as QEMU's XBZRLE does for guest RAM, here for
	// framebuffers too (checkpoint.DeltaCache: each region gets a share
	// in proportion to its size, two pages a slot, so a cache of twice a
	// region's size holds all of it). The destination checks each
	// delta's base and fails the migration rather than apply one to
	// other content. In Legacy mode the framebuffers are sent once, in
	// the stun: their share of the cache finds nothing sent before.
	DeltaCacheBytes int64
}

// validate refuses what f cannot ask for: a negative cache.
func (f Filtering) validate() error {
	if f.DeltaCacheBytes < 0 {
		return fmt.Errorf("%w: delta cache of %d bytes", ErrConfig, f.DeltaCacheBytes)
	}
	return nil
}

// Enabled reports whether f asks for page filters, which the stream then
// declares (checkpoint.WriterOptions.Filters).
func (f Filtering) Enabled() bool { return f.Shuffle || f.DeltaCacheBytes > 0 }

// PageFilters returns the encoders' page filters f asks for, with a delta
// cache of its own laid out for regions, the stream's. A negative cache
// size is an error wrapping ErrConfig.
func (f Filtering) PageFilters(regions []checkpoint.RegionInfo) (checkpoint.PageFilters, error) {
	pf := checkpoint.PageFilters{Shuffle: f.Shuffle}
	if err := f.validate(); err != nil {
		return pf, err
	}
	if f.DeltaCacheBytes > 0 {
		d, err := checkpoint.NewDeltaCache(f.DeltaCacheBytes)
		if err == nil {
			err = d.Reset(regions)
		}
		if err != nil {
			return pf, wrap(ErrConfig, err)
		}
		pf.Delta = d
	}
	return pf, nil
}

func (c Config) withDefaults() (Config, error) {
	var err error
	if c.Policy, err = c.Policy.WithDefaults(); err != nil {
		return c, err
	}
	if c.Fidelity == 0 {
		c.Fidelity = Model
	}
	if c.Link.BandwidthBitsPerSec == 0 && c.Link.Name == "" {
		c.Link = GbE10()
	}
	if c.Costs == (StunCosts{}) {
		c.Costs = PreCopyCosts()
		if c.Mode == Legacy {
			c.Costs = Legacy67U1Costs()
		}
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.MetricsWindow == 0 {
		c.MetricsWindow = time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.EncodeWorkers == 0 {
		c.EncodeWorkers = 1
	}
	switch {
	case c.Codec > CodecAuto || c.EncodeWorkers < 0:
		return c, fmt.Errorf("%w: unknown codec %v or negative encode workers %d", ErrConfig, c.Codec, c.EncodeWorkers)
	case c.Fidelity != Bytes && c.Fidelity != Model:
		return c, fmt.Errorf("%w: unknown fidelity %v", ErrConfig, c.Fidelity)
	case c.Timeout < 0:
		return c, fmt.Errorf("%w: negative timeout", ErrConfig)
	case c.Costs.Quiesce < 0 || c.Costs.DeviceCheckpoint < 0 || c.Costs.Resume < 0 || c.Costs.CheckpointPathBytesPerSec < 0:
		return c, fmt.Errorf("%w: negative stun cost", ErrConfig)
	case c.BatchBytes < 4096 || c.BatchBytes > checkpoint.MaxBatchBytes:
		return c, fmt.Errorf("%w: batch of %d bytes outside [4 KiB, 64 MiB]", ErrConfig, c.BatchBytes)
	case c.EncryptionKey != nil && len(c.EncryptionKey) != checkpoint.KeySize:
		return c, fmt.Errorf("%w: encryption key of %d bytes, want %d", ErrConfig, len(c.EncryptionKey), checkpoint.KeySize)
	case c.MetricsWindow < 0:
		return c, fmt.Errorf("%w: negative metrics window", ErrConfig)
	}
	if err := c.Filtering.validate(); err != nil {
		return c, err
	}
	c.Via = slices.Clone(c.Via) // the caller's slice is the caller's to change
	for i, l := range c.route() {
		if err := l.validate(); err != nil {
			return c, err
		}
		if slices.ContainsFunc(c.route()[:i], func(o Link) bool { return o.Name == l.Name }) {
			return c, fmt.Errorf("%w: the path crosses link %q twice", ErrConfig, l.Name)
		}
	}
	return c, nil
}

// route returns the links the stream crosses: Link, then Via.
func (c Config) route() []Link { return append([]Link{c.Link}, c.Via...) }

// routeNames is the names of route's links, as a report writes them.
func (c Config) routeNames() string {
	var names []string
	for _, l := range c.route() {
		names = append(names, l.Name)
	}
	return joinRoute(names)
}

// joinRoute writes the names of the links of a path, in order.
func joinRoute(names []string) string { return strings.Join(names, " > ") }

// latency is the one-way latency of the path: the sum of its links'.
func (c Config) latency() time.Duration {
	d := c.Link.Latency
	for _, l := range c.Via {
		d += l.Latency
	}
	return d
}

// goodput is the nominal goodput of the path, in bytes per second: the
// least of its links', before any other migration shares them.
func (c Config) goodput() int64 {
	g := c.Link.GoodputBytesPerSec()
	for _, l := range c.Via {
		g = min(g, l.GoodputBytesPerSec())
	}
	return g
}
