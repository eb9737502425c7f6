package live

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// liveBufferBytes is the destination's read buffer on each connection.
const liveBufferBytes = 256 << 10

// Send live-migrates vm to a destination running Receive at the other end
// of conns: iterative pre-copy of guest RAM and framebuffers while the VM
// runs (driven by a Runner, say), the switchover rule of the simulated mode
// fed with measured rates, then the stun — pause, device save, last dirty
// pages, device states and region digests — and the destination's
// acknowledgement of the resume, after which the source VM is destroyed.
// Time is wall time.
//
// Each connection in conns carries a stream of its own, written on a
// goroutine of its own; the copy engine deals the batches to them in turn
// (checkpoint.ParallelWriter). The first also carries the handshake and
// the acknowledgements.
//
// On failure — a refusal, a connection closed or stalled past the timeout,
// a canceled ctx, pre-copy that does not converge under the Abort policy —
// Send closes the connections, so the destination gives up at once, and the
// VM stays on the source as it was: running if it ran, paused if it was
// paused, its memory untouched. The error is a *PhaseError. The
// exceptions come after the source told the destination to resume: with
// ErrInDoubt, and, in post-copy, ErrVMLost (see the package doc), the VM
// stays paused and held until vgpu.VM.ResolveMigration.
//
// In post-copy the stun sends, instead of the last dirty pages and the
// digests, the list of the pages that follow, and the pages follow once
// the destination runs the VM.
func Send(ctx context.Context, vm *vgpu.VM, conns []io.ReadWriter, cfg SendConfig) (*migrate.Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if vm == nil || len(conns) == 0 || len(conns) > maxConnections {
		return nil, fmt.Errorf("%w: Send needs a VM and 1 to %d connections", migrate.ErrConfig, maxConnections)
	}
	s := &sender{cfg: cfg, vm: vm, conns: newConnSet(conns, cfg.bounds()), link: linkName(conns), ctx: ctx}
	if cfg.AdaptiveCodec {
		// The encoders run on at most GOMAXPROCS cores at once.
		s.chooser = migrate.NewAdaptiveChooser(min(max(cfg.Engine.Workers, 1), runtime.GOMAXPROCS(0)), s.out.rate)
		s.chooser.Now = cfg.Clock.Now
		s.cfg.Engine.Chooser = s.chooser
	}
	if s.cfg.Engine.Now == nil {
		s.cfg.Engine.Now = cfg.Clock.Now
	}
	if s.cfg.Engine.InFlight == 0 {
		s.cfg.Engine.InFlight = sendInFlight(s.cfg.Engine.Workers, len(conns))
	}
	// The delta cache is laid out for the VM's regions once the stream's
	// metadata is known (setup).
	if s.cfg.Engine.Filters, err = cfg.Filtering.PageFilters(nil); err != nil {
		return nil, err
	}
	eng, err := migrate.NewEngine(s.cfg.Engine)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	s.eng = eng
	return s.run()
}

// sender is the source's side of one live migration: the live driver of a
// Core, which executes the Core's actions on the connections in wall time
// (or SendConfig.Clock's).
type sender struct {
	cfg   SendConfig
	vm    *vgpu.VM
	conns connSet
	link  string // the connections' name, for the report
	eng   *migrate.Engine
	// chooser picks each batch's codec under AdaptiveCodec; nil
	// otherwise.
	chooser *migrate.AdaptiveChooser
	// wire predicts the dirty pages' wire size from their classes;
	// sizing is closed once the sizes it needs are measured.
	wire   migrate.WireModel
	sizing chan struct{}
	// warming is closed when the digests' warm-up ends; nil if none runs.
	warming chan struct{}
	ctx     context.Context
	prog    reporter
	core    *migrate.Core
	src     *migrate.Source // nil if the VM could not go
	post    *sendPostCopy   // once the stun left pages for post-copy

	ctl  *bufio.Reader // the destination's answers, on the first connection
	conv *conversation
	out  sendStreams                // the connections, each written on its own goroutine
	pw   *checkpoint.ParallelWriter // one stream on each connection

	start       time.Time
	destination string
	states      [][]byte
	digests     []migrate.Digest
}

func (s *sender) now() time.Duration { return s.cfg.Clock.Now().Sub(s.start) }

// locked runs f holding the source host's lock.
func (s *sender) locked(f func() error) error {
	s.cfg.Lock.Lock()
	defer s.cfg.Lock.Unlock()
	return f()
}

func (s *sender) run() (*migrate.Report, error) {
	s.start = s.cfg.Clock.Now()
	s.prog = reporter{fn: s.cfg.Progress, log: s.cfg.Logger, clock: s.cfg.Clock, start: s.start, vm: s.vm.ID()}
	stop := context.AfterFunc(s.ctx, s.conns.closeAll)
	defer stop()
	// The streams' goroutines are idle here (Copy waits for every batch
	// it queued); closing their queues ends them.
	defer func() {
		s.waitWarm()
		if s.sizing != nil {
			<-s.sizing
		}
		_ = s.out.close()
		if s.pw != nil {
			_ = s.pw.Release()
		}
	}()
	// What the migration needs of the VM, read under the host's lock: the
	// VM's own run state, throttle and regions; its devices' state size
	// and how long it took to take (the live mode's measured device
	// cost); what the hello declares.
	var (
		stateBytes   int64
		snapshot     time.Duration
		fbs, devices int
		listBytes    int64
		spec         vgpu.IncomingSpec
		sourceName   string
		meta         checkpoint.Metadata
	)
	inspectErr := s.locked(func() error {
		fbs, devices, sourceName = len(s.vm.Framebuffers()), len(s.vm.VGPUs()), s.vm.Host().Name()
		var err error
		if s.src, err = migrate.NewSource(s.vm); err != nil {
			return err
		}
		t0 := s.cfg.Clock.Now()
		stateBytes, err = migrate.DeviceStateBytes(s.vm)
		snapshot = s.cfg.Clock.Now().Sub(t0)
		spec, meta = s.vm.IncomingSpec(), s.src.Metadata()
		if s.cfg.UsesPostCopy() {
			listBytes = migrate.PostCopyListBytes(s.vm)
		}
		if err == nil && len(spec.Remote) > 0 {
			// A session is a pointer into this process: the hello
			// cannot name it to another.
			err = fmt.Errorf("%w: VM %q uses a remote GPU, whose session the live mode cannot hand over", migrate.ErrConfig, s.vm.ID())
		}
		return err
	})
	if inspectErr == nil {
		s.measureWireSizes()
	}
	core, err := migrate.NewCore(migrate.CoreConfig{VM: s.vm.ID(), Policy: s.cfg.Policy, Framebuffers: fbs,
		Devices: devices, DeviceStateBytes: stateBytes, PageListBytes: listBytes}, 0, fmt.Sprintf("over %s", s.link))
	if err != nil {
		s.cfg.Lock.Lock()
		s.src.RollBack(false) // gives the VM's migration claim back
		s.cfg.Lock.Unlock()
		return nil, err
	}
	s.core = core
	s.publish()
	var a migrate.Action
	if inspectErr != nil {
		a = core.Fail(s.now(), inspectErr)
	} else if err := s.ctx.Err(); err != nil {
		// Canceled before the handshake: the migration fails in setup,
		// as a cancel between any two later steps fails in the phase it
		// came in.
		a = core.Fail(s.now(), liveCause(s.ctx, s.conns, err))
	} else if rtt, err := s.setup(spec, sourceName, meta); err != nil {
		a = core.Fail(s.now(), liveCause(s.ctx, s.conns, err))
	} else if err := core.UpdateCosts(liveStunCosts(snapshot, devices), 2*rtt); err != nil {
		a = core.Fail(s.now(), err)
	} else {
		core.SetDestination(s.destination)
		a = core.Done(s.now())
	}
	for {
		s.publish()
		switch a.Kind {
		case migrate.DoRollBack:
			return s.rollBack(a)
		case migrate.DoStrand:
			return s.strand(a)
		case migrate.DoNothing:
			return s.report(), nil
		}
		if err := s.ctx.Err(); err != nil && core.Phase() < migrate.PhaseRelease {
			// Canceled between two steps: the migration fails in the
			// phase it was in, as a simulated one's Cancel does. From
			// the acknowledgement on the VM is the destination's, and
			// the source still lets it go.
			a = core.Fail(s.now(), liveCause(s.ctx, s.conns, err))
			continue
		}
		next, err := s.execute(a)
		if err != nil {
			next = core.Fail(s.now(), liveCause(s.ctx, s.conns, err))
		}
		a = next
	}
}

// liveStunCosts are the live mode's fixed stun costs, measured in its own
// setup: saving the device states took about as long as the snapshot the
// setup took to size them, and restoring them at the destination is taken
// to take as long again. Quiesce and resume are state changes of the
// emulated VM, too short to count next to the transfers; the latency is
// two of the handshake's round trips, one for ready and one for resumed.
func liveStunCosts(snapshot time.Duration, devices int) migrate.StunCosts {
	if devices == 0 {
		return migrate.StunCosts{}
	}
	return migrate.StunCosts{DeviceCheckpoint: 2 * snapshot / time.Duration(devices)}
}

// publish hands the Core's new events to the caller, with the stream's
// bytes so far on the last ones.
func (s *sender) publish() {
	for _, e := range s.core.Events() {
		if e.Kind == migrate.Done || e.Kind == migrate.Failed {
			e.WireBytes = s.wireBytes()
		}
		s.prog.emit(e)
	}
}

// setup shakes hands with the hello of spec, opens the streams that meta
// declares and starts dirty logging. It returns the network's round trip,
// timed on the offer and its challenge.
func (s *sender) setup(spec vgpu.IncomingSpec, source string, meta checkpoint.Metadata) (time.Duration, error) {
	outs, rtt, err := s.handshake(spec, source)
	if err != nil {
		return 0, err
	}
	// The streams are data: their headers are written under the
	// connections' own deadline, the handshake's having ended.
	for i, w := range s.out.start(s.conns.writers(), s.cfg.Clock.Now, s.eng.Config().InFlight) {
		outs[i].W = w
	}
	if d := s.cfg.Engine.Filters.Delta; d != nil {
		if err := d.Reset(meta.Regions); err != nil {
			return 0, wrap(migrate.ErrConfig, err)
		}
	}
	if s.pw, err = checkpoint.NewParallelWriter(meta, s.writerOptions(), outs); err != nil {
		if errors.Is(err, checkpoint.ErrWrite) {
			return 0, err // the connections' failure, which liveCause names
		}
		return 0, wrap(migrate.ErrConfig, err)
	}
	s.out.run(s.pw)
	s.cfg.Lock.Lock()
	s.src.StartLogging()
	s.cfg.Lock.Unlock()
	return rtt, nil
}

// writerOptions are the options of the streams, the first and the
// post-copy's alike; each stream's id and key are its own.
func (s *sender) writerOptions() checkpoint.WriterOptions {
	opts := checkpoint.WriterOptions{Level: s.cfg.Engine.Level, BatchBytes: s.cfg.Engine.BatchBytes,
		Mixed: s.cfg.Engine.Chooser != nil, Filters: s.cfg.Filtering.Enabled()}
	if s.cfg.EncryptionKey != nil {
		opts.Encryption = checkpoint.EncryptionRequired
	}
	return opts
}

// handshake shakes hands with the hello of spec, under the handshake's
// deadline. It returns each stream's id and key, and the network's round
// trip.
func (s *sender) handshake(spec vgpu.IncomingSpec, source string) ([]checkpoint.ParallelOut, time.Duration, error) {
	s.conns.handshaking(s.cfg.HandshakeTimeout)
	defer s.conns.handshaking(0)
	c0 := s.conns[0]
	s.ctl = bufio.NewReaderSize(c0, 4<<10)
	s.conv = &conversation{w: c0, r: s.ctl, end: migrate.SourceEnd, t: newTranscript()}
	nonce, err := newNonce(s.cfg.Rand)
	if err != nil {
		return nil, 0, err
	}
	t0 := s.cfg.Clock.Now()
	keys, err := openConversation(s.conv, s.cfg.EncryptionKey, nonce)
	if err != nil {
		return nil, 0, err
	}
	rtt := s.cfg.Clock.Now().Sub(t0)

	keyed := s.cfg.EncryptionKey != nil
	h := hello{Connections: len(s.conns), Encrypted: keyed, BatchBytes: s.cfg.Engine.BatchBytes,
		Spec: spec, StreamID: s.cfg.StreamID, Source: source, Mode: uint8(s.cfg.Mode), PostCopy: s.cfg.UsesPostCopy()}
	if err := s.conv.write(msgHello, h); err != nil {
		return nil, 0, err
	}
	// Every stream's id draws on the conversation up to the hello.
	outs := make([]checkpoint.ParallelOut, len(s.conns))
	for i := range outs {
		outs[i].StreamID = s.conv.t.streamID(s.cfg.StreamID, i)
		if keyed {
			if outs[i].Key, err = keys.streamKey(i); err != nil {
				return nil, 0, err
			}
		}
	}
	var a accept
	if err := s.conv.read(msgAccept, &a); err != nil {
		return nil, 0, err
	}
	s.destination = peerText(a.Host, maxPeerNameBytes)
	for i, c := range s.conns[1:] {
		if err := writeBind(c, s.conv.t, i+1); err != nil {
			return nil, 0, err
		}
	}
	return outs, rtt, nil
}

// openConversation opens the source's side of conv: it writes the offer
// of key (nil for none) and nonce, reads the destination's challenge, and
// sets the migration's keys. It returns them.
func openConversation(conv *conversation, key []byte, nonce *[nonceBytes]byte) (sessionKeys, error) {
	keyed := key != nil
	if err := writeOffer(conv.w, conv.t, keyed, nonce); err != nil {
		return sessionKeys{}, err
	}
	body, err := conv.readRaw(msgChallenge)
	if err != nil {
		return sessionKeys{}, err
	}
	if len(body) != 1+nonceBytes || body[0]&^flagKeyed != 0 {
		return sessionKeys{}, fmt.Errorf("%w: a challenge of %d bytes, or with unknown flags", migrate.ErrStream, len(body))
	}
	if peerKeyed := body[0]&flagKeyed != 0; peerKeyed != keyed {
		return sessionKeys{}, fmt.Errorf("%w: the source holds a key: %v; the destination: %v", migrate.ErrConfig, keyed, peerKeyed)
	}
	keys, err := deriveKeys(key, nonce, (*[nonceBytes]byte)(body[1:]))
	if err != nil {
		return sessionKeys{}, err
	}
	conv.t.keyed(keys, migrate.SourceEnd)
	conv.tagged = true
	return keys, nil
}

// sendInFlight is the engine's batches in flight by default: two for
// each worker, as the engine's own default, and two for each connection,
// queued to it or being written.
func sendInFlight(workers, conns int) int {
	return 2*max(workers, 1) + 2*conns
}

// copyRegion sends region i's pages in set (nil: every page in use).
func (s *sender) copyRegion(i int, set *memory.PageSet) (migrate.Traffic, error) {
	return s.eng.Copy(s.ctx, queueSink{s}, s.src.Regions()[i], uint32(i), set)
}

// rollBack ends a failed migration with the VM on the source, as it was,
// unless the destination may already run it.
func (s *sender) rollBack(a migrate.Action) (*migrate.Report, error) {
	s.conns.closeAll()
	s.cfg.Lock.Lock()
	if s.src != nil {
		s.src.RollBack(a.InDoubt)
	}
	s.cfg.Lock.Unlock()
	s.publish()
	return s.report(), a.Err
}
