package live

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// Clock tells the live mode the time. The wall clock is the default;
// tests inject one they move themselves, so that a live migration over
// in-memory connections runs without sleeping and, over a simulated
// network, deterministically. Connection deadlines stay on the wall
// clock: they are the sockets' own.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// SendConfig describes the source's side of a live migration (Send). The
// zero value means pre-copy with the simulated mode's defaults, one
// encoding worker, zstd at its fastest and no encryption.
type SendConfig struct {
	// Policy means what it means in Config: the switchover rule, the
	// expected stun, the non-convergence policy and the stun limit are
	// the simulated mode's (the same Core decides), fed with the rates
	// and costs measured on the connections.
	migrate.Policy

	// Engine configures the copy engine: workers, batches in flight, batch
	// size and compression level (checkpoint.LevelNone to send pages
	// uncompressed, checkpoint.LevelS2 for S2). A Chooser set here picks
	// each batch's level instead, and the stream records it batch by
	// batch. Its batches in flight include those queued to the
	// connections or being written to them: 0 means two for each worker
	// and two for each connection.
	Engine migrate.EngineConfig
	// Filtering selects the page filters, as in the simulated mode:
	// shuffled float pages and delta pages. Engine.Filters must be left
	// zero; Send sets it from these.
	migrate.Filtering
	// AdaptiveCodec chooses each batch's codec — none, S2 or zstd at its
	// fastest — as the migration goes (migrate.CodecAuto): the one that
	// moves memory fastest given the rate the connections take bytes at
	// and what each codec costs the encoders and saves on the wire, both
	// measured on the batches themselves. It replaces Engine.Chooser.
	AdaptiveCodec bool
	// DigestWorkers is how many goroutines hash each region for the
	// stream's end-to-end digests, while the VM is stopped; zero means
	// GOMAXPROCS.
	DigestWorkers int
	// StreamID is the caller's half of the stream's id; the other half
	// is drawn afresh for every migration.
	StreamID uint64
	// EncryptionKey, if set (checkpoint.KeySize bytes), is the migration
	// key the destination must hold too: every control message is then
	// authenticated and the stream encrypted, under keys derived for
	// this migration alone (see SECURITY.md). Without a key the migration
	// is safe on a trusted network only: an attacker on the wire can read
	// the VM's memory and change what the destination does with it.
	EncryptionKey []byte

	// Timeout bounds every wait on a connection; zero means
	// DefaultTimeout. It is enforced with the connections' deadlines
	// where they have them (net.Conn does); otherwise only the context
	// bounds a stalled peer.
	Timeout time.Duration
	// HandshakeTimeout bounds the whole handshake, from the first byte to
	// the destination's accept and the extra connections' binds; zero
	// means Timeout.
	HandshakeTimeout time.Duration
	// MinBytesPerSec is the slowest the migration may move its bytes
	// over the time it waits on its peer, after a first Timeout of
	// grace; zero means DefaultMinBytesPerSec and a negative value no
	// minimum. Deadlines enforce it, as they do Timeout.
	MinBytesPerSec int64
	// Lock, if set, guards the source VM's host: Send holds it while it
	// touches the VM (pause, device save, throttle, release), and whoever
	// runs the VM — a Runner — holds it while it advances the host.
	Lock sync.Locker
	// Progress, if set, receives the migration's events on Send's
	// goroutine; it must not block for long.
	Progress func(migrate.Event)
	// Logger, if set, receives the same events as structured records.
	Logger *slog.Logger
	// Clock, if set, is the clock the migration's times and rates are
	// measured on; nil means the wall clock.
	Clock Clock
	// Rand, if set, is where this end draws its nonce for the
	// migration, as crypto/tls's Config.Rand; nil means crypto/rand.
	// Every migration must draw a fresh one. A Rand that repeats itself
	// at one end makes a recorded migration replayable to it; at both
	// ends, it gives two migrations one key, so their streams share a
	// keystream and their contents leak. Only a test that replays a
	// recording wants that.
	Rand io.Reader
}

// DefaultMinBytesPerSec is the default minimum rate of a live migration,
// far below any link that migrates a VM and far above a peer that holds a
// host's resources by sending a byte now and then.
const DefaultMinBytesPerSec = 64 << 10

func (c SendConfig) withDefaults() (SendConfig, error) {
	var err error
	if c.Policy, err = c.Policy.WithDefaults(); err != nil {
		return c, err
	}
	if c.Engine.BatchBytes == 0 {
		c.Engine.BatchBytes = migrate.DefaultBatchBytes
	}
	if c.Engine.BatchBytes < 4096 || c.Engine.BatchBytes > checkpoint.MaxBatchBytes {
		return c, fmt.Errorf("%w: batch of %d bytes outside [4 KiB, 64 MiB]", migrate.ErrConfig, c.Engine.BatchBytes)
	}
	if c.Engine.Filters != (checkpoint.PageFilters{}) {
		return c, fmt.Errorf("%w: set SendConfig.Filtering, not Engine.Filters", migrate.ErrConfig)
	}
	err = endDefaults(c.EncryptionKey, &c.Timeout, &c.HandshakeTimeout, &c.MinBytesPerSec, &c.DigestWorkers, &c.Lock, &c.Clock)
	return c, err
}

// ReceiveConfig describes the destination's side of a live migration
// (Receive).
type ReceiveConfig struct {
	// EncryptionKey, if set, is required: a source that holds no key is
	// refused at the handshake (ErrConfig here, ErrRefused at the
	// source), and one that holds another fails the handshake's
	// authentication (ErrAuthentication at both ends) before this end
	// reserves anything for its VM. Without a key, a source that holds
	// one is refused, and the migration is safe on a trusted network
	// only (see SendConfig.EncryptionKey and SECURITY.md).
	EncryptionKey []byte
	// Limits bound what the stream may make the destination hold. Each
	// field left zero takes checkpoint's default, widened to the batch
	// size the source declares (up to MaxBatchBytes); a source whose
	// batches exceed a MaxBatchBytes set here is refused.
	Limits checkpoint.Limits
	// MaxBatchBytes is the largest batch a source may declare; zero means
	// 16 MiB.
	MaxBatchBytes int
	// DigestWorkers is how many goroutines hash each region to check its
	// digest at the end of the stream, while the VM is stopped; zero
	// means GOMAXPROCS.
	DigestWorkers int
	// Workers is how many goroutines decode and apply the page batches
	// that the connections' readers, one goroutine each, take in; zero
	// means GOMAXPROCS.
	Workers int
	// InFlight bounds the page batches read and not yet applied, over
	// all the connections: the destination's memory besides the VM's is
	// about InFlight+Workers batches. A connection whose batches are all
	// in flight is not read until the workers catch up, and the source
	// then waits on the connection's flow control. Zero means 2*Workers
	// plus one a connection; it is at least one a connection (see
	// checkpoint.ParallelOptions.InFlight).
	InFlight int
	// Timeout, HandshakeTimeout, MinBytesPerSec, Lock, Progress, Logger,
	// Clock and Rand mean what they mean in SendConfig, for the destination
	// host. The handshake ends here when the source's hello has been
	// authenticated and answered. Progress is called one call at a time,
	// while the stream arrives from the goroutines that apply it.
	Timeout          time.Duration
	HandshakeTimeout time.Duration
	MinBytesPerSec   int64
	Lock             sync.Locker
	Progress         func(migrate.Event)
	Logger           *slog.Logger
	Clock            Clock
	Rand             io.Reader
	// OnResume, if set, is called with the VM once it runs here (or is
	// here paused, if it was paused at the source), before Receive
	// returns: in post-copy, while its pages that follow are still
	// coming, so that its owner can give it its workload and run it
	// meanwhile. Accesses to a page that has not come, OnResume's own
	// included, wait for it (at most Timeout), and fail if the migration
	// fails; the pages land, and the source hears that they did, whether
	// OnResume has returned or not. Receive returns after it.
	OnResume func(*vgpu.VM)
}

const defaultMaxBatchBytes = 16 << 20

func (c ReceiveConfig) withDefaults() (ReceiveConfig, error) {
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = defaultMaxBatchBytes
	}
	if c.MaxBatchBytes < 0 || c.Workers < 0 || c.InFlight < 0 {
		return c, fmt.Errorf("%w: negative batch size %d, workers %d or batches in flight %d", migrate.ErrConfig, c.MaxBatchBytes, c.Workers, c.InFlight)
	}
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	err := endDefaults(c.EncryptionKey, &c.Timeout, &c.HandshakeTimeout, &c.MinBytesPerSec, &c.DigestWorkers, &c.Lock, &c.Clock)
	return c, err
}

// endDefaults checks and fills what both ends' configurations share: the
// key's size, the timeouts (the handshake's is Timeout's by default), the
// minimum rate (negative for none), the digest workers, the lock and the
// clock.
func endDefaults(key []byte, timeout, handshake *time.Duration, minRate *int64, digestWorkers *int, lock *sync.Locker, clock *Clock) error {
	switch {
	case key != nil && len(key) != checkpoint.KeySize:
		return fmt.Errorf("%w: encryption key of %d bytes, want %d", migrate.ErrConfig, len(key), checkpoint.KeySize)
	case *timeout < 0 || *handshake < 0 || *digestWorkers < 0:
		return fmt.Errorf("%w: negative timeout %v, handshake timeout %v or digest workers %d", migrate.ErrConfig, *timeout, *handshake, *digestWorkers)
	}
	if *timeout == 0 {
		*timeout = migrate.DefaultTimeout
	}
	if *handshake == 0 {
		*handshake = *timeout
	}
	if *digestWorkers == 0 {
		*digestWorkers = runtime.GOMAXPROCS(0)
	}
	switch {
	case *minRate == 0:
		*minRate = DefaultMinBytesPerSec
	case *minRate < 0:
		*minRate = 0
	}
	if *lock == nil {
		*lock = new(sync.Mutex)
	}
	if *clock == nil {
		*clock = wallClock{}
	}
	return nil
}

// bounds are the limits the configuration sets a slow peer.
func (c SendConfig) bounds() bounds    { return bounds{c.Timeout, c.MinBytesPerSec} }
func (c ReceiveConfig) bounds() bounds { return bounds{c.Timeout, c.MinBytesPerSec} }

// receiveLimits returns the limits of a stream whose batches are of
// batchBytes: each field of user that is set, and, for each that is not,
// checkpoint's default widened to the batch size.
func receiveLimits(user checkpoint.Limits, batchBytes int) checkpoint.Limits {
	l := checkpoint.LimitsForBatch(batchBytes)
	for _, f := range []struct{ dst, src *int }{
		{&l.MaxRecordBytes, &user.MaxRecordBytes}, {&l.MaxBatchBytes, &user.MaxBatchBytes},
		{&l.MaxPagesPerRecord, &user.MaxPagesPerRecord}, {&l.MaxWindowBytes, &user.MaxWindowBytes},
		{&l.MaxDeviceStateBytes, &user.MaxDeviceStateBytes}, {&l.MaxMetadataBytes, &user.MaxMetadataBytes},
		{&l.MaxRegions, &user.MaxRegions},
	} {
		if *f.src != 0 {
			*f.dst = *f.src
		}
	}
	if user.MaxTotalBytes != 0 {
		l.MaxTotalBytes = user.MaxTotalBytes
	}
	return l
}
