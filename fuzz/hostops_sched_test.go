package fuzz_test

import (
	"fmt"
	"time"

	"github.com/vgpusim/vgpusim/sched"
	"github.com/vgpusim/vgpusim/vgpu"
)

// checkSched: between two checks, the GPU time a GPU's tenants received
// adds up to no more than the time that passed. Under fixed share a
// tenant's turns n and n+2 are a period (slice x MaxInstances) apart at
// least, and a turn grants a slice plus its overshoot, so over T it
// receives at most (T/period + 3) slices plus its overshoot: 1/MaxInstances
// in the long run (sched's documented guarantee).
func (w *hostopsWorld) checkSched() error {
	for hi, h := range w.hosts {
		for _, g := range h.GPUs() {
			k := hostopsGPUKey{hi, g.Index()}
			s := g.Scheduler()
			now := s.Now()
			cur := map[*vgpu.VGPU]hostopsGrant{}
			var sum, since time.Duration
			for _, x := range w.windows(k) {
				info, err := s.Tenant(x.v.Tenant())
				if err != nil {
					return fmt.Errorf("%s GPU %d: tenant of %s: %w", h.Name(), k.gpu, x.v.VM().ID(), err)
				}
				gr := hostopsGrant{now, info.Granted, info.Overshoot}
				cur[x.v] = gr
				if prev, ok := w.last[k][x.v]; ok {
					sum += gr.granted - prev.granted
					since = now - prev.at
				}
				base, ok := w.grants[x.v]
				if !ok {
					w.grants[x.v] = gr
					continue
				}
				got, elapsed := gr.granted-base.granted, now-base.at
				if got < 0 || got > elapsed {
					return fmt.Errorf("%s GPU %d: %s got %v of GPU time in %v", h.Name(), k.gpu, x.v.VM().ID(), got, elapsed)
				}
				if w.setup.Policy == sched.FixedShare {
					period := info.Slice * time.Duration(info.MaxInstances)
					limit := (elapsed/period+3)*info.Slice + gr.overshoot - base.overshoot
					if got > limit {
						return fmt.Errorf("%s GPU %d: %s (1/%d, slice %v) got %v in %v under fixed share, limit %v",
							h.Name(), k.gpu, x.v.VM().ID(), info.MaxInstances, info.Slice, got, elapsed, limit)
					}
				}
			}
			if sum > since {
				return fmt.Errorf("%s GPU %d: tenants got %v of GPU time in %v", h.Name(), k.gpu, sum, since)
			}
			w.last[k] = cur
		}
	}
	return nil
}
