package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// liveRoundGap is the host time that passes at each round's end.
const liveRoundGap = 100 * time.Millisecond

// liveStallTimeout is the Timeout of the stall cells: the wait they
// measure. The race detector slows every step, so it gets more room there.
func liveStallTimeout() time.Duration {
	if raceEnabled {
		return 3 * time.Second
	}
	return 500 * time.Millisecond
}

// liveWorld is a source host whose VM runs the counter oracle under a
// Runner, a destination and a third host.
type liveWorld struct {
	src, dst, third *vgpu.Host
	vm              *vgpu.VM
	w               *counterWorkload
	run             *Runner
	frozen          bool // guarded by run: no more writes, the failure's moment has passed
	// filters are the page filters of the world's migrations.
	filters migrate.Filtering
}

// liveVariant is how a cell's VM and migration differ from the plain
// one's: the VM paused, or the migration with page filters.
type liveVariant struct {
	paused, filtered bool
}

func (v liveVariant) String() string {
	switch {
	case v.paused:
		return "/paused"
	case v.filtered:
		return "/filters"
	}
	return ""
}

// newLiveWorld builds the table's world for variant v.
func newLiveWorld(t *testing.T, v liveVariant) *liveWorld {
	t.Helper()
	fw := newFaultWorld(t, v.paused)
	// 4000 pages a second: every page of the oracle rewritten in 50 ms of
	// the host's time, so liveRoundGap rewrites them all, throttled or not.
	fw.w.PagesPerSec = 4000
	lw := &liveWorld{src: fw.src, dst: fw.dst, third: fw.third, vm: fw.vm, w: fw.w, run: NewRunner(fw.src, 0)}
	if v.filtered {
		// A cache of every page: the pages rewritten between rounds go
		// as deltas.
		lw.filters = migrate.Filtering{Shuffle: true, DeltaCacheBytes: 64 * MiB}
	}
	lw.run.Start()
	t.Cleanup(func() { _ = lw.run.Stop() })
	return lw
}

// liveAttempt is one migration's results, with the source as the failure
// found it.
type liveAttempt struct {
	res     liveResult
	before  sourceImage
	want    vgpu.VMState // the source VM's state before the migration
	dirtied int64        // the oracle's writes from the start to the failure
	rounds  int          // the rounds the stream had ended before the cut
	cutIn   uint16       // the type of the record or message the cut fell in
}

// attempt migrates lw.vm to `to` over one loopback connection tapped as
// pl says. At the failure it stops the Runner and takes the source's
// image, so that what the library does next is all that can change it.
// Each round's end moves the source's clock on by liveRoundGap, under the
// Runner's lock, so that every page is rewritten between rounds and before
// the stun: the later rounds and the final pages are never empty.
func (lw *liveWorld) attempt(t *testing.T, to *vgpu.Host, pl livePlan, timeout time.Duration) liveAttempt {
	t.Helper()
	sc, dc := loopbackConns(t, 1)
	st, dt := newTap(sc[0], true), newTap(dc[0], false)
	st.peer, dt.peer = dt, st
	srcCtx, cancelSrc := context.WithCancel(context.Background())
	dstCtx, cancelDst := context.WithCancel(context.Background())
	defer cancelSrc()
	defer cancelDst()
	lw.run.Lock()
	att := liveAttempt{want: lw.vm.State()}
	start := lw.w.Pos
	lw.frozen = false
	lw.run.Unlock()
	var snapErr error
	active := st
	if pl.onDst {
		active = dt
	}
	active.cut, active.act, active.cancel = pl.cut, pl.act, cancelSrc
	active.kill = func() { cancelDst(); dt.Close() }
	active.onTrip = func() {
		_ = lw.run.Stop()
		// Under the host's lock, which Send takes to undo what it did:
		// the image is the source's before the library reacts.
		lw.run.Lock()
		lw.frozen, att.dirtied = true, lw.w.Pos-start
		att.before, snapErr = snapshotOf(lw.vm)
		lw.run.Unlock()
	}
	var advErr error
	// Pages go uncompressed, so that the final pages outgrow the source's
	// buffer and leave it in the phase that sends them.
	scfg := SendConfig{Policy: migrate.Policy{StunTarget: time.Nanosecond, MaxRounds: liveRounds}, Engine: migrate.EngineConfig{Level: checkpoint.LevelNone}, Filtering: lw.filters, Timeout: timeout, Lock: lw.run, Progress: func(p migrate.Event) {
		if p.Kind != migrate.RoundEnded {
			return
		}
		lw.run.Lock()
		if !lw.frozen {
			advErr = errors.Join(advErr, lw.src.Advance(liveRoundGap))
		}
		lw.run.Unlock()
	}}
	rcfg := ReceiveConfig{Timeout: timeout}
	if pl.handshake {
		rcfg.MaxBatchBytes = migrate.DefaultBatchBytes / 2
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		att.res.in, att.res.dstRep, att.res.dstErr = Receive(dstCtx, to, rws([]net.Conn{dt}), rcfg)
	}()
	att.res.srcRep, att.res.srcErr = Send(srcCtx, lw.vm, rws([]net.Conn{st}), scfg)
	wg.Wait()
	cancelSrc() // canceling an ended migration changes nothing
	must(t, errors.Join(advErr, snapErr))
	if pl.cut != nil && !pl.probe {
		var tripped bool
		if tripped, att.rounds, att.cutIn = active.trip(); !tripped {
			t.Fatalf("the migration ended (%v / %v) without reaching the point", att.res.srcErr, att.res.dstErr)
		}
	}
	return att
}

// snapshotOf is imageOf without a testing.TB, for the goroutine the
// failure happens on.
func snapshotOf(vm *vgpu.VM) (sourceImage, error) {
	var img sourceImage
	for _, r := range append([]*memory.Region{vm.RAM()}, vm.Framebuffers()...) {
		d, err := r.Digest()
		if err != nil {
			return img, err
		}
		img.Digests = append(img.Digests, d)
	}
	var err error
	if img.States, err = vm.Snapshots(); err != nil {
		return img, fmt.Errorf("snapshots: %w", err)
	}
	for i := range img.States {
		img.States[i].Registers[vgpu.RegControl] &^= 2 // the run state is compared on its own
	}
	img.VMState = vm.State()
	return img, nil
}

// cleanRound0 is the wire bytes of round 0 in a migration of the table's
// world without a fault, from the end of the stream's metadata record to
// the end of round 0's record.
var cleanRound0Bytes = map[liveVariant]int64{}

func cleanRound0(t *testing.T, v liveVariant) int64 {
	t.Helper()
	if n, ok := cleanRound0Bytes[v]; ok {
		return n
	}
	lw := newLiveWorld(t, v)
	var units []wireUnit
	pl := livePlan{act: actPass, probe: true, cut: func(us []wireUnit) (int64, bool) { units = us; return 0, false }}
	att := lw.attempt(t, lw.dst, pl, 20*time.Second)
	if att.res.srcErr != nil || att.res.dstErr != nil {
		t.Fatalf("clean run: %v / %v", att.res.srcErr, att.res.dstErr)
	}
	var from int64 = -1
	for _, u := range units {
		if u.kind == unitRecord && from < 0 {
			from = u.end
		}
		if u.kind == unitRecord && u.typ == recEndOfRound {
			cleanRound0Bytes[v] = u.end - from
			return u.end - from
		}
	}
	t.Fatal("the clean run has no round 0")
	return 0
}
