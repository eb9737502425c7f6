package main

import (
	"fmt"
	"time"
)

// outcome is the summary of one migration against the same service's run
// without one.
type outcome struct {
	model, mode string
	stun, total time.Duration // the migration's
	// delayed counts the requests completed (or refused) from the stun's
	// start until the service recovered: the start of the first step after
	// the stun whose slowest request was no slower than the slowest of the
	// run without migration. Metrics cannot select requests by arrival,
	// so the requests that waited out the stun are counted this way.
	delayed   int64
	recovered time.Duration // from the stun's end to recovery
	worst     time.Duration // the slowest request of the run
	// servedDuring and baselineDuring are the requests completed from the
	// migration's start to its end, with and without it; lostPct the
	// share of the second the migration cost.
	servedDuring, baselineDuring int64
	lostPct                      float64
	dropped                      int64 // requests refused by a full queue in the whole run
}

// summarize pairs every migration run with its model's run without one.
func summarize(runs []serviceRun) ([]outcome, error) {
	base := map[string]serviceRun{}
	for _, r := range runs {
		if r.name == noMigration {
			base[r.model] = r
		}
	}
	var out []outcome
	for _, r := range runs {
		if r.report == nil {
			continue
		}
		b, ok := base[r.model]
		if !ok {
			return nil, fmt.Errorf("%s: no run without migration to compare with", r.model)
		}
		out = append(out, compare(r, b))
	}
	return out, nil
}

// compare summarizes migration run r against b, the same service without it.
func compare(r, b serviceRun) outcome {
	end := r.ticks[len(r.ticks)-1].at
	whole, bWhole := r.service.Metrics(0, end), b.service.Metrics(0, end)
	rep := r.report
	o := outcome{model: r.model, mode: r.name, stun: rep.Stun, total: rep.Total, worst: whole.LatencyMax,
		dropped: whole.Dropped}
	o.servedDuring = r.service.Metrics(rep.Start, rep.End).Completed
	o.baselineDuring = b.service.Metrics(rep.Start, rep.End).Completed
	if o.baselineDuring > 0 {
		o.lostPct = 100 * float64(o.baselineDuring-o.servedDuring) / float64(o.baselineDuring)
	}
	recovered := end
	for _, t := range r.ticks {
		if t.at > r.stunTo && t.worst <= bWhole.LatencyMax {
			recovered = t.at
			break
		}
	}
	o.recovered = recovered - r.stunTo
	for _, t := range r.ticks {
		if t.at > r.stunFrom && t.at < recovered {
			o.delayed += t.served + t.dropped
		}
	}
	return o
}
