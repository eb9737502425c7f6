package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/vgpusim/vgpusim/examples/tabular"
)

// columns names the overhead table's columns, units last, as every output
// prints them.
var columns = []string{
	"model", "batch", "link", "local_ms", "remote_ms", "normalized", "overhead_pct",
}

// shareColumns names the sharing table's.
var shareColumns = []string{
	"clients", "vm", "iteration_ms", "images_per_s", "vs_local_x", "gpu_util_pct",
}

// numeric marks the columns JSON writes as numbers.
var numeric = map[string]bool{
	"batch": true, "local_ms": true, "remote_ms": true, "normalized": true, "overhead_pct": true,
	"clients": true, "iteration_ms": true, "images_per_s": true, "vs_local_x": true, "gpu_util_pct": true,
}

// ms formats a duration in milliseconds to the microsecond.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

func (r row) fields() []string {
	return []string{
		r.model, strconv.Itoa(r.batch), r.link.Name, ms(r.local), ms(r.remote),
		strconv.FormatFloat(r.normalized(), 'f', 3, 64),
		strconv.FormatFloat(r.overheadPct(), 'f', 1, 64),
	}
}

// imagesPerSec is the client's training throughput, tf_cnn_benchmarks's
// measure.
func (s shareRow) imagesPerSec(batch int) float64 {
	return float64(batch) / s.iteration.Seconds()
}

func (s shareRow) fields(batch int) []string {
	return []string{
		strconv.Itoa(s.clients), fmt.Sprint("vm", s.client), ms(s.iteration),
		strconv.FormatFloat(s.imagesPerSec(batch), 'f', 1, 64),
		strconv.FormatFloat(float64(s.iteration)/float64(s.local), 'f', 2, 64),
		strconv.FormatFloat(100*s.gpuUtil, 'f', 1, 64),
	}
}

// newTable returns a table of the named columns.
func newTable(names []string) *tabular.Table {
	t := &tabular.Table{NoNull: true}
	for _, name := range names {
		kind := tabular.Text
		if numeric[name] {
			kind = tabular.Number
		}
		t.Columns = append(t.Columns, tabular.Column{Name: name, Kind: kind})
	}
	return t
}

// overheadTable is the rows' table, a blank line between one model and
// batch and the next.
func overheadTable(rows []row) *tabular.Table {
	t := newTable(columns)
	for i, r := range rows {
		if i > 0 && (r.model != rows[i-1].model || r.batch != rows[i-1].batch) {
			t.Break()
		}
		t.Add(r.fields()...)
	}
	return t
}

// shareTable is the sharing runs' table, a blank line between runs.
func shareTable(p params, share []shareRow) *tabular.Table {
	t := newTable(shareColumns)
	for i, s := range share {
		if i > 0 && s.clients != share[i-1].clients {
			t.Break()
		}
		t.Add(s.fields(p.shareBatch)...)
	}
	return t
}

// writeCSV writes the overhead table as CSV.
func writeCSV(w io.Writer, res result) error { return overheadTable(res.rows).WriteCSV(w) }

// writeJSON writes both tables as one JSON object: the overhead table's
// rows under "overhead", the sharing table's under "sharing", each an
// array of objects keyed by the column names in column order.
func writeJSON(w io.Writer, p params, res result) error {
	return tabular.WriteJSONObject(w, []string{"overhead", "sharing"},
		[]*tabular.Table{overheadTable(res.rows), shareTable(p, res.share)})
}
