package live

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/migrate"
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
	// uncompressed).
	Engine migrate.EngineConfig
	// DigestWorkers is how many goroutines hash each region for the
	// stream's end-to-end digests, while the VM is stopped; zero means
	// GOMAXPROCS.
	DigestWorkers int
	// StreamID identifies the stream; EncryptionKey, if set
	// (checkpoint.KeySize bytes), encrypts it, and the destination must
	// hold the same key.
	StreamID      uint64
	EncryptionKey []byte

	// Timeout bounds every wait on a connection; zero means
	// DefaultTimeout. It is enforced with the connections' deadlines
	// where they have them (net.Conn does); otherwise only the context
	// bounds a stalled peer.
	Timeout time.Duration
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
}

func (c SendConfig) withDefaults() (SendConfig, error) {
	var err error
	if c.Policy, err = c.Policy.WithDefaults(); err != nil {
		return c, err
	}
	if c.Engine.BatchBytes == 0 {
		c.Engine.BatchBytes = migrate.DefaultBatchBytes
	}
	if c.Timeout == 0 {
		c.Timeout = migrate.DefaultTimeout
	}
	if c.DigestWorkers == 0 {
		c.DigestWorkers = runtime.GOMAXPROCS(0)
	}
	switch {
	case c.Engine.BatchBytes < 4096 || c.Engine.BatchBytes > checkpoint.MaxBatchBytes:
		return c, fmt.Errorf("%w: batch of %d bytes outside [4 KiB, 64 MiB]", migrate.ErrConfig, c.Engine.BatchBytes)
	case c.EncryptionKey != nil && len(c.EncryptionKey) != checkpoint.KeySize:
		return c, fmt.Errorf("%w: encryption key of %d bytes, want %d", migrate.ErrConfig, len(c.EncryptionKey), checkpoint.KeySize)
	case c.Timeout < 0 || c.DigestWorkers < 0:
		return c, fmt.Errorf("%w: negative timeout %v or digest workers %d", migrate.ErrConfig, c.Timeout, c.DigestWorkers)
	}
	if c.Lock == nil {
		c.Lock = new(sync.Mutex)
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	return c, nil
}

// ReceiveConfig describes the destination's side of a live migration
// (Receive).
type ReceiveConfig struct {
	// EncryptionKey, if set, is required: a source that declares no
	// encryption is refused at the handshake (ErrConfig here, ErrRefused
	// at the source), and a stream sealed with another key fails its
	// first record's authentication (ErrStream). Without a key, a source
	// that declares encryption is refused.
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
	// Timeout, Lock, Progress, Logger and Clock mean what they mean in
	// SendConfig, for the destination host.
	Timeout  time.Duration
	Lock     sync.Locker
	Progress func(migrate.Event)
	Logger   *slog.Logger
	Clock    Clock
}

const defaultMaxBatchBytes = 16 << 20

func (c ReceiveConfig) withDefaults() (ReceiveConfig, error) {
	if c.EncryptionKey != nil && len(c.EncryptionKey) != checkpoint.KeySize {
		return c, fmt.Errorf("%w: encryption key of %d bytes, want %d", migrate.ErrConfig, len(c.EncryptionKey), checkpoint.KeySize)
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = defaultMaxBatchBytes
	}
	if c.Timeout == 0 {
		c.Timeout = migrate.DefaultTimeout
	}
	if c.DigestWorkers == 0 {
		c.DigestWorkers = runtime.GOMAXPROCS(0)
	}
	if c.Timeout < 0 || c.MaxBatchBytes < 0 || c.DigestWorkers < 0 {
		return c, fmt.Errorf("%w: negative timeout, batch size or digest workers", migrate.ErrConfig)
	}
	if c.Lock == nil {
		c.Lock = new(sync.Mutex)
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	return c, nil
}

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
