package migtest

import (
	"runtime/metrics"
	"sync"
	"time"
)

// heapMetric is the bytes of heap objects, live and not yet swept: what a
// benchmark's peak-heap-MiB bounds.
const heapMetric = "/memory/classes/heap/objects:bytes"

// PeakHeap samples the heap's objects every interval until Stop, which
// returns the largest sample in MiB. It measures what a run holds at its
// worst, which a cumulative allocation count cannot.
type PeakHeap struct {
	stop chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

// StartPeakHeap starts sampling.
func StartPeakHeap(interval time.Duration) *PeakHeap {
	p := &PeakHeap{stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		s := []metrics.Sample{{Name: heapMetric}}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			metrics.Read(s)
			p.peak = max(p.peak, s[0].Value.Uint64())
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// Stop ends the sampling and returns the peak, in MiB.
func (p *PeakHeap) Stop() float64 {
	close(p.stop)
	p.wg.Wait()
	return float64(p.peak) / (1 << 20)
}
