package live

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vgpusim/vgpusim/migrate/internal/migtest"

	"github.com/vgpusim/vgpusim/memory"
	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// A VM has one migration at a time, whichever mode runs each: while a
// live Send holds it (here stuck in its handshake), a second Send and a
// simulated Start are refused with ErrMigrating before they touch it;
// while a simulated migration holds it, a live Send is. Once the holder
// ends, the VM goes.
func TestLiveSecondMigrationRefused(t *testing.T) {
	// One clock: a Sim takes part below.
	src, dst := migtest.HostPair(t, memory.Sparse, 1)
	vm := inferenceVM(t, src, "vm-2", "P40-1Q", 64*MiB, 8*MiB, tinyModel, 3)
	var mu sync.Mutex
	refused := func(what string, err error) {
		t.Helper()
		var pe *migrate.PhaseError
		if !errors.Is(err, migrate.ErrMigrating) || !errors.Is(err, vgpu.ErrMigrating) || !errors.As(err, &pe) || pe.Phase != migrate.PhaseSetup {
			t.Fatalf("%s: %v, want ErrMigrating in setup", what, err)
		}
	}
	// A live holder: the destination end of its pipe never reads.
	held, _ := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := Send(ctx, vm, rws([]net.Conn{held}), SendConfig{Lock: &mu})
		first <- err
	}()
	for {
		mu.Lock()
		migrating := vm.Migrating()
		mu.Unlock()
		if migrating {
			break
		}
		time.Sleep(time.Millisecond)
	}
	spare, _ := net.Pipe()
	defer spare.Close()
	_, err := Send(context.Background(), vm, rws([]net.Conn{spare}), SendConfig{Lock: &mu})
	refused("live after live", err)
	sim, err := migrate.NewSim(migrate.SimConfig{}, src, dst)
	must(t, err)
	mu.Lock()
	_, err = sim.Start(vm, dst, migrate.Config{})
	mu.Unlock()
	refused("simulated after live", err)
	cancel()
	if err := <-first; !errors.Is(err, migrate.ErrCanceled) {
		t.Fatalf("the live holder: %v, want canceled", err)
	}
	if vm.Migrating() || vm.State() != vgpu.VMRunning {
		t.Fatalf("after the live holder: VM %v, migrating %v", vm.State(), vm.Migrating())
	}

	// A simulated holder.
	m, err := sim.Start(vm, dst, migrate.Config{})
	must(t, err)
	_, err = Send(context.Background(), vm, rws([]net.Conn{spare}), SendConfig{})
	refused("live after simulated", err)
	must(t, m.Cancel())

	// Free again: a live migration moves it.
	sc, dc := loopbackConns(t, 1)
	res := liveMigrate(context.Background(), vm, dst, rws(sc), rws(dc), SendConfig{}, ReceiveConfig{})
	if res.srcErr != nil || res.dstErr != nil || res.in.State() != vgpu.VMRunning {
		t.Fatalf("source %v, destination %v", res.srcErr, res.dstErr)
	}
}

// liveSentinels are the errors a live Send may fail with here, each typed.
var liveSentinels = []error{migrate.ErrMigrating, migrate.ErrSource, migrate.ErrCanceled, migrate.ErrConnection,
	migrate.ErrRefused, migrate.ErrStream, migrate.ErrDestination, migrate.ErrIncompatible, migrate.ErrInDoubt}

// TestLiveConcurrentSends is the ownership race: each try runs two Sends
// of one VM at once, to two destinations, while the Runner drives the
// source, its owner pauses, resumes and throttles it under the host's lock,
// and a cancel may hit either Send. After each try: at most one Send
// succeeded and every failure is typed; no two copies run, and the VM is
// at exactly one host (ErrInDoubt aside, where the source keeps a paused
// copy, as documented); the VM's run state and throttle are what its
// owner last set, wherever it is; nothing of a failed migration is left at
// its destination. Run it with -race.
func TestLiveConcurrentSends(t *testing.T) {
	tries := 24
	if raceEnabled {
		tries = 12
	}
	tally := map[string]int{}
	for i := range tries {
		t.Run(fmt.Sprintf("try=%d", i), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 0x0417))
			fw := newFaultWorld(t, false)
			run := NewRunner(fw.src, 0)
			run.Start()
			defer func() { _ = run.Stop() }()
			withOwner := i%2 == 1
			dsts := []*vgpu.Host{fw.dst, fw.third}
			// The second Send starts a little later, often while the first
			// is in pre-copy or its stun.
			delays := [2]time.Duration{0, time.Duration(rng.IntN(60)) * time.Millisecond}
			var (
				wg       sync.WaitGroup
				res      [2]liveResult
				cancels  [2]context.CancelFunc
				stop     = make(chan struct{})
				paused   bool    // what the owner last set, read after wg.Wait
				throttle float64 // likewise
			)
			for k := range 2 {
				ctx, cancel := context.WithCancel(context.Background())
				cancels[k] = cancel
				defer cancel()
				sc, dc := loopbackConns(t, 1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(delays[k])
					res[k] = liveMigrate(ctx, fw.vm, dsts[k], rws(sc), rws(dc), SendConfig{Lock: run}, ReceiveConfig{Timeout: 5 * time.Second})
				}()
			}
			if rng.IntN(3) > 0 {
				k, after := rng.IntN(2), time.Duration(rng.IntN(60))*time.Millisecond
				time.AfterFunc(after, cancels[k])
				tally["with a cancel"]++
			}
			ownerDone := make(chan struct{})
			go func() {
				defer close(ownerDone)
				if !withOwner {
					return
				}
				orng := rand.New(rand.NewPCG(uint64(i), 0x0a11))
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Duration(orng.IntN(2000)) * time.Microsecond):
					}
					run.Lock()
					var err error
					switch op := orng.IntN(3); op {
					case 0:
						if err = fw.vm.Pause(); err == nil {
							paused = true
						}
					case 1:
						if err = fw.vm.Resume(); err == nil {
							paused = false
						}
					default:
						f := float64(orng.IntN(5)) / 10
						if err = fw.vm.SetThrottle(f); err == nil {
							throttle = f
						}
					}
					run.Unlock()
					if err != nil && !errors.Is(err, vgpu.ErrIllegalTransition) && !errors.Is(err, vgpu.ErrMigrating) {
						t.Errorf("owner's call: %v, an untyped refusal", err)
					}
				}
			}()
			wg.Wait()
			close(stop)
			<-ownerDone
			must(t, run.Stop())

			ok, inDoubt := 0, false
			for k, r := range res {
				switch {
				case r.srcErr == nil:
					ok++
				case errors.Is(r.srcErr, migrate.ErrInDoubt):
					inDoubt = true
				}
				if r.srcErr != nil && !wrapsOne(r.srcErr, liveSentinels) {
					t.Fatalf("send %d: untyped error %v", k, r.srcErr)
				}
				tally[outcome(r.srcErr)]++
			}
			if ok > 1 {
				t.Fatalf("both Sends succeeded: %v | %v", res[0].srcErr, res[1].srcErr)
			}
			hosts := []*vgpu.Host{fw.src, fw.dst, fw.third}
			checkOneOwner(t, fw.vm.ID(), hosts...)
			if inDoubt {
				tally["in doubt"]++
				return
			}
			at := checkSettled(t, fw.vm.ID(), hosts...)
			for _, h := range hosts {
				if h != at && h != fw.src {
					holdsNothing(t, h)
				}
			}
			vm, _ := at.VM(fw.vm.ID())
			want := vgpu.VMRunning
			if paused {
				want = vgpu.VMPaused
			}
			if vm.State() != want || vm.Throttle() != throttle || vm.EffectiveThrottle() != throttle || vm.Migrating() {
				t.Fatalf("VM on %s %v, throttle %v (effective %v, migrating %v); its owner last left it %v, throttle %v",
					at.Name(), vm.State(), vm.Throttle(), vm.EffectiveThrottle(), vm.Migrating(), want, throttle)
			}
			if at != fw.src {
				tally["moved"]++
			}
		})
	}
	t.Logf("%d tries, two Sends each: %v", tries, tally)
}

func wrapsOne(err error, sentinels []error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// outcome names a Send's result for the tally.
func outcome(err error) string {
	if err == nil {
		return "send succeeded"
	}
	for _, s := range liveSentinels {
		if errors.Is(err, s) {
			return "send failed: " + s.Error()
		}
	}
	return "send failed: " + err.Error()
}
